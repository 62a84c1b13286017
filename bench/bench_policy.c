/*
 * bench_policy: what the degrade policy layer costs on the happy path (Redis answers every call).
 * Run by hand (see bench/README.md); not a test.
 *
 * Part 1, against a real redis-server (its own on a free 127.0.0.1 port, or --url): two handles on
 * the same filter and the same client - "none" without a policy (the layer still counts its
 * calls) and "policy" with the default policy plus a fallback callback and a snapshot in the
 * chain - query the same sequence (alternating added and never-added items) with
 * bg_filter_contains (batch 1) or bg_filter_contains_many (batch 100), from 1 thread (pool of 1
 * connection) and from 2 threads sharing the handle (pool of 2: the breaker and counters are
 * shared cache lines). Within each thread the calls alternate between the sides (ABBA), each
 * timed, so the load of other processes on a shared machine falls on both alike; a side's rate is
 * its items over the time its own calls took. The result is the median of the per-round
 * policy/none ratios. Target: >= 0.95.
 *
 * Part 2, no server: the layer alone, ns per call, around an attempt that returns at once
 * (bgi_guard_run with a no-op step; the step called directly as the baseline): with no policy,
 * with the default policy, and with the breaker open (the answer Redis-down callers get).
 *
 *   bench_policy [--url URL] [--rounds N (5)] [--seconds S per round (2.0)]
 * Exit status: 0 target met, 3 missed, 1 or 2 on errors.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"
#include "policy/guard.h"

#define N_PRESENT 100000u
#define N_QUERY (2 * N_PRESENT)
#define MAX_ROUNDS 21
#define MAX_THREADS 2

static const char **g_items;
static size_t *g_lens;

typedef struct side {
  const char *name;
  bg_filter *f;
} side;

/*
 * One worker: calls alternate between the two sides in an ABBA pattern (none, policy, policy,
 * none, ...), each call timed on its own, so a burst of load from other processes on this shared
 * machine lands on both sides alike; per side it adds up the items and the time its calls took.
 */
typedef struct worker {
  side *sides;
  size_t batch;
  double seconds;
  size_t cursor;
  uint64_t items[2];
  double busy[2];
  uint64_t present;   /* keeps answers alive; a sanity total */
  int failed;
} worker;

static int one_call(worker *w, bg_filter *f, size_t from) {
  uint8_t present[100];
  if (w->batch == 1) {
    int p = 0;
    int st = bg_filter_contains(f, g_items[from], g_lens[from], &p);
    w->present += (uint64_t)p;
    return st;
  }
  int st = bg_filter_contains_many(f, (const void *const *)(g_items + from), g_lens + from, w->batch, present);
  for (size_t i = 0; i < w->batch; i++) w->present += present[i];
  return st;
}

static void *work(void *arg) {
  worker *w = arg;
  double start = bgb_now_s(), t = start;
  for (uint64_t n = 0; t - start < w->seconds && !w->failed; n++) {
    size_t from = w->cursor;
    int i = (int)((n ^ (n >> 1)) & 1);   /* 0 1 1 0 0 1 1 0 ...: ABBA */
    /* both sides query the same sequence: the cursor moves after each pair */
    if (n & 1) w->cursor = from + w->batch >= N_QUERY ? 0 : from + w->batch;
    if (one_call(w, w->sides[i].f, from) != BG_OK) w->failed = 1 + i;
    double t1 = bgb_now_s();
    w->busy[i] += t1 - t;
    w->items[i] += w->batch;
    t = t1;
  }
  return NULL;
}

/* One round of `seconds`: `threads` workers; rate[i] = side i's items per second of its own calls. */
static void run_round(side *sides, size_t batch, int threads, double seconds, double *rate) {
  pthread_t th[MAX_THREADS];
  worker w[MAX_THREADS];
  static size_t cursors[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].sides = sides, w[i].batch = batch, w[i].seconds = seconds;
    /* threads start half the sequence apart; a cursor is a multiple of the batch (N_QUERY is one of 100) */
    w[i].cursor = (cursors[i] + (size_t)i * (N_QUERY / 2)) % N_QUERY / batch * batch;
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  uint64_t items[2] = {0, 0};
  double busy[2] = {0, 0};
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (w[i].failed) bgb_die("%s: a query failed: %s", sides[w[i].failed - 1].name,
                             bg_filter_errmsg(sides[w[i].failed - 1].f));
    cursors[i] = (w[i].cursor + N_QUERY - (size_t)i * (N_QUERY / 2)) % N_QUERY;
    for (int j = 0; j < 2; j++) items[j] += w[i].items[j], busy[j] += w[i].busy[j];
  }
  /* per thread, calls are sequential: items / (busy / threads) is the aggregate rate */
  for (int j = 0; j < 2; j++) rate[j] = (double)items[j] * threads / busy[j];
}

/* ---- part 2: the layer alone ---------------------------------------------------------------------- */

static atomic_int sink;

/* The steps are tasks (common/task.h) that end when first resumed: one per thread. */
typedef struct step_task {
  bgi_task t;
  size_t *done;
} step_task;

static int resume_noop(bgi_task *t, int st, bgi_err *err) {
  (void)st, (void)err;
  atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
  *((step_task *)t)->done = 1;
  return bgi_task_done(t, BG_OK);
}

static int resume_refused(bgi_task *t, int st, bgi_err *err) {
  (void)st;
  *((step_task *)t)->done = 0;
  return bgi_task_done(t, bgi_err_set(err, BG_ECONN, "connection refused"));
}

static bgi_task *step_of(step_task *s, bgi_resume_fn fn, size_t *done) {
  bgi_task_init(&s->t, fn);
  s->done = done;
  return &s->t;
}

static bgi_task *noop_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  (void)deadline_ns, (void)from;
  return step_of(ctx, resume_noop, done);
}

static bgi_task *refused_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  (void)deadline_ns, (void)from;
  return step_of(ctx, resume_refused, done);
}

typedef struct layer_run {
  bgi_guard *g;      /* NULL: call the attempt directly */
  bgi_attempt_fn fn;
  long calls;
  double ns;
} layer_run;

static void *layer_work(void *arg) {
  layer_run *r = arg;
  step_task step;
  const void *item = "x";
  size_t len = 1;
  uint8_t present;
  bgi_op op = {0, r->fn, &step, &item, &len, 1, &present, NULL};
  double t0 = bgb_now_s();
  for (long i = 0; i < r->calls; i++) {
    if (r->g) {
      bgi_err err;
      int source;
      err.status = 0, err.msg[0] = 0;
      bgi_guard_run(r->g, &op, 0, NULL, &source, &err);
    } else {
      bgi_err err;
      size_t done;
      err.status = 0;
      bgi_task *t = r->fn(&step, 0, 0, &done);
      t->resume(t, BG_OK, &err);
    }
  }
  r->ns = (bgb_now_s() - t0) * 1e9 / (double)r->calls;
  return NULL;
}

/* Best of 5 of ns per call, each of `threads` threads making `calls` calls at once. */
static double layer_ns(bgi_guard *g, bgi_attempt_fn fn, int threads, long calls) {
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    pthread_t th[MAX_THREADS];
    layer_run r[MAX_THREADS];
    double worst = 0;
    for (int i = 0; i < threads; i++) {
      r[i] = (layer_run){g, fn, calls, 0};
      pthread_create(&th[i], NULL, layer_work, &r[i]);
    }
    for (int i = 0; i < threads; i++) {
      pthread_join(th[i], NULL);
      if (r[i].ns > worst) worst = r[i].ns;
    }
    if (worst < best) best = worst;
  }
  return best;
}

static int decline(void *userdata, const void *const *items, const size_t *lens, size_t n, uint8_t *present) {
  (void)userdata, (void)items, (void)lens, (void)n, (void)present;
  return 1;
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--url redis://host:port | unix:///path] [--rounds N (1..%d, default 5)] "
                  "[--seconds S per round (default 2.0)]\n", argv0, MAX_ROUNDS);
  exit(2);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int rounds = 5;
  double seconds = 2.0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = strtod(argv[++i], NULL);
    else usage(argv[0]);
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0.01 && seconds <= 30))
    usage(argv[0]);

  bgb_server srv = {0};
  url = bgb_server_or(url, &srv);
  char *pool = malloc((size_t)N_QUERY * 12);
  g_items = malloc(N_QUERY * sizeof *g_items);
  g_lens = malloc(N_QUERY * sizeof *g_lens);
  if (!pool || !g_items || !g_lens) bgb_die("out of memory%s%s", NULL, NULL);
  for (unsigned i = 0; i < N_QUERY; i++) {
    char *p = pool + (size_t)i * 12;
    g_lens[i] = (size_t)snprintf(p, 12, "%c:%08u", i % 2 ? 'a' : 'p', i / 2);
    g_items[i] = p;
  }

  char name[64], err[512];
  snprintf(name, sizeof name, "bloomguard-bench:policy:%ld", (long)getpid());
  bg_policy *policy;
  bg_policy_new(&policy);
  int chain[] = {BG_ACT_RETRY, BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_PRESENT};
  for (int c = BG_FAIL_NOTINIT; c <= BG_FAIL_CORRUPT; c++) bg_policy_set_chain(policy, c, chain, 4);
  bg_policy_set_fallback(policy, decline, NULL);

  printf("bench_policy: server %s%s; %d rounds x %.2f s, calls alternating none/policy (ABBA) in each thread; "
         "filter %s (1000000, 0.01), %u items added, queries alternate added / never added\n", url,
         srv.pid ? " (started by the benchmark)" : "", rounds, seconds, name, N_PRESENT);
  printf("\n%-7s %-7s %14s %14s %8s %8s %7s\n", "threads", "batch", "none items/s", "policy items/s", "ratio",
         "med/med", "result");
  int all_pass = 1;
  static const size_t batches[] = {1, 100};
  for (int threads = 1; threads <= MAX_THREADS; threads++) {
    bg_options *o;
    bg_client *cl;
    bg_options_new(&o);
    bg_options_set_int(o, BG_OPT_POOL_SIZE, threads);
    if (bgt_client_open(&cl, url, o, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
    bg_options_free(o);
    side sides[2] = {{"none", NULL}, {"policy", NULL}};
    for (int i = 0; i < 2; i++)
      if (bg_filter_open(&sides[i].f, cl, name) != BG_OK) bgb_die("open: %s%s", bg_client_errmsg(cl), NULL);
    if (threads == 1) {
      bg_filter_delete(sides[0].f, NULL);
      if (bg_filter_init(sides[0].f, 1000000, 0.01, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(sides[0].f), NULL);
      const void *ptrs[1000];
      size_t plens[1000];
      for (unsigned from = 0; from < N_PRESENT; from += 1000) {
        for (unsigned j = 0; j < 1000; j++) ptrs[j] = g_items[2 * (from + j)], plens[j] = g_lens[2 * (from + j)];
        if (bg_filter_add_many(sides[0].f, ptrs, plens, 1000, NULL) != BG_OK)
          bgb_die("add: %s%s", bg_filter_errmsg(sides[0].f), NULL);
      }
    }
    if (bg_filter_set_policy(sides[1].f, policy) != BG_OK) bgb_die("set_policy: %s%s", bg_filter_errmsg(sides[1].f), NULL);
    if (bg_filter_snapshot_refresh(sides[1].f) != BG_OK) bgb_die("snapshot: %s%s", bg_filter_errmsg(sides[1].f), NULL);
    for (int bi = 0; bi < 2; bi++) {
      size_t batch = batches[bi];
      double rate[2], ratios[MAX_ROUNDS], none[MAX_ROUNDS], pol[MAX_ROUNDS];
      run_round(sides, batch, threads, 0.2, rate);   /* warm-up */
      for (int r = 0; r < rounds; r++) {
        run_round(sides, batch, threads, seconds, rate);
        none[r] = rate[0], pol[r] = rate[1], ratios[r] = rate[1] / rate[0];
        fprintf(stderr, "  threads %d batch %3zu round %d: none %9.0f  policy %9.0f items/s  (%.3fx)\n", threads,
                batch, r + 1, rate[0], rate[1], ratios[r]);
      }
      double ratio = bgb_median(ratios, rounds), mn = bgb_median(none, rounds), mp = bgb_median(pol, rounds);
      int pass = ratio >= 0.95;
      all_pass &= pass;
      printf("%-7d %-7zu %14.0f %14.0f %7.3fx %7.3fx %7s\n", threads, batch, mn, mp, ratio, mp / mn,
             pass ? "pass" : "MISS");
    }
    /* every answer came from Redis: the policy side never degraded */
    int64_t redis = 0, queries = 0;
    bg_filter_stat(sides[1].f, BG_STAT_ANSWERS_REDIS, &redis);
    bg_filter_stat(sides[1].f, BG_STAT_QUERIES, &queries);
    if (redis != queries) bgb_die("the policy side degraded some answers%s%s", NULL, NULL);
    if (threads == MAX_THREADS) bg_filter_delete(sides[0].f, NULL);
    for (int i = 0; i < 2; i++) bg_filter_close(sides[i].f);
    bg_client_close(cl);
  }
  printf("target: policy/none >= 0.95 (ratio = median of per-round ratios; med/med = ratio of the median rates)\n");

  /* part 2 */
  bgi_guard g_none, g_pol, g_open;
  bgi_err e = {0};
  bgi_guard_init(&g_none);
  bgi_guard_init(&g_pol);
  bgi_guard_init(&g_open);
  bgi_guard_set_policy(&g_pol, policy, &e);
  bg_policy_set_int(policy, BG_POLICY_BREAKER_THRESHOLD, 1);
  bg_policy_set_int(policy, BG_POLICY_BREAKER_COOLDOWN_MS, 3600000);
  bgi_guard_set_policy(&g_open, policy, &e);
  {
    step_task step;
    bgi_op op = {0, refused_attempt, &step, NULL, NULL, 0, NULL, NULL};
    int source;
    bgi_guard_run(&g_open, &op, 0, NULL, &source, &e);   /* opens the breaker */
  }
  printf("\nthe layer alone (no I/O), ns per call, best of 5 runs of 2M calls per thread:\n");
  printf("%-7s %10s %12s %14s %16s\n", "threads", "direct", "no policy", "default+chain", "breaker open");
  for (int threads = 1; threads <= MAX_THREADS; threads++) {
    double d = layer_ns(NULL, noop_attempt, threads, 2000000), n = layer_ns(&g_none, noop_attempt, threads, 2000000),
           p = layer_ns(&g_pol, noop_attempt, threads, 2000000), o = layer_ns(&g_open, noop_attempt, threads, 2000000);
    printf("%-7d %10.1f %12.1f %14.1f %16.1f\n", threads, d, n, p, o);
  }
  printf("(breaker open: the call is answered by the chain - assumed present here - without an attempt)\n");
  bgi_guard_destroy(&g_none);
  bgi_guard_destroy(&g_pol);
  bgi_guard_destroy(&g_open);
  bg_policy_free(policy);

  printf("overall: %s\n", all_pass ? "target met" : "target missed");
  free(pool);
  free(g_items);
  free(g_lens);
  bgb_server_stop(&srv);
  return all_pass ? 0 : 3;
}
