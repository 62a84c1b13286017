/*
 * bench_rotate: the cost of rebuilding a filter, and what a rebuild does to the queries that keep
 * running meanwhile. Run by hand (see bench/README.md); not a test.
 *
 * Part 1, rebuild (n = --items, default 10,000,000 distinct 16-byte items, p = --fpp 0.01; the items
 * are generated in memory once, outside the timing). Both filters start as a full "previous
 * generation" (a random bitmap of the final length plus the config), so both sides rebuild over an
 * existing filter.
 *  bg        bg_rotation_begin(SWAP, n, p) + bg_rotation_add_many in batches of --bg-batch
 *            (1,000,000) + bg_rotation_commit + bg_rotation_free, timed end to end; broken down into
 *            begin, build (hashing into the in-memory bitmap), upload (SETRANGE chunks under the
 *            lease) and commit (the swap script), from progress-callback timestamps.
 *  redisson  what Redisson 3.45's RBloomFilter does for delete() + tryInit(n, p) + add(batch) per
 *            1,000 items: DEL bitmap config; EVAL of tryInit's script (EXISTS check, 4x HSET); then
 *            per 1,000 items one EVALSHA of Redisson's add script (HGET size / hashIterations, assert,
 *            one SETBIT per index counting new bits) with ARGV = size, hashIterations, k, indexes.
 *            The indexes are computed inside the timed loop with bg_indexes (HighwayHash-128 +
 *            Redisson's index function, as Redisson does client-side). Commands go out on one
 *            connection with up to --window (16) in flight (addAsync without waiting; --window 1 =
 *            the synchronous add()). EVALSHA (script loaded inside the timing) instead of EVAL saves
 *            the baseline the script text on the wire: the comparison favours the baseline.
 * The bg side runs --bg-runs times (default 3: once before the baseline, the rest after it); its
 * median decides. Then the two bitmaps are fetched and compared byte for byte, the 4 config fields
 * compared, and a sample of items checked present (and absent items counted as false positives)
 * through bg_filter_contains_many on both filters. Target: redisson / bg >= 100x. A build reference
 * follows: ns per item on one thread for hashing alone, hashing + the library's atomic-OR loop, the
 * same loop with a block of indexes prefetched first, the library's add_many itself, and a plain
 * (non-atomic) OR loop.
 *
 * Part 2, latency under rotation. A filter of the same n, p holds the first --rot-items (1,000,000)
 * items. The query thread (this one) calls bg_filter_contains back to back on its own client
 * (pool 1), alternating present and absent items, and records every call's latency in a
 * preallocated array. By default it is a closed loop (the next call starts when the last one
 * returns: a server stall delays ONE call); --qps Q makes it an open loop of Q calls/s whose
 * latencies count from when each call was due, so a stall delays every call due during it.
 * Phases of --phase-seconds (3) each:
 *  idle      no rotation;
 *  rotating  another thread (its own client) runs SWAP rotations of the same filter back to back:
 *            begin(n, p), add_many of the --rot-items items, commit, free;
 *  build     the same but abort instead of commit: the hashing threads' CPU alone, no upload/swap;
 *  rot+add   (with --adds-per-rotation A > 0, default 1) rotating plus A bg_filter_add calls
 *            right after begin, so the delta list exists and the commit applies it (BITFIELD SET).
 * --rot-threads / --chunk-bytes set BG_OPT_ROTATE_THREADS / BG_OPT_ROTATE_CHUNK_BYTES; --rot-nice
 * lowers the rotator thread's priority (the library's hashing and lease threads inherit it).
 * Each round runs every kind once, the order rotating from round to round (--rounds, default 5).
 * Reported per kind: p50/p99/p999/max (median over rounds, and pooled over all calls); the
 * decision is the median over rounds of p99(rotating) / p99(idle) of the same round: <= 2x.
 * Present items answered absent and errors are counted (both must be 0). When the benchmark started
 * the server itself, every command slower than --slowlog-us (20) is taken from SLOWLOG per phase
 * and classified (rotation upload / commit / begin / renew, adds, contains, other), then it
 * measures each rotation step with slowlog-log-slower-than 0 on an idle server (upload time per
 * chunk offset), and the raw costs of the server operations involved (SETRANGE growing a fresh
 * value, RENAME over a live key, BITOP OR, uploads plain / through EVAL / over an existing value,
 * one whole-value SET), each with the longest PING round trip a concurrent client saw during it.
 *
 *   bench_rotate [--url URL] [--items N (10000000)] [--fpp P (0.01)] [--window W (16)]
 *                [--bg-runs R (3)] [--bg-batch B (1000000)] [--rot-items M (1000000)]
 *                [--rot-threads T (0: library default)] [--rot-nice N (0)]
 *                [--chunk-bytes C (0: library default)]
 *                [--adds-per-rotation A (1)] [--phase-seconds S (3)] [--rounds N (5)]
 *                [--slowlog-us U (20)] [--qps Q (0)] [--skip-rebuild] [--skip-latency]
 * Exit status: 0 all targets met, 3 a target missed, 1 or 2 on errors.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define ITEM_LEN 16
#define K_MAX 64
#define REDISSON_BATCH 1000
#define MAX_ROUNDS 21
#define UPLOAD_CHUNK_REF (1u << 20) /* the raw reference uploads use 1 MiB, the library's default */

/* Redisson 3.45 RedissonBloomFilter.addAsync(Collection): the script as Redisson concatenates it. */
static const char REDISSON_ADD[] =
    "local size = redis.call('hget', KEYS[1], 'size');"
    "local hashIterations = redis.call('hget', KEYS[1], 'hashIterations');"
    "assert(size == ARGV[1] and hashIterations == ARGV[2], 'Bloom filter config has been changed')"
    "local k = 0;"
    "local c = 0;"
    "for i = 4, #ARGV, 1 do "
    "local r = redis.call('setbit', KEYS[2], ARGV[i], 1); "
    "if r == 0 then "
    "k = k + 1;"
    "end; "
    "if ((i - 4) + 1) % ARGV[3] == 0 then "
    "if k > 0 then "
    "c = c + 1;"
    "end; "
    "k = 0; "
    "end; "
    "end; "
    "return c;";

/* Redisson 3.45 tryInitAsync: writes the config only if it does not exist (KEYS = config). */
static const char REDISSON_TRYINIT[] =
    "if redis.call('exists', KEYS[1]) == 1 then "
    "return 0;"
    "end; "
    "redis.call('hset', KEYS[1], 'size', ARGV[1]);"
    "redis.call('hset', KEYS[1], 'hashIterations', ARGV[2]);"
    "redis.call('hset', KEYS[1], 'expectedInsertions', ARGV[3]);"
    "redis.call('hset', KEYS[1], 'falseProbability', ARGV[4]);"
    "return 1;";

/* ---------------------------------------------------------------- small helpers */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Item i: 8 pseudo-random bytes then i itself, so all items are distinct. */
static void make_item(uint8_t *p, uint64_t i) {
  uint64_t a = mix64(i), b = i ^ 0x3c6ef372fe94f82bull;
  memcpy(p, &a, 8);
  memcpy(p + 8, &b, 8);
}

typedef struct vec {
  double *v;
  size_t n, cap;
} vec;

static void vec_push(vec *a, double x) {
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 64;
    a->v = realloc(a->v, a->cap * sizeof *a->v);
    if (!a->v) bgb_die("out of memory%s%s", NULL, NULL);
  }
  a->v[a->n++] = x;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank quantile of n values (sorted in place); 0 if n == 0. */
static double quantile(double *v, size_t n, double q) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)ceil(q * (double)n);
  if (i < 1) i = 1;
  if (i > n) i = n;
  return v[i - 1];
}

static double vec_q(const vec *a, double q) {
  if (!a->n) return 0;
  double *t = malloc(a->n * sizeof *t);
  if (!t) bgb_die("out of memory%s%s", NULL, NULL);
  memcpy(t, a->v, a->n * sizeof *t);
  double r = quantile(t, a->n, q);
  free(t);
  return r;
}

static double vec_max(const vec *a) {
  double m = 0;
  for (size_t i = 0; i < a->n; i++) m = a->v[i] > m ? a->v[i] : m;
  return m;
}

static double vec_sum(const vec *a) {
  double s = 0;
  for (size_t i = 0; i < a->n; i++) s += a->v[i];
  return s;
}

static redisReply *must(redisReply *r, redisContext *c, const char *what) {
  if (!r) bgb_die("%s: %s", what, c->errstr);
  if (r->type == REDIS_REPLY_ERROR) bgb_die("%s: %s", what, r->str);
  return r;
}

static void must_ok(redisReply *r, redisContext *c, const char *what) { freeReplyObject(must(r, c, what)); }

static void flush_out(redisContext *c) {
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK) bgb_die("write: %s%s", c->errstr, NULL);
}

static void loadavg(char *out, size_t cap) {
  FILE *f = fopen("/proc/loadavg", "r");
  out[0] = 0;
  if (f) {
    if (fgets(out, (int)cap, f)) {
      /* the first three fields: 1, 5 and 15 minute averages */
      char *p = out;
      for (int i = 0; i < 3 && p; i++) p = strchr(p + (i > 0), ' ');
      if (p) *p = 0;
      else out[strcspn(out, "\n")] = 0;
    }
    fclose(f);
  }
}

/* "{NAME}:config", or NAME + ":config" if NAME holds a '{' (DESIGN.md; Redisson's suffixName). */
static void config_key(const char *name, char *out, size_t cap) {
  if (strchr(name, '{')) snprintf(out, cap, "%s:config", name);
  else snprintf(out, cap, "{%s}:config", name);
}

/* ---------------------------------------------------------------- the run's shared state */

typedef struct opts_t {
  const char *url;
  int64_t items;
  double fpp;
  int window, bg_runs;
  int64_t bg_batch, rot_items;
  int rot_threads, rot_nice;
  int64_t chunk_bytes;
  int adds;
  double phase_s;
  int rounds, slowlog_us;
  double qps;
  int skip_rebuild, skip_latency;
} opts_t;

typedef struct run {
  opts_t o;
  bgb_server srv;
  int own_server;
  redisContext *raw;        /* side connection: GET, SLOWLOG, INFO, setup */
  uint8_t *pool;            /* n items of 16 bytes */
  const void **items;
  size_t *lens;
  uint64_t size;
  uint32_t k;
  size_t bitmap_len;        /* ceil(size / 8) */
  char fpp_text[64];        /* falseProbability as bloomguard writes it (Java Double.toString) */
  bg_client *cl;
  bg_options *rot_opts;
} run;

static bg_options *rotation_options(const opts_t *o) {
  bg_options *ro;
  if (bg_options_new(&ro) != BG_OK) bgb_die("out of memory%s%s", NULL, NULL);
  if (o->rot_threads > 0) bg_options_set_int(ro, BG_OPT_ROTATE_THREADS, o->rot_threads);
  if (o->chunk_bytes > 0) bg_options_set_int(ro, BG_OPT_ROTATE_CHUNK_BYTES, o->chunk_bytes);
  /* the command timeout is the client's (open_client): a rotation refuses it (BG_ENOTSUP), and 0.1
   * silently ignored it here */
  return ro;
}

static bg_client *open_client(const char *url, int pool) {
  bg_options *o;
  bg_client *c;
  char err[512];
  bg_options_new(&o);
  if (pool > 0) bg_options_set_int(o, BG_OPT_POOL_SIZE, pool);
  bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 30000);
  if (bgt_client_open(&c, url, o, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  bg_options_free(o);
  return c;
}

static bg_filter *open_filter(bg_client *c, const char *name) {
  bg_filter *f;
  if (bg_filter_open(&f, c, name) != BG_OK) bgb_die("bg_filter_open %s: %s", name, bg_client_errmsg(c));
  return f;
}

/* A full previous generation: config (tryInit semantics) plus a random bitmap of the final length. */
static void write_gen0(run *R, bg_client *c, const char *name, uint64_t seed) {
  bg_filter *f = open_filter(c, name);
  bg_filter_delete(f, NULL);
  if (bg_filter_init(f, R->o.items, R->o.fpp, NULL) != BG_OK) bgb_die("init %s: %s", name, bg_filter_errmsg(f));
  bg_filter_close(f);
  uint8_t *buf = malloc(UPLOAD_CHUNK_REF);
  if (!buf) bgb_die("out of memory%s%s", NULL, NULL);
  for (size_t off = 0; off < R->bitmap_len; off += UPLOAD_CHUNK_REF) {
    size_t len = R->bitmap_len - off < UPLOAD_CHUNK_REF ? R->bitmap_len - off : UPLOAD_CHUNK_REF;
    for (size_t i = 0; i + 8 <= len; i += 8) {
      uint64_t w = mix64(seed ^ (off + i));
      memcpy(buf + i, &w, 8);
    }
    for (size_t i = len & ~(size_t)7; i < len; i++) buf[i] = (uint8_t)mix64(seed + i);
    must_ok(redisCommand(R->raw, "SETRANGE %s %llu %b", name, (unsigned long long)off, buf, len), R->raw,
            "gen0 SETRANGE");
  }
  free(buf);
}

/* ---------------------------------------------------------------- part 1: rebuild */

typedef struct bg_times {
  double total, begin, build, upload, commit, other;
  double cpu_client, cpu_server; /* part 1 only: CPU seconds of this process and of the server */
  uint64_t bytes, chunks;
  double chunk_max;
} bg_times;

typedef struct progress_obs {
  uint64_t t_upload0, t_commit0, t_done, t_last;
  uint64_t chunks;
  double chunk_max_ms;
} progress_obs;

static int on_progress(void *ud, int phase, uint64_t items, uint64_t done, uint64_t total) {
  progress_obs *p = ud;
  uint64_t t = now_ns();
  (void)items, (void)done, (void)total;
  if (phase == BG_PHASE_UPLOADING) {
    if (!p->t_upload0) p->t_upload0 = t;
    else {
      double ms = (double)(t - p->t_last) / 1e6;
      p->chunks++;
      if (ms > p->chunk_max_ms) p->chunk_max_ms = ms;
    }
    p->t_last = t;
  } else if (phase == BG_PHASE_COMMITTING) {
    if (!p->t_commit0) p->t_commit0 = t;
  } else if (phase == BG_PHASE_DONE) {
    p->t_done = t;
  }
  return 0;
}

/* One SWAP rotation of f over items[0..n): begin + add_many in batches + commit + free. adds > 0:
 * that many bg_filter_add calls right after begin (they go to the delta); adds < 0: build only,
 * abort instead of commit (the hashing's CPU without the upload and the swap). */
static int rotate_once(bg_filter *f, int64_t expected, double fpp, const bg_options *ro, const void *const *items,
                       const size_t *lens, size_t n, size_t batch, int adds, bg_times *out, char *err, size_t errcap) {
  progress_obs p = {0};
  bg_rotation *r = NULL;
  uint64_t t0 = now_ns();
  int st = bg_rotation_begin(&r, f, expected, fpp, BG_ROTATE_SWAP, ro);
  if (st != BG_OK) {
    snprintf(err, errcap, "begin: %s", bg_filter_errmsg(f));
    return st;
  }
  uint64_t t1 = now_ns();
  bg_rotation_set_progress(r, on_progress, &p);
  for (int a = 0; a < adds && st == BG_OK; a++) {
    /* an add through the live filter during the rotation: recorded in the delta (an item that is
     * also in the rebuild, so the content does not change) */
    st = bg_filter_add(f, items[(size_t)a % n], lens[(size_t)a % n], NULL);
    if (st != BG_OK) snprintf(err, errcap, "add during rotation: %s", bg_filter_errmsg(f));
  }
  uint64_t t_adds = now_ns();
  for (size_t from = 0; from < n && st == BG_OK; from += batch) {
    size_t m = n - from < batch ? n - from : batch;
    st = bg_rotation_add_many(r, items + from, lens + from, m);
    if (st != BG_OK) snprintf(err, errcap, "add_many: %s", bg_rotation_errmsg(r));
  }
  uint64_t t2 = now_ns();
  if (st == BG_OK && adds >= 0) {
    st = bg_rotation_commit(r);
    if (st != BG_OK) snprintf(err, errcap, "commit: %s", bg_rotation_errmsg(r));
  } else if (st == BG_OK) {
    st = bg_rotation_abort(r);
    if (st != BG_OK) snprintf(err, errcap, "abort: %s", bg_rotation_errmsg(r));
  }
  uint64_t bytes = 0;
  bg_rotation_stats(r, NULL, &bytes, NULL);
  bg_rotation_free(r);
  uint64_t t3 = now_ns();
  if (st != BG_OK) return st;
  if (out) {
    out->total = (double)(t3 - t0) / 1e9;
    out->begin = (double)(t1 - t0) / 1e9;
    out->build = (double)(t2 - t_adds) / 1e9;
    out->upload = p.t_upload0 && p.t_commit0 ? (double)(p.t_commit0 - p.t_upload0) / 1e9 : 0;
    out->commit = p.t_commit0 && p.t_done ? (double)(p.t_done - p.t_commit0) / 1e9 : 0;
    out->other = out->total - out->begin - out->build - out->upload - out->commit;
    out->bytes = bytes;
    out->chunks = p.chunks;
    out->chunk_max = p.chunk_max_ms;
  }
  return BG_OK;
}

typedef struct redisson_side {
  char name[96], cfg[128];
  char sha[48];
  double seconds, cpu_client, cpu_server;
  long long batches_with_new_bits;
} redisson_side;

/* Redisson-style population: DEL + tryInit + one EVALSHA of the add script per 1,000 items. */
static void run_redisson(run *R, redisson_side *s) {
  const opts_t *o = &R->o;
  redisContext *c = bgb_raw_connect(o->url);
  char size_s[24], k_s[24], n_s[24];
  snprintf(size_s, sizeof size_s, "%llu", (unsigned long long)R->size);
  snprintf(k_s, sizeof k_s, "%u", R->k);
  snprintf(n_s, sizeof n_s, "%lld", (long long)o->items);
  size_t name_len = strlen(s->name), cfg_len = strlen(s->cfg);
  size_t cap = 256 + name_len + cfg_len + (size_t)REDISSON_BATCH * R->k * 24;
  char *out = malloc(cap);
  if (!out) bgb_die("out of memory%s%s", NULL, NULL);
  size_t n = (size_t)o->items, inflight = 0, sent = 0;
  long long sum = 0;
  uint64_t idx[K_MAX];

  double srv0 = bgb_server_cpu_s(R->raw), cpu0 = bgb_cpu_s();
  double t0 = bgb_now_s(), next_note = t0 + 10;
  /* delete() */
  must_ok(redisCommand(c, "DEL %s %s", s->name, s->cfg), c, "redisson: DEL");
  /* tryInit(n, p) */
  redisReply *r = must(redisCommand(c, "EVAL %s 1 %s %s %s %s %s", REDISSON_TRYINIT, s->cfg, size_s, k_s, n_s,
                                    R->fpp_text), c, "redisson: tryInit");
  if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
    bgb_die("redisson: tryInit did not create the config%s%s", NULL, NULL);
  freeReplyObject(r);
  r = must(redisCommand(c, "SCRIPT LOAD %s", REDISSON_ADD), c, "redisson: SCRIPT LOAD");
  snprintf(s->sha, sizeof s->sha, "%s", r->str);
  freeReplyObject(r);
  /* add(batch) per 1,000 items, up to --window in flight */
  for (size_t from = 0; from < n; from += REDISSON_BATCH) {
    size_t m = n - from < REDISSON_BATCH ? n - from : REDISSON_BATCH;
    char *p = out;
    p += sprintf(p, "*%zu\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", 8 + m * R->k,
                 s->sha, cfg_len, s->cfg, name_len, s->name);
    p += sprintf(p, "$%zu\r\n%s\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n", strlen(size_s), size_s, strlen(k_s), k_s,
                 strlen(k_s), k_s);
    for (size_t i = from; i < from + m; i++) {
      bg_indexes(R->items[i], R->lens[i], R->size, R->k, idx);
      for (uint32_t j = 0; j < R->k; j++) {
        char d[24];
        size_t dl = (size_t)(bgb_put_u64(d, idx[j]) - d);
        *p++ = '$';
        p = bgb_put_u64(p, dl);
        *p++ = '\r', *p++ = '\n';
        memcpy(p, d, dl);
        p += dl;
        *p++ = '\r', *p++ = '\n';
      }
    }
    if (redisAppendFormattedCommand(c, out, (size_t)(p - out)) != REDIS_OK) bgb_die("redisson: %s%s", c->errstr, NULL);
    flush_out(c);
    inflight++, sent++;
    while (inflight >= (size_t)o->window || (from + m >= n && inflight > 0)) {
      void *v = NULL;
      if (redisGetReply(c, &v) != REDIS_OK) bgb_die("redisson: %s%s", c->errstr, NULL);
      redisReply *x = v;
      if (x->type != REDIS_REPLY_INTEGER)
        bgb_die("redisson: add script answered %s%s", x->type == REDIS_REPLY_ERROR ? x->str : "?", NULL);
      sum += x->integer;
      freeReplyObject(x);
      inflight--;
    }
    if (bgb_now_s() > next_note) {
      fprintf(stderr, "  redisson: %zu / %zu items after %.0f s\n", from + m, n, bgb_now_s() - t0);
      next_note += 10;
    }
  }
  s->seconds = bgb_now_s() - t0;
  s->cpu_client = bgb_cpu_s() - cpu0;
  s->cpu_server = bgb_server_cpu_s(R->raw) - srv0;
  s->batches_with_new_bits = sum;
  free(out);
  redisFree(c);
}

static int compare_filters(run *R, const char *a, const char *b, const char *label) {
  redisReply *x = must(redisCommand(R->raw, "GET %s", a), R->raw, "GET");
  redisReply *y = must(redisCommand(R->raw, "GET %s", b), R->raw, "GET");
  int same = x->type == REDIS_REPLY_STRING && y->type == REDIS_REPLY_STRING && x->len == y->len &&
             memcmp(x->str, y->str, x->len) == 0;
  uint64_t ones = 0;
  if (x->type == REDIS_REPLY_STRING)
    for (size_t i = 0; i < x->len; i++) ones += (uint64_t)__builtin_popcount((unsigned char)x->str[i]);
  printf("  %s: bitmaps %s (%zu and %zu bytes, %llu bits set = %.2f%% of %llu)\n", label,
         same ? "byte-identical" : "DIFFER", x->type == REDIS_REPLY_STRING ? x->len : 0,
         y->type == REDIS_REPLY_STRING ? y->len : 0, (unsigned long long)ones, 100.0 * (double)ones / (double)R->size,
         (unsigned long long)R->size);
  freeReplyObject(x);
  freeReplyObject(y);
  /* the config, field by field */
  static const char *fields[] = {"size", "hashIterations", "expectedInsertions", "falseProbability"};
  char ca[160], cb[160];
  config_key(a, ca, sizeof ca);
  config_key(b, cb, sizeof cb);
  int cfg_same = 1;
  char shown[256] = "";
  for (int i = 0; i < 4; i++) {
    redisReply *u = must(redisCommand(R->raw, "HGET %s %s", ca, fields[i]), R->raw, "HGET");
    redisReply *v = must(redisCommand(R->raw, "HGET %s %s", cb, fields[i]), R->raw, "HGET");
    int eq = u->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING && u->len == v->len &&
             !memcmp(u->str, v->str, u->len);
    cfg_same &= eq;
    size_t l = strlen(shown);
    snprintf(shown + l, sizeof shown - l, "%s%s=%s", i ? " " : "", fields[i],
             u->type == REDIS_REPLY_STRING ? u->str : "(nil)");
    freeReplyObject(u);
    freeReplyObject(v);
  }
  printf("  %s: config %s (%s)\n", label, cfg_same ? "identical" : "DIFFERS", shown);
  return same && cfg_same;
}

/* A sample of the items must be present in both filters; absent items give the false positive rate. */
static int check_items(run *R, bg_filter *fa, bg_filter *fb) {
  enum { SAMPLE = 20000 };
  const void **ptr = malloc(SAMPLE * sizeof *ptr);
  size_t *len = malloc(SAMPLE * sizeof *len);
  uint8_t *abs_pool = malloc((size_t)SAMPLE * ITEM_LEN), *ans = malloc(SAMPLE);
  if (!ptr || !len || !abs_pool || !ans) bgb_die("out of memory%s%s", NULL, NULL);
  size_t n = (size_t)R->o.items, miss = 0, fp = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < SAMPLE; i++) {
      if (pass == 0) ptr[i] = R->items[(size_t)(mix64(i) % n)];
      else make_item(abs_pool + i * ITEM_LEN, (uint64_t)n + 1000000000ull + i), ptr[i] = abs_pool + i * ITEM_LEN;
      len[i] = ITEM_LEN;
    }
    for (int w = 0; w < 2; w++) {
      bg_filter *f = w ? fb : fa;
      if (bg_filter_contains_many(f, ptr, len, SAMPLE, ans) != BG_OK)
        bgb_die("contains_many: %s%s", bg_filter_errmsg(f), NULL);
      for (size_t i = 0; i < SAMPLE; i++) {
        if (pass == 0) miss += !ans[i];
        else fp += ans[i];
      }
    }
  }
  printf("  items: %d sampled items present in both filters: %s (%zu missing); %d never-added items: false "
         "positive rate %.3f%% (target p = %g)\n", SAMPLE, miss ? "NO" : "yes", miss, SAMPLE,
         100.0 * (double)fp / (2.0 * SAMPLE), R->o.fpp);
  free(ptr), free(len), free(abs_pool), free(ans);
  return miss == 0;
}

/*
 * Where the build's time goes: min(n, 2M) items hashed into a bitmap of the real size, on ONE
 * thread, best of 2 interleaved passes: hashing alone (bg_indexes), hashing + one atomic OR per
 * index (the library's loop before the bucketed build), the same with the indexes of 64 items
 * computed and prefetched before their ORs, and the library itself (begin with 1 thread + add_many + abort)
 * and with its default threads.
 */
static void build_reference(run *R, const char *scratch) {
  enum { MODES = 6, BLOCK = 64 };
  static const char *const what[MODES] = {
      "bg_indexes only (HighwayHash-128 + k indexes)", "bg_indexes + atomic OR per index (the old library loop)",
      "bg_indexes of 64 items + prefetch, then the (atomic) ORs", "library: add_many, 1 thread (begin/abort excluded)",
      "library: add_many, default threads (wall)", "bg_indexes + plain (non-atomic) OR per index"};
  size_t n = R->o.items < 2000000 ? (size_t)R->o.items : 2000000;
  uint8_t *bm = malloc(R->bitmap_len);
  uint64_t *buf = malloc((size_t)BLOCK * R->k * sizeof *buf), sink = 0;
  if (!bm || !buf) bgb_die("out of memory%s%s", NULL, NULL);
  memset(bm, 0, R->bitmap_len); /* touched once: page faults stay out of the timing */
  bg_client *c = open_client(R->o.url, 0);
  bg_filter *f = open_filter(c, scratch);
  double best[MODES];
  for (int m = 0; m < MODES; m++) best[m] = 1e30;
  for (int pass = 0; pass < 2; pass++)
    for (int m = 0; m < MODES; m++) {
      bg_rotation *r = NULL;
      if (m == 3 || m == 4) {
        bg_options *ro = rotation_options(&R->o);
        if (m == 3) bg_options_set_int(ro, BG_OPT_ROTATE_THREADS, 1);
        if (bg_rotation_begin(&r, f, R->o.items, R->o.fpp, BG_ROTATE_SWAP, ro) != BG_OK)
          bgb_die("reference begin: %s%s", bg_filter_errmsg(f), NULL);
        bg_options_free(ro);
      }
      double t0 = bgb_now_s();
      if (m == 0) {
        for (size_t i = 0; i < n; i++) {
          bg_indexes(R->items[i], ITEM_LEN, R->size, R->k, buf);
          for (uint32_t j = 0; j < R->k; j++) sink += buf[j];
        }
      } else if (m == 1) {
        for (size_t i = 0; i < n; i++) {
          bg_indexes(R->items[i], ITEM_LEN, R->size, R->k, buf);
          for (uint32_t j = 0; j < R->k; j++)
            __atomic_fetch_or(&bm[buf[j] >> 3], (uint8_t)(0x80u >> (buf[j] & 7)), __ATOMIC_RELAXED);
        }
      } else if (m == 2) {
        for (size_t i = 0; i < n; i += BLOCK) {
          size_t b = n - i < BLOCK ? n - i : BLOCK;
          for (size_t a = 0; a < b; a++) {
            bg_indexes(R->items[i + a], ITEM_LEN, R->size, R->k, buf + a * R->k);
            for (uint32_t j = 0; j < R->k; j++) __builtin_prefetch(&bm[buf[a * R->k + j] >> 3], 1);
          }
          for (size_t x = 0; x < b * R->k; x++)
            __atomic_fetch_or(&bm[buf[x] >> 3], (uint8_t)(0x80u >> (buf[x] & 7)), __ATOMIC_RELAXED);
        }
      } else if (m == 5) {
        for (size_t i = 0; i < n; i++) {
          bg_indexes(R->items[i], ITEM_LEN, R->size, R->k, buf);
          for (uint32_t j = 0; j < R->k; j++) bm[buf[j] >> 3] |= (uint8_t)(0x80u >> (buf[j] & 7));
        }
      } else {
        if (bg_rotation_add_many(r, R->items, R->lens, n) != BG_OK)
          bgb_die("reference add_many: %s%s", bg_rotation_errmsg(r), NULL);
      }
      double ns = (bgb_now_s() - t0) * 1e9 / (double)n;
      if (r) bg_rotation_free(r); /* aborts */
      if (ns < best[m]) best[m] = ns;
    }
  printf("\nbuild reference: %zu items into a %zu-byte bitmap, ns per item (best of 2; one thread unless stated):\n",
         n, R->bitmap_len);
  for (int m = 0; m < MODES; m++) printf("  %-56s %8.1f\n", what[m], best[m]);
  if (sink == 42) fputc(' ', stderr);
  bg_filter_close(f);
  bg_client_close(c);
  free(bm);
  free(buf);
}

static int part_rebuild(run *R, int *pass_out) {
  const opts_t *o = &R->o;
  pid_t pid = getpid();
  char bg_name[96];
  redisson_side rs = {0};
  snprintf(bg_name, sizeof bg_name, "bloomguard-bench:rotate:%ld:bg", (long)pid);
  snprintf(rs.name, sizeof rs.name, "bloomguard-bench:rotate:%ld:redisson", (long)pid);
  config_key(rs.name, rs.cfg, sizeof rs.cfg);
  bg_filter *fbg = open_filter(R->cl, bg_name), *frs = open_filter(R->cl, rs.name);

  printf("\n== part 1: rebuild of %lld distinct %d-byte items, p = %g (size %llu bits = %zu bytes, k = %u)\n",
         (long long)o->items, ITEM_LEN, o->fpp, (unsigned long long)R->size, R->bitmap_len, R->k);
  write_gen0(R, R->cl, bg_name, 1);
  write_gen0(R, R->cl, rs.name, 2);
  {
    redisReply *r = must(redisCommand(R->raw, "HGET %s falseProbability", rs.cfg), R->raw, "HGET");
    snprintf(R->fpp_text, sizeof R->fpp_text, "%s", r->type == REDIS_REPLY_STRING ? r->str : "?");
    freeReplyObject(r);
  }
  printf("both filters start as a full previous generation (config + random %zu-byte bitmap)\n", R->bitmap_len);
  printf("bg: SWAP rotation, add_many in batches of %lld, %s hashing thread(s), upload chunk %s; "
         "redisson: EVALSHA per %d items, %d in flight on one connection%s\n",
         (long long)o->bg_batch, o->rot_threads > 0 ? "" : "default (online CPUs - 1, at least 1)",
         o->chunk_bytes > 0 ? "set" : "default 1 MiB",
         REDISSON_BATCH, o->window, o->window == 1 ? " (the synchronous add())" : " (addAsync without waiting)");
  if (o->rot_threads > 0) printf("  (hashing threads: %d)\n", o->rot_threads);

  bg_times t[MAX_ROUNDS];
  char err[512];
  int nbg = 0;
  for (int i = 0; i < o->bg_runs; i++) {
    if (i == 1) {
      char la[64];
      loadavg(la, sizeof la);
      fprintf(stderr, "  redisson-style population running (load %s) ...\n", la);
      run_redisson(R, &rs);
      printf("redisson: %.2f s (DEL + tryInit + %lld EVALSHA of %d items; %lld batches set a new bit); CPU %.2f s "
             "here + %.2f s server\n", rs.seconds, (long long)((o->items + REDISSON_BATCH - 1) / REDISSON_BATCH),
             REDISSON_BATCH, rs.batches_with_new_bits, rs.cpu_client, rs.cpu_server);
    }
    double srv0 = bgb_server_cpu_s(R->raw), cpu0 = bgb_cpu_s();
    if (rotate_once(fbg, o->items, o->fpp, R->rot_opts, R->items, R->lens, (size_t)o->items, (size_t)o->bg_batch, 0,
                    &t[nbg], err, sizeof err) != BG_OK)
      bgb_die("bg rotation: %s%s", err, NULL);
    t[nbg].cpu_client = bgb_cpu_s() - cpu0;
    t[nbg].cpu_server = bgb_server_cpu_s(R->raw) - srv0;
    bg_times *x = &t[nbg++];
    printf("bg run %d: %.3f s = begin %.1f ms + build %.1f ms + upload %.1f ms (%llu bytes, %llu chunks, "
           "slowest %.1f ms) "
           "+ commit %.1f ms + other %.1f ms; CPU %.2f s here + %.3f s server\n", nbg, x->total, x->begin * 1e3,
           x->build * 1e3, x->upload * 1e3, (unsigned long long)x->bytes, (unsigned long long)x->chunks, x->chunk_max,
           x->commit * 1e3, x->other * 1e3, x->cpu_client, x->cpu_server);
  }
  if (o->bg_runs == 1) {
    run_redisson(R, &rs);
    printf("redisson: %.2f s\n", rs.seconds);
  }

  printf("\ncorrectness:\n");
  int ok = compare_filters(R, bg_name, rs.name, "bg vs redisson");
  ok &= check_items(R, fbg, frs);
  {
    char scratch[112];
    snprintf(scratch, sizeof scratch, "%s:scratch", bg_name);
    build_reference(R, scratch);
  }

  double v[MAX_ROUNDS];
  for (int i = 0; i < nbg; i++) v[i] = t[i].total;
  double med = bgb_median(v, nbg);
  double comp[5][MAX_ROUNDS];
  for (int i = 0; i < nbg; i++)
    comp[0][i] = t[i].begin, comp[1][i] = t[i].build, comp[2][i] = t[i].upload, comp[3][i] = t[i].commit,
    comp[4][i] = t[i].other;
  double ratio = rs.seconds / med;
  int pass = ratio >= 100 && ok;
  for (int i = 0; i < nbg; i++) v[i] = t[i].cpu_client + t[i].cpu_server;
  double med_cpu = bgb_median(v, nbg), rs_cpu = rs.cpu_client + rs.cpu_server;
  printf("\n%-10s %12s %12s %16s\n", "side", "seconds", "items/s", "CPU s (all)");
  printf("%-10s %12.3f %12.0f %16.3f\n", "redisson", rs.seconds, (double)o->items / rs.seconds, rs_cpu);
  printf("%-10s %12.3f %12.0f %16.3f   (medians of %d runs:", "bg", med, (double)o->items / med, med_cpu, nbg);
  for (int i = 0; i < nbg; i++) printf(" %.3f", t[i].total);
  printf(" s)\n");
  printf("CPU ratio redisson / bg (client + server CPU seconds; less sensitive to the machine's load than the\n"
         "wall clock, not the target's measure): %.1fx\n", rs_cpu / med_cpu);
  printf("bg breakdown (medians): begin %.1f ms, build (hashing) %.1f ms, upload %.1f ms, commit %.2f ms, "
         "other %.1f ms\n",
         bgb_median(comp[0], nbg) * 1e3, bgb_median(comp[1], nbg) * 1e3, bgb_median(comp[2], nbg) * 1e3,
         bgb_median(comp[3], nbg) * 1e3, bgb_median(comp[4], nbg) * 1e3);
  printf("rebuild ratio redisson / bg: %.1fx   target >= 100x: %s%s\n", ratio, ratio >= 100 ? "PASS" : "MISS",
         ok ? "" : "   (CORRECTNESS CHECK FAILED)");
  bg_filter_delete(fbg, NULL);
  bg_filter_delete(frs, NULL);
  bg_filter_close(fbg);
  bg_filter_close(frs);
  *pass_out = pass;
  return ok;
}

/* ---------------------------------------------------------------- SLOWLOG classification */

enum { S_UPLOAD, S_COMMIT, S_BEGIN, S_RENEW, S_ABORT, S_ADD, S_CONTAINS, S_OTHER, S_N };
static const char *const S_NAMES[S_N] = {"rotation upload", "rotation commit", "rotation begin", "lease renew",
                                         "rotation abort", "add (bg_filter_add)", "contains (MULTI..EXEC)", "other"};

/* Commands run inside a script are logged too (client "?:0"): kept apart, by name. Their time is
 * part of their script's. */
#define INNER_MAX 16

typedef struct slow {
  vec v[S_N];
  vec upload_off;   /* offset of each upload entry (parallel to v[S_UPLOAD]) */
  char other_names[256];
  char inner_name[INNER_MAX][24];
  vec inner[INNER_MAX];
  int ninner;
} slow;

static int arg_is(const redisReply *a, const char *s) {
  return a->type == REDIS_REPLY_STRING && strlen(s) == a->len && !strncasecmp(a->str, s, a->len);
}

/* Takes every SLOWLOG entry into s (classified), then resets the log. */
static void slowlog_take(redisContext *c, slow *s) {
  redisReply *r = must(redisCommand(c, "SLOWLOG GET -1"), c, "SLOWLOG GET");
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
    redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 || e->element[3]->type != REDIS_REPLY_ARRAY ||
        e->element[3]->elements == 0)
      continue;
    double us = (double)e->element[2]->integer;
    redisReply *a = e->element[3];
    int cls = S_OTHER;
    if (e->elements >= 5 && e->element[4]->type == REDIS_REPLY_STRING && !strcmp(e->element[4]->str, "?:0") &&
        a->element[0]->type == REDIS_REPLY_STRING) {
      int j = 0;
      while (j < s->ninner && strcasecmp(s->inner_name[j], a->element[0]->str)) j++;
      if (j == s->ninner && j < INNER_MAX)
        snprintf(s->inner_name[s->ninner++], sizeof s->inner_name[0], "%s", a->element[0]->str);
      if (j < INNER_MAX) vec_push(&s->inner[j], us);
      continue;
    }
    if (arg_is(a->element[0], "slowlog") || arg_is(a->element[0], "info") || arg_is(a->element[0], "config")) continue;
    if ((arg_is(a->element[0], "evalsha") || arg_is(a->element[0], "eval")) && a->elements >= 3) {
      long nk = strtol(a->element[2]->str ? a->element[2]->str : "0", NULL, 10);
      size_t argc = a->elements;
      /* the library's scripts by their key and argument counts (csrc/rotation/steps.c, filter/add.c) */
      if (nk == 6) cls = S_COMMIT;
      else if (nk == 4 && argc == 16) cls = S_BEGIN;
      else if (nk == 3 && argc == 9) cls = S_RENEW;
      else if (nk == 4 && argc == 9) cls = S_ABORT;
      else if (nk == 4) cls = S_ADD;
    } else if (arg_is(a->element[0], "setrange") && a->elements == 4) {
      /* the upload is plain MULTI / SETRANGE / PEXPIRE / EXEC since the library stopped using Lua for it */
      cls = S_UPLOAD;
      vec_push(&s->upload_off, strtod(a->element[2]->str ? a->element[2]->str : "0", NULL));
    } else if (arg_is(a->element[0], "multi") || arg_is(a->element[0], "exec") || arg_is(a->element[0], "hmget") ||
               arg_is(a->element[0], "bitfield_ro")) {
      cls = S_CONTAINS;
    }
    if (cls == S_OTHER && a->element[0]->type == REDIS_REPLY_STRING && strlen(s->other_names) < 200 &&
        !strcasestr(s->other_names, a->element[0]->str)) {
      size_t l = strlen(s->other_names);
      snprintf(s->other_names + l, sizeof s->other_names - l, "%s%s", l ? "," : "", a->element[0]->str);
    }
    vec_push(&s->v[cls], us);
  }
  freeReplyObject(r);
  must_ok(redisCommand(c, "SLOWLOG RESET"), c, "SLOWLOG RESET");
}

static void slow_free(slow *s) {
  for (int i = 0; i < S_N; i++) free(s->v[i].v);
  for (int i = 0; i < s->ninner; i++) free(s->inner[i].v);
  free(s->upload_off.v);
  memset(s, 0, sizeof *s);
}

static void slow_print(const slow *s, const char *indent) {
  for (int i = 0; i < S_N; i++) {
    const vec *v = &s->v[i];
    if (!v->n) continue;
    printf("%s%-24s %6zu  median %8.1f  p99 %8.1f  max %8.1f  total %9.1f us%s%s%s\n", indent, S_NAMES[i], v->n,
           vec_q(v, 0.5), vec_q(v, 0.99), vec_max(v), vec_sum(v), i == S_OTHER && s->other_names[0] ? "  (" : "",
           i == S_OTHER ? s->other_names : "", i == S_OTHER && s->other_names[0] ? ")" : "");
  }
  if (s->ninner) {
    printf("%sinside those scripts (included in their time):", indent);
    for (int j = 0; j < s->ninner; j++)
      printf(" %s %zu x median %.0f max %.0f;", s->inner_name[j], s->inner[j].n, vec_q(&s->inner[j], 0.5),
             vec_max(&s->inner[j]));
    printf("\n");
  }
}

/* ---------------------------------------------------------------- part 2: latency under rotation */

enum { K_IDLE, K_ROT, K_BUILD, K_ROTADD, K_N };
static const char *const K_NAMES[K_N] = {"idle", "rotating", "build", "rot+add"};

typedef struct rotator {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int mode;     /* K_IDLE: wait; K_ROT / K_ROTADD: rotate back to back; -1: quit */
  int busy;     /* inside a rotation */
  bg_filter *f;
  const bg_options *ro;
  const void *const *items;
  const size_t *lens;
  size_t n;
  int64_t expected;
  double fpp;
  int adds;
  int nice;     /* applied to the rotator thread; the library's hashing and lease threads inherit it */
  /* per phase, reset by the phase runner */
  int rotations, errors;
  vec build, upload, commit, total;
  char err[512];
} rotator;

static void *rotator_main(void *arg) {
  rotator *t = arg;
  if (t->nice && setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), t->nice) != 0)
    fprintf(stderr, "  setpriority(%d) failed for the rotator thread\n", t->nice);
  pthread_mutex_lock(&t->mu);
  for (;;) {
    while (t->mode == K_IDLE) pthread_cond_wait(&t->cv, &t->mu);
    if (t->mode < 0) break;
    int mode = t->mode;
    t->busy = 1;
    pthread_mutex_unlock(&t->mu);
    bg_times x;
    char err[512];
    int st = rotate_once(t->f, t->expected, t->fpp, t->ro, t->items, t->lens, t->n, t->n,
                         mode == K_ROTADD ? t->adds : mode == K_BUILD ? -1 : 0, &x, err, sizeof err);
    pthread_mutex_lock(&t->mu);
    t->busy = 0;
    if (st == BG_OK) {
      t->rotations++;
      vec_push(&t->build, x.build * 1e3);
      vec_push(&t->upload, x.upload * 1e3);
      vec_push(&t->commit, x.commit * 1e3);
      vec_push(&t->total, x.total * 1e3);
    } else {
      t->errors++;
      snprintf(t->err, sizeof t->err, "%s", err);
      if (t->errors > 20) t->mode = K_IDLE; /* bounded: stop retrying a broken setup */
    }
    pthread_cond_broadcast(&t->cv);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

static void rotator_set(rotator *t, int mode) {
  pthread_mutex_lock(&t->mu);
  t->mode = mode;
  pthread_cond_broadcast(&t->cv);
  if (mode == K_IDLE)
    while (t->busy) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

typedef struct lat_stats {
  double p50, p99, p999, max; /* microseconds */
  double calls_per_s;
  size_t calls;
} lat_stats;

static lat_stats lat_of(uint32_t *v, size_t n, double seconds) {
  lat_stats s = {0};
  if (!n) return s;
  qsort(v, n, sizeof *v, cmp_u32);
#define Q(q) ((double)v[(size_t)fmin((double)n, fmax(1.0, ceil((q) * (double)n))) - 1] / 1e3)
  s.p50 = Q(0.5), s.p99 = Q(0.99), s.p999 = Q(0.999);
#undef Q
  s.max = (double)v[n - 1] / 1e3;
  s.calls = n;
  s.calls_per_s = (double)n / seconds;
  return s;
}

typedef struct kind_acc {
  uint32_t *all;      /* every call of every phase of this kind (for pooled percentiles) */
  size_t n, cap;
  lat_stats round[MAX_ROUNDS];
  double srv_cpu[MAX_ROUNDS], proc_cpu[MAX_ROUNDS];
  int rotations;
  vec build, upload, commit, total;
  slow sl;
  uint64_t false_neg, errors;
} kind_acc;

static int part_latency(run *R, int *pass_out) {
  const opts_t *o = &R->o;
  char name[96];
  snprintf(name, sizeof name, "bloomguard-bench:rotate:%ld:latency", (long)getpid());
  size_t m = (size_t)o->rot_items;
  int nkinds = o->adds > 0 ? 4 : 3;
  printf("\n== part 2: single-item contains latency while SWAP rotations run (filter n = %lld, p = %g: %zu-byte "
         "bitmap; each rotation: %zu items)\n", (long long)o->items, o->fpp, R->bitmap_len, m);

  /* the filter: config + a first generation holding the first m items */
  rotator t = {.mode = K_IDLE, .ro = R->rot_opts, .items = R->items, .lens = R->lens, .n = m, .expected = o->items,
               .fpp = o->fpp, .adds = o->adds, .nice = o->rot_nice};
  bg_client *rot_client = open_client(o->url, 0);
  t.f = open_filter(rot_client, name);
  bg_filter_delete(t.f, NULL);
  if (bg_filter_init(t.f, o->items, o->fpp, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(t.f), NULL);
  {
    char err[512];
    if (rotate_once(t.f, o->items, o->fpp, R->rot_opts, R->items, R->lens, m, m, 0, NULL, err, sizeof err) != BG_OK)
      bgb_die("first generation: %s%s", err, NULL);
  }

  /* the query side: its own client, one connection; alternating present / absent items */
  enum { QN = 100000 };
  size_t nq = 2 * QN;
  const void **qitems = malloc(nq * sizeof *qitems);
  uint8_t *abs_pool = malloc((size_t)QN * ITEM_LEN);
  if (!qitems || !abs_pool) bgb_die("out of memory%s%s", NULL, NULL);
  for (size_t i = 0; i < QN; i++) {
    qitems[2 * i] = R->items[(size_t)(mix64(i + 77) % m)];
    make_item(abs_pool + i * ITEM_LEN, (uint64_t)o->items + 2000000000ull + i);
    qitems[2 * i + 1] = abs_pool + i * ITEM_LEN;
  }
  bg_client *qc = open_client(o->url, 1);
  bg_filter *qf = open_filter(qc, name);
  int present;
  for (size_t i = 0; i < 2000; i++) /* warm-up: connection, config cache */
    if (bg_filter_contains(qf, qitems[i % nq], ITEM_LEN, &present) != BG_OK)
      bgb_die("contains: %s%s", bg_filter_errmsg(qf), NULL);

  pthread_mutex_init(&t.mu, NULL);
  pthread_cond_init(&t.cv, NULL);
  if (pthread_create(&t.th, NULL, rotator_main, &t) != 0) bgb_die("pthread_create failed%s%s", NULL, NULL);

  int slowlog = R->own_server;
  if (slowlog) {
    must_ok(redisCommand(R->raw, "CONFIG SET slowlog-log-slower-than %d", o->slowlog_us), R->raw, "CONFIG SET");
    must_ok(redisCommand(R->raw, "CONFIG SET slowlog-max-len 100000"), R->raw, "CONFIG SET");
    must_ok(redisCommand(R->raw, "SLOWLOG RESET"), R->raw, "SLOWLOG RESET");
  }

  size_t per_phase_cap = (size_t)(o->phase_s * 400000.0) + 1000; /* >= 2.5 us per call */
  uint32_t *buf = malloc(per_phase_cap * sizeof *buf);
  kind_acc acc[K_N];
  memset(acc, 0, sizeof acc);
  for (int k = 0; k < nkinds; k++) {
    acc[k].cap = per_phase_cap * (size_t)o->rounds;
    acc[k].all = malloc(acc[k].cap * sizeof(uint32_t));
    if (!acc[k].all) bgb_die("out of memory%s%s", NULL, NULL);
  }
  if (!buf) bgb_die("out of memory%s%s", NULL, NULL);

  if (o->qps > 0)
    printf("query thread: bg_filter_contains, open loop at %.0f calls/s (latency from when each call was due, "
           "1 in flight), on its own client (pool 1), alternating present/absent items;\n", o->qps);
  else
    printf("query thread: bg_filter_contains back to back (closed loop, 1 in flight) on its own client (pool 1), "
           "alternating present/absent items;\n");
  printf("rotator thread: its own client, SWAP rotations back to back (%s "
         "hashing threads, upload chunk %s); build = begin + add_many + abort (the hashing's CPU alone, no upload "
         "or swap)%s;\n%d rounds x %d kinds x %.1f s, the order rotating per round\n",
         o->rot_threads > 0 ? "set" : "default: online CPUs - 1, at least 1", o->chunk_bytes > 0 ? "set" : "default 1 MiB",
         nkinds == 4 ? "; rot+add = rotating with an add during each rotation (delta list + BITFIELD SET in the commit)" : "",
         o->rounds, nkinds, o->phase_s);
  if (o->rot_threads > 0 || o->chunk_bytes > 0 || o->rot_nice)
    printf("  (hashing threads %d, chunk bytes %lld (0 = library default); rotator thread nice %d, inherited by the "
           "library's threads)\n", o->rot_threads, (long long)o->chunk_bytes, o->rot_nice);
  printf("\n%-9s %5s %8s %9s %8s %8s %8s %9s %6s %7s %7s\n", "kind", "round", "calls", "calls/s", "p50 us",
         "p99 us", "p999 us", "max us", "rots", "srvCPU", "bgCPU");

  size_t qcur = 0;
  for (int round = 0; round < o->rounds; round++) {
    for (int j = 0; j < nkinds; j++) {
      int kind = (round + j) % nkinds;
      kind_acc *a = &acc[kind];
      if (slowlog) { /* drop whatever came before */
        slow drop = {0};
        slowlog_take(R->raw, &drop);
        slow_free(&drop);
      }
      pthread_mutex_lock(&t.mu);
      t.rotations = t.errors = 0;
      t.build.n = t.upload.n = t.commit.n = t.total.n = 0;
      pthread_mutex_unlock(&t.mu);
      double srv0 = bgb_server_cpu_s(R->raw), cpu0 = bgb_cpu_s();
      if (kind != K_IDLE) rotator_set(&t, kind);
      size_t n = 0;
      uint64_t t_start = now_ns(), until = t_start + (uint64_t)(o->phase_s * 1e9), t1 = t_start;
      uint64_t next = t_start, period = o->qps > 0 ? (uint64_t)(1e9 / o->qps) : 0;
      while (t1 < until && n < per_phase_cap) {
        const void *it = qitems[qcur];
        uint64_t t0 = now_ns();
        if (period) {
          /* open loop: calls are due every `period`; a call's latency counts from when it was due, so
           * time spent behind a stalled call is counted too (no coordinated omission) */
          if (t0 < next) {
            struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
          }
          t0 = next;
          next += period;
        }
        int st = bg_filter_contains(qf, it, ITEM_LEN, &present);
        t1 = now_ns();
        uint64_t d = t1 - t0;
        buf[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        if (st != BG_OK) {
          if (a->errors++ < 3) fprintf(stderr, "  contains error: %s\n", bg_filter_errmsg(qf));
        } else if (qcur % 2 == 0 && !present) {
          a->false_neg++;
        }
        qcur = qcur + 1 == nq ? 0 : qcur + 1;
      }
      double secs = (double)(t1 - t_start) / 1e9;
      if (kind != K_IDLE) rotator_set(&t, K_IDLE);
      double wall = (double)(now_ns() - t_start) / 1e9;
      double srv = (bgb_server_cpu_s(R->raw) - srv0) / wall, cpu = (bgb_cpu_s() - cpu0) / wall;
      if (slowlog) slowlog_take(R->raw, &a->sl);
      memcpy(a->all + a->n, buf, n * sizeof *buf);
      a->n += n;
      lat_stats s = lat_of(buf, n, secs);
      a->round[round] = s;
      a->srv_cpu[round] = srv, a->proc_cpu[round] = cpu;
      pthread_mutex_lock(&t.mu);
      int rots = t.rotations;
      a->rotations += t.rotations;
      for (size_t i = 0; i < t.total.n; i++)
        vec_push(&a->build, t.build.v[i]), vec_push(&a->upload, t.upload.v[i]), vec_push(&a->commit, t.commit.v[i]),
            vec_push(&a->total, t.total.v[i]);
      if (t.errors) fprintf(stderr, "  rotation errors: %d (last: %s)\n", t.errors, t.err);
      a->errors += (uint64_t)t.errors;
      pthread_mutex_unlock(&t.mu);
      printf("%-9s %5d %8zu %9.0f %8.1f %8.1f %8.1f %9.1f %6d %6.0f%% %6.0f%%\n", K_NAMES[kind], round + 1, n,
             s.calls_per_s, s.p50, s.p99, s.p999, s.max, rots, 100 * srv, 100 * cpu);
    }
  }

  /* summary */
  printf("\n%-9s %8s %8s %8s %9s | %8s %8s %8s %9s | %9s %8s\n", "kind", "p50 us", "p99 us", "p999 us", "max us",
         "pooled", "p99", "p999", "max", "p99 ratio", "result");
  printf("%-9s %35s   %35s   %s\n", "", "(medians over rounds)", "(all calls of the kind pooled)",
         "(median of per-round p99 / idle p99)");
  int pass = 1;
  double ratio_rot = 0;
  for (int k = 0; k < nkinds; k++) {
    kind_acc *a = &acc[k];
    double v[4][MAX_ROUNDS], r[MAX_ROUNDS];
    for (int i = 0; i < o->rounds; i++) {
      v[0][i] = a->round[i].p50, v[1][i] = a->round[i].p99, v[2][i] = a->round[i].p999, v[3][i] = a->round[i].max;
      r[i] = a->round[i].p99 / acc[K_IDLE].round[i].p99;
    }
    lat_stats pooled = lat_of(a->all, a->n, 1);
    double ratio = bgb_median(r, o->rounds);
    const char *res = "-";
    if (k == K_ROT) {
      ratio_rot = ratio;
      res = ratio <= 2.0 ? "PASS" : "MISS";
      pass &= ratio <= 2.0;
    } else if (k != K_IDLE) {
      res = ratio <= 2.0 ? "(pass)" : "(miss)";
    }
    char rs[16];
    if (k == K_IDLE) snprintf(rs, sizeof rs, "1.00x");
    else snprintf(rs, sizeof rs, "%.2fx", ratio);
    printf("%-9s %8.1f %8.1f %8.1f %9.1f | %8.1f %8.1f %8.1f %9.1f | %9s %8s\n", K_NAMES[k],
           bgb_median(v[0], o->rounds), bgb_median(v[1], o->rounds), bgb_median(v[2], o->rounds),
           bgb_median(v[3], o->rounds), pooled.p50,
           pooled.p99, pooled.p999, pooled.max, rs, res);
  }
  printf("target: p99 while rotating <= 2x idle (decided on the per-round ratio, rotating vs idle): %s (%.2fx)\n",
         pass ? "PASS" : "MISS", ratio_rot);
  uint64_t fn = 0, errs = 0;
  for (int k = 0; k < nkinds; k++) fn += acc[k].false_neg, errs += acc[k].errors;
  printf("present items answered absent: %llu; errors: %llu (both must be 0)\n", (unsigned long long)fn,
         (unsigned long long)errs);

  printf("\nrotations run during the phases (client-side ms, medians; max in brackets):\n");
  for (int k = 1; k < nkinds; k++) {
    kind_acc *a = &acc[k];
    printf("  %-9s %4d %s: total %.1f [%.1f], build %.1f [%.1f], upload %.1f [%.1f], commit %.2f [%.2f]\n",
           K_NAMES[k], a->rotations, k == K_BUILD ? "builds (aborted)" : "rotations", vec_q(&a->total, 0.5),
           vec_max(&a->total), vec_q(&a->build, 0.5), vec_max(&a->build), vec_q(&a->upload, 0.5),
           vec_max(&a->upload), vec_q(&a->commit, 0.5), vec_max(&a->commit));
  }
  if (slowlog) {
    printf("\nserver: commands slower than %d us during the phases (SLOWLOG; microseconds inside the server):\n",
           o->slowlog_us);
    for (int k = 0; k < nkinds; k++) {
      printf("  %s (%d rotations):\n", K_NAMES[k], acc[k].rotations);
      slow_print(&acc[k].sl, "    ");
    }
  } else {
    printf("\n(server-side stalls not measured: --url points at a server this benchmark did not start)\n");
  }

  rotator_set(&t, -1);
  pthread_join(t.th, NULL);

  /* clean per-step server times: no query load, every command logged */
  if (slowlog) {
    enum { CLEAN = 3 };
    must_ok(redisCommand(R->raw, "CONFIG SET slowlog-log-slower-than 0"), R->raw, "CONFIG SET");
    for (int adds = 0; adds <= (o->adds > 0); adds++) {
      slow s = {0}, drop = {0};
      slowlog_take(R->raw, &drop);
      slow_free(&drop);
      for (int i = 0; i < CLEAN; i++) {
        char err[512];
        if (rotate_once(t.f, o->items, o->fpp, R->rot_opts, R->items, R->lens, m, m, adds ? o->adds : 0, NULL, err,
                        sizeof err) != BG_OK)
          bgb_die("rotation: %s%s", err, NULL);
        slowlog_take(R->raw, &s);
      }
      printf("\nserver time of each step, %d rotations %s on an idle server (slowlog-log-slower-than 0):\n", CLEAN,
             adds ? "WITH an add during each (delta list + BITFIELD SET)" : "without adds");
      slow_print(&s, "  ");
      if (s.v[S_UPLOAD].n) {
        /* upload time by chunk offset: growth of the staging value shows as a trend */
        printf("  upload chunks by offset (median us of the %d rotations):", CLEAN);
        double offs[256];
        int no = 0;
        for (size_t i = 0; i < s.upload_off.n && no < 256; i++) {
          int seen = 0;
          for (int j = 0; j < no; j++) seen |= offs[j] == s.upload_off.v[i];
          if (!seen) offs[no++] = s.upload_off.v[i];
        }
        qsort(offs, (size_t)no, sizeof *offs, cmp_double);
        for (int j = 0; j < no; j++) {
          vec one = {0};
          for (size_t i = 0; i < s.upload_off.n; i++)
            if (s.upload_off.v[i] == offs[j]) vec_push(&one, s.v[S_UPLOAD].v[i]);
          if (j % 8 == 0) printf("\n   ");
          printf(" %5.1fMiB:%6.0f", offs[j] / 1048576.0, vec_q(&one, 0.5));
          free(one.v);
        }
        printf("\n");
      }
      slow_free(&s);
    }
  }

  bg_filter_delete(t.f, NULL);
  for (int k = 0; k < nkinds; k++) {
    free(acc[k].all);
    free(acc[k].build.v), free(acc[k].upload.v), free(acc[k].commit.v), free(acc[k].total.v);
    slow_free(&acc[k].sl);
  }
  free(t.build.v), free(t.upload.v), free(t.commit.v), free(t.total.v);
  pthread_mutex_destroy(&t.mu);
  pthread_cond_destroy(&t.cv);
  bg_filter_close(t.f);
  bg_filter_close(qf);
  bg_client_close(qc);
  bg_client_close(rot_client);
  free(qitems);
  free(abs_pool);
  free(buf);
  *pass_out = pass;
  return fn == 0 && errs == 0;
}

/* ---------------------------------------------------------------- raw server operations (evidence) */

/* Server time (us) of the most recent SLOWLOG entry for command `cmd`; -1 if none (faster than the
 * threshold, or pushed out by other entries). */
static double last_us(redisContext *c, const char *cmd) {
  redisReply *r = must(redisCommand(c, "SLOWLOG GET 256"), c, "SLOWLOG GET");
  double us = -1;
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && us < 0; i++) {
    redisReply *e = r->element[i];
    if (e->elements >= 4 && e->element[3]->elements && arg_is(e->element[3]->element[0], cmd))
      us = (double)e->element[2]->integer;
  }
  freeReplyObject(r);
  return us;
}

/* Uploads data in order in chunks of `chunk` bytes (plain SETRANGE or through EVAL); returns the
 * slowest chunk's server time and adds all of them to *sum. */
static double upload_chunks(redisContext *c, const char *key, const uint8_t *data, size_t len, size_t chunk, int lua,
                            double *sum) {
  double worst = 0;
  for (size_t off = 0; off < len; off += chunk) {
    size_t l = len - off < chunk ? len - off : chunk;
    if (lua)
      must_ok(redisCommand(c, "EVAL %s 1 %s %llu %b", "redis.call('SETRANGE', KEYS[1], ARGV[1], ARGV[2]) return 1", key,
                           (unsigned long long)off, data + off, l), c, "EVAL SETRANGE");
    else
      must_ok(redisCommand(c, "SETRANGE %s %llu %b", key, (unsigned long long)off, data + off, l), c, "SETRANGE");
    double us = last_us(c, lua ? "eval" : "setrange");
    *sum += us;
    worst = us > worst ? us : worst;
  }
  return worst;
}

/* A client doing PING back to back on its own connection, every call's start and end recorded. */
typedef struct pinger {
  pthread_t th;
  const char *url;
  uint64_t *t;      /* pairs: start, end */
  size_t n, cap;    /* in pairs */
  atomic_int stop;
} pinger;

static void *pinger_main(void *arg) {
  pinger *p = arg;
  redisContext *c = bgb_raw_connect(p->url);
  while (!atomic_load(&p->stop) && p->n < p->cap) {
    uint64_t t0 = now_ns();
    redisReply *r = redisCommand(c, "PING");
    uint64_t t1 = now_ns();
    if (!r) break;
    freeReplyObject(r);
    p->t[2 * p->n] = t0, p->t[2 * p->n + 1] = t1;
    atomic_thread_fence(memory_order_release);
    p->n++;
  }
  redisFree(c);
  return NULL;
}

/* Longest PING (us) whose round trip overlaps [from, to]. */
static double ping_max(const pinger *p, uint64_t from, uint64_t to) {
  double m = 0;
  size_t n = p->n;
  atomic_thread_fence(memory_order_acquire);
  for (size_t i = n; i-- > 0;) {
    if (p->t[2 * i + 1] < from) break;
    if (p->t[2 * i] <= to) {
      double us = (double)(p->t[2 * i + 1] - p->t[2 * i]) / 1e3;
      m = us > m ? us : m;
    }
  }
  return m;
}

enum { OP_FRESH_SETRANGE, OP_FRESH_SETBIT, OP_DEL, OP_UNLINK, OP_RENAME, OP_RENAME_LAZY, OP_BITOP, OP_UP_PLAIN,
       OP_UP_LUA, OP_UP_SMALL, OP_OVER_PLAIN, OP_OVER_LUA, OP_SET_WHOLE, OP_N };

static void part_server_ops(run *R) {
  static const char *const what[OP_N] = {
      "SETRANGE at the last byte of a fresh key (one zero-filled value)",
      "SETBIT at the last bit of a fresh key (the first add to a fresh delta)",
      "DEL of a value of that size",
      "UNLINK of a value of that size",
      "RENAME over an existing key of that size (the commit's swap)",
      "the same RENAME with lazyfree-lazy-server-del yes",
      "BITOP OR a a b over two values of that size (commit with a delta)",
      "upload: 1 MiB chunks in order, plain SETRANGE",
      "upload: 1 MiB chunks in order, through EVAL (as the library did)",
      "upload: 128 KiB chunks in order, plain SETRANGE",
      "overwrite a full-size value: 1 MiB chunks, plain SETRANGE",
      "overwrite a full-size value: 1 MiB chunks, through EVAL",
      "SET of the whole value in one command"};
  redisContext *c = R->raw;
  char a[96], b[96];
  snprintf(a, sizeof a, "bloomguard-bench:rotate:%ld:ref:a", (long)getpid());
  snprintf(b, sizeof b, "bloomguard-bench:rotate:%ld:ref:b", (long)getpid());
  size_t len = R->bitmap_len;
  uint8_t *data = malloc(len);
  if (!data) bgb_die("out of memory%s%s", NULL, NULL);
  for (size_t i = 0; i < len; i++) data[i] = (uint8_t)mix64(i);
  /* 3 us, not 0: the concurrent PINGs (under 1 us each in the server) would crowd the log */
  must_ok(redisCommand(c, "CONFIG SET slowlog-log-slower-than 3"), c, "CONFIG SET");
  must_ok(redisCommand(c, "CONFIG SET slowlog-max-len 100000"), c, "CONFIG SET");

  pinger pg = {.url = R->o.url, .cap = 8000000};
  pg.t = malloc(2 * pg.cap * sizeof *pg.t);
  if (!pg.t) bgb_die("out of memory%s%s", NULL, NULL);
  atomic_init(&pg.stop, 0);
  if (pthread_create(&pg.th, NULL, pinger_main, &pg) != 0) bgb_die("pthread_create failed%s%s", NULL, NULL);

  enum { REP = 5 };
  vec srv[OP_N], sum[OP_N], ping[OP_N], idle = {0};
  memset(srv, 0, sizeof srv), memset(sum, 0, sizeof sum), memset(ping, 0, sizeof ping);
  struct timespec pause = {0, 30000000};
  for (int rep = 0; rep < REP; rep++)
    for (int op = 0; op < OP_N; op++) {
      /* set-up, outside the window */
      must_ok(redisCommand(c, "DEL %s %s", a, b), c, "DEL");
      if (op == OP_DEL || op == OP_UNLINK || op == OP_RENAME || op == OP_RENAME_LAZY || op == OP_BITOP ||
          op == OP_OVER_PLAIN || op == OP_OVER_LUA)
        must_ok(redisCommand(c, "SET %s %b", a, data, len), c, "SET");
      if (op == OP_RENAME || op == OP_RENAME_LAZY || op == OP_BITOP)
        must_ok(redisCommand(c, "SET %s %b", b, data, len), c, "SET");
      if (op == OP_RENAME_LAZY) must_ok(redisCommand(c, "CONFIG SET lazyfree-lazy-server-del yes"), c, "CONFIG SET");
      nanosleep(&pause, NULL);
      uint64_t s0 = now_ns();
      vec_push(&idle, ping_max(&pg, s0 - 25000000u, s0 - 5000000u));
      double us = 0, total = 0;
      switch (op) {
      case OP_FRESH_SETRANGE:
        must_ok(redisCommand(c, "SETRANGE %s %llu x", a, (unsigned long long)(len - 1)), c, "SETRANGE");
        break;
      case OP_FRESH_SETBIT:
        must_ok(redisCommand(c, "SETBIT %s %llu 1", a, (unsigned long long)R->size - 1), c, "SETBIT");
        break;
      case OP_DEL: must_ok(redisCommand(c, "DEL %s", a), c, "DEL"); break;
      case OP_UNLINK: must_ok(redisCommand(c, "UNLINK %s", a), c, "UNLINK"); break;
      case OP_RENAME:
      case OP_RENAME_LAZY: must_ok(redisCommand(c, "RENAME %s %s", b, a), c, "RENAME"); break;
      case OP_BITOP: must_ok(redisCommand(c, "BITOP OR %s %s %s", a, a, b), c, "BITOP"); break;
      case OP_UP_PLAIN: us = upload_chunks(c, a, data, len, 1u << 20, 0, &total); break;
      case OP_UP_LUA: us = upload_chunks(c, a, data, len, 1u << 20, 1, &total); break;
      case OP_UP_SMALL: us = upload_chunks(c, a, data, len, 1u << 17, 0, &total); break;
      case OP_OVER_PLAIN: us = upload_chunks(c, a, data, len, 1u << 20, 0, &total); break;
      case OP_OVER_LUA: us = upload_chunks(c, a, data, len, 1u << 20, 1, &total); break;
      case OP_SET_WHOLE: must_ok(redisCommand(c, "SET %s %b", a, data, len), c, "SET"); break;
      }
      uint64_t s1 = now_ns();
      if (op < OP_UP_PLAIN || op == OP_SET_WHOLE) {
        static const char *const cmd[OP_N] = {"setrange", "setbit", "del", "unlink", "rename", "rename", "bitop",
                                              NULL, NULL, NULL, NULL, NULL, "set"};
        us = total = last_us(c, cmd[op]);
        if (us < 0) us = total = 3; /* not logged: at most the threshold */
      }
      if (op == OP_RENAME_LAZY) must_ok(redisCommand(c, "CONFIG SET lazyfree-lazy-server-del no"), c, "CONFIG SET");
      nanosleep(&(struct timespec){0, 5000000}, NULL); /* a PING held up by the op ends after it */
      vec_push(&srv[op], us);
      vec_push(&sum[op], total);
      vec_push(&ping[op], ping_max(&pg, s0, s1));
    }
  atomic_store(&pg.stop, 1);
  pthread_join(pg.th, NULL);
  must_ok(redisCommand(c, "DEL %s %s", a, b), c, "DEL");
  must_ok(redisCommand(c, "CONFIG SET slowlog-log-slower-than %d", R->o.slowlog_us), c, "CONFIG SET");

  printf("\nserver operations on a %zu-byte value, idle server, %d reps, interleaved (median / max). server =\n"
         "SLOWLOG time of the command (3 = not logged, 3 us or less; uploads: the slowest chunk, and the sum of\n"
         "all chunks); PING = the longest round trip of a client doing PING back to back on its own connection,\n"
         "among those overlapping the operation\n",
         len, REP);
  printf("  %-70s %17s %9s %17s\n", "operation", "server us", "sum us", "PING max us");
  for (int op = 0; op < OP_N; op++)
    printf("  %-70s %8.0f / %6.0f %9.0f %8.0f / %6.0f\n", what[op], vec_q(&srv[op], 0.5), vec_max(&srv[op]),
           vec_q(&sum[op], 0.5), vec_q(&ping[op], 0.5), vec_max(&ping[op]));
  printf("  %-70s %17s %9s %8.0f / %6.0f\n", "(no operation: 20 ms just before each one)", "", "", vec_q(&idle, 0.5),
         vec_max(&idle));
  for (int op = 0; op < OP_N; op++) free(srv[op].v), free(sum[op].v), free(ping[op].v);
  free(idle.v);
  free(pg.t);
  free(data);
}

/* ---------------------------------------------------------------- main */

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--url redis://host:port | unix:///path] [--items N (10000000)] [--fpp P (0.01)]\n"
          "       [--window W (16)] [--bg-runs R (3)] [--bg-batch B (1000000)] [--rot-items M (1000000)]\n"
          "       [--rot-threads T (0)] [--rot-nice N (0)]\n"
          "       [--chunk-bytes C (0)] [--adds-per-rotation A (1)] [--phase-seconds S (3)] [--rounds N (5)]\n"
          "       [--slowlog-us U (20)] [--qps Q (0: closed loop)] [--skip-rebuild] [--skip-latency]\n", argv0);
  exit(2);
}

int main(int argc, char **argv) {
  run R;
  memset(&R, 0, sizeof R);
  opts_t *o = &R.o;
  *o = (opts_t){.items = 10000000, .fpp = 0.01, .window = 16, .bg_runs = 3, .bg_batch = 1000000, .rot_items = 1000000,
                .adds = 1, .phase_s = 3, .rounds = 5, .slowlog_us = 20};
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--skip-rebuild")) o->skip_rebuild = 1;
    else if (!strcmp(a, "--skip-latency")) o->skip_latency = 1;
    else if (!v) usage(argv[0]);
    else if (!strcmp(a, "--url")) o->url = v, i++;
    else if (!strcmp(a, "--items")) o->items = strtoll(v, NULL, 10), i++;
    else if (!strcmp(a, "--fpp")) o->fpp = strtod(v, NULL), i++;
    else if (!strcmp(a, "--window")) o->window = atoi(v), i++;
    else if (!strcmp(a, "--bg-runs")) o->bg_runs = atoi(v), i++;
    else if (!strcmp(a, "--bg-batch")) o->bg_batch = strtoll(v, NULL, 10), i++;
    else if (!strcmp(a, "--rot-items")) o->rot_items = strtoll(v, NULL, 10), i++;
    else if (!strcmp(a, "--rot-threads")) o->rot_threads = atoi(v), i++;
    else if (!strcmp(a, "--rot-nice")) o->rot_nice = atoi(v), i++;
    else if (!strcmp(a, "--chunk-bytes")) o->chunk_bytes = strtoll(v, NULL, 10), i++;
    else if (!strcmp(a, "--adds-per-rotation")) o->adds = atoi(v), i++;
    else if (!strcmp(a, "--phase-seconds")) o->phase_s = strtod(v, NULL), i++;
    else if (!strcmp(a, "--rounds")) o->rounds = atoi(v), i++;
    else if (!strcmp(a, "--slowlog-us")) o->slowlog_us = atoi(v), i++;
    else if (!strcmp(a, "--qps")) o->qps = strtod(v, NULL), i++;
    else usage(argv[0]);
  }
  if (o->items < 1000 || o->items > 200000000 || !(o->fpp > 0 && o->fpp < 1) || o->window < 1 || o->window > 1024 ||
      o->bg_runs < 1 || o->bg_runs > MAX_ROUNDS || o->bg_batch < 1 || o->rot_items < 1 || o->rot_threads < 0 ||
      o->rot_threads > 256 || o->rot_nice < 0 || o->rot_nice > 19 || o->chunk_bytes < 0 || o->adds < 0 ||
      o->adds > 1000 || !(o->phase_s >= 0.2 && o->phase_s <= 60) ||
      o->rounds < 1 || o->rounds > MAX_ROUNDS || o->slowlog_us < 0 || !(o->qps >= 0 && o->qps <= 1e6))
    usage(argv[0]);
  if (o->rot_items > o->items) o->rot_items = o->items;

  if (!o->url) {
    bgb_server_start(&R.srv);
    o->url = R.srv.url;
    R.own_server = 1;
  }
  R.raw = bgb_raw_connect(o->url);
  if (bg_optimal_params(o->items, o->fpp, &R.size, &R.k) != BG_OK || R.k > K_MAX)
    bgb_die("bad --items / --fpp%s%s", NULL, NULL);
  R.bitmap_len = (size_t)((R.size + 7) / 8);

  /* the items, once, outside every timing */
  size_t n = (size_t)o->items;
  R.pool = malloc(n * ITEM_LEN);
  R.items = malloc(n * sizeof *R.items);
  R.lens = malloc(n * sizeof *R.lens);
  if (!R.pool || !R.items || !R.lens) bgb_die("out of memory for the items%s%s", NULL, NULL);
  for (size_t i = 0; i < n; i++) {
    make_item(R.pool + i * ITEM_LEN, i);
    R.items[i] = R.pool + i * ITEM_LEN;
    R.lens[i] = ITEM_LEN;
  }
  R.cl = open_client(o->url, 0);
  R.rot_opts = rotation_options(o);

  char la[64];
  loadavg(la, sizeof la);
  {
    redisReply *r = must(redisCommand(R.raw, "INFO server"), R.raw, "INFO");
    const char *v = strstr(r->str, "redis_version:");
    char ver[32] = "?";
    if (v) sscanf(v + 14, "%31[^\r\n]", ver);
    printf("bench_rotate: server %s%s (redis %s), hash %s, %ld online CPUs, load average %s\n", o->url,
           R.own_server ? " (started by the benchmark)" : "", ver, bg_hash_impl(), sysconf(_SC_NPROCESSORS_ONLN), la);
    freeReplyObject(r);
  }

  int ok = 1, pass_rebuild = 1, pass_latency = 1;
  if (!o->skip_rebuild) ok &= part_rebuild(&R, &pass_rebuild);
  if (!o->skip_latency) ok &= part_latency(&R, &pass_latency);
  if (R.own_server && !o->skip_latency) part_server_ops(&R);

  loadavg(la, sizeof la);
  printf("\nload average at the end: %s\n", la);
  printf("overall: %s%s\n", pass_rebuild && pass_latency ? "all targets met" : "target(s) missed",
         ok ? "" : "; CORRECTNESS CHECK FAILED");

  bg_options_free(R.rot_opts);
  bg_client_close(R.cl);
  redisFree(R.raw);
  free(R.pool);
  free(R.items);
  free(R.lens);
  bgb_server_stop(&R.srv);
  return !ok ? 1 : pass_rebuild && pass_latency ? 0 : 3;
}
