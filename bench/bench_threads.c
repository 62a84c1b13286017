/*
 * bench_threads: T threads each calling bg_filter_contains (one item per call) on ONE shared
 * client (BG_OPT_PIPELINE on: its few multiplexed connections), against a baseline of T threads
 * each with its own raw hiredis connection doing one BITFIELD_RO round trip per item (the
 * indexes from bg_indexes). Same run, sides interleaved per round (the order alternates), so both
 * see the same background load. Optionally (--nopipe) a third side: the same client with
 * BG_OPT_PIPELINE 0 and a pool of T connections. Run by hand (see bench/README.md).
 *
 * Prints per T: items/s of each side (median over rounds), the ratio bg/raw (median of per-round
 * ratios), p50/p99 latency per call (all calls of all rounds), and the server's cost per query:
 * CPU (INFO cpu, used_cpu_user + used_cpu_sys) and time inside commands (INFO commandstats, the
 * sum of usec over all commands) divided by the queries answered.
 *
 *   bench_threads [--url redis://host:port] [--threads 8,64] [--rounds N (5)] [--seconds S (1.0)]
 *                 [--conns N (2)] [--spin US (0)] [--nopipe]
 *                 [--only bg|raw|nopipe (one side alone, to profile it)]
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "bloomguard.h"

#define N_ITEMS 4000       /* even: added; odd: never added */
#define MAX_THREADS 128
#define MAX_ROUNDS 21
#define LAT_PER_THREAD 200000
#define NAME "bloomguard-bench:threads"

enum { SIDE_BG, SIDE_RAW, SIDE_NOPIPE, NSIDES };
static const char *side_name[NSIDES] = {"bg (pipelined)", "raw hiredis", "bg (pool, no pipelining)"};

static char items[N_ITEMS][24];
static size_t lens[N_ITEMS];
static uint64_t fsize;
static uint32_t fk;
static const char *url;

typedef struct worker {
  int side, id;
  bg_filter *f;
  redisContext *raw;
  double seconds;
  uint64_t done;
  float *lat_us;     /* per call */
  size_t nlat;
  int failed;
} worker;

static double now_s(void) { return bgb_now_s(); }

static int raw_contains(redisContext *c, size_t i, int *present) {
  uint64_t idx[64];
  if (bg_indexes(items[i], lens[i], fsize, fk, idx) != BG_OK) return -1;
  const char *argv[2 + 3 * 64];
  char num[64][24];
  size_t argl[2 + 3 * 64];
  int argc = 0;
  argv[argc] = "BITFIELD_RO", argl[argc++] = 11;
  argv[argc] = NAME, argl[argc++] = strlen(NAME);
  for (uint32_t j = 0; j < fk; j++) {
    argv[argc] = "GET", argl[argc++] = 3;
    argv[argc] = "u1", argl[argc++] = 2;
    argl[argc] = (size_t)snprintf(num[j], sizeof num[j], "%llu", (unsigned long long)idx[j]);
    argv[argc] = num[j], argc++;
  }
  redisReply *r = redisCommandArgv(c, argc, argv, argl);
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    if (r) freeReplyObject(r);
    return -1;
  }
  int all = 1;
  for (size_t j = 0; j < r->elements; j++) all &= r->element[j]->integer == 1;
  *present = all;
  freeReplyObject(r);
  return 0;
}

static void *work(void *arg) {
  worker *w = arg;
  double end = now_s() + w->seconds;
  uint64_t n = (uint64_t)w->id * 7919u;
  w->done = 0;
  while (now_s() < end) {
    for (int j = 0; j < 16; j++, n++) {
      size_t i = (size_t)(n % N_ITEMS);
      int present = 0, st;
      double t0 = now_s();
      if (w->side == SIDE_RAW) st = raw_contains(w->raw, i, &present);
      else st = bg_filter_contains(w->f, items[i], lens[i], &present);
      double us = (now_s() - t0) * 1e6;
      if (st != 0 || (i % 2 == 0 && !present)) {
        w->failed = 1;
        return NULL;
      }
      if (w->nlat < LAT_PER_THREAD) w->lat_us[w->nlat++] = (float)us;
      w->done++;
    }
  }
  return NULL;
}

/* usec inside commands since the last CONFIG RESETSTAT (sum over cmdstat_* lines) */
static double command_usec(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO commandstats");
  double total = 0;
  if (r && r->type == REDIS_REPLY_STRING)
    for (const char *p = r->str; (p = strstr(p, ",usec=")); p += 6) total += atof(p + 6);
  if (r) freeReplyObject(r);
  return total;
}

typedef struct side_result {
  double rate[MAX_ROUNDS];
  double cpu_us_per_q, cmd_us_per_q;   /* sums over rounds, divided at the end */
  uint64_t queries;
  float *lat;
  size_t nlat, cap;
} side_result;

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static void run_side(int side, int threads, double seconds, bg_filter *f, redisContext **raw, redisContext *admin,
                     side_result *res, int round) {
  worker w[MAX_THREADS];
  pthread_t t[MAX_THREADS];
  freeReplyObject(redisCommand(admin, "CONFIG RESETSTAT"));
  double cpu0 = bgb_server_cpu_s(admin);
  double start = now_s();
  for (int i = 0; i < threads; i++) {
    w[i] = (worker){.side = side, .id = i, .f = f, .raw = raw ? raw[i] : NULL, .seconds = seconds};
    w[i].lat_us = malloc(LAT_PER_THREAD * sizeof(float));
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  uint64_t total = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (w[i].failed) bgb_die("%s: a query failed or missed an added item%s", side_name[side], "");
    total += w[i].done;
  }
  double elapsed = now_s() - start;
  double cpu = bgb_server_cpu_s(admin) - cpu0, cmd_us = command_usec(admin);
  res->rate[round] = (double)total / elapsed;
  res->cpu_us_per_q += cpu * 1e6;
  res->cmd_us_per_q += cmd_us;
  res->queries += total;
  for (int i = 0; i < threads; i++) {
    if (res->nlat + w[i].nlat > res->cap) {
      res->cap = (res->nlat + w[i].nlat) * 2;
      res->lat = realloc(res->lat, res->cap * sizeof(float));
    }
    memcpy(res->lat + res->nlat, w[i].lat_us, w[i].nlat * sizeof(float));
    res->nlat += w[i].nlat;
    free(w[i].lat_us);
  }
}

static double pct(side_result *r, double p) {
  if (!r->nlat) return 0;
  qsort(r->lat, r->nlat, sizeof(float), cmp_float);
  return r->lat[(size_t)(p * (double)(r->nlat - 1))];
}

int main(int argc, char **argv) {
  int rounds = 5, conns = 2, spin_us = 0, nopipe = 0, only = -1, tlist[8] = {8, 64}, nt = 2;
  double seconds = 1.0;
  bgb_server srv = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--conns") && i + 1 < argc) conns = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin") && i + 1 < argc) spin_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nopipe")) nopipe = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      /* one side alone, for profiling it (perf stat / perf record): no ratio is printed */
      const char *v = argv[++i];
      only = !strcmp(v, "bg") ? SIDE_BG : !strcmp(v, "raw") ? SIDE_RAW : !strcmp(v, "nopipe") ? SIDE_NOPIPE : -2;
      if (only == -2) bgb_die("--only: bg, raw or nopipe%s%s", "", "");
      if (only == SIDE_NOPIPE) nopipe = 1;
    }
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      nt = 0;
      for (char *s = strtok(argv[++i], ","); s && nt < 8; s = strtok(NULL, ",")) tlist[nt++] = atoi(s);
    } else bgb_die("usage: bench_threads [--url U] [--threads 8,64] [--rounds N] [--seconds S] [--conns N] [--spin US] [--nopipe] [--only SIDE]%s%s", "", "");
  }
  if (rounds < 1 || rounds > MAX_ROUNDS) bgb_die("--rounds: 1..21%s%s", "", "");
  url = bgb_server_or(url, &srv);
  for (int i = 0; i < N_ITEMS; i++) lens[i] = (size_t)snprintf(items[i], sizeof items[i], "item-%d", i);
  redisContext *admin = bgb_raw_connect(url);

  bg_options *o = NULL;
  bg_client *c = NULL, *cpool = NULL;
  bg_filter *f = NULL, *fpool = NULL;
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, conns);
  if (bg_options_set_int(o, BG_OPT_PIPELINE_SPIN_US, spin_us) != BG_OK) bgb_die("--spin: 0..1000 (microseconds)%s%s", "", "");
  if (bg_client_open(&c, url, o) != BG_OK) bgb_die("open: %s%s", url, "");
  if (bg_filter_open(&f, c, NAME) != BG_OK) bgb_die("filter open%s%s", "", "");
  bg_filter_delete(f, NULL);
  if (bg_filter_init(f, 100000, 0.01, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(f), "");
  for (int i = 0; i < N_ITEMS; i += 2)
    if (bg_filter_add(f, items[i], lens[i], NULL) != BG_OK) bgb_die("add%s%s", "", "");
  if (bg_filter_info(f, &fsize, &fk, NULL, NULL) != BG_OK) bgb_die("info%s%s", "", "");

  printf("bench_threads: %d round(s) of %.2f s per side, BG_OPT_PIPELINE_CONNS %d, BG_OPT_PIPELINE_SPIN_US %d, k = %u\n",
         rounds, seconds, conns, spin_us, fk);
  for (int ti = 0; ti < nt; ti++) {
    int T = tlist[ti];
    if (T < 1 || T > MAX_THREADS) bgb_die("--threads: 1..128%s%s", "", "");
    redisContext *raw[MAX_THREADS];
    for (int i = 0; i < T; i++) raw[i] = bgb_raw_connect(url);
    if (nopipe) {
      bg_options_set_int(o, BG_OPT_PIPELINE, 0);
      bg_options_set_int(o, BG_OPT_POOL_SIZE, T);
      if (bg_client_open(&cpool, url, o) != BG_OK || bg_filter_open(&fpool, cpool, NAME) != BG_OK)
        bgb_die("open (no pipelining)%s%s", "", "");
      bg_options_set_int(o, BG_OPT_PIPELINE, 1);
    }
    side_result res[NSIDES];
    memset(res, 0, sizeof res);
    double ratio[MAX_ROUNDS], ratio_np[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
      int order[NSIDES] = {SIDE_BG, SIDE_RAW, SIDE_NOPIPE}, ns = nopipe ? 3 : 2;
      if (r % 2) order[0] = SIDE_RAW, order[1] = SIDE_BG;
      for (int s = 0; s < ns; s++)
        if (only < 0 || order[s] == only)
        run_side(order[s], T, seconds, order[s] == SIDE_NOPIPE ? fpool : f, order[s] == SIDE_RAW ? raw : NULL, admin,
                 &res[order[s]], r);
      ratio[r] = res[SIDE_BG].rate[r] / res[SIDE_RAW].rate[r];
      if (nopipe) ratio_np[r] = res[SIDE_BG].rate[r] / res[SIDE_NOPIPE].rate[r];
    }
    printf("\nT = %d threads\n", T);
    printf("  %-26s %12s %10s %10s %14s %14s\n", "side", "items/s", "p50 us", "p99 us", "srv CPU us/q", "srv cmd us/q");
    for (int s = 0; s < (nopipe ? 3 : 2); s++) {
      side_result *x = &res[s];
      if (!x->queries) continue;
      printf("  %-26s %12.0f %10.1f %10.1f %14.2f %14.2f\n", side_name[s], bgb_median(x->rate, rounds), pct(x, 0.50),
             pct(x, 0.99), x->cpu_us_per_q / (double)x->queries, x->cmd_us_per_q / (double)x->queries);
    }
    if (only < 0) printf("  ratio bg / raw (median of rounds): %.2fx; p99 bg / raw: %.2fx\n", bgb_median(ratio, rounds),
           pct(&res[SIDE_BG], 0.99) / pct(&res[SIDE_RAW], 0.99));
    if (nopipe && only < 0) printf("  ratio bg / bg without pipelining: %.2fx\n", bgb_median(ratio_np, rounds));
    for (int s = 0; s < NSIDES; s++) free(res[s].lat);
    for (int i = 0; i < T; i++) redisFree(raw[i]);
    if (nopipe) {
      bg_filter_close(fpool);
      bg_client_close(cpool);
    }
  }
  bg_filter_delete(f, NULL);
  bg_filter_close(f);
  bg_client_close(c);
  bg_options_free(o);
  redisFree(admin);
  bgb_server_stop(&srv);
  return 0;
}
