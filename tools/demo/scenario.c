/*
 * scenario.c - one scenario of bloomguard-demo: "the catalogue filter is rebuilt every hour
 * while queries keep coming", compressed into seconds.
 *
 *  - the catalogue (product:0 .. product:N-1) is loaded with a SWAP rotation before the clock starts;
 *  - query threads ask for product ids that are all in the catalogue, one per call, at a steady
 *    total rate: an "absent" answer is a false negative, a failed call an error. They go on until
 *    --seconds have passed and the last rebuild has committed (a naive rebuild of a large catalogue
 *    can outlast the scenario: its whole window is measured), at most until a hard limit where a
 *    rebuild still running is aborted;
 *  - the main thread follows a timeline: rotations with the scenario's strategy at 10 %, 40 % and
 *    70 % of the run (each starts when the previous one is over); degrade instead kills its own
 *    redis-server at 25 %, starts it again (empty: no persistence) 30 % of the run later and
 *    rebuilds (SWAP) 10 % after that, with bloomguard's default degrade policy on the readers'
 *    filter handle.
 */
#include "demo.h"
#include "cli.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROTATE_BATCH       65536
#define DEMO_STAGING_TTL_MS 30000
#define MAX_QUERIES_THREAD 100000000ull   /* a bound besides the hard limit */
#define TARGET_BUCKETS     160            /* time buckets per scenario (plot resolution) */
#define MIN_BUCKET_US      20000

const char *demo_kind_name(int kind) {
  static const char *const names[DEMO_NKINDS] = {"naive", "swap", "locked", "degrade"};
  return kind >= 0 && kind < DEMO_NKINDS ? names[kind] : "?";
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t item_name(char *buf, uint64_t id) {
  int n = snprintf(buf, DEMO_ITEM_MAX, "product:%llu", (unsigned long long)id);
  return (size_t)n;
}

/* xorshift64*: each thread its own, no locking */
static uint64_t next_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* ---- query threads -------------------------------------------------------------------- */
typedef struct reader {
  pthread_t tid;
  const demo_config *cfg;
  bg_filter *f;
  demo_series series;
  int64_t t0_ns, end_ns, hard_end_ns;
  atomic_int *done;
  atomic_int *rebuilding;  /* a rebuild is running: go on past end_ns until it ends */
  int index;
  uint64_t rng;
  char first_error[256];
  int64_t first_error_ns;  /* when, for picking the earliest over all threads */
} reader;

static void *read_loop(void *arg) {
  reader *rd = arg;
  bg_call *call = NULL;
  char item[DEMO_ITEM_MAX];
  rd->first_error_ns = -1;
  if (bg_call_new(&call) != BG_OK) {
    snprintf(rd->first_error, sizeof rd->first_error, "cannot allocate a bg_call");
    rd->first_error_ns = 0;
    return NULL;
  }
  /* a steady arrival rate, the same in every scenario, so that the counts compare; without it a
   * reader answered in 1 us by an open breaker would spin a million queries into the figures */
  int64_t interval = rd->cfg->rate > 0 ? (int64_t)(1e9 * rd->cfg->threads / rd->cfg->rate) : 0;
  int64_t next = rd->t0_ns + interval * rd->index / rd->cfg->threads; /* staggered */
  for (uint64_t n = 0; n < MAX_QUERIES_THREAD; n++) {
    if (atomic_load_explicit(rd->done, memory_order_relaxed) || *rd->cfg->stop) break;
    if (interval) {
      int64_t now = now_ns();
      if (now > next + 100000000) next = now; /* after a stall (a timeout) resume the pace, no burst */
      if (next > now) {
        struct timespec ts = {(time_t)((next - now) / 1000000000), (long)((next - now) % 1000000000)};
        nanosleep(&ts, NULL);
      }
      next += interval;
    }
    size_t len = item_name(item, next_rand(&rd->rng) % (uint64_t)rd->cfg->items);
    const void *p = item;
    uint8_t present = 0;
    int64_t start = now_ns();
    if (start >= rd->hard_end_ns ||
        (start >= rd->end_ns && !atomic_load_explicit(rd->rebuilding, memory_order_acquire)))
      break;
    int st = bg_filter_contains_many_ex(rd->f, call, &p, &len, 1, &present);
    int64_t end = now_ns();
    int outcome = st != BG_OK ? DEMO_OUT_ERROR : present ? DEMO_OUT_OK : DEMO_OUT_FALSE_NEG;
    int degraded = st == BG_OK && bg_call_source(call) != BG_SOURCE_REDIS;
    demo_series_record(&rd->series, (start - rd->t0_ns) / 1000, (double)(end - start) / 1000.0, outcome,
                       degraded);
    if (st != BG_OK && rd->first_error_ns < 0) {
      rd->first_error_ns = start;
      snprintf(rd->first_error, sizeof rd->first_error, "%s: %s", cli_status_name(st), bg_call_errmsg(call));
    }
  }
  bg_call_free(call);
  return NULL;
}

/* ---- rotations ------------------------------------------------------------------------ */
typedef struct abort_when {
  const demo_config *cfg;
  int64_t hard_end_ns;  /* 0: no limit (loading) */
} abort_when;

static int stop_requested(void *ud, int phase, uint64_t items, uint64_t done, uint64_t total) {
  const abort_when *w = ud;
  (void)phase; (void)items; (void)done; (void)total;
  /* Ctrl-C or the hard limit abort the rotation cleanly */
  return *w->cfg->stop != 0 || (w->hard_end_ns && now_ns() >= w->hard_end_ns);
}

/*
 * Rebuilds f from the whole catalogue with the strategy. Returns the status; the message goes to
 * err. *secs: begin to commit.
 */
static int rebuild(const demo_config *cfg, bg_filter *f, int strategy, int64_t hard_end_ns, double *secs, char *err,
                   size_t errlen) {
  abort_when w = {cfg, hard_end_ns};
  bg_rotation *r = NULL;
  char *names = malloc((size_t)ROTATE_BATCH * DEMO_ITEM_MAX);
  const void **ptrs = malloc((size_t)ROTATE_BATCH * sizeof *ptrs);
  size_t *lens = malloc((size_t)ROTATE_BATCH * sizeof *lens);
  int64_t t0 = now_ns();
  int st = BG_ENOMEM;
  err[0] = 0;
  if (!names || !ptrs || !lens) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  /* hash on half the cores: the demo's Redis and readers share this machine with the rotator,
   * which in production usually runs elsewhere; all cores would starve them and measure that */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  bg_options *o = NULL;
  st = bg_options_new(&o);
  if (st == BG_OK) st = bg_options_set_int(o, BG_OPT_ROTATE_THREADS, cpus >= 4 ? cpus / 2 : 1);
  /* the staging keys - the "spare" bitmap a commit keeps for the next rotation among them - expire
   * on their own; bg_filter_delete leaves them: 30 s (3 lease renewals) rather than 5 min on a
   * server named with --url */
  if (st == BG_OK) st = bg_options_set_int(o, BG_OPT_ROTATE_STAGING_TTL_MS, DEMO_STAGING_TTL_MS);
  if (st == BG_OK) st = bg_rotation_begin(&r, f, cfg->items, cfg->fpp, strategy, o);
  bg_options_free(o);
  if (st != BG_OK) {
    snprintf(err, errlen, "%s: %s", cli_status_name(st), bg_filter_errmsg(f));
    goto out;
  }
  bg_rotation_set_progress(r, stop_requested, &w);
  for (int64_t next = 0; next < cfg->items && st == BG_OK;) {
    size_t n = 0;
    for (; n < ROTATE_BATCH && next < cfg->items; n++, next++) {
      ptrs[n] = names + n * DEMO_ITEM_MAX;
      lens[n] = item_name(names + n * DEMO_ITEM_MAX, (uint64_t)next);
    }
    st = bg_rotation_add_many(r, ptrs, lens, n);
  }
  if (st == BG_OK) st = bg_rotation_commit(r);
  if (st != BG_OK) snprintf(err, errlen, "%s: %s", cli_status_name(st), bg_rotation_errmsg(r));
out:
  bg_rotation_free(r);
  free(names);
  free(ptrs);
  free(lens);
  *secs = (double)(now_ns() - t0) / 1e9;
  return st;
}

/* ---- the timeline --------------------------------------------------------------------- */
typedef struct timeline {
  const demo_config *cfg;
  demo_result *r;
  bg_filter *f;
  int64_t t0_ns, end_ns, hard_end_ns;
  double rebuild_sum;
  atomic_int rebuilding;
  double last_end_s;      /* when the last rebuild or outage ended */
} timeline;

static double since(const timeline *tl) { return (double)(now_ns() - tl->t0_ns) / 1e9; }

/* Sleeps until fraction `at` of the run; 0 if there is still time for an event, -1 if not. */
static int wait_for(const timeline *tl, double at) {
  int64_t when = tl->t0_ns + (int64_t)(at * tl->cfg->seconds * 1e9);
  for (;;) {
    int64_t now = now_ns();
    if (*tl->cfg->stop || now >= tl->end_ns - (int64_t)(0.05 * tl->cfg->seconds * 1e9)) return -1;
    if (now >= when) return 0;
    int64_t left = when - now;
    struct timespec ts = {0, (long)(left < 10000000 ? left : 10000000)};
    nanosleep(&ts, NULL);
  }
}

/* Sleeps for fraction `part` of the run from now, or until Ctrl-C. */
static void sleep_for(const timeline *tl, double part) {
  int64_t until = now_ns() + (int64_t)(part * tl->cfg->seconds * 1e9);
  while (!*tl->cfg->stop) {
    int64_t left = until - now_ns();
    if (left <= 0) return;
    struct timespec ts = {0, (long)(left < 10000000 ? left : 10000000)};
    nanosleep(&ts, NULL);
  }
}

static demo_mark *add_mark(demo_result *r, int kind, double t0) {
  if (r->nmarks >= DEMO_MAX_MARKS) return NULL;
  demo_mark *m = &r->marks[r->nmarks++];
  m->kind = kind;
  m->t0 = m->t1 = t0;
  return m;
}

static void timed_rebuild(timeline *tl, int strategy) {
  char err[512];
  double secs;
  demo_mark *m = add_mark(tl->r, DEMO_MARK_ROTATION, since(tl));
  atomic_store_explicit(&tl->rebuilding, 1, memory_order_release);
  int st = rebuild(tl->cfg, tl->f, strategy, tl->hard_end_ns, &secs, err, sizeof err);
  tl->last_end_s = since(tl);
  atomic_store_explicit(&tl->rebuilding, 0, memory_order_release);
  if (m) {
    m->t1 = tl->last_end_s;
    m->ok = st == BG_OK;
  }
  if (st == BG_OK) {
    tl->r->rotations_ok++;
    tl->rebuild_sum += secs;
    if (secs > tl->r->rebuild_max_s) tl->r->rebuild_max_s = secs;
  } else {
    tl->r->rotations_failed++;
    if (!tl->r->note[0]) snprintf(tl->r->note, sizeof tl->r->note, "rotation failed: %.200s", err);
  }
}

static void run_timeline(timeline *tl) {
  static const double rotations_at[] = {0.10, 0.40, 0.70};
  const demo_config *cfg = tl->cfg;
  demo_result *r = tl->r;
  if (r->kind != DEMO_DEGRADE) {
    static const int strategy[] = {BG_ROTATE_NAIVE, BG_ROTATE_SWAP, BG_ROTATE_LOCKED};
    for (size_t i = 0; i < sizeof rotations_at / sizeof rotations_at[0]; i++)
      if (wait_for(tl, rotations_at[i]) == 0) timed_rebuild(tl, strategy[r->kind]);
    return;
  }
  /* times relative to the outage's real start: on a busy machine the timeline may run late, and
   * the outage must still be long enough for the breaker's cooldown and probes to show */
  char err[512];
  if (wait_for(tl, 0.25) != 0) return;
  /* a crash (SIGKILL), not a shutdown: SIGTERM is only acted on at Redis's next cron tick */
  bgt_server_kill(cfg->server);
  demo_mark *m = add_mark(r, DEMO_MARK_OUTAGE, since(tl));
  /* down for 30 % of the run (cut short by Ctrl-C: the server must be back to clean up) */
  sleep_for(tl, 0.30);
  int st = bgt_server_restart(cfg->server, err, sizeof err);
  if (m) {
    m->t1 = since(tl);
    m->ok = st == 0;
  }
  if (st != 0) {
    r->harness_failed = 1;
    snprintf(r->note, sizeof r->note, "could not restart redis-server: %.200s", err);
    return;
  }
  /* it came back empty (no persistence): the rebuild a little later restores the filter */
  sleep_for(tl, 0.10);
  if (!*cfg->stop) timed_rebuild(tl, BG_ROTATE_SWAP);
}

/* ---- the scenario --------------------------------------------------------------------- */
/* Rebuilds are batch jobs: their client waits longer for a busy server than the readers' does
 * (a naive rebuild's re-adds on a loaded machine took over the library's 1 s default). */
#define ROTATOR_COMMAND_TIMEOUT_MS 10000

/* The readers' client (pool: one connection per thread) or the rotator's (pool 4: the rotation,
 * its lease renewal, the lock). command_timeout_ms 0: the library's default. */
static int open_client(const demo_config *cfg, int pool, int64_t command_timeout_ms, const char *client_name,
                       bg_client **out, char *err, size_t errlen) {
  bg_options *o = NULL;
  int st = bg_options_new(&o);
  if (st == BG_OK) st = bg_options_set_int(o, BG_OPT_POOL_SIZE, pool);
  if (st == BG_OK && cfg->timeout_ms) st = bg_options_set_int(o, BG_OPT_CONNECT_TIMEOUT_MS, cfg->timeout_ms);
  if (st == BG_OK && command_timeout_ms) st = bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, command_timeout_ms);
  if (st == BG_OK) st = bg_options_set_str(o, BG_OPT_CLIENT_NAME, client_name);
  const char *pw = cli_password(); /* loaded once by main */
  if (st == BG_OK && pw) st = bg_options_set_str(o, BG_OPT_PASSWORD, pw);
  err[0] = 0;
  if (st == BG_OK) st = cli_client_open(out, cfg->url, o, err, errlen);
  else snprintf(err, errlen, "options rejected by the library");
  bg_options_free(o);
  return st;
}

/* LOCKED comes with the lock engine: a library without it says BG_ENOTSUP (or BG_EINVAL, older). */
static int locked_available(bg_filter *probe, char *err, size_t errlen) {
  bg_rotation *r = NULL;
  int st = bg_rotation_begin(&r, probe, 1000, 0.01, BG_ROTATE_LOCKED, NULL);
  if (st == BG_OK) {
    bg_rotation_free(r); /* aborts it */
    bg_filter_delete(probe, NULL);
    return 1;
  }
  snprintf(err, errlen, "%s: %s", cli_status_name(st), bg_filter_errmsg(probe));
  return st == BG_ENOTSUP || st == BG_EINVAL ? 0 : -1;
}

static int harness_fail(demo_result *r, const char *what, const char *err) {
  r->harness_failed = 1;
  snprintf(r->note, sizeof r->note, "%s: %.200s", what, err);
  return -1;
}

int demo_run_scenario(const demo_config *cfg, demo_result *r) {
  char name[256], err[512];
  bg_client *client = NULL, *rclient = NULL;
  bg_filter *f = NULL, *rf = NULL;  /* the readers' handle, the rotator's (as separate processes) */
  reader *readers = NULL;
  atomic_int done;
  int rc = 0, started = 0;
  demo_events rotator_events, reader_events;   /* outlive both clients (closed below) */
  r->name = demo_kind_name(r->kind);
  atomic_init(&done, 0);

  if (r->kind == DEMO_DEGRADE && !cfg->server) {
    snprintf(r->note, sizeof r->note, "skipped: --url names a server the demo did not start, and it stops only its own");
    return 0;
  }
  int64_t rotator_timeout = cfg->timeout_ms > ROTATOR_COMMAND_TIMEOUT_MS ? cfg->timeout_ms : ROTATOR_COMMAND_TIMEOUT_MS;
  if (open_client(cfg, 4, rotator_timeout, "bloomguard-demo-rotator", &rclient, err, sizeof err) != BG_OK)
    return harness_fail(r, "cannot connect", err);
  demo_events_attach(&rotator_events, rclient, r->name, "rotator");
  if (r->kind == DEMO_LOCKED) {
    bg_filter *probe = NULL;
    snprintf(name, sizeof name, "%slocked-probe", cfg->prefix);
    if (bg_filter_open(&probe, rclient, name) != BG_OK) {
      bg_client_close(rclient);
      return harness_fail(r, "cannot open the probe filter", name);
    }
    int ok = locked_available(probe, err, sizeof err);
    bg_filter_close(probe);
    if (ok <= 0) {
      bg_client_close(rclient);
      if (ok < 0) return harness_fail(r, "BG_ROTATE_LOCKED probe failed", err);
      snprintf(r->note, sizeof r->note, "n/a: not built (%.200s)", err);
      return 0;
    }
  }
  snprintf(name, sizeof name, "%s%s", cfg->prefix, r->name);
  if (open_client(cfg, cfg->threads, cfg->timeout_ms, "bloomguard-demo", &client, err, sizeof err) != BG_OK) {
    bg_client_close(rclient);
    return harness_fail(r, "cannot connect", err);
  }
  demo_events_attach(&reader_events, client, r->name, "readers");
  reader_events.t0_ns = rotator_events.t0_ns;
  if (bg_filter_open(&f, client, name) != BG_OK || bg_filter_open(&rf, rclient, name) != BG_OK) {
    bg_filter_close(f);
    bg_client_close(client);
    bg_client_close(rclient);
    return harness_fail(r, "cannot open the filter", name);
  }
  bg_filter_delete(rf, NULL); /* a leftover of an interrupted run */
  if (rebuild(cfg, rf, BG_ROTATE_SWAP, 0, &r->load_s, err, sizeof err) != BG_OK) {
    rc = harness_fail(r, "loading the catalogue failed", err);
    goto out;
  }
  if (r->kind == DEMO_DEGRADE) {
    bg_policy *p = NULL;
    int st = bg_policy_new(&p); /* the defaults: retry briefly, then assume present; breaker */
    if (st == BG_OK) st = bg_filter_set_policy(f, p);
    bg_policy_free(p);
    if (st != BG_OK) {
      rc = harness_fail(r, "cannot set the policy", cli_status_name(st));
      goto out;
    }
  }

  int64_t bucket_us = (int64_t)(cfg->seconds * 1e6 / TARGET_BUCKETS);
  if (bucket_us < MIN_BUCKET_US) bucket_us = MIN_BUCKET_US;
  /* a rebuild still running this long after the scenario's end is aborted */
  double hard_s = cfg->seconds + (cfg->seconds * 3 > 60 ? cfg->seconds * 3 : 60);
  int nbuckets = (int)ceil(hard_s * 1e6 / (double)bucket_us) + 1;
  readers = calloc((size_t)cfg->threads, sizeof *readers);
  if (!readers || demo_series_init(&r->series, nbuckets, bucket_us) != 0) {
    rc = harness_fail(r, "out of memory", "series");
    goto out;
  }
  timeline tl = {cfg, r, rf, now_ns(), 0, 0, 0, 0, 0};
  atomic_init(&tl.rebuilding, 0);
  tl.end_ns = tl.t0_ns + (int64_t)(cfg->seconds * 1e9);
  tl.hard_end_ns = tl.t0_ns + (int64_t)(hard_s * 1e9);
  for (int i = 0; i < cfg->threads; i++) {
    reader *rd = &readers[i];
    rd->cfg = cfg;
    rd->f = f;
    rd->t0_ns = tl.t0_ns;
    rd->end_ns = tl.end_ns;
    rd->hard_end_ns = tl.hard_end_ns;
    rd->done = &done;
    rd->rebuilding = &tl.rebuilding;
    rd->index = i;
    rd->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)tl.t0_ns;
    if (!rd->rng) rd->rng = 1;
    if (demo_series_init(&rd->series, nbuckets, bucket_us) != 0) {
      rc = harness_fail(r, "out of memory", "series");
      break;
    }
    if (pthread_create(&rd->tid, NULL, read_loop, rd) != 0) {
      demo_series_free(&rd->series);
      rc = harness_fail(r, "cannot start a query thread", "pthread_create");
      break;
    }
    started++;
  }
  if (rc == 0) run_timeline(&tl);
  if (r->harness_failed) rc = -1;
  /* the readers go on until the scenario's end, or the end of the last rebuild if later */
  while (rc == 0 && !*cfg->stop && now_ns() < tl.end_ns) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&done, 1);
  /* the readers' own rule: --seconds, or the end of a rebuild running then */
  r->duration_s = tl.last_end_s > cfg->seconds ? tl.last_end_s : cfg->seconds;
  if (*cfg->stop || rc != 0) r->duration_s = (double)(now_ns() - tl.t0_ns) / 1e9;
  int64_t first_ns = -1;
  for (int i = 0; i < started; i++) {
    pthread_join(readers[i].tid, NULL);
    demo_series_merge(&r->series, &readers[i].series);
    demo_series_free(&readers[i].series);
    if (readers[i].first_error_ns >= 0 && (first_ns < 0 || readers[i].first_error_ns < first_ns)) {
      first_ns = readers[i].first_error_ns;
      snprintf(r->first_error, sizeof r->first_error, "%s", readers[i].first_error);
    }
  }
  r->ran = rc == 0;
  if (r->rotations_ok) r->rebuild_mean_s = tl.rebuild_sum / r->rotations_ok;

  for (int k = 0; k < r->series.nbuckets; k++) {
    r->queries += r->series.b[k].queries;
    r->errors += r->series.b[k].errors;
    r->false_neg += r->series.b[k].false_neg;
    r->degraded += r->series.b[k].degraded;
  }
  uint32_t bins[DEMO_LAT_BINS];
  demo_series_total(&r->series, bins);
  r->p50_us = demo_bins_quantile(bins, 0.50);
  r->p99_us = demo_bins_quantile(bins, 0.99);
  r->max_us = demo_bins_max(bins);
  static const int answer_stat[6] = {0, BG_STAT_ANSWERS_REDIS, BG_STAT_ANSWERS_SNAPSHOT, BG_STAT_ANSWERS_CALLBACK,
                                     BG_STAT_ANSWERS_ASSUMED_PRESENT, BG_STAT_ANSWERS_ASSUMED_ABSENT};
  for (int s = 1; s < 6; s++) bg_filter_stat(f, answer_stat[s], &r->answers[s]);
  bg_filter_stat(f, BG_STAT_RETRIES, &r->retries);
  bg_filter_stat(f, BG_STAT_BREAKER_TRIPS, &r->breaker_trips);
  bg_filter_stat(f, BG_STAT_BREAKER_REJECTED, &r->breaker_rejected);
out:
  free(readers);
  bg_filter_delete(rf, NULL); /* leave nothing behind on someone else's server */
  bg_filter_close(rf);
  bg_filter_close(f);
  bg_client_close(client);
  bg_client_close(rclient);
  return rc;
}

void demo_result_free(demo_result *r) { demo_series_free(&r->series); }
