/*
 * RedisBloom's hashing done here (hash/murmur.h) against the server's own: for many (capacity,
 * error rate) pairs, a filter built by the server (BF.RESERVE + BF.MADD) is read back with
 * BF.SCANDUMP, and its bit array must equal, byte for byte, the one built here from the same items.
 * The rotation's build (rotation/bitmap.c: region-bucketed, threaded, items pending across calls)
 * must give the same bytes and the server's item count; and, past a link's capacity, take exactly
 * the items and count that the one-by-one build takes.
 * Then the other way: a bit array built here, uploaded with BF.LOADCHUNK under the header of an
 * empty template, answers BF.MEXISTS item for item as the server-built filter does.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hash/murmur.h"
#include "native_fixture.h"
#include "rotation/rotation.h"

static bgt_redis srv;
static redisContext *rc;

/* BF.SCANDUMP key from start to end: the header (malloc'd) and the data chunks concatenated; the
 * iterators of each chunk in iters (up to 16). */
typedef struct dump {
  unsigned char *header, *data;
  size_t header_len, data_len;
  long long iters[16];
  size_t chunk_lens[16];
  int nchunks;
} dump;

static void scandump(const char *key, dump *d) {
  memset(d, 0, sizeof *d);
  long long it = 0;
  for (int round = 0; round < 64; round++) {
    redisReply *r = redisCommand(rc, "BF.SCANDUMP %s %lld", key, it);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    if (!r || r->type != REDIS_REPLY_ARRAY) return;
    it = r->element[0]->integer;
    redisReply *chunk = r->element[1];
    if (it == 0) {
      freeReplyObject(r);
      return;
    }
    if (round == 0) {
      d->header = malloc(chunk->len);
      memcpy(d->header, chunk->str, chunk->len);
      d->header_len = chunk->len;
      d->iters[15] = it;   /* the header's own iterator */
    }
    else {
      d->data = realloc(d->data, d->data_len + chunk->len);
      memcpy(d->data + d->data_len, chunk->str, chunk->len);
      d->data_len += chunk->len;
      if (d->nchunks < 15) {
        d->iters[d->nchunks] = it;
        d->chunk_lens[d->nchunks++] = chunk->len;
      }
    }
    freeReplyObject(r);
  }
}

static void free_dump(dump *d) {
  free(d->header);
  free(d->data);
}

static void cmd_ok(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  CHECK_MSG(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r && r->str ? r->str : "(no reply)");
  freeReplyObject(r);
}

/* The rotation's build of items[0..n) in calls of `chunk` items on `threads` threads (nice: their
 * nice value), regions of 2^shift bits, calls below bucketed_min items direct: the bits into out
 * (bits / 8 bytes), the count into *added; returns the items taken (fewer at capacity). */
static size_t engine_build(uint64_t bits, uint32_t k, uint64_t cap, const char *const *items, const size_t *lens,
                           size_t n, int threads, int nice, size_t chunk, uint32_t shift, size_t bucketed_min,
                           uint8_t *out, uint64_t *added) {
  bgi_bitmap b;
  CHECK_OK(bgi_bitmap_init_rbloom(&b, bits, k));
  b.region_shift = shift;
  b.bucketed_min = bucketed_min;
  size_t taken = 0;
  for (size_t i = 0; i < n; i += chunk) {
    size_t m = n - i < chunk ? n - i : chunk;
    size_t t = bgi_bitmap_add_upto(&b, (const void *const *)(items + i), lens + i, m, threads, nice, cap);
    taken += t;
    if (t < m) break;   /* as the rotation: the link goes up, the rest by BF.INSERT */
  }
  bgi_bitmap_flush(&b, threads, nice);
  memcpy(out, b.bytes, bits / 8);
  *added = b.added;
  bgi_bitmap_free(&b);
  return taken;
}

/* The one-by-one build (checked against the server below): stops where the server opens a link. */
static size_t seq_build(uint64_t bits, uint32_t k, uint64_t cap, const char *const *items, const size_t *lens,
                        size_t n, uint8_t *out, uint64_t *added) {
  size_t i = 0;
  *added = 0;
  for (; i < n && *added < cap; i++) *added += (uint64_t)bgi_rbloom_add(out, bits, k, items[i], lens[i]);
  return i;
}

static uint64_t get_u64le(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void test_bits_match_scandump(void) {
  static const struct { uint64_t cap; double err; int n; } pairs[] = {
    {100, 0.01, 80}, {1000, 0.001, 900}, {5000, 0.05, 3000}, {777, 0.1, 700}, {10000, 0.0001, 5000},
    {3, 0.5, 3}, {64, 0.2, 50}, {20000, 0.01, 15000}, {123457, 0.003, 1000}, {50, 1e-6, 40}};
  enum { MAXN = 15000 };
  static char store[MAXN][32];
  static const char *ptrs[MAXN];
  static size_t lens[MAXN];
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    char key[32];
    snprintf(key, sizeof key, "vec-%zu", p);
    cmd_ok("BF.RESERVE %s %.17g %llu", key, pairs[p].err, (unsigned long long)pairs[p].cap);
    uint64_t bits;
    uint32_t k;
    bgi_rbloom_geometry(pairs[p].cap, pairs[p].err, &bits, &k);
    uint8_t *mine = calloc(bits / 8, 1);
    for (int i = 0; i < pairs[p].n; i++) {
      /* items of every length 0..31 bytes, binary too: each tail length of the hash */
      char *item = store[i];
      size_t len = (size_t)snprintf(item, sizeof store[i], "%d:%.*s", i, i % 24, "abcdefghijklmnopqrstuvwxyz");
      if (i % 7 == 0) item[1] = '\0';
      ptrs[i] = item, lens[i] = len;
      cmd_ok("BF.ADD %s %b", key, item, len);
      bgi_rbloom_add(mine, bits, k, item, len);
    }
    dump d;
    scandump(key, &d);
    /* the rotation's build: bucketed in regions of 64 bits (so that even 100 items span many), in
     * calls of 37 items, on 1 and 3 threads; the bits and the count the server's */
    uint8_t *built = calloc(bits / 8, 1);
    for (int threads = 1; threads <= 3; threads += 2) {
      uint64_t added = 0;
      size_t took = engine_build(bits, k, pairs[p].cap, ptrs, lens, (size_t)pairs[p].n, threads, 0, 37, 6, 1, built,
                                 &added);
      CHECK_EQ_U64(took, (uint64_t)pairs[p].n);
      CHECK_MSG(d.data_len == bits / 8 && memcmp(d.data, built, d.data_len) == 0,
                "(%llu, %g), %d threads: the bucketed build's bits differ from the server's",
                (unsigned long long)pairs[p].cap, pairs[p].err, threads);
      CHECK_MSG(d.header_len >= 8 && get_u64le(d.header) == added, "(%llu, %g): the server counts %llu items, the "
                "bucketed build %llu", (unsigned long long)pairs[p].cap, pairs[p].err,
                (unsigned long long)(d.header_len >= 8 ? get_u64le(d.header) : 0), (unsigned long long)added);
    }
    free(built);
    CHECK_MSG(d.data_len == bits / 8, "(%llu, %g): the server's link has %zu bytes, %llu computed here",
              (unsigned long long)pairs[p].cap, pairs[p].err, d.data_len, (unsigned long long)bits / 8);
    CHECK_MSG(d.data_len == bits / 8 && memcmp(d.data, mine, d.data_len) == 0,
              "(%llu, %g): the server's bits differ from the ones built here", (unsigned long long)pairs[p].cap,
              pairs[p].err);
    free_dump(&d);
    free(mine);
  }
}

/* Past the capacity (and with repeated items, which the server does not count): the bucketed
 * build takes the items and counts what the one-by-one build does, and sets the same bits - for
 * every mix of threads, call sizes, region sizes and the direct loop's threshold. The control: a
 * capacity one less takes fewer items (the comparison can fail). */
static void test_bucketed_past_capacity(void) {
  enum { N = 40000 };
  static char store[N][24];
  static const char *ptrs[N];
  static size_t lens[N];
  for (int i = 0; i < N; i++) {
    /* a third of them repeat an earlier item */
    lens[i] = (size_t)snprintf(store[i], sizeof store[i], "p%d", i % 3 == 2 ? i / 3 : i);
    ptrs[i] = store[i];
  }
  static const struct { uint64_t cap; double err; } links[] = {{20000, 0.01}, {25000, 0.1}, {3000, 0.001}};
  static const struct { int threads, nice; size_t chunk; uint32_t shift; size_t min; } runs[] = {
    {1, 0, 10000, 9, 1}, {2, 0, 777, 6, 1}, {3, 0, 5000, 12, 4096}, {4, 1, 40000, 9, 64}, {2, 0, 1, 6, 1}};
  for (size_t l = 0; l < sizeof links / sizeof links[0]; l++) {
    uint64_t bits, want_added;
    uint32_t k;
    bgi_rbloom_geometry(links[l].cap, links[l].err, &bits, &k);
    uint8_t *want = calloc(bits / 8, 1), *got = calloc(bits / 8, 1);
    size_t want_took = seq_build(bits, k, links[l].cap, ptrs, lens, N, want, &want_added);
    CHECK(want_took < N && want_added == links[l].cap);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
      uint64_t added;
      size_t took = engine_build(bits, k, links[l].cap, ptrs, lens, N, runs[r].threads, runs[r].nice, runs[r].chunk,
                                 runs[r].shift, runs[r].min, got, &added);
      CHECK_MSG(took == want_took && added == want_added && memcmp(got, want, bits / 8) == 0,
                "capacity %llu, run %zu: took %zu, count %llu (one by one: %zu, %llu), bits %s",
                (unsigned long long)links[l].cap, r, took, (unsigned long long)added, want_took,
                (unsigned long long)want_added, memcmp(got, want, bits / 8) ? "differ" : "alike");
    }
    uint64_t added;
    size_t took = engine_build(bits, k, links[l].cap - 1, ptrs, lens, N, 2, 0, 777, 6, 1, got, &added);
    CHECK_MSG(took < want_took && added == links[l].cap - 1, "the control: capacity - 1 took %zu of %zu", took,
              want_took);
    free(want);
    free(got);
  }
}

/* A client-built filter uploaded with BF.LOADCHUNK answers as the server-built one. */
static void test_loadchunk_answers_alike(void) {
  enum { N = 3000, Q = 6000 };
  cmd_ok("BF.RESERVE built 0.01 5000");
  cmd_ok("BF.RESERVE tmpl 0.01 5000");
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry(5000, 0.01, &bits, &k);
  uint8_t *mine = calloc(bits / 8, 1);
  char item[32];
  for (int i = 0; i < N; i++) {
    size_t len = (size_t)snprintf(item, sizeof item, "u%d", i);
    cmd_ok("BF.ADD built %b", item, len);
    bgi_rbloom_add(mine, bits, k, item, len);
  }
  dump t;
  scandump("tmpl", &t);
  CHECK(t.nchunks >= 1 && t.data_len == bits / 8);
  cmd_ok("BF.LOADCHUNK loaded %lld %b", t.iters[15], t.header, t.header_len);
  size_t off = 0;
  for (int c = 0; c < t.nchunks; c++) {
    cmd_ok("BF.LOADCHUNK loaded %lld %b", t.iters[c], mine + off, t.chunk_lens[c]);
    off += t.chunk_lens[c];
  }
  int same = 0, present = 0;
  for (int i = 0; i < Q; i++) {
    size_t len = (size_t)snprintf(item, sizeof item, "u%d", i);
    redisReply *a = redisCommand(rc, "BF.EXISTS built %b", item, len), *b = redisCommand(rc, "BF.EXISTS loaded %b", item, len);
    same += a && b && a->type == REDIS_REPLY_INTEGER && b->type == REDIS_REPLY_INTEGER && a->integer == b->integer;
    present += i < N && b && b->type == REDIS_REPLY_INTEGER && b->integer == 1;
    freeReplyObject(a);
    freeReplyObject(b);
  }
  CHECK_EQ_INT(same, Q);
  CHECK_EQ_INT(present, N);
  free_dump(&t);
  free(mine);
}

/* The control: one bit off in the local array is seen (the comparison can fail). */
static void test_control_one_bit_off(void) {
  cmd_ok("BF.RESERVE ctl 0.01 100");
  cmd_ok("BF.ADD ctl x");
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry(100, 0.01, &bits, &k);
  uint8_t *mine = calloc(bits / 8, 1);
  bgi_rbloom_add(mine, bits, k, "x", 1);
  dump d;
  scandump("ctl", &d);
  CHECK(d.data_len == bits / 8 && memcmp(d.data, mine, d.data_len) == 0);
  mine[0] ^= 0x10;
  CHECK_MSG(memcmp(d.data, mine, d.data_len) != 0, "a flipped bit was not seen");
  free_dump(&d);
  free(mine);
}

static void setup(void) {
  bgt_redis_start_bloom(&srv, NULL);
  rc = redisConnect("127.0.0.1", srv.port);
  CHECK(rc && !rc->err);
}

static void teardown(void) {
  redisFree(rc);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_bits_match_scandump), BGT_CASE(test_bucketed_past_capacity),
        BGT_CASE(test_loadchunk_answers_alike),
        BGT_CASE(test_control_one_bit_off), BGT_CASE(teardown))
