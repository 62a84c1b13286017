/*
 * Partitioned filters (filter.h, bg_filter_init_partitioned): their sizing as pure computation
 * (each partition below 2^32 bits; the false-positive rate at capacity within 1.05x of a plain
 * filter's, by the formula and measured on the same items in memory), their arguments' checks,
 * and their operations on a real standalone redis-server - blocking and on a submission queue:
 * add / contains of one item and of batches, info, count, expire, persist, delete, a handle that
 * finds the filter deleted and made again with another number of partitions or as a plain one,
 * and the config hash holding none of the fields Redisson reads.
 */
#include <bloomguard.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "filter/filter.h"
#include "filter/partition.h"
#include "harness.h"
#include "hash/hash.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;

/* Allocations counted (malloc, calloc, realloc of every thread) by taking the allocator's place:
 * not under ASan or TSan, whose own allocators must see every block. glibc gives the real allocator
 * as __libc_malloc; another libc (musl, in the static build of scripts/test-musl-c.sh) has no such
 * entry, so there the linker's --wrap sends every call to __wrap_malloc and gives the real one as
 * __real_malloc (BGT_WRAP_MALLOC: tests/c/CMakeLists.txt). */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && (defined(__GLIBC__) || defined(BGT_WRAP_MALLOC))
#define COUNTS_ALLOCATIONS 1
#include <stdatomic.h>
static atomic_long allocations;
#ifdef BGT_WRAP_MALLOC
#define COUNTED(name) __wrap_##name
#define REAL(name) __real_##name
#else
#define COUNTED(name) name
#define REAL(name) __libc_##name
#endif
extern void *REAL(malloc)(size_t n);
extern void *REAL(calloc)(size_t n, size_t size);
extern void *REAL(realloc)(void *p, size_t n);
void *COUNTED(malloc)(size_t n);
void *COUNTED(calloc)(size_t n, size_t size);
void *COUNTED(realloc)(void *p, size_t n);
void *COUNTED(malloc)(size_t n) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return REAL(malloc)(n);
}
void *COUNTED(calloc)(size_t n, size_t size) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return REAL(calloc)(n, size);
}
void *COUNTED(realloc)(void *p, size_t n) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return REAL(realloc)(p, n);
}
#endif

/* ---- sizing (no server) -------------------------------------------------------------------- */

static void sizes_bounded_and_fpr_within_target(void) {
  static const int64_t ns[] = {1, 1000, 200000, 10000000, 600000000, 2000000000};
  static const double ps[] = {0.1, 0.01, 0.001};
  static const int64_t parts[] = {1, 2, 3, 16, 128, 1000, 16384};
  for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
    for (size_t b = 0; b < sizeof ps / sizeof *ps; b++)
      for (size_t c = 0; c < sizeof parts / sizeof *parts; c++) {
        bgi_pgeom g;
        bgi_err err = {0};
        int st = bgi_partition_geometry(ns[a], ps[b], parts[c], &g, &err);
        if (st != BG_OK) {
          /* only partitions too big or too small are refused, and the message says how many fit */
          CHECK_STATUS(st, BG_EBADPARAMS);
          CHECK_MSG(strstr(err.msg, "use at least") || strstr(err.msg, "use at most"), "%s", err.msg);
          continue;
        }
        CHECK(g.psize >= 1 && g.psize <= BG_MAX_SIZE);
        CHECK(g.psize * g.parts >= g.m);
        double plain = bgi_bloom_fpr((double)ns[a], (double)g.m, g.k);
        double part = bgi_partitioned_fpr((uint64_t)ns[a], g.parts, g.psize, g.k);
        CHECK_MSG(part <= 1.05 * plain + 1e-12, "n=%lld p=%g P=%lld: %g vs plain %g", (long long)ns[a], ps[b],
                  (long long)parts[c], part, plain);
      }
}

static void arguments_checked(void) {
  bgi_pgeom g;
  bgi_err err = {0};
  CHECK_STATUS(bgi_partition_geometry(1000, 0.01, 0, &g, &err), BG_EINVAL);
  CHECK_CONTAINS(err.msg, "partitions must be from 1 to 16384");
  CHECK_STATUS(bgi_partition_geometry(1000, 0.01, 16385, &g, &err), BG_EINVAL);
  CHECK_STATUS(bgi_partition_geometry(600000000, 0.01, 1, &g, &err), BG_EBADPARAMS);
  CHECK_CONTAINS(err.msg, "use at least 2 partitions");
  CHECK_STATUS(bgi_partition_geometry(200000, 0.01, 1024, &g, &err), BG_EBADPARAMS);
  CHECK_CONTAINS(err.msg, "use at most 936 partitions");
  CHECK_STATUS(bgi_partition_geometry(0, 0.01, 4, &g, &err), BG_EBADPARAMS);
  CHECK_STATUS(bgi_partition_geometry(1000, 1.5, 4, &g, &err), BG_EBADPARAMS);
  CHECK_CONTAINS(err.msg, "can't be greater than 1");
  /* beyond Redisson's cap: 600 M at 1 % is 5.75e9 bits, fine over 128 partitions */
  CHECK_OK(bgi_partition_geometry(600000000, 0.01, 128, &g, &err));
  CHECK(g.m > (1ULL << 32));
  CHECK(g.psize * 128 > (1ULL << 32));
  CHECK(g.psize % 2 == 1);
  /* the slots of the partitions: the middle of each 1/P of the 16384 */
  CHECK_EQ_INT(bgi_partition_slot(0, 1), 8192);
  CHECK_EQ_INT(bgi_partition_slot(0, 2), 4096);
  CHECK_EQ_INT(bgi_partition_slot(1, 2), 12288);
  CHECK_EQ_INT(bgi_partition_slot(16383, 16384), 16383);
}

/* One in-memory filter of `parts` partitions of psize bits (parts 1 and psize m: a plain one). */
typedef struct memfilter {
  uint32_t parts, k;
  uint64_t psize;
  uint8_t *bits;
} memfilter;

static void mf_init(memfilter *m, uint32_t parts, uint64_t psize, uint32_t k) {
  m->parts = parts, m->psize = psize, m->k = k;
  m->bits = calloc((size_t)(parts * psize / 8 + 1), 1);
}

static void mf_idx(const memfilter *m, const uint64_t h[2], uint64_t *base, uint64_t *idx) {
  *base = m->parts == 1 ? 0 : (uint64_t)bgi_partition_of(h[0], h[1], m->parts) * m->psize;
  bgi_indexes_from_hash(h[0], h[1], m->psize, m->k, idx);
}

static void mf_add(memfilter *m, const uint64_t h[2]) {
  uint64_t base, idx[64];
  mf_idx(m, h, &base, idx);
  for (uint32_t i = 0; i < m->k; i++) m->bits[(base + idx[i]) / 8] |= (uint8_t)(1u << ((base + idx[i]) % 8));
}

static int mf_has(const memfilter *m, const uint64_t h[2]) {
  uint64_t base, idx[64];
  mf_idx(m, h, &base, idx);
  for (uint32_t i = 0; i < m->k; i++)
    if (!(m->bits[(base + idx[i]) / 8] & (1u << ((base + idx[i]) % 8)))) return 0;
  return 1;
}

/* The hashes of "prefix-0" .. "prefix-(n-1)". */
static uint64_t (*hashes(const char *prefix, size_t n))[2] {
  uint64_t (*h)[2] = malloc(n * sizeof *h);
  char buf[32];
  for (size_t i = 0; i < n; i++) bgi_hash128(buf, (size_t)snprintf(buf, sizeof buf, "%s-%zu", prefix, i), h[i]);
  return h;
}

/* The rate measured at capacity: 200 k items, 1 M absent probes (a rate near 1 % is then known to
 * about 1 % of itself), the same items and probes for the plain filter and each P. */
static void measured_fpr_within_1_05x(void) {
  enum { N = 200000, PROBES = 1000000 };
  static const uint32_t parts[] = {2, 128, 900};
  uint64_t(*in)[2] = hashes("in", N), (*out)[2] = hashes("out", PROBES);
  bgi_pgeom g;
  bgi_err err = {0};
  CHECK_OK(bgi_partition_geometry(N, 0.01, 1, &g, &err));
  memfilter plain;
  mf_init(&plain, 1, g.m, g.k);
  for (int i = 0; i < N; i++) mf_add(&plain, in[i]);
  long plain_fp = 0;
  for (int i = 0; i < PROBES; i++) plain_fp += mf_has(&plain, out[i]);
  free(plain.bits);
  double plain_rate = (double)plain_fp / PROBES;
  printf("    plain: m=%llu k=%u measured %.5f (formula %.5f)\n", (unsigned long long)g.m, g.k, plain_rate,
         bgi_bloom_fpr(N, (double)g.m, g.k));
  for (size_t p = 0; p < sizeof parts / sizeof *parts; p++) {
    bgi_pgeom pg;
    CHECK_OK(bgi_partition_geometry(N, 0.01, parts[p], &pg, &err));
    memfilter m;
    mf_init(&m, pg.parts, pg.psize, pg.k);
    for (int i = 0; i < N; i++) mf_add(&m, in[i]);
    long fp = 0, fn = 0;
    for (int i = 0; i < N; i++) fn += !mf_has(&m, in[i]);
    for (int i = 0; i < PROBES; i++) fp += mf_has(&m, out[i]);
    free(m.bits);
    double rate = (double)fp / PROBES;
    printf("    P=%u: %llu bits each (+%.2f%% over m/P), measured %.5f = %.3fx plain (formula %.3fx)\n", parts[p],
           (unsigned long long)pg.psize, 100.0 * ((double)pg.psize * pg.parts / (double)g.m - 1), rate,
           rate / plain_rate, bgi_partitioned_fpr(N, pg.parts, pg.psize, pg.k) / bgi_bloom_fpr(N, (double)g.m, g.k));
    CHECK_EQ_INT(fn, 0);
    CHECK_MSG(rate <= 1.05 * plain_rate, "P=%u: measured %.5f > 1.05 x plain %.5f", parts[p], rate, plain_rate);
  }
  free(in);
  free(out);
}

/* The negative control of the sizing: partitions of exactly m/P bits over many partitions of few
 * items each lose to the binomial spread - the check above would catch a sizing that forgot it. */
static void naive_sizing_exceeds_1_05x(void) {
  enum { N = 200000 };
  bgi_pgeom g;
  bgi_err err = {0};
  CHECK_OK(bgi_partition_geometry(N, 0.01, 1, &g, &err));
  uint32_t P = 4096;
  uint64_t naive = (g.m + P - 1) / P;
  double ratio = bgi_partitioned_fpr(N, P, naive, g.k) / bgi_bloom_fpr(N, (double)g.m, g.k);
  printf("    P=%u at m/P bits: %.3fx plain\n", P, ratio);
  CHECK(ratio > 1.05);
}

/* ---- on a server ---------------------------------------------------------------------------- */

/* A client whose round trips may take 10 s: a batch is a round of up to 256 requests at once, whose
 * answers a sanitizer build on a loaded machine reads for longer than the default second. */
static bg_client *open_client(void) {
  bg_client *c = NULL;
  bg_options *o = NULL;
  char msg[256];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000));
  CHECK_MSG(bgt_client_open(&c, srv.url, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  return c;
}

static long long redis_int(const char *fmt, const char *arg) {
  char *r = bgt_redis_cmd(&srv, fmt, arg);
  long long v = r ? atoll(r) : -1;
  free(r);
  return v;
}

/* Keys of the filter `name` on the server (the library's own probe key aside), and how many of them
 * have a time to live. */
static long long filter_keys(const char *name) {
  char *r = bgt_redis_cmd(&srv, "EVAL %s 0 *%s*", "return #redis.call('KEYS', ARGV[1])", name);
  long long v = r ? atoll(r) : -1;
  free(r);
  return v;
}

static long long filter_keys_with_ttl(const char *name) {
  char *r = bgt_redis_cmd(&srv, "EVAL %s 0 *%s*",
                          "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                          "if redis.call('PTTL', k) > 0 then n = n + 1 end end return n", name);
  long long v = r ? atoll(r) : -1;
  free(r);
  return v;
}

static void operations_standalone(void) {
  bg_client *c = open_client();
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "pf"));
  int created = -1;
  CHECK_STATUS(bg_filter_init_partitioned(f, 100000, 0.01, 16385, &created), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "partitions must be from 1 to 16384");
  CHECK_STATUS(bg_filter_init_partitioned(f, 600000000, 0.01, 1, &created), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_filter_errmsg(f), "use at least 2 partitions");
  CHECK_OK(bg_filter_init_partitioned(f, 100000, 0.01, 8, &created));
  CHECK_EQ_INT(created, 1);
  CHECK_OK(bg_filter_init_partitioned(f, 100000, 0.01, 8, &created));
  CHECK_EQ_INT(created, 0);
  /* a plain init of the name keeps it too */
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  CHECK_EQ_INT(created, 0);

  /* what Redisson reads is not there: it says "not initialized" */
  char *r = bgt_redis_cmd(&srv, "HMGET {pf}:config size hashIterations expectedInsertions falseProbability");
  CHECK_EQ_STR(r, "(nil) (nil) (nil) (nil)");
  free(r);
  CHECK_EQ_INT(redis_int("EXISTS %s", "pf"), 0);

  uint64_t size = 0;
  uint32_t k = 0, parts = 0;
  int64_t n = 0;
  double fpp = 0;
  CHECK_OK(bg_filter_info_partitioned(f, &size, &k, &n, &fpp, &parts));
  CHECK_EQ_INT(parts, 8);
  CHECK_EQ_INT(k, 7);
  CHECK_EQ_INT(n, 100000);
  CHECK(fpp == 0.01);
  CHECK(size >= 958506 && size % 8 == 0);
  uint64_t size2 = 0;
  CHECK_OK(bg_filter_info(f, &size2, NULL, NULL, NULL));
  CHECK_EQ_U64(size2, size);

  items in = make_items("pin", 20000), out = make_items("pout", 20000);
  int added = -1, present = -1;
  CHECK_OK(bg_filter_add(f, "one", 3, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_add(f, "one", 3, &added));
  CHECK_EQ_INT(added, 0);
  CHECK_OK(bg_filter_contains(f, "one", 3, &present));
  CHECK_EQ_INT(present, 1);
  size_t nadded = 0;
  CHECK_OK(bg_filter_add_many(f, PTRS(in), in.len, in.n, &nadded));
  CHECK(nadded > 19900 && nadded <= 20000);
  uint8_t *ans = malloc(in.n);
  CHECK_OK(bg_filter_contains_many(f, PTRS(in), in.len, in.n, ans));
  size_t yes = 0;
  for (size_t i = 0; i < in.n; i++) yes += ans[i];
  CHECK_EQ_INT(yes, in.n);
  CHECK_OK(bg_filter_contains_many(f, PTRS(out), out.len, out.n, ans));
  yes = 0;
  for (size_t i = 0; i < out.n; i++) yes += ans[i];
  CHECK_MSG(yes < out.n / 100, "%zu of %zu absent items answered present", yes, out.n);
  /* each single-item answer agrees with the batch's */
  for (size_t i = 0; i < 200; i++) {
    CHECK_OK(bg_filter_contains(f, out.p[i], out.len[i], &present));
    CHECK_EQ_INT(present, ans[i]);
  }
  int64_t count = 0;
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_MSG(llabs(count - 20001) < 400, "count %lld", (long long)count);

  /* 8 bitmaps and 8 metas and the config, nothing else */
  CHECK_EQ_INT(filter_keys("pf"), 17);
  int applied = -1;
  CHECK_OK(bg_filter_expire(f, 100000, &applied));
  CHECK_EQ_INT(applied, 1);
  CHECK_EQ_INT(filter_keys_with_ttl("pf"), 17);
  CHECK_OK(bg_filter_persist(f, &applied));
  CHECK_EQ_INT(applied, 1);
  CHECK_EQ_INT(filter_keys_with_ttl("pf"), 0);

  /* another handle made it again with another P: this one's answers stay right */
  bg_filter *g = NULL;
  CHECK_OK(bg_filter_open(&g, c, "pf"));
  int deleted = -1;
  CHECK_OK(bg_filter_delete(g, &deleted));
  CHECK_EQ_INT(deleted, 1);
  CHECK_EQ_INT(filter_keys("pf"), 0);
  CHECK_STATUS(bg_filter_contains(f, "one", 3, &present), BG_ENOTINIT);
  CHECK_OK(bg_filter_init_partitioned(g, 50000, 0.01, 5, &created));
  CHECK_EQ_INT(created, 1);
  CHECK_OK(bg_filter_add_many(g, PTRS(in), in.len, 5000, NULL));
  CHECK_OK(bg_filter_contains_many(f, PTRS(in), in.len, 5000, ans));
  yes = 0;
  for (size_t i = 0; i < 5000; i++) yes += ans[i];
  CHECK_EQ_INT(yes, 5000);
  CHECK_OK(bg_filter_add(f, "two", 3, NULL));
  CHECK_OK(bg_filter_contains(g, "two", 3, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_EQ_INT(filter_keys("pf"), 11);
  /* ... and again as a plain (Redisson) filter */
  CHECK_OK(bg_filter_delete(g, &deleted));
  CHECK_OK(bg_filter_init(g, 10000, 0.01, &created));
  CHECK_EQ_INT(created, 1);
  CHECK_OK(bg_filter_add(f, "three", 5, NULL));
  CHECK_OK(bg_filter_contains(g, "three", 5, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_info_partitioned(f, &size, &k, &n, &fpp, &parts));
  CHECK_EQ_INT(parts, 0);
  CHECK_EQ_INT(redis_int("EXISTS %s", "pf"), 1);
  CHECK_OK(bg_filter_delete(f, &deleted));
  CHECK_EQ_INT(filter_keys("pf"), 0);
  free(ans);
  items_free(&in);
  items_free(&out);
  bg_filter_close(g);
  bg_filter_close(f);
  bg_client_close(c);
}

/* Waits for one completion (at most 10 s): its status, or -1000 if none came. */
static int one(bg_queue *q, int64_t *value, uint32_t *parts) {
  bg_completion *cs[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 10000, cs, 1, &n));
  if (n != 1) return -1000;
  if (value) *value = bg_completion_value(cs[0]);
  if (parts) CHECK_OK(bg_completion_partitions(cs[0], parts));
  int st = bg_completion_status(cs[0]);
  if (st != BG_OK) printf("    completion: %s\n", bg_completion_errmsg(cs[0]));
  return st;
}

static void operations_on_a_queue(void) {
  bg_client *c = open_client();
  bg_filter *f = NULL;
  bg_queue *q = NULL;
  CHECK_OK(bg_filter_open(&f, c, "qpf"));
  CHECK_OK(bg_queue_open(&q, c));
  int64_t v = -1;
  uint32_t parts = 0;
  CHECK_STATUS(bg_filter_init_partitioned_submit(f, q, 1, 1000, 0.01, -1), BG_EINVAL);
  CHECK_OK(bg_filter_init_partitioned_submit(f, q, 1, 100000, 0.01, 300));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  items in = make_items("qin", 30000);
  CHECK_OK(bg_filter_add_many_submit(f, q, 2, PTRS(in), in.len, in.n));
  CHECK_OK(one(q, &v, NULL));
  CHECK(v > 29900);
  CHECK_OK(bg_filter_contains_many_submit(f, q, 3, PTRS(in), in.len, in.n));
  bg_completion *cs[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 10000, cs, 1, &n));
  CHECK_EQ_INT(n, 1);
  if (n == 1) {
    CHECK_OK(bg_completion_status(cs[0]));
    size_t np = 0, yes = 0;
    const uint8_t *p = bg_completion_present(cs[0], &np);
    CHECK_EQ_INT(np, in.n);
    for (size_t i = 0; p && i < np; i++) yes += p[i];
    CHECK_EQ_INT(yes, in.n);
  }
  CHECK_OK(bg_filter_contains_submit(f, q, 4, in.p[7], in.len[7]));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  CHECK_OK(bg_filter_info_submit(f, q, 5));
  CHECK_OK(one(q, NULL, &parts));
  CHECK_EQ_INT(parts, 300);
  CHECK_OK(bg_filter_count_submit(f, q, 6));
  CHECK_OK(one(q, &v, NULL));
  CHECK_MSG(llabs(v - 30000) < 600, "count %lld", (long long)v);
  CHECK_OK(bg_filter_delete_submit(f, q, 7));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  CHECK_EQ_INT(filter_keys("qpf"), 0);
  items_free(&in);
  bg_queue_close(q);
  bg_filter_close(f);
  bg_client_close(c);
}

/* The writes the client's one multiplexed connection made for `batches` blocking contains_many of
 * 100 items on a filter of 128 partitions (each batch touches ~70 of them), per batch. */
static double writes_per_batch(bg_client *c, bg_filter *f, const void *const *items, const size_t *lens, int batches) {
  uint8_t present[100];
  uint64_t w0 = atomic_load(&c->mux.mux[0].writes);
  for (int b = 0; b < batches; b++) {
    CHECK_OK(bg_filter_contains_many(f, items + (b % 10) * 100, lens + (b % 10) * 100, 100, present));
    for (int i = 0; i < 100; i++) CHECK(present[i]);
  }
  return (double)(atomic_load(&c->mux.mux[0].writes) - w0) / batches;
}

/* A blocking batch splits into one request per partition, all written before the first answer is
 * waited for: one write per connection (found by bench_partitioned: a batch of 100 made ~70 send
 * calls). Negative control: each request written alone (the fault). */
static void batch_written_once_per_server(void) {
  bg_client *c = NULL;
  bg_options *o = NULL;
  char msg[256];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 1));   /* one connection: one write a batch */
  CHECK_MSG(bgt_client_open(&c, srv.url, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "pw"));
  CHECK_OK(bg_filter_init_partitioned(f, 100000, 0.01, 128, NULL));
  static char buf[1000][16];
  static const void *items[1000];
  static size_t lens[1000];
  for (int i = 0; i < 1000; i++) lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "w%d", i), items[i] = buf[i];
  CHECK_OK(bg_filter_add_many(f, items, lens, 1000, NULL));
  CHECK_EQ_INT(c->mux.n, 1);
  double held = writes_per_batch(c, f, items, lens, 50);
  bgi_fanout_fault_send_each(1);
  double each = writes_per_batch(c, f, items, lens, 50);
  bgi_fanout_fault_send_each(0);
  printf("  writes per batch of 100 over 128 partitions: %.2f (control, each request alone: %.2f)\n", held, each);
  CHECK_MSG(held == 1, "%.2f writes per batch: the batch's requests were not written together", held);
  CHECK_MSG(each >= 50, "control: %.2f writes per batch with each request written alone - the harness cannot tell",
            each);
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_filter_close(f);
  bg_client_close(c);
}

#ifdef COUNTS_ALLOCATIONS
/* Allocations made by 1000 single-item queries of f's 100 items, once each has been asked (its
 * partition's verdict and the buffers' sizes settled). */
static long allocations_of_queries(bg_filter *f) {
  int yes = 0;
  long a0 = 0;
  for (int i = 0; i < 1100; i++) {
    if (i == 100) a0 = atomic_load(&allocations);
    char item[16];
    int n = snprintf(item, sizeof item, "a%d", i % 100);
    CHECK_OK(bg_filter_contains(f, item, (size_t)n, &yes));
    CHECK(yes);
  }
  return atomic_load(&allocations) - a0;
}

/* A warm single-item query allocates nothing, on a plain filter and on a partitioned one.
 * Negative control: the partitioned task memory not kept (the fault) - one allocation a query. */
static void warm_queries_allocate_nothing(void) {
  bg_client *c = open_client();
  bg_filter *plain = NULL, *part = NULL;
  CHECK_OK(bg_filter_open(&plain, c, "pa-plain"));
  CHECK_OK(bg_filter_open(&part, c, "pa-part"));
  CHECK_OK(bg_filter_init(plain, 10000, 0.01, NULL));
  CHECK_OK(bg_filter_init_partitioned(part, 10000, 0.01, 16, NULL));
  for (int i = 0; i < 100; i++) {
    char item[16];
    int n = snprintf(item, sizeof item, "a%d", i);
    CHECK_OK(bg_filter_add(plain, item, (size_t)n, NULL));
    CHECK_OK(bg_filter_add(part, item, (size_t)n, NULL));
  }
  long on_plain = allocations_of_queries(plain), on_part = allocations_of_queries(part);
  bgi_guarded_fault_no_spares(1);
  long control = allocations_of_queries(part);
  bgi_guarded_fault_no_spares(0);
  printf("  allocations in 1000 warm single-item queries: plain %ld, partitioned %ld (control: %ld)\n", on_plain,
         on_part, control);
  CHECK_MSG(on_plain == 0, "a plain filter's queries allocated %ld times", on_plain);
  CHECK_MSG(on_part == 0, "a partitioned filter's queries allocated %ld times", on_part);
  CHECK_MSG(control >= 1000, "control: %ld allocations with the task memory not kept - the harness cannot tell",
            control);
  CHECK_OK(bg_filter_delete(plain, NULL));
  CHECK_OK(bg_filter_delete(part, NULL));
  bg_filter_close(plain), bg_filter_close(part);
  bg_client_close(c);
}
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static void warm_queries_allocate_nothing(void) {
  bgt_skip_case(BGT_SKIP_SANITIZER " (allocations are not counted under a sanitizer's allocator)");
}
#else
static void warm_queries_allocate_nothing(void) {
  bgt_skip_case("no allocator to count with (neither glibc's __libc_malloc nor the linker's --wrap)");
}
#endif

static void with_server(void (*fn)(void)) {
  bgt_redis_start(&srv, NULL);
  fn();
  bgt_redis_stop(&srv);
}

static void standalone(void) { with_server(operations_standalone); }
static void queue(void) { with_server(operations_on_a_queue); }
static void one_write(void) { with_server(batch_written_once_per_server); }
static void no_allocation(void) { with_server(warm_queries_allocate_nothing); }

BGT_RUN(BGT_CASE(sizes_bounded_and_fpr_within_target), BGT_CASE(arguments_checked), BGT_CASE(measured_fpr_within_1_05x),
        BGT_CASE(naive_sizing_exceeds_1_05x), BGT_CASE(standalone), BGT_CASE(queue),
        BGT_CASE(one_write), BGT_CASE(no_allocation))
