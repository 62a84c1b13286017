/*
 * bench_cluster: aggregate single-item contains throughput of T threads on ONE bg_client talking
 * to a Redis Cluster, when the T filters they query live on ONE master versus on T DIFFERENT
 * masters - same client, same run, rounds interleaved (one, spread, one, spread, ...) so both see
 * the same background load. It shows what spreading filters over masters buys on this machine
 * (near-linear up to the cores that the client and the servers share). Not a test.
 *
 *   bench_cluster --url redis://host:port[,...] [--threads T (3)] [--seconds S (2.0)] [--rounds N (5)]
 *
 * Setup: for each side, T filters named bloomguard-bench:cluster:<pid>:<side>:<i>, each
 * initialised with (100000, 0.01) and given 10000 items; every thread queries its own filter, one
 * item per call, alternating present and absent items. Each filter is deleted at the end.
 * Exit status: 0, or 1 on errors.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define MAX_THREADS 16
#define N_ITEMS 10000
#define MAX_ROUNDS 21

typedef struct worker {
  bg_filter *f;
  double seconds;
  uint64_t done;
  int failed;
} worker;

static char items[2 * N_ITEMS][16];
static size_t lens[2 * N_ITEMS];

static void *work(void *arg) {
  worker *w = arg;
  double end = bgb_now_s() + w->seconds;
  uint64_t n = 0;
  while (bgb_now_s() < end) {
    for (int j = 0; j < 64; j++, n++) {
      int present;
      size_t i = (size_t)(n % (2 * N_ITEMS));
      if (bg_filter_contains(w->f, items[i], lens[i], &present) != BG_OK || present != (int)(i % 2 == 0)) {
        if (present != (int)(i % 2 == 0) && i % 2 == 1) continue;   /* a false positive is allowed */
        w->failed = 1;
        return NULL;
      }
    }
  }
  w->done = n;
  return NULL;
}

static double run_side(bg_filter **f, int threads, double seconds) {
  worker w[MAX_THREADS];
  pthread_t t[MAX_THREADS];
  double start = bgb_now_s();
  for (int i = 0; i < threads; i++) {
    w[i] = (worker){.f = f[i], .seconds = seconds};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  uint64_t total = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (w[i].failed) bgb_die("a query failed or missed an added item: %s%s", bg_filter_errmsg(f[i]), NULL);
    total += w[i].done;
  }
  return (double)total / (bgb_now_s() - start);
}

/* A fresh filter named after (side, i) on the master `want` (NULL: any), loaded with the items. */
static bg_filter *make_filter(bg_client *c, const char *side, int i, const char *want, char *node, size_t cap) {
  char name[128];
  bg_filter *f = NULL;
  for (int attempt = 0; attempt < 100000; attempt++) {
    snprintf(name, sizeof name, "bloomguard-bench:cluster:%ld:%s:%d:%d", (long)getpid(), side, i, attempt);
    if (bg_filter_open(&f, c, name) != BG_OK) bgb_die("open: %s%s", bg_client_errmsg(c), NULL);
    if (bg_filter_node(f, node, cap, NULL) != BG_OK) bgb_die("node: %s%s", bg_filter_errmsg(f), NULL);
    if (!want || strcmp(node, want) == 0) break;
    bg_filter_close(f);
    f = NULL;
  }
  if (!f) bgb_die("no filter name lands on %s%s", want, NULL);
  bg_filter_delete(f, NULL);
  if (bg_filter_init(f, 100000, 0.01, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(f), NULL);
  const void *p[N_ITEMS];
  for (int j = 0; j < N_ITEMS; j++) p[j] = items[2 * j];
  size_t l[N_ITEMS];
  for (int j = 0; j < N_ITEMS; j++) l[j] = lens[2 * j];
  if (bg_filter_add_many(f, p, l, N_ITEMS, NULL) != BG_OK) bgb_die("add: %s%s", bg_filter_errmsg(f), NULL);
  return f;
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int threads = 3, rounds = 5;
  double seconds = 2.0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else url = NULL, i = argc;
  }
  if (!url || threads < 1 || threads > MAX_THREADS || rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0.05)) {
    fprintf(stderr, "usage: %s --url redis://host:port[,...] [--threads T (1..%d, 3)] [--seconds S (2)] "
                    "[--rounds N (1..%d, 5)]\n", argv[0], MAX_THREADS, MAX_ROUNDS);
    return 1;
  }
  for (int i = 0; i < 2 * N_ITEMS; i++) lens[i] = (size_t)snprintf(items[i], sizeof items[i], "%c:%08d", i % 2 ? 'a' : 'p', i / 2);

  bg_client *c = NULL;
  bg_options *o = NULL;
  char err[512];
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_POOL_SIZE, threads);
  if (bgt_client_open(&c, url, o, err, sizeof err) != BG_OK) bgb_die("open %s: %s", url, err);
  bg_options_free(o);

  bg_filter *one[MAX_THREADS], *spread[MAX_THREADS];
  char first[300], node[300], used[MAX_THREADS][300];
  one[0] = make_filter(c, "one", 0, NULL, first, sizeof first);
  for (int i = 1; i < threads; i++) one[i] = make_filter(c, "one", i, first, node, sizeof node);
  /* spread: a different master per filter, as long as there are masters left */
  int nused = 0;
  for (int i = 0; i < threads; i++) {
    bg_filter *f = NULL;
    for (int attempt = 0; attempt < 1000 && !f; attempt++) {
      char name[128];
      snprintf(name, sizeof name, "bloomguard-bench:cluster:%ld:probe:%d:%d", (long)getpid(), i, attempt);
      bg_filter *p;
      if (bg_filter_open(&p, c, name) != BG_OK || bg_filter_node(p, node, sizeof node, NULL) != BG_OK)
        bgb_die("probe: %s%s", bg_client_errmsg(c), NULL);
      bg_filter_close(p);
      int seen = 0;
      for (int u = 0; u < nused; u++) seen |= !strcmp(used[u], node);
      if (!seen || attempt == 999) {
        char got[300];
        snprintf(used[nused++ % MAX_THREADS], sizeof used[0], "%s", node);
        f = make_filter(c, "spread", i, node, got, sizeof got);
      }
    }
    spread[i] = f;
  }
  printf("bench_cluster: %d threads, one client; \"one\": %d filters on %s; \"spread\": on", threads, threads, first);
  for (int i = 0; i < threads; i++) {
    bg_filter_node(spread[i], node, sizeof node, NULL);
    printf(" %s", node);
  }
  printf("\n");

  double r_one[MAX_ROUNDS], r_spread[MAX_ROUNDS], ratio[MAX_ROUNDS];
  run_side(one, threads, 0.3);   /* warm the connections */
  run_side(spread, threads, 0.3);
  for (int r = 0; r < rounds; r++) {
    if (r % 2 == 0) {
      r_one[r] = run_side(one, threads, seconds);
      r_spread[r] = run_side(spread, threads, seconds);
    } else {
      r_spread[r] = run_side(spread, threads, seconds);
      r_one[r] = run_side(one, threads, seconds);
    }
    ratio[r] = r_spread[r] / r_one[r];
    fprintf(stderr, "  round %d: one master %.0f/s, spread %.0f/s (%.2fx)\n", r + 1, r_one[r], r_spread[r], ratio[r]);
  }
  printf("\n| side | items/s (median of %d x %.1f s) |\n|---|---:|\n", rounds, seconds);
  printf("| %d filters on 1 master | %.0f |\n", threads, bgb_median(r_one, rounds));
  printf("| %d filters on %d masters | %.0f |\n", threads, nused < threads ? nused : threads, bgb_median(r_spread, rounds));
  printf("\nspread / one master: %.2fx (median of per-round ratios)\n", bgb_median(ratio, rounds));

  for (int i = 0; i < threads; i++) {
    bg_filter_delete(one[i], NULL);
    bg_filter_delete(spread[i], NULL);
    bg_filter_close(one[i]);
    bg_filter_close(spread[i]);
  }
  bg_client_close(c);
  return 0;
}
