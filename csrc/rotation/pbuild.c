/*
 * A partitioned filter's next generation, built in memory (rotation.h, bgi_pbuild): each item goes
 * to its partition (filter/partition.h, bgi_partition_of) and sets Redisson's k indexes over the
 * partition's size there. The partitions lie one after another, each padded to whole bytes, so a
 * partition's upload is one run of bytes. Threads take slices of the items and set bits with an
 * atomic OR: two items of two threads may share a byte, and the partitions together exceed what
 * 32-bit offsets (bitmap.c's bucketed build) can address.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/hash.h"
#include "hash/hash.h"
#include "rotation/rotation.h"

#define PBUILD_THREADS_MAX 64
/* Below this many items per thread, starting threads costs more than it saves. */
#define PBUILD_ITEMS_PER_THREAD_MIN 8192

int bgi_pbuild_init(bgi_pbuild *b, const bgi_pgen *g) {
  memset(b, 0, sizeof *b);
  b->g = *g;
  b->pbytes = (size_t)((bgi_cfg_size(g->cfg) + 7) / 8);
  /* calloc: untouched zero pages cost nothing until an item lands there */
  b->bytes = calloc((size_t)g->parts * b->pbytes, 1);
  return b->bytes ? BG_OK : BG_ENOMEM;
}

void bgi_pbuild_free(bgi_pbuild *b) {
  free(b->bytes);
  b->bytes = NULL;
}

typedef struct slice {
  bgi_pbuild *b;
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  int nice;
} slice;

static void add_slice(const slice *s) {
  const bgi_pbuild *b = s->b;
  const uint64_t size = bgi_cfg_size(b->g.cfg);
  const uint32_t k = bgi_cfg_k(b->g.cfg);
  uint64_t idx[BG_MAX_HASH_ITERATIONS];
  for (size_t i = s->from; i < s->to; i++) {
    uint64_t h[2];
    bgi_hash128(s->items[i], s->lens[i], h);
    uint8_t *p = b->bytes + (size_t)bgi_partition_of(h[0], h[1], b->g.parts) * b->pbytes;
    bgi_indexes_from_hash(h[0], h[1], size, k, idx);
    for (uint32_t j = 0; j < k; j++)
      __atomic_fetch_or(&p[idx[j] >> 3], (uint8_t)(0x80u >> (idx[j] & 7)), __ATOMIC_RELAXED);
  }
}

static void *work(void *arg) {
  slice *s = arg;
  bgi_build_thread_nice(s->nice);
  add_slice(s);
  return NULL;
}

void bgi_pbuild_add(bgi_pbuild *b, const void *const *items, const size_t *lens, size_t n, int threads, int nice) {
  size_t t = (size_t)(threads > 0 ? threads : 1);
  if (t > PBUILD_THREADS_MAX) t = PBUILD_THREADS_MAX;
  if (t > n / PBUILD_ITEMS_PER_THREAD_MIN) t = n / PBUILD_ITEMS_PER_THREAD_MIN;
  if (t <= 1) {
    add_slice(&(slice){b, items, lens, 0, n, 0});
    return;
  }
  slice s[PBUILD_THREADS_MAX];
  pthread_t th[PBUILD_THREADS_MAX];
  int started[PBUILD_THREADS_MAX];
  for (size_t i = 0; i < t; i++) {
    s[i] = (slice){b, items, lens, n * i / t, n * (i + 1) / t, nice};
    started[i] = pthread_create(&th[i], NULL, work, &s[i]) == 0;
    if (!started[i]) add_slice(&s[i]);   /* no thread to be had: this one does its share */
  }
  for (size_t i = 0; i < t; i++)
    if (started[i]) pthread_join(th[i], NULL);
}
