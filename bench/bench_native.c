/*
 * bench_native: contains on a native filter (RedisBloom BF.*, bg_filter_open_native) against a
 * Redisson-layout filter of the same capacity and error rate holding the same items, on one
 * redis-server with RedisBloom loaded, plus a raw hiredis baseline sending BF.EXISTS (one item) or
 * BF.MEXISTS (a batch) to the native filter at the same depth. Run by hand (see bench/README.md),
 * not a test; pin the server and this process to different CPUs (taskset) for figures that mean
 * something.
 *
 * Setup: starts its own redis-server with --loadmodule redisbloom.so (bgb_server_or_bloom: the
 * module of scripts/redisbloom.sh, or $BG_REDISBLOOM) on a free 127.0.0.1 port, or uses --url (a
 * server that has the module). Both filters: capacity --capacity (1,000,000), error --error (0.01);
 * --items (100,000) items "p:%08u" added to both; the query sequence alternates them with items
 * "a:%08u" never added. Every side walks the same sequence.
 *
 * Sides, per mode:
 *  native    bg_filter_contains (batch 1) / bg_filter_contains_many (batch 100) on the native handle
 *  redisson  the same calls on the Redisson-layout handle
 *  raw       hiredis on one connection: BF.EXISTS name item (batch 1), BF.MEXISTS name i1..i100
 *            (batch 100), built with redisAppendCommandArgv
 * Modes:
 *  blocking  one call at a time on one connection (bg clients with BG_OPT_POOL_SIZE 1); raw: one
 *            command, one reply
 *  queue N   N calls in flight on a bg_queue driven from epoll (as bench_queue), each call one item
 *            or one batch of 100; raw: N commands in flight on one hiredis connection (a pipeline
 *            refilled as replies come back)
 *
 * Each round runs every side --seconds once, the order rotating from round to round. Printed per
 * (mode, batch, side): items/s (median of rounds), native/redisson and side/raw (medians of
 * per-round ratios), client CPU us per item (getrusage), server CPU us per call and per item (INFO
 * cpu around each run). A present item answered absent is counted and reported (a false negative:
 * the figures are then void); absent items may answer present (false positives).
 *
 *   bench_native [--url redis://host:port] [--rounds N (5)] [--seconds S (1.0)] [--items N (100000)]
 *                [--capacity N (1000000)] [--error P (0.01)] [--inflight 64,1024 (64)]
 *                [--batches 1,100 (both)] [--modes blocking,queue (both)]
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define MAX_ROUNDS 21 /* <= BGB_MAX_SAMPLES */
#define MAX_LEVELS 8
#define BATCH_MAX 100

enum { S_NATIVE, S_REDISSON, S_RAW, NSIDES };
static const char *side_name[NSIDES] = {"native", "redisson", "raw BF.*"};

static char *pool;           /* N_QUERY items of 12 bytes */
static const char **items;   /* even: added; odd: never added */
static size_t *lens;
static size_t n_query;
static char name_native[64];

typedef struct result {
  uint64_t items, calls, false_neg;
  double wall, cpu, srv;
} result;

/* the next batch's first index: batches never wrap (n_query is a multiple of every batch) */
static size_t take(size_t *cursor, size_t batch) {
  /* a cursor left by the other batch size may leave no whole batch before the end */
  size_t from = *cursor + batch > n_query ? 0 : *cursor;
  *cursor = from + batch >= n_query ? 0 : from + batch;
  return from;
}

/* ---- raw hiredis ------------------------------------------------------------------------------ */

static void raw_append(redisContext *raw, size_t from, size_t batch) {
  const char *argv[2 + BATCH_MAX];
  size_t argl[2 + BATCH_MAX];
  argv[0] = batch == 1 ? "BF.EXISTS" : "BF.MEXISTS", argl[0] = strlen(argv[0]);
  argv[1] = name_native, argl[1] = strlen(name_native);
  for (size_t i = 0; i < batch; i++) argv[2 + i] = items[from + i], argl[2 + i] = lens[from + i];
  if (redisAppendCommandArgv(raw, 2 + (int)batch, argv, argl) != REDIS_OK) bgb_die("raw: append: %s%s", raw->errstr, NULL);
}

/* Reads one reply to raw_append(from, batch); returns the false negatives in it. */
static uint64_t raw_reply(redisContext *raw, size_t from, size_t batch) {
  redisReply *r = NULL;
  uint64_t fn = 0;
  if (redisGetReply(raw, (void **)&r) != REDIS_OK) bgb_die("raw: %s%s", raw->errstr, NULL);
  if (batch == 1) {
    if (r->type != REDIS_REPLY_INTEGER) bgb_die("raw: BF.EXISTS answered %s%s", r->type == REDIS_REPLY_ERROR ? r->str : "?", NULL);
    fn += from % 2 == 0 && r->integer != 1;
  } else {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != batch)
      bgb_die("raw: BF.MEXISTS answered %s%s", r->type == REDIS_REPLY_ERROR ? r->str : "?", NULL);
    for (size_t i = 0; i < batch; i++) fn += (from + i) % 2 == 0 && r->element[i]->integer != 1;
  }
  freeReplyObject(r);
  return fn;
}

/* depth 1: blocking; depth N: N commands in flight, one refilled per reply */
static void run_raw(redisContext *raw, size_t batch, int depth, double seconds, size_t *cursor, redisContext *info,
                    result *out) {
  size_t ring[4096];
  if (depth > 4096) bgb_die("--inflight above 4096%s%s", NULL, NULL);
  double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s(), end = t0 + seconds;
  size_t head = 0, tail = 0, pending = 0;
  for (int i = 0; i < depth; i++, pending++) raw_append(raw, ring[head++ % 4096] = take(cursor, batch), batch);
  while (pending > 0) {
    out->false_neg += raw_reply(raw, ring[tail++ % 4096], batch);
    pending--;
    out->calls++, out->items += batch;
    if (bgb_now_s() < end) raw_append(raw, ring[head++ % 4096] = take(cursor, batch), batch), pending++;
  }
  out->wall = bgb_now_s() - t0;
  out->cpu = bgb_cpu_s() - cpu0;
  out->srv = bgb_server_cpu_s(info) - srv0;
}

/* ---- bloomguard, blocking --------------------------------------------------------------------- */

static void run_blocking(bg_filter *f, size_t batch, double seconds, size_t *cursor, redisContext *info, result *out) {
  uint8_t present[BATCH_MAX];
  double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s(), end = t0 + seconds;
  do {
    size_t from = take(cursor, batch);
    if (batch == 1) {
      int p = 0;
      if (bg_filter_contains(f, items[from], lens[from], &p) != BG_OK) bgb_die("contains: %s%s", bg_filter_errmsg(f), NULL);
      present[0] = (uint8_t)p;
    } else if (bg_filter_contains_many(f, (const void *const *)(items + from), lens + from, batch, present) != BG_OK) {
      bgb_die("contains_many: %s%s", bg_filter_errmsg(f), NULL);
    }
    for (size_t i = 0; i < batch; i++) out->false_neg += (from + i) % 2 == 0 && !present[i];
    out->calls++, out->items += batch;
  } while (bgb_now_s() < end);
  out->wall = bgb_now_s() - t0;
  out->cpu = bgb_cpu_s() - cpu0;
  out->srv = bgb_server_cpu_s(info) - srv0;
}

/* ---- bloomguard, N in flight on a queue ------------------------------------------------------- */

static void submit(bg_filter *f, bg_queue *q, size_t batch, size_t *cursor) {
  size_t from = take(cursor, batch);
  int st = batch == 1 ? bg_filter_contains_submit(f, q, from, items[from], lens[from])
                      : bg_filter_contains_many_submit(f, q, from, (const void *const *)(items + from), lens + from, batch);
  if (st != BG_OK) bgb_die("submit: %s%s", bg_filter_errmsg(f), NULL);
}

static void run_queue(bg_filter *f, bg_queue *q, int ep, size_t batch, int inflight, double seconds, size_t *cursor,
                      redisContext *info, result *out) {
  double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s(), end = t0 + seconds;
  uint64_t pending = 0;
  for (int i = 0; i < inflight; i++, pending++) submit(f, q, batch, cursor);
  /* bounded: every operation completes or fails by the client's timeouts; 10 s past the end is a hang */
  while (pending > 0) {
    struct epoll_event got;
    epoll_wait(ep, &got, 1, 100);
    bg_completion *cs[256];
    size_t n = 0;
    bg_queue_poll(q, 0, cs, 256, &n);
    int more = bgb_now_s() < end;
    if (bgb_now_s() > end + 10) bgb_die("queue: completions stopped coming%s%s", NULL, NULL);
    for (size_t i = 0; i < n; i++) {
      size_t from = (size_t)bg_completion_tag(cs[i]);
      pending--;
      if (bg_completion_status(cs[i]) != BG_OK) bgb_die("queue: %s%s", bg_completion_errmsg(cs[i]), NULL);
      if (batch == 1) {
        out->false_neg += from % 2 == 0 && bg_completion_value(cs[i]) != 1;
      } else {
        size_t np = 0;
        const uint8_t *p = bg_completion_present(cs[i], &np);
        if (np != batch) bgb_die("queue: a batch answered with another count%s%s", NULL, NULL);
        for (size_t j = 0; j < batch; j++) out->false_neg += (from + j) % 2 == 0 && !p[j];
      }
      out->calls++, out->items += batch;
      if (more) submit(f, q, batch, cursor), pending++;
    }
  }
  out->wall = bgb_now_s() - t0;
  out->cpu = bgb_cpu_s() - cpu0;
  out->srv = bgb_server_cpu_s(info) - srv0;
}

/* ---- main -------------------------------------------------------------------------------------- */

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--url redis://host:port] [--rounds N (1..%d, 5)] [--seconds S (1.0)] [--items N (100000)]\n"
                  "          [--capacity N (1000000)] [--error P (0.01)] [--inflight 64,1024 (64)] [--batches 1,100]\n"
                  "          [--modes blocking,queue]\n", argv0, MAX_ROUNDS);
  exit(2);
}

static int ints(char *s, int *out, int max) {
  int n = 0;
  for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = atoi(tok);
  return n;
}

static void fill(bg_filter *f, size_t n_present) {
  const void *ptrs[1000];
  size_t pl[1000];
  for (size_t from = 0; from < n_present; from += 1000) {
    size_t n = n_present - from < 1000 ? n_present - from : 1000;
    for (size_t j = 0; j < n; j++) ptrs[j] = items[2 * (from + j)], pl[j] = lens[2 * (from + j)];
    if (bg_filter_add_many(f, ptrs, pl, n, NULL) != BG_OK) bgb_die("add: %s%s", bg_filter_errmsg(f), NULL);
  }
}

typedef struct row {
  double rate[NSIDES][MAX_ROUNDS], cpu[NSIDES][MAX_ROUNDS], srv_call[NSIDES][MAX_ROUNDS], srv_item[NSIDES][MAX_ROUNDS];
  double vs_redisson[MAX_ROUNDS], vs_raw[NSIDES][MAX_ROUNDS], srv_vs_redisson[MAX_ROUNDS];
  uint64_t false_neg;
} row;

static void print_row(const char *mode, size_t batch, row *w, int rounds) {
  for (int s = 0; s < NSIDES; s++) {
    char a[16] = "", b[16] = "", c[16] = "";
    if (s == S_NATIVE) snprintf(a, sizeof a, "%.3fx", bgb_median(w->vs_redisson, rounds));
    if (s == S_NATIVE) snprintf(c, sizeof c, "%.3fx", bgb_median(w->srv_vs_redisson, rounds));
    if (s != S_RAW) snprintf(b, sizeof b, "%.3fx", bgb_median(w->vs_raw[s], rounds));
    printf("%-12s %5zu %-9s %12.0f %9s %9s %10.3f %11.3f %10.4f %12s\n", mode, batch, side_name[s],
           bgb_median(w->rate[s], rounds), a, b, bgb_median(w->cpu[s], rounds), bgb_median(w->srv_call[s], rounds),
           bgb_median(w->srv_item[s], rounds), c);
  }
  if (w->false_neg) printf("  !! %llu present items answered absent: these figures are void\n", (unsigned long long)w->false_neg);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int rounds = 5, levels[MAX_LEVELS] = {64}, nlevels = 1, want_batch[2] = {1, 1}, want_mode[2] = {1, 1};
  double seconds = 1.0, error = 0.01;
  long long n_present = 100000, capacity = 1000000;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--items") && i + 1 < argc) n_present = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--capacity") && i + 1 < argc) capacity = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--error") && i + 1 < argc) error = atof(argv[++i]);
    else if (!strcmp(argv[i], "--inflight") && i + 1 < argc) nlevels = ints(argv[++i], levels, MAX_LEVELS);
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
      int b[2], n = ints(argv[++i], b, 2);
      want_batch[0] = want_batch[1] = 0;
      for (int j = 0; j < n; j++) {
        if (b[j] != 1 && b[j] != BATCH_MAX) usage(argv[0]);
        want_batch[b[j] == 1 ? 0 : 1] = 1;
      }
    } else if (!strcmp(argv[i], "--modes") && i + 1 < argc) {
      char *m = argv[++i];
      want_mode[0] = strstr(m, "blocking") != NULL, want_mode[1] = strstr(m, "queue") != NULL;
    } else usage(argv[0]);
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0.01 && seconds <= 60) || n_present < BATCH_MAX ||
      n_present > 50000000 || n_present % BATCH_MAX || capacity < 1 || !(error > 0 && error < 1) || nlevels < 1)
    usage(argv[0]);
  for (int l = 0; l < nlevels; l++)
    if (levels[l] < 1 || levels[l] > 4096) usage(argv[0]);

  bgb_server srv = {0};
  url = bgb_server_or_bloom(url, &srv);

  n_query = 2 * (size_t)n_present;
  pool = malloc(n_query * 12);
  items = malloc(n_query * sizeof *items);
  lens = malloc(n_query * sizeof *lens);
  if (!pool || !items || !lens) bgb_die("out of memory%s%s", NULL, NULL);
  for (size_t i = 0; i < n_query; i++) {
    char *p = pool + i * 12;
    lens[i] = (size_t)snprintf(p, 12, "%c:%08u", i % 2 ? 'a' : 'p', (unsigned)(i / 2));
    items[i] = p;
  }

  /* blocking: one connection per client, as the raw side; queue: a default client */
  bg_options *o;
  bg_client *cb = NULL, *cq = NULL;
  char err[512], name_redisson[64];
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_POOL_SIZE, 1);
  if (bgt_client_open(&cb, url, o, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  bg_options_free(o);
  if (bgt_client_open(&cq, url, NULL, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  snprintf(name_native, sizeof name_native, "bloomguard-bench:native:%ld", (long)getpid());
  snprintf(name_redisson, sizeof name_redisson, "bloomguard-bench:redisson:%ld", (long)getpid());
  bg_filter *fn = NULL, *fr = NULL, *qn = NULL, *qr = NULL;
  if (bg_filter_open_native(&fn, cb, name_native) != BG_OK || bg_filter_open(&fr, cb, name_redisson) != BG_OK ||
      bg_filter_open_native(&qn, cq, name_native) != BG_OK || bg_filter_open(&qr, cq, name_redisson) != BG_OK)
    bgb_die("bg_filter_open: %s%s", bg_client_errmsg(cb), NULL);
  bg_filter_delete(fn, NULL);
  bg_filter_delete(fr, NULL);
  if (bg_filter_init_native(fn, capacity, error, -1, NULL) != BG_OK) bgb_die("init native: %s%s", bg_filter_errmsg(fn), NULL);
  if (bg_filter_init(fr, capacity, error, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(fr), NULL);
  fill(fn, (size_t)n_present);
  fill(fr, (size_t)n_present);
  int64_t nbytes = 0, nlinks = 0;
  uint64_t rsize = 0;
  uint32_t rk = 0;
  bg_filter_info_native(fn, NULL, &nbytes, &nlinks, NULL, NULL);
  bg_filter_info(fr, &rsize, &rk, NULL, NULL);

  redisContext *raw = bgb_raw_connect(url), *info = bgb_raw_connect(url);
  bg_queue *q = NULL;
  if (bg_queue_open(&q, cq) != BG_OK) bgb_die("bg_queue_open: %s%s", bg_client_errmsg(cq), NULL);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, bg_queue_fd(q), &ev);

  printf("bench_native: server %s%s; capacity %lld, error %g, %lld items added to both filters\n", url,
         srv.pid ? " (started by the benchmark, RedisBloom loaded)" : "", capacity, error, n_present);
  printf("  native %s: %lld bytes, %lld link(s); redisson-layout %s: %llu bits, k=%u\n", name_native, (long long)nbytes,
         (long long)nlinks, name_redisson, (unsigned long long)rsize, rk);
  printf("  %d rounds x %.2f s per side, order rotating; ratios are medians of per-round ratios\n\n", rounds, seconds);
  printf("%-12s %5s %-9s %12s %9s %9s %10s %11s %10s %12s\n", "mode", "batch", "side", "items/s", "/redisson", "/raw",
         "cli us/it", "srv us/call", "srv us/it", "srv/redisson");

  static const size_t batches[2] = {1, BATCH_MAX};
  size_t cursor[NSIDES] = {0, 0, 0};
  row *w = malloc(sizeof *w);
  if (!w) bgb_die("out of memory%s%s", NULL, NULL);
  for (int mode = 0; mode < 2; mode++) {
    if (!want_mode[mode]) continue;
    for (int l = 0; l < (mode ? nlevels : 1); l++) {
      int depth = mode ? levels[l] : 1;
      char mname[24];
      if (mode) snprintf(mname, sizeof mname, "queue %d", depth);
      else snprintf(mname, sizeof mname, "blocking");
      for (int bi = 0; bi < 2; bi++) {
        if (!want_batch[bi]) continue;
        size_t batch = batches[bi];
        memset(w, 0, sizeof *w);
        for (int r = -1; r < rounds; r++) { /* round -1: a short warm-up, not counted */
          result res[NSIDES];
          memset(res, 0, sizeof res);
          for (int k = 0; k < NSIDES; k++) {
            int s = (r + 1 + k) % NSIDES;
            double secs = r < 0 ? 0.1 : seconds;
            if (s == S_RAW) run_raw(raw, batch, depth, secs, &cursor[s], info, &res[s]);
            else if (!mode) run_blocking(s == S_NATIVE ? fn : fr, batch, secs, &cursor[s], info, &res[s]);
            else run_queue(s == S_NATIVE ? qn : qr, q, ep, batch, depth, secs, &cursor[s], info, &res[s]);
          }
          if (r < 0) continue;
          for (int s = 0; s < NSIDES; s++) {
            w->rate[s][r] = (double)res[s].items / res[s].wall;
            w->cpu[s][r] = res[s].cpu * 1e6 / (double)res[s].items;
            w->srv_call[s][r] = res[s].srv * 1e6 / (double)res[s].calls;
            w->srv_item[s][r] = res[s].srv * 1e6 / (double)res[s].items;
            w->vs_raw[s][r] = w->rate[s][r] / ((double)res[S_RAW].items / res[S_RAW].wall);
            w->false_neg += res[s].false_neg;
          }
          w->vs_redisson[r] = w->rate[S_NATIVE][r] / w->rate[S_REDISSON][r];
          w->srv_vs_redisson[r] = w->srv_item[S_REDISSON][r] > 0 ? w->srv_item[S_NATIVE][r] / w->srv_item[S_REDISSON][r] : 0;
        }
        print_row(mname, batch, w, rounds);
      }
    }
  }
  printf("\n/redisson: native items/s over redisson-layout items/s; /raw: the side's items/s over raw BF.* at the\n"
         "same batch and depth; srv/redisson: native server CPU per item over redisson-layout's (below 1: less)\n");

  free(w);
  bg_queue_close(q);
  close(ep);
  bg_filter_delete(fn, NULL);
  bg_filter_delete(fr, NULL);
  bg_filter_close(fn);
  bg_filter_close(fr);
  bg_filter_close(qn);
  bg_filter_close(qr);
  bg_client_close(cb);
  bg_client_close(cq);
  redisFree(raw);
  redisFree(info);
  free(items);
  free(lens);
  free(pool);
  bgb_server_stop(&srv);
  return 0;
}
