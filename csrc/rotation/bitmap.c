/*
 * The in-memory build of the next generation: a Redisson-layout bitmap (bgi_bitmap_init) or a
 * RedisBloom filter's first link (bgi_bitmap_init_rbloom, a native rotation: nload.c). The two
 * differ in their index function (an item's k bit indexes), in their bit order, and in that the
 * link counts its items the way the server does; the build is the same.
 *
 * A large bitmap (12 MB for 10M items at p = 0.01) is far bigger than the caches, so setting k
 * random bits per item is bound by cache misses, not by hashing (measured: bench/README.md, bench_rotate, "Why the rotation is built this way").
 * The build therefore works in batches:
 *   1. hash:   each thread hashes its share of a call's items, a block at a time, into a small
 *              scratch array of bit indexes that stays in cache, counting them per region (a
 *              cache-sized byte range of the bitmap), then scatters them into its batch buffer so
 *              that the block's indexes for each region are contiguous (a counting sort, stable:
 *              within a region they stay in item order); a block's indexes are a segment;
 *   2. set:    each thread owns a contiguous run of regions (so no two threads write the same
 *              byte: no atomics) and sets, region by region, the bits of every segment for it, the
 *              segments in item order: one region is in cache while its bits are set.
 * A Redisson bitmap sets at the end of every call. A link keeps its items pending across
 * calls until its scratch is full (a rotation adds in chunks too small to fill it) or it is
 * flushed (bgi_bitmap_flush, before the upload).
 *
 * The link's count: the server counts an item when one of its bits was 0 before it, and opens a
 * new link once the count reaches the capacity. The set step sees bits in item order within each
 * region (segments in order, each sorted stably), so the first item of a bit is the one that finds
 * it 0, as in a sequential build: such an item is marked (fresh), and the marks are counted after
 * the step. Pending items never take the count past the capacity (a batch is cut to the room left,
 * assuming each item counts); close to it the items go one by one (add_direct), which stops at the
 * capacity exactly where the server would.
 *
 * Scratch is sized by a batch, not by the item count, and kept with the bitmap across calls.
 * Small calls (bg_rotation_add of a few items) skip all this: a direct loop.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bloomguard/hash.h"
#include "common/thread.h"
#include "hash/hash.h"
#include "hash/murmur.h"
#include "rotation/rotation.h"

/* Below this many items per thread, starting threads costs more than it saves. */
#define BGI_ITEMS_PER_THREAD_MIN 8192
/* Hashing alone (a link's call, its set step later): below this many items per thread, fewer threads. */
#define BGI_HASH_PER_THREAD_MIN 2048
/* Below this many items the batches' bookkeeping costs more than the misses it saves. */
#define BGI_BUCKETED_MIN 4096
/* 64 KB regions: well inside a core's L2 (and ~180 of them for 12 MB, few enough to scatter to). */
#ifndef BGI_REGION_BITS_SHIFT
#define BGI_REGION_BITS_SHIFT 19
#endif
/* Indexes per thread and batch (4 bytes each: 4 MB):
 * enough that each cache line of a 12 MB bitmap gets several bits per batch, so a line is
 * fetched once for several ORs. */
#ifndef BGI_ROUND_INDEXES
#define BGI_ROUND_INDEXES (1u << 20)
#endif
#define BGI_MAX_THREADS 256
/* Indexes a thread hashes before scattering them (8 bytes each for a link: 256 KB, within L2). A
 * link's block has at most 2^(32 - region_shift) items (8,192 for 64 KB regions): a sorted entry
 * holds the bit's offset in its region and the item's number in the block in 32 bits. */
#define BGI_BLOCK_INDEXES (1u << 15)
/* Segments per batch (blocks; a link's calls times threads), and the memory their region counts may take. */
#define BGI_MAX_SEGMENTS 512
#define BGI_SEGMENT_COUNTS_BYTES (16u << 20)
/* Pending items of a link at most (one mark byte each). */
#define BGI_MAX_BATCH_ITEMS (UINT64_C(1) << 24)

/* ---- the two layouts' index functions ---------------------------------------------------------- */

/*
 * Redisson's index sequence (bgi_indexes_from_hash) with the 64-bit division replaced by a
 * multiplication: with m = floor((2^64 - 1) / size), q = mulhi(x, m) is floor(x / size) or one
 * less for x < 2^63, so x - q * size is the remainder or the remainder + size. Same results,
 * several times cheaper than k divisions (checked against bgi_indexes_from_hash by the tests and
 * the bench).
 */
static void index_redisson(const bgi_bitmap *b, const void *item, size_t len, uint64_t *out) {
  uint64_t h2[2];
  bgi_hash128(item, len, h2);
  const uint64_t size = b->size, m = b->recip;
  uint64_t h = h2[0];
  for (uint32_t i = 0; i < b->k; i++) {
    uint64_t x = h & INT64_MAX;
    uint64_t q = (uint64_t)(((unsigned __int128)x * m) >> 64);
    uint64_t r = x - q * size;
    out[i] = r >= size ? r - size : r;
    h += (i % 2 == 0) ? h2[1] : h2[0];
  }
}

static void index_rbloom(const bgi_bitmap *b, const void *item, size_t len, uint64_t *out) {
  bgi_rbloom_indexes(item, len, &b->mod, b->k, out);
}

static int init(bgi_bitmap *b, uint64_t size, uint32_t k) {
  memset(b, 0, sizeof *b);
  b->size = size;
  b->k = k;
  b->len = (size_t)((size + 7) / 8);
  b->region_shift = BGI_REGION_BITS_SHIFT;
  b->bucketed_min = BGI_BUCKETED_MIN;
  /* calloc: the kernel hands out zero pages lazily, so a 512 MB bitmap costs only what is touched */
  b->bytes = calloc(b->len ? b->len : 1, 1);
  return b->bytes ? BG_OK : BG_ENOMEM;
}

int bgi_bitmap_init(bgi_bitmap *b, uint64_t size, uint32_t k) {
  int st = init(b, size, k);
  b->index = index_redisson;
  b->recip = UINT64_MAX / size;
  return st;
}

int bgi_bitmap_init_rbloom(bgi_bitmap *b, uint64_t bits, uint32_t k) {
  int st = init(b, bits, k);
  b->rbloom = 1;
  b->index = index_rbloom;
  bgi_fastmod_init(&b->mod, bits);
  return st;
}

/* ---- scratch ------------------------------------------------------------------------------------ */

typedef struct segment {
  uint32_t *start;    /* nregions + 1: counts while hashing (region r's at r + 1), then region r's
                       * entries at sorted[e0 + start[r] .. e0 + start[r + 1]) of its thread */
  size_t e0, e1;      /* its entries in its thread's raw and sorted */
  uint64_t first;     /* a link's: the batch number of its first item */
  size_t thread;
} segment;

typedef struct scratch {
  void *raw;          /* a block's bit indexes in item order: uint32_t (Redisson), uint64_t (link) */
  uint32_t *sorted;   /* the batch's, grouped by region within each segment: the bit (Redisson), or
                       * its offset in the region | the item's number in the block << region_shift (link) */
  size_t fill;        /* entries sorted holds */
} scratch;

typedef struct build {
  size_t nthreads, nregions, cap;   /* cap: entries per thread */
  size_t block;                     /* items per block */
  size_t esize;                     /* bytes per raw entry */
  scratch *th;
  segment seg[BGI_MAX_SEGMENTS];
  size_t nseg, maxseg;
  uint32_t *counts;                 /* maxseg x (nregions + 1) */
  atomic_uchar *fresh;              /* a link's: per pending item, 1 once it found one of its bits 0;
                                     * then the set threads' sinks (set_step) */
  uint64_t items, max_items;        /* pending items, and the most a batch holds */
} build;

static void build_free(build *B) {
  if (!B) return;
  for (size_t i = 0; B->th && i < B->nthreads; i++) free(B->th[i].raw), free(B->th[i].sorted);
  free(B->th);
  free(B->counts);
  free(B->fresh);
  free(B);
}

void bgi_bitmap_free(bgi_bitmap *b) {
  free(b->bytes);
  b->bytes = NULL;
  build_free(b->scratch);
  b->scratch = NULL;
}

static size_t nregions_of(const bgi_bitmap *b) {
  return (size_t)((b->size + (UINT64_C(1) << b->region_shift) - 1) >> b->region_shift);
}

/* Scratch for t threads of cap entries each, kept with the bitmap (a larger one is kept); NULL if
 * it cannot be had or the bitmap cannot be bucketed. Never replaced while items are pending. */
static build *build_get(bgi_bitmap *b, size_t t, size_t cap) {
  build *B = b->scratch;
  if (B && (B->items || (B->nthreads >= t && B->cap >= cap))) return B;
  const size_t nregions = nregions_of(b);
  if (nregions < 2) return NULL;
  size_t maxseg = BGI_SEGMENT_COUNTS_BYTES / ((nregions + 1) * sizeof(uint32_t));
  if (maxseg > BGI_MAX_SEGMENTS) maxseg = BGI_MAX_SEGMENTS;
  if (maxseg < t) return NULL;   /* a bitmap of millions of regions: the direct loop */
  build_free(B);
  b->scratch = NULL;
  if (!(B = calloc(1, sizeof *B))) return NULL;
  B->nthreads = t, B->nregions = nregions, B->cap = cap, B->maxseg = maxseg;
  B->esize = b->rbloom ? sizeof(uint64_t) : sizeof(uint32_t);
  B->block = BGI_BLOCK_INDEXES / b->k ? BGI_BLOCK_INDEXES / b->k : 1;
  if (b->rbloom && B->block > ((size_t)1 << (32 - b->region_shift))) B->block = (size_t)1 << (32 - b->region_shift);
  B->max_items = (uint64_t)t * (cap / b->k);
  if (B->max_items > BGI_MAX_BATCH_ITEMS) B->max_items = BGI_MAX_BATCH_ITEMS;
  int ok = (B->th = calloc(t, sizeof *B->th)) && (B->counts = calloc(maxseg * (nregions + 1), sizeof *B->counts));
  /* one mark per pending item, then a sink per set thread (set_step), a cache line apart */
  if (ok && b->rbloom) ok = (B->fresh = calloc((size_t)B->max_items + 64 * BGI_MAX_THREADS, sizeof *B->fresh)) != NULL;
  for (size_t i = 0; ok && i < t; i++)
    ok = (B->th[i].raw = malloc(B->block * b->k * B->esize)) && (B->th[i].sorted = malloc(cap * sizeof(uint32_t)));
  if (!ok) {
    build_free(B);
    return NULL;
  }
  for (size_t s = 0; s < maxseg; s++) B->seg[s].start = B->counts + s * (nregions + 1);
  b->scratch = B;
  return B;
}

/* ---- the three steps, on worker threads -------------------------------------------------------- */

enum { STEP_HASH, STEP_SET };

typedef struct worker {
  bgi_bitmap *b;
  build *B;
  int step;
  int nice;           /* added to the thread's nice value (BG_OPT_ROTATE_NICE) */
  size_t index;       /* this worker's thread number: its scratch */
  /* hash: items [from, to), the first one the batch's item number first, into segments seg[0..),
   * at most nseg of them; used: how many it filled */
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  uint64_t first;
  segment *seg;
  size_t nseg, used;
  /* set: the regions this worker owns */
  size_t rfrom, rto;
} worker;

/* Prefix sums of a block's region counts (region r's at start[r + 1]): start[r] becomes where region
 * r's entries go; each scatter advances it to where region r + 1 begins, and unshift puts it back. */
static void prefix(uint32_t *start, size_t nregions) {
  for (size_t r = 0; r < nregions; r++) start[r + 1] += start[r];
}

static void unshift(uint32_t *start, size_t nregions) {
  memmove(start + 1, start, nregions * sizeof *start);
  start[0] = 0;
}

static void hash_step(worker *w) {
  const bgi_bitmap *b = w->b;
  const uint32_t k = b->k, shift = b->region_shift;
  const size_t nregions = w->B->nregions, block = w->B->block;
  scratch *s = &w->B->th[w->index];
  uint64_t idx[BG_MAX_HASH_ITERATIONS];
  w->used = 0;
  for (size_t i0 = w->from; i0 < w->to; i0 += block) {
    size_t i1 = w->to - i0 < block ? w->to : i0 + block, m = 0;
    segment *g = &w->seg[w->used++];
    uint32_t *start = g->start;
    memset(start, 0, (nregions + 1) * sizeof *start);
    g->thread = w->index;
    g->first = w->first + (i0 - w->from);
    uint32_t *sorted = s->sorted + s->fill;
    if (b->rbloom) {
      uint64_t *raw = s->raw;
      const uint64_t offmask = ((uint64_t)1 << shift) - 1;
      for (size_t i = i0; i < i1; i++) {
        b->index(b, w->items[i], w->lens[i], raw + m);
        for (uint32_t j = 0; j < k; j++) start[(raw[m + j] >> shift) + 1]++;
        m += k;
      }
      /* a counting sort, stable: within a region the entries stay in item order */
      prefix(start, nregions);
      for (size_t i = 0, e = 0; i < i1 - i0; i++)
        for (uint32_t j = 0; j < k; j++, e++)
          sorted[start[raw[e] >> shift]++] = (uint32_t)((raw[e] & offmask) | (uint64_t)i << shift);
      unshift(start, nregions);
    } else {
      uint32_t *raw = s->raw;
      for (size_t i = i0; i < i1; i++) {
        b->index(b, w->items[i], w->lens[i], idx);
        for (uint32_t j = 0; j < k; j++) {
          raw[m + j] = (uint32_t)idx[j];   /* size <= BG_MAX_SIZE < 2^32 */
          start[(idx[j] >> shift) + 1]++;
        }
        m += k;
      }
      prefix(start, nregions);
      for (size_t e = 0; e < m; e++) sorted[start[raw[e] >> shift]++] = raw[e];
      unshift(start, nregions);
    }
    g->e0 = s->fill;
    g->e1 = s->fill += m;
  }
}

/* Reads a region's cache lines in order: the hardware prefetcher streams them in, where the
 * random ORs that follow would each wait for their own miss. */
static void warm(const uint8_t *p, size_t len) {
  uint8_t acc = 0;
  for (size_t i = 0; i < len; i += 64) acc |= ((const volatile uint8_t *)p)[i];
  (void)acc;
}

static void set_step(worker *w) {
  const bgi_bitmap *b = w->b;
  const build *B = w->B;
  uint8_t *bytes = b->bytes;
  const size_t region_bytes = (size_t)1 << (b->region_shift - 3);
  /* where a bit that was already set records its item: a slot of this worker's past the pending
   * items', never counted (an index select, no branch per bit: half the bits of a filling link
   * are set already, a branch on it mispredicts) */
  const uint64_t sink = B->max_items + 64 * w->index;
  for (size_t r = w->rfrom; r < w->rto; r++) {
    size_t off = r * region_bytes;
    warm(bytes + off, b->len - off < region_bytes ? b->len - off : region_bytes);
    for (size_t n = 0; n < B->nseg; n++) {
      const segment *g = &B->seg[n];
      const uint32_t *x = B->th[g->thread].sorted + g->e0 + g->start[r];
      const uint32_t *end = B->th[g->thread].sorted + g->e0 + g->start[r + 1];
      if (b->rbloom) {
        /* RedisBloom's order (bit o: mask 1 << o % 8); an item that finds a bit 0 counts */
        atomic_uchar *fresh = B->fresh;
        const uint32_t shift = b->region_shift, offmask = ((uint32_t)1 << shift) - 1;
        uint8_t *rbytes = bytes + off;   /* the region's: offsets are within it */
        for (; x < end; x++) {
          uint32_t bit = *x & offmask;
          uint8_t mask = (uint8_t)(1u << (bit & 7)), old = rbytes[bit >> 3];
          rbytes[bit >> 3] = old | mask;
          uint64_t was_set = (uint64_t)0 - (uint64_t)((old & mask) != 0);   /* all ones or 0 */
          uint64_t slot = ((g->first + (*x >> shift)) & ~was_set) | (sink & was_set);
          atomic_store_explicit(&fresh[slot], 1, memory_order_relaxed);
        }
      } else {
        /* SETBIT order (bit o: mask 0x80 >> o % 8) */
        for (; x < end; x++) bytes[*x >> 3] |= (uint8_t)(0x80u >> (*x & 7));
      }
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
  if (w->step == STEP_HASH) hash_step(w);
  else set_step(w);
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

/* Sets the pending items on up to `threads` threads; counts a link's. */
void bgi_bitmap_flush(bgi_bitmap *b, int threads, int nice) {
  build *B = b->scratch;
  if (!B || !B->items) return;
  worker w[BGI_MAX_THREADS];
  size_t t = (size_t)threads < B->nregions ? (size_t)threads : B->nregions;
  if (t > BGI_MAX_THREADS) t = BGI_MAX_THREADS;
  if (t < 1) t = 1;
  for (size_t i = 0; i < t; i++)
    w[i] = (worker){.b = b, .B = B, .step = STEP_SET, .nice = nice, .index = i, .rfrom = B->nregions * i / t,
                    .rto = B->nregions * (i + 1) / t};
  run_all(w, t);
  if (b->rbloom) {
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < B->items; i++) {
      fresh += atomic_load_explicit(&B->fresh[i], memory_order_relaxed);
      atomic_store_explicit(&B->fresh[i], 0, memory_order_relaxed);
    }
    b->added += fresh;
  }
  for (size_t i = 0; i < B->nthreads; i++) B->th[i].fill = 0;
  B->nseg = 0;
  B->items = 0;
}

/* ---- adding ------------------------------------------------------------------------------------ */

/* The direct loop: indexes of a block of items are computed and their bytes prefetched before
 * any bit is set, so the block's misses overlap. One thread only (plain ORs), nothing pending. A
 * link's items count and stop at the capacity; returns the items taken. */
#define BGI_BUILD_BLOCK 32
static size_t add_direct(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, uint64_t capacity) {
  const uint32_t k = b->k;
  uint64_t idx[BG_MAX_HASH_ITERATIONS];
  const size_t block = k * BGI_BUILD_BLOCK <= BG_MAX_HASH_ITERATIONS ? BGI_BUILD_BLOCK : BG_MAX_HASH_ITERATIONS / k;
  uint8_t *bytes = b->bytes;
  for (size_t i = 0; i < n; i += block) {
    size_t m = n - i < block ? n - i : block;
    for (size_t j = 0; j < m; j++) {
      b->index(b, items[i + j], lens[i + j], idx + j * k);
      for (uint32_t x = 0; x < k; x++) __builtin_prefetch(&bytes[idx[j * k + x] >> 3], 1, 0);
    }
    if (b->rbloom) {
      for (size_t j = 0; j < m; j++) {
        /* the server counts an item new when it sets a bit; at capacity it would open a new link */
        if (b->added >= capacity) return i + j;
        b->added += (uint64_t)bgi_rbloom_set(bytes, idx + j * k, k);
      }
    } else {
      for (const uint64_t *x = idx, *end = idx + m * k; x < end; x++) bytes[*x >> 3] |= (uint8_t)(0x80u >> (*x & 7));
    }
  }
  return n;
}

/* Hashes items into pending segments on up to t threads (flushing when the scratch is full);
 * returns the items taken: all, or, for a link close to its capacity, what add_direct took. */
static size_t add_bucketed(bgi_bitmap *b, build *B, const void *const *items, const size_t *lens, size_t n,
                           size_t t, int threads, int nice, uint64_t capacity) {
  const uint32_t k = b->k;
  if (t > B->nthreads) t = B->nthreads;
  if (t > B->maxseg) t = B->maxseg;
  worker w[BGI_MAX_THREADS];
  for (size_t done = 0; done < n;) {
    /* a batch that cannot reach the capacity even if every item counts */
    uint64_t slack = b->rbloom ? capacity - b->added - B->items : UINT64_MAX;
    /* threads for this call's shares: a small call hashes on fewer (one: on this thread if not nicer) */
    size_t th = (n - done) / BGI_HASH_PER_THREAD_MIN;
    if (th > t) th = t;
    if (th < 1) th = 1;
    size_t room = SIZE_MAX;
    for (size_t i = 0; i < th; i++) {
      size_t r = (B->cap - B->th[i].fill) / k;
      if (r < room) room = r;
    }
    uint64_t chunk = n - done;
    if (chunk > (uint64_t)room * th) chunk = (uint64_t)room * th;
    if (chunk > B->max_items - B->items) chunk = B->max_items - B->items;
    if (chunk > slack) chunk = slack;
    /* segments: each share may use segs of them (one per block) */
    size_t segs = (B->maxseg - B->nseg) / th;
    if (chunk > (uint64_t)segs * B->block * th) chunk = (uint64_t)segs * B->block * th;
    if (chunk == 0 || (slack < n - done && slack < b->bucketed_min)) {
      if (B->items) {
        bgi_bitmap_flush(b, threads, nice);
        continue;
      }
      /* nothing pending, and only the capacity stops a batch: one by one up to it */
      return done + add_direct(b, items + done, lens + done, n - done, capacity);
    }
    size_t nw = 0;
    for (size_t i = 0; i < th; i++) {
      size_t from = done + (size_t)(chunk * i / th), to = done + (size_t)(chunk * (i + 1) / th);
      if (from == to) continue;
      w[nw++] = (worker){.b = b, .B = B, .step = STEP_HASH, .nice = nice, .index = i, .items = items,
                         .lens = lens, .from = from, .to = to, .first = B->items + (from - done),
                         .seg = &B->seg[B->nseg + i * segs], .nseg = segs};
    }
    run_all(w, nw);
    /* the used segments together, in item order (swapped, so each keeps a counts array of its own) */
    for (size_t i = 0; i < nw; i++) {
      for (size_t j = 0; j < w[i].used; j++) {
        segment tmp = B->seg[B->nseg];
        B->seg[B->nseg] = w[i].seg[j];
        w[i].seg[j] = tmp;
        B->nseg++;
      }
    }
    B->items += chunk;
    done += (size_t)chunk;
  }
  return n;
}

static size_t threads_for(size_t n, int threads, size_t per_thread_min) {
  size_t t = n / per_thread_min;
  if (t > (size_t)threads) t = (size_t)threads;
  if (t > BGI_MAX_THREADS) t = BGI_MAX_THREADS;
  return t < 1 ? 1 : t;
}

void bgi_bitmap_add(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, int threads, int nice) {
  size_t t = threads_for(n, threads, BGI_ITEMS_PER_THREAD_MIN);
  size_t per_thread = BGI_ROUND_INDEXES / b->k;  /* items per thread and batch */
  if (per_thread > (n + t - 1) / t) per_thread = (n + t - 1) / t;
  if (per_thread < 1) per_thread = 1;
  build *B = n < b->bucketed_min ? NULL : build_get(b, t, per_thread * b->k);
  if (!B) {
    add_direct(b, items, lens, n, UINT64_MAX);  /* also the fallback when scratch memory is short */
    return;
  }
  add_bucketed(b, B, items, lens, n, t, threads, nice, UINT64_MAX);
  bgi_bitmap_flush(b, (int)t, nice);
}

size_t bgi_bitmap_add_upto(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, int threads,
                           int nice, uint64_t capacity) {
  build *B = b->scratch;
  if (n < b->bucketed_min && !(B && B->items)) return add_direct(b, items, lens, n, capacity);
  /* scratch for a batch of what the link can still take (all of its threads hash every call's shares) */
  size_t t = threads < 1 ? 1 : threads > BGI_MAX_THREADS ? BGI_MAX_THREADS : (size_t)threads;
  uint64_t left = capacity > b->added ? capacity - b->added : 0;
  uint64_t per_thread = BGI_ROUND_INDEXES / b->k;
  if (per_thread > (left + t - 1) / t) per_thread = (left + t - 1) / t;
  if (per_thread < 1) per_thread = 1;
  B = build_get(b, t, (size_t)per_thread * b->k);
  if (!B) return add_direct(b, items, lens, n, capacity);   /* none pending: build_get keeps a scratch that holds some */
  return add_bucketed(b, B, items, lens, n, t, threads, nice, capacity);
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
