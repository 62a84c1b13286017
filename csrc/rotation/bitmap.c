/*
 * The in-memory build of the next generation.
 *
 * A large bitmap (12 MB for 10M items at p = 0.01) is far bigger than the caches, so setting k
 * random bits per item is bound by cache misses, not by hashing (measured: bench/README.md, bench_rotate, "Why the rotation is built this way").
 * The build therefore works in rounds:
 *   1. hash:   each thread hashes its share of the round's items into a scratch array of bit
 *              indexes, counting them per region (a cache-sized byte range of the bitmap), then
 *              scatters them so that each region's indexes are contiguous (a counting sort);
 *   2. set:    each thread owns a contiguous run of regions (so no two threads write the same
 *              byte: no atomics) and sets, region by region, the bits every thread found for it:
 *              one region is in cache while its bits are set.
 * Scratch is sized by the round, not by the item count, and kept with the bitmap across calls.
 * Small calls (bg_rotation_add of a few items) skip all this: a direct loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bloomguard/hash.h"
#include "common/thread.h"
#include "hash/hash.h"
#include "rotation/rotation.h"

/* Below this many items per thread, starting threads costs more than it saves. */
#define BGI_ITEMS_PER_THREAD_MIN 8192
/* Below this many items the rounds' bookkeeping costs more than the misses it saves. */
#define BGI_BUCKETED_MIN 4096
/* 64 KB regions: well inside a core's L2 (and ~180 of them for 12 MB, few enough to scatter to). */
#ifndef BGI_REGION_BITS_SHIFT
#define BGI_REGION_BITS_SHIFT 19
#endif
/* Indexes per thread and round (4 bytes each, twice: ~8 MB): enough that each cache line of a
 * 12 MB bitmap gets several bits per round, so a line is fetched once for several ORs. */
#ifndef BGI_ROUND_INDEXES
#define BGI_ROUND_INDEXES (1u << 20)
#endif
#define BGI_MAX_THREADS 256

int bgi_bitmap_init(bgi_bitmap *b, uint64_t size, uint32_t k) {
  memset(b, 0, sizeof *b);
  b->size = size;
  b->k = k;
  b->len = (size_t)((size + 7) / 8);
  /* calloc: the kernel hands out zero pages lazily, so a 512 MB bitmap costs only what is touched */
  b->bytes = calloc(b->len ? b->len : 1, 1);
  return b->bytes ? BG_OK : BG_ENOMEM;
}

typedef struct scratch {
  uint32_t *raw;      /* this round's indexes, in item order */
  uint32_t *sorted;   /* the same, grouped by region */
  uint32_t *start;    /* region r's indexes: sorted[start[r] .. start[r + 1]) */
  size_t cap;         /* indexes raw and sorted can hold */
} scratch;

static void scratch_free(scratch *s, size_t n) {
  for (size_t i = 0; s && i < n; i++) free(s[i].raw), free(s[i].sorted), free(s[i].start);
  free(s);
}

void bgi_bitmap_free(bgi_bitmap *b) {
  free(b->bytes);
  b->bytes = NULL;
  scratch_free(b->scratch, b->nscratch);
  b->scratch = NULL;
  b->nscratch = 0;
}

/* The direct loop: indexes of a block of items are computed and their bytes prefetched before
 * any bit is set, so the block's misses overlap. One thread only (plain ORs). */
#define BGI_BUILD_BLOCK 32
static void add_direct(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n) {
  const uint32_t k = b->k;
  uint64_t idx[BG_MAX_HASH_ITERATIONS];
  const size_t block = k * BGI_BUILD_BLOCK <= BG_MAX_HASH_ITERATIONS ? BGI_BUILD_BLOCK : BG_MAX_HASH_ITERATIONS / k;
  uint8_t *bytes = b->bytes;
  for (size_t i = 0; i < n; i += block) {
    size_t m = n - i < block ? n - i : block;
    for (size_t j = 0; j < m; j++) {
      uint64_t h[2];
      bgi_hash128(items[i + j], lens[i + j], h);
      bgi_indexes_from_hash(h[0], h[1], b->size, k, idx + j * k);
      for (uint32_t x = 0; x < k; x++) __builtin_prefetch(&bytes[idx[j * k + x] >> 3], 1, 0);
    }
    for (const uint64_t *x = idx, *end = idx + m * k; x < end; x++) bytes[*x >> 3] |= (uint8_t)(0x80u >> (*x & 7));
  }
}

/*
 * Redisson's index sequence (bgi_indexes_from_hash) with the 64-bit division replaced by a
 * multiplication: with m = floor((2^64 - 1) / size), q = mulhi(x, m) is floor(x / size) or one
 * less, so x - q * size is the remainder or the remainder + size. Same results, several times
 * cheaper than k divisions (checked against bgi_indexes_from_hash by the tests and the bench).
 */
static inline void indexes_fast(uint64_t h1, uint64_t h2, uint64_t size, uint64_t m, uint32_t k, uint32_t *out) {
  uint64_t h = h1;
  for (uint32_t i = 0; i < k; i++) {
    uint64_t x = h & INT64_MAX;
    uint64_t q = (uint64_t)(((unsigned __int128)x * m) >> 64);
    uint64_t r = x - q * size;
    out[i] = (uint32_t)(r >= size ? r - size : r);  /* size <= BG_MAX_SIZE < 2^32 */
    h += (i % 2 == 0) ? h2 : h1;
  }
}

typedef struct worker {
  bgi_bitmap *b;
  scratch *all;       /* every thread's scratch (the set phase reads them all) */
  size_t nthreads, nregions;
  scratch *mine;
  const void *const *items;
  const size_t *lens;
  size_t from, to;    /* hash phase: this thread's items of the round */
  size_t rfrom, rto;  /* set phase: the regions this thread owns */
  int phase;          /* 0: hash, 1: set */
  int nice;           /* added to the thread's nice value (BG_OPT_ROTATE_NICE) */
} worker;

static void hash_phase(worker *w) {
  const uint32_t k = w->b->k;
  const uint64_t size = w->b->size;
  scratch *s = w->mine;
  uint32_t *raw = s->raw, *start = s->start;
  const uint64_t m = UINT64_MAX / size;
  memset(start, 0, (w->nregions + 1) * sizeof *start);
  size_t o = 0;
  for (size_t i = w->from; i < w->to; i++) {
    uint64_t h[2];
    bgi_hash128(w->items[i], w->lens[i], h);
    indexes_fast(h[0], h[1], size, m, k, raw + o);
    for (uint32_t j = 0; j < k; j++) start[(raw[o + j] >> BGI_REGION_BITS_SHIFT) + 1]++;
    o += k;
  }
  for (size_t r = 0; r < w->nregions; r++) start[r + 1] += start[r];
  /* scatter; start[r] ends up where region r + 1 begins, so shift back afterwards */
  uint32_t *sorted = s->sorted;
  for (size_t i = 0; i < o; i++) sorted[start[raw[i] >> BGI_REGION_BITS_SHIFT]++] = raw[i];
  memmove(start + 1, start, w->nregions * sizeof *start);
  start[0] = 0;
}

/* Reads a region's cache lines in order: the hardware prefetcher streams them in, where the
 * random ORs that follow would each wait for their own miss. */
static void warm(const uint8_t *p, size_t len) {
  uint8_t acc = 0;
  for (size_t i = 0; i < len; i += 64) acc |= ((const volatile uint8_t *)p)[i];
  (void)acc;
}

static void set_phase(worker *w) {
  uint8_t *bytes = w->b->bytes;
  const size_t region_bytes = (size_t)1 << (BGI_REGION_BITS_SHIFT - 3);
  for (size_t r = w->rfrom; r < w->rto; r++) {
    size_t off = r * region_bytes;
    warm(bytes + off, w->b->len - off < region_bytes ? w->b->len - off : region_bytes);
    for (size_t t = 0; t < w->nthreads; t++) {
      const scratch *s = &w->all[t];
      for (const uint32_t *x = s->sorted + s->start[r], *end = s->sorted + s->start[r + 1]; x < end; x++)
        bytes[*x >> 3] |= (uint8_t)(0x80u >> (*x & 7));
    }
  }
}

void bgi_build_thread_nice(int nice) {
  /* a thread of its own: where the nice value is per thread (Linux) this one yields the CPU to the
   * process's serving threads and ends with its work - nothing to restore; elsewhere it runs at the
   * process's priority (common/thread.h) */
  (void)bgi_thread_nice_self(nice);
}

static void *work(void *arg) {
  worker *w = arg;
  bgi_build_thread_nice(w->nice);
  if (w->phase == 0) hash_phase(w);
  else set_phase(w);
  return NULL;
}

/* Runs w[0..t) on t - 1 new threads plus this one - or, when they run at a lower priority, on t
 * new threads (this thread's own priority is the caller's); a thread that cannot start runs here
 * at this thread's priority. */
static void run_all(worker *w, size_t t) {
  pthread_t th[BGI_MAX_THREADS];
  int started[BGI_MAX_THREADS];
  size_t first = w[0].nice > 0 ? 0 : 1;
  for (size_t i = first; i < t; i++) started[i] = pthread_create(&th[i], NULL, work, &w[i]) == 0;
  if (first) work(&w[0]);
  for (size_t i = first; i < t; i++) {
    if (started[i]) {
      pthread_join(th[i], NULL);
    } else {
      int nice = w[i].nice;
      w[i].nice = 0;
      work(&w[i]);
      w[i].nice = nice;
    }
  }
}

/* Scratch for t threads, kept with the bitmap; BG_ENOMEM if it cannot be had. */
static int scratch_get(bgi_bitmap *b, size_t t, size_t cap, size_t nregions) {
  if (b->scratch && b->nscratch >= t && ((scratch *)b->scratch)[0].cap >= cap) return BG_OK;
  scratch_free(b->scratch, b->nscratch);
  b->scratch = NULL;
  b->nscratch = 0;
  scratch *s = calloc(t, sizeof *s);
  if (!s) return BG_ENOMEM;
  for (size_t i = 0; i < t; i++) {
    s[i].cap = cap;
    s[i].raw = malloc(cap * sizeof(uint32_t));
    s[i].sorted = malloc(cap * sizeof(uint32_t));
    s[i].start = malloc((nregions + 1) * sizeof(uint32_t));
    if (!s[i].raw || !s[i].sorted || !s[i].start) {
      scratch_free(s, t);
      return BG_ENOMEM;
    }
  }
  b->scratch = s;
  b->nscratch = t;
  return BG_OK;
}

void bgi_bitmap_add(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, int threads, int nice) {
  size_t t = n / BGI_ITEMS_PER_THREAD_MIN;
  if (t > (size_t)threads) t = (size_t)threads;
  if (t > BGI_MAX_THREADS) t = BGI_MAX_THREADS;
  if (t < 1) t = 1;
  const size_t nregions = (size_t)((b->size + (1ull << BGI_REGION_BITS_SHIFT) - 1) >> BGI_REGION_BITS_SHIFT);
  size_t per_thread = BGI_ROUND_INDEXES / b->k;  /* items per thread and round */
  if (per_thread > (n + t - 1) / t) per_thread = (n + t - 1) / t;
  if (per_thread < 1) per_thread = 1;
  if (n < BGI_BUCKETED_MIN || nregions < 2 || scratch_get(b, t, per_thread * b->k, nregions) != BG_OK) {
    add_direct(b, items, lens, n);  /* also the fallback when scratch memory is short */
    return;
  }
  worker w[BGI_MAX_THREADS];
  for (size_t i = 0; i < t; i++)
    w[i] = (worker){.b = b, .all = b->scratch, .nthreads = t, .nregions = nregions, .mine = &((scratch *)b->scratch)[i],
                    .items = items, .lens = lens, .nice = nice,
                    .rfrom = nregions * i / t, .rto = nregions * (i + 1) / t};
  for (size_t done = 0; done < n;) {
    size_t round = n - done < per_thread * t ? n - done : per_thread * t;
    for (size_t i = 0; i < t; i++) {
      w[i].from = done + round * i / t;
      w[i].to = done + round * (i + 1) / t;
      w[i].phase = 0;
    }
    run_all(w, t);
    for (size_t i = 0; i < t; i++) w[i].phase = 1;
    run_all(w, t);
    done += round;
  }
}

size_t bgi_bitmap_used_len(const bgi_bitmap *b) {
  size_t n = b->len;
  /* word steps first: the tail of a sparse bitmap is long runs of zeros */
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, b->bytes + n - 8, 8);
    if (w) break;
    n -= 8;
  }
  while (n && !b->bytes[n - 1]) n--;
  return n;
}
