/*
 * What operators see (include/bloomguard/observe.h), against a real redis-server:
 *  - the histograms count exactly the operations made, blocking and submitted, by operation and
 *    outcome, and agree with the counters; BG_OPT_HISTOGRAMS 0 records nothing (the control);
 *  - a real breaker trip (CLIENT PAUSE longer than the timeout): BREAKER_OPEN, then HALF_OPEN and
 *    CLOSED once the server is back, each on the thread of the query that moved it;
 *  - degraded answers: counted, and sampled at most BG_OPT_DEGRADED_EVENTS_PER_S a second, the
 *    samples' counts adding up to the answers; 0 tells none (the control);
 *  - a real rotation: BEGIN and COMMIT (strategy, items, bytes, duration), ABORT when asked (and by
 *    bg_rotation_free), the rotation histograms;
 *  - connections: the client's count is what CLIENT LIST shows; CLIENT KILL gives CONNECTION_LOST;
 *  - a lock whose key was deleted under its hold: LOCK_LOST on the renewal thread;
 *  - no observer, no cost: the same faults with no observer never reach bgi_obs_emit (counted by
 *    the hub), where with one every event does (the control shows the count moves);
 *  - the observer set and removed while threads query and the breaker flaps (TSan).
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>

#include "client/client.h"
#include "common/histogram.h"
#include "common/observe.h"
#include "filter/filter.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;

/* ---- an observer that records what it hears ------------------------------------------------------ */

#define MAX_EVENTS 4096

typedef struct event {
  int kind;
  char name[128];
  int64_t v[BG_EVENT_NVALUES];
  char msg[512];
  pthread_t thread;
  uint64_t at_ns;
} event;

typedef struct recorder {
  pthread_mutex_t mu;
  event ev[MAX_EVENTS];
  size_t n;
  atomic_long calls;
} recorder;

static void on_event(void *ud, int kind, const char *name, const int64_t *v, size_t nv, const char *msg) {
  recorder *r = ud;
  atomic_fetch_add(&r->calls, 1);
  pthread_mutex_lock(&r->mu);
  if (r->n < MAX_EVENTS && nv >= BG_EVENT_NVALUES) {
    event *e = &r->ev[r->n++];
    e->kind = kind;
    snprintf(e->name, sizeof e->name, "%s", name);
    memcpy(e->v, v, sizeof e->v);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    e->thread = pthread_self();
    e->at_ns = bgt_now_ns();
  }
  pthread_mutex_unlock(&r->mu);
}

static recorder *recorder_new(void) {
  recorder *r = calloc(1, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  return r;
}

static void recorder_free(recorder *r) {
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* The index of the first event of kind at or after from, or -1. */
static long find(recorder *r, int kind, size_t from) {
  long at = -1;
  pthread_mutex_lock(&r->mu);
  for (size_t i = from; i < r->n && at < 0; i++)
    if (r->ev[i].kind == kind) at = (long)i;
  pthread_mutex_unlock(&r->mu);
  return at;
}

static size_t count_kind(recorder *r, int kind) {
  size_t k = 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n; i++) k += r->ev[i].kind == kind;
  pthread_mutex_unlock(&r->mu);
  return k;
}

/* Waits (bounded) until an event of kind has been heard. */
static long wait_for(recorder *r, int kind, int timeout_ms) {
  uint64_t until = bgt_now_ns() + (uint64_t)timeout_ms * 1000000u;
  long at;
  while ((at = find(r, kind, 0)) < 0 && bgt_now_ns() < until) usleep(5000);
  return at;
}

/* ---- helpers ------------------------------------------------------------------------------------- */

static bg_client *open_client(int64_t timeout_ms, int64_t degraded_per_s, int histograms) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  char msg[256];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, timeout_ms));
  if (degraded_per_s >= 0) CHECK_OK(bg_options_set_int(o, BG_OPT_DEGRADED_EVENTS_PER_S, degraded_per_s));
  if (histograms >= 0) CHECK_OK(bg_options_set_int(o, BG_OPT_HISTOGRAMS, histograms));
  CHECK_OK(bgt_client_open(&c, srv.url, o, msg, sizeof msg));
  bg_options_free(o);
  return c;
}

static uint64_t hist_count(const bg_filter *f, int op, int outcome) {
  uint64_t n = 0;
  CHECK_OK(bg_filter_histogram(f, op, outcome, NULL, NULL, 0, &n, NULL));
  return n;
}

static int64_t stat_of(const bg_filter *f, int id) {
  int64_t v = -1;
  CHECK_OK(bg_filter_stat(f, id, &v));
  return v;
}

static int64_t client_stat(const bg_client *c, int id) {
  int64_t v = -1;
  CHECK_OK(bg_client_stat(c, id, &v));
  return v;
}

static bg_policy *breaker_policy(int64_t threshold, int64_t cooldown_ms) {
  bg_policy *p = NULL;
  int chain[] = {BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, threshold));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_COOLDOWN_MS, cooldown_ms));
  for (int cls = BG_FAIL_NOTINIT; cls <= BG_FAIL_CORRUPT; cls++) CHECK_OK(bg_policy_set_chain(p, cls, chain, 1));
  return p;
}

static void flush(void) { free(bgt_redis_cmd(&srv, "FLUSHALL")); }

/* ---- cases --------------------------------------------------------------------------------------- */

static void test_names_and_buckets(void) {
  CHECK_EQ_STR(bg_event_name(BG_EVENT_BREAKER_OPEN), "breaker_open");
  CHECK_EQ_STR(bg_event_name(BG_EVENT_LOCK_LOST), "lock_lost");
  for (int k = BG_EVENT_BREAKER_OPEN; k <= BG_EVENT_LOCK_LOST; k++) CHECK_MSG(bg_event_name(k), "kind %d unnamed", k);
  CHECK(bg_event_name(0) == NULL && bg_event_name(12) == NULL && bg_event_name(-1) == NULL);
  for (int op = 1; op <= BG_OP_MAX; op++) CHECK_MSG(bg_op_name(op), "op %d unnamed", op);
  CHECK(bg_op_name(0) == NULL && bg_op_name(BG_OP_MAX + 1) == NULL);
  CHECK_EQ_STR(bg_op_name(BG_OP_CONTAINS), "contains");
  CHECK_EQ_STR(bg_op_name(BG_OP_ROTATE_LOCKED), "rotate_locked");
  for (int o = 0; o <= BG_OUTCOME_MAX; o++) CHECK_MSG(bg_outcome_name(o), "outcome %d unnamed", o);
  CHECK_EQ_STR(bg_outcome_name(BG_FAIL_TIMEOUT), "timeout");
  CHECK_EQ_STR(bg_outcome_name(BG_OUTCOME_ABORTED), "aborted");
  CHECK(bg_outcome_name(BG_OUTCOME_MAX + 1) == NULL);
  /* bucket i holds 2^(i-1) us < d <= 2^i us */
  CHECK_EQ_INT(bgi_hist_bucket(0), 0);
  CHECK_EQ_INT(bgi_hist_bucket(1000), 0);
  CHECK_EQ_INT(bgi_hist_bucket(1001), 1);
  CHECK_EQ_INT(bgi_hist_bucket(2000), 1);
  CHECK_EQ_INT(bgi_hist_bucket(2001), 2);
  CHECK_EQ_INT(bgi_hist_bucket(64000), 6);
  CHECK_EQ_INT(bgi_hist_bucket(64001), 7);
  CHECK_EQ_INT(bgi_hist_bucket(134217728000ull), BG_HIST_BUCKETS - 2);
  CHECK_EQ_INT(bgi_hist_bucket(134217728001ull), BG_HIST_BUCKETS - 1);
  CHECK_EQ_INT(bgi_hist_bucket(UINT64_MAX), BG_HIST_BUCKETS - 1);
  /* the reader's bounds say the same, in seconds */
  bg_client *c = open_client(1000, -1, -1);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-names"));
  double bounds[BG_HIST_BUCKETS - 1];
  uint64_t counts[BG_HIST_BUCKETS];
  CHECK_OK(bg_filter_histogram(f, BG_OP_CONTAINS, BG_OUTCOME_OK, bounds, counts, BG_HIST_BUCKETS, NULL, NULL));
  CHECK(bounds[0] == 1e-6 && bounds[10] == 1024e-6 && bounds[BG_HIST_BUCKETS - 2] == 134217728e-6);
  CHECK_STATUS(bg_filter_histogram(f, BG_OP_CONTAINS, 0, bounds, counts, BG_HIST_BUCKETS - 1, NULL, NULL), BG_EINVAL);
  CHECK_STATUS(bg_filter_histogram(f, 0, 0, NULL, NULL, 0, NULL, NULL), BG_ENOTSUP);
  CHECK_STATUS(bg_filter_histogram(f, 1, BG_OUTCOME_MAX + 1, NULL, NULL, 0, NULL, NULL), BG_ENOTSUP);
  CHECK_STATUS(bg_filter_histogram(NULL, 1, 0, NULL, NULL, 0, NULL, NULL), BG_EINVAL);
  int64_t v;
  CHECK_STATUS(bg_client_stat(c, 999, &v), BG_ENOTSUP);
  CHECK_STATUS(bg_client_stat(NULL, BG_CLIENT_STAT_CONNECTIONS, &v), BG_EINVAL);
  CHECK_STATUS(bg_client_set_observer(NULL, on_event, NULL), BG_EINVAL);
  bg_filter_close(f);
  bg_client_close(c);
}

typedef struct sums {
  size_t got;
} sums;

static void count_completion(bg_completion *cp, void *ctx) {
  sums *s = ctx;
  CHECK_OK(bg_completion_status(cp));
  s->got++;
}

/* Polls q until want completions came (bounded). */
static size_t drain(bg_queue *q, size_t want, void (*fn)(bg_completion *, void *), void *ctx) {
  size_t got = 0;
  uint64_t until = bgt_now_ns() + 10ull * 1000000000ull;
  while (got < want && bgt_now_ns() < until) {
    struct pollfd p = {.fd = bg_queue_fd(q), .events = POLLIN};
    poll(&p, 1, 100);
    bg_completion *cs[64];
    size_t n = 0;
    CHECK_OK(bg_queue_poll(q, 0, cs, 64, &n));
    for (size_t i = 0; i < n; i++) fn(cs[i], ctx);
    got += n;
  }
  return got;
}

/* Runs the same mix of operations on a fresh filter of a client with or without histograms:
 * 50 contains, 20 adds (10 single, 10 batches), the admin operations, 2 failures (contains and
 * count of a filter never initialized: BG_ENOTINIT), and 30 submitted contains and 5 adds. */
static void run_mix(bg_client *c, bg_filter *f, bg_filter *missing) {
  int created, present, applied, deleted;
  int64_t count;
  uint64_t size;
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  for (int i = 0; i < 10; i++) {
    char item[16];
    snprintf(item, sizeof item, "i%d", i);
    CHECK_OK(bg_filter_add(f, item, strlen(item), NULL));
    const void *items[2] = {item, "x"};
    size_t lens[2] = {strlen(item), 1};
    CHECK_OK(bg_filter_add_many(f, items, lens, 2, NULL));
  }
  for (int i = 0; i < 50; i++) CHECK_OK(bg_filter_contains(f, "i1", 2, &present));
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_OK(bg_filter_info(f, &size, NULL, NULL, NULL));
  CHECK_OK(bg_filter_expire(f, 100000, &applied));
  CHECK_OK(bg_filter_persist(f, &applied));
  CHECK_STATUS(bg_filter_contains(missing, "a", 1, &present), BG_ENOTINIT);
  CHECK_STATUS(bg_filter_count(missing, &count), BG_ENOTINIT);
  bg_queue *q = NULL;
  CHECK_OK(bg_queue_open(&q, c));
  for (uint64_t t = 0; t < 30; t++) CHECK_OK(bg_filter_contains_submit(f, q, t, "i2", 2));
  for (uint64_t t = 30; t < 35; t++) CHECK_OK(bg_filter_add_submit(f, q, t, "q", 1));
  sums s = {0};
  CHECK_EQ_INT(drain(q, 35, count_completion, &s), 35);
  bg_queue_close(q);
  CHECK_OK(bg_filter_delete(f, &deleted));
}

static void test_histograms_count_operations(void) {
  flush();
  bg_client *c = open_client(1000, -1, -1);
  bg_filter *f = NULL, *missing = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-hist"));
  CHECK_OK(bg_filter_open(&missing, c, "obs-hist-missing"));
  run_mix(c, f, missing);
  CHECK_EQ_U64(hist_count(f, BG_OP_CONTAINS, BG_OUTCOME_OK), 80);
  CHECK_EQ_U64(hist_count(f, BG_OP_ADD, BG_OUTCOME_OK), 25);
  CHECK_EQ_U64(hist_count(f, BG_OP_INIT, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_COUNT, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_INFO, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_EXPIRE, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_PERSIST, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_DELETE, BG_OUTCOME_OK), 1);
  CHECK_EQ_U64(hist_count(missing, BG_OP_CONTAINS, BG_FAIL_NOTINIT), 1);
  CHECK_EQ_U64(hist_count(missing, BG_OP_COUNT, BG_FAIL_NOTINIT), 1);
  CHECK_EQ_U64(hist_count(missing, BG_OP_CONTAINS, BG_OUTCOME_OK), 0);
  /* they agree with the counters */
  CHECK_EQ_U64(hist_count(f, BG_OP_CONTAINS, BG_OUTCOME_OK), (uint64_t)stat_of(f, BG_STAT_QUERIES));
  CHECK_EQ_U64(hist_count(f, BG_OP_ADD, BG_OUTCOME_OK), (uint64_t)stat_of(f, BG_STAT_ADDS));
  /* the buckets add up to the count, the sum is plausible (each call took more than 1 us, and
   * together less than the run) */
  uint64_t counts[BG_HIST_BUCKETS], n = 0, total = 0;
  double sum = 0;
  CHECK_OK(bg_filter_histogram(f, BG_OP_CONTAINS, BG_OUTCOME_OK, NULL, counts, BG_HIST_BUCKETS, &n, &sum));
  for (int i = 0; i < BG_HIST_BUCKETS; i++) total += counts[i];
  CHECK_EQ_U64(total, n);
  CHECK_MSG(sum > 80e-6 && sum < 60.0, "sum of 80 contains: %f s", sum);
  CHECK_EQ_U64(counts[0], 0);   /* no round trip takes 1 us or less */
  bg_filter_close(missing);
  bg_filter_close(f);
  bg_client_close(c);
}

/* The control: with BG_OPT_HISTOGRAMS 0 the same mix records nothing (so the counts above come
 * from the recording, not from something else that counts). */
static void test_histograms_off_record_nothing(void) {
  flush();
  bg_client *c = open_client(1000, -1, 0);
  bg_filter *f = NULL, *missing = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-hist-off"));
  CHECK_OK(bg_filter_open(&missing, c, "obs-hist-off-missing"));
  run_mix(c, f, missing);
  for (int op = 1; op <= BG_OP_MAX; op++)
    for (int o = 0; o <= BG_OUTCOME_MAX; o++) {
      CHECK_MSG(hist_count(f, op, o) == 0, "op %d outcome %d recorded with histograms off", op, o);
      CHECK_MSG(hist_count(missing, op, o) == 0, "op %d outcome %d recorded with histograms off", op, o);
    }
  CHECK_EQ_INT(stat_of(f, BG_STAT_QUERIES), 80);   /* the counters still count */
  bg_filter_close(missing);
  bg_filter_close(f);
  bg_client_close(c);
}

/* A real breaker trip: the server paused longer than the timeout. */
static void test_breaker_events(void) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(150, -1, -1);
  bg_filter *f = NULL;
  int present, created;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_filter_open(&f, c, "obs-breaker"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  bg_policy *p = breaker_policy(3, 300);
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  free(bgt_redis_cmd(&srv, "CLIENT PAUSE 1500 ALL"));
  for (int i = 0; i < 6; i++) CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_EQ_INT(stat_of(f, BG_STAT_BREAKER_TRIPS), 1);
  long open = find(r, BG_EVENT_BREAKER_OPEN, 0);
  CHECK_MSG(open >= 0, "no BREAKER_OPEN event after the trip");
  if (open >= 0) {
    event *e = &r->ev[open];
    CHECK_EQ_STR(e->name, "obs-breaker");
    CHECK_EQ_INT(e->v[BG_EV_STATUS], BG_ETIMEOUT);
    CHECK_EQ_INT(e->v[BG_EV_COUNT], 3);
    CHECK_EQ_INT(e->v[BG_EV_DURATION_US], 300000);
    CHECK(pthread_equal(e->thread, pthread_self()));
    CHECK_CONTAINS(e->msg, "obs-breaker");
    CHECK_CONTAINS(e->msg, "open");
  }
  CHECK_MSG(bgt_redis_wait_pong(&srv, 5000) == 0, "the pause did not end");
  usleep(350 * 1000);   /* the cooldown: the next call is the probe */
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  long half = find(r, BG_EVENT_BREAKER_HALF_OPEN, 0), closed = find(r, BG_EVENT_BREAKER_CLOSED, 0);
  CHECK_MSG(half > open && closed > half, "events out of order: open %ld, half-open %ld, closed %ld", open, half,
            closed);
  if (closed > 0) {
    CHECK_MSG(r->ev[closed].v[BG_EV_DURATION_US] >= 300000, "closed after %lld us",
              (long long)r->ev[closed].v[BG_EV_DURATION_US]);
    CHECK(pthread_equal(r->ev[closed].thread, pthread_self()));
  }
  CHECK_EQ_INT(count_kind(r, BG_EVENT_BREAKER_OPEN), 1);
  CHECK_EQ_INT(count_kind(r, BG_EVENT_BREAKER_CLOSED), 1);
  /* the degraded answers were told (the first at once: at most one a second by default) */
  CHECK_MSG(find(r, BG_EVENT_DEGRADED, 0) >= 0, "no DEGRADED event");
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_EVENTS), (int64_t)atomic_load(&r->calls));
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

/* Degraded answers: at most per_s events a second; their counts add up to the answers. */
static void degraded_run(int64_t per_s, size_t *events, int64_t *counted, int64_t *pending) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(1000, per_s, -1);
  bg_filter *f = NULL;
  int present;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_filter_open(&f, c, "obs-degraded"));   /* never initialized: BG_ENOTINIT, assumed present */
  bg_policy *p = breaker_policy(0, 1000);
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
  uint64_t t0 = bgt_now_ns();
  for (int i = 0; i < 400; i++) CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  double secs = (double)(bgt_now_ns() - t0) / 1e9;
  CHECK_EQ_INT(stat_of(f, BG_STAT_ANSWERS_ASSUMED_PRESENT), 400);
  *events = count_kind(r, BG_EVENT_DEGRADED);
  *counted = 0;
  for (size_t i = 0; i < r->n; i++)
    if (r->ev[i].kind == BG_EVENT_DEGRADED) {
      *counted += r->ev[i].v[BG_EV_COUNT];
      CHECK_EQ_INT(r->ev[i].v[BG_EV_STATUS], BG_ENOTINIT);
      CHECK_EQ_INT(r->ev[i].v[BG_EV_SOURCE], BG_SOURCE_ASSUMED_PRESENT);
    }
  *pending = atomic_load(&f->guard.degraded.pending);
  /* per second (the windows the run touched) at most per_s */
  CHECK_MSG(*events <= (size_t)per_s * (size_t)(secs + 2), "%zu events in %.2f s at %lld/s", *events, secs,
            (long long)per_s);
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

static void test_degraded_sampled(void) {
  size_t events;
  int64_t counted, pending;
  degraded_run(3, &events, &counted, &pending);
  CHECK_MSG(events >= 1, "no DEGRADED event at 3/s");
  CHECK_EQ_INT(counted + pending, 400);
  /* the control: 0 a second tells nothing, though every answer is still counted */
  degraded_run(0, &events, &counted, &pending);
  CHECK_EQ_INT(events, 0);
  CHECK_EQ_INT(pending, 400);
}

static void test_rotation_events(void) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(2000, -1, -1);
  bg_filter *f = NULL;
  bg_rotation *rot = NULL;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_filter_open(&f, c, "obs-rot"));
  items it = make_items("rot-", 2000);
  CHECK_OK(bg_rotation_begin(&rot, f, 10000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(rot, PTRS(it), it.len, it.n));
  CHECK_OK(bg_rotation_commit(rot));
  bg_rotation_free(rot);
  long b = find(r, BG_EVENT_ROTATION_BEGIN, 0), cm = find(r, BG_EVENT_ROTATION_COMMIT, 0);
  CHECK_MSG(b >= 0 && cm > b, "begin %ld, commit %ld", b, cm);
  if (cm > 0) {
    event *e = &r->ev[cm];
    CHECK_EQ_STR(e->name, "obs-rot");
    CHECK_EQ_INT(e->v[BG_EV_STRATEGY], BG_ROTATE_SWAP);
    CHECK_EQ_INT(e->v[BG_EV_ITEMS], 2000);
    CHECK_MSG(e->v[BG_EV_BYTES] > 0, "bytes %lld", (long long)e->v[BG_EV_BYTES]);
    CHECK_MSG(e->v[BG_EV_DURATION_US] > 0, "duration %lld", (long long)e->v[BG_EV_DURATION_US]);
    CHECK(pthread_equal(e->thread, pthread_self()));
    CHECK_CONTAINS(e->msg, "committed");
  }
  CHECK_EQ_U64(hist_count(f, BG_OP_ROTATE_SWAP, BG_OUTCOME_OK), 1);
  /* aborted when asked, and by free */
  CHECK_OK(bg_rotation_begin(&rot, f, 10000, 0.01, BG_ROTATE_LOCKED, NULL));
  CHECK_OK(bg_rotation_abort(rot));
  bg_rotation_free(rot);
  CHECK_OK(bg_rotation_begin(&rot, f, 10000, 0.01, BG_ROTATE_NAIVE, NULL));
  bg_rotation_free(rot);
  CHECK_EQ_INT(count_kind(r, BG_EVENT_ROTATION_ABORT), 2);
  CHECK_EQ_INT(count_kind(r, BG_EVENT_ROTATION_BEGIN), 3);
  long a = find(r, BG_EVENT_ROTATION_ABORT, 0);
  if (a >= 0) {
    CHECK_EQ_INT(r->ev[a].v[BG_EV_STATUS], BG_EABORTED);
    CHECK_EQ_INT(r->ev[a].v[BG_EV_STRATEGY], BG_ROTATE_LOCKED);
  }
  CHECK_EQ_U64(hist_count(f, BG_OP_ROTATE_LOCKED, BG_OUTCOME_ABORTED), 1);
  CHECK_EQ_U64(hist_count(f, BG_OP_ROTATE_NAIVE, BG_OUTCOME_ABORTED), 1);
  CHECK_EQ_INT(stat_of(f, BG_STAT_ROTATIONS), 1);
  items_free(&it);
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

/* Lines of CLIENT LIST whose name is "bloomguard" (the library's connections). */
static int server_side_connections(void) {
  char *list = bgt_redis_cmd(&srv, "CLIENT LIST");
  int n = 0;
  for (const char *p = list; (p = strstr(p, " name=bloomguard ")); p++) n++;
  free(list);
  return n;
}

static void test_connections_counted_and_lost(void) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(1000, -1, -1);
  bg_filter *f = NULL;
  int present, created;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_filter_open(&f, c, "obs-conn"));
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_CONNECTIONS), 0);   /* lazy: nothing yet */
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  int64_t ours = client_stat(c, BG_CLIENT_STAT_CONNECTIONS);
  CHECK_MSG(ours >= 1, "connections %lld", (long long)ours);
  CHECK_EQ_INT(ours, server_side_connections());
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_CONNECTIONS_LOST), 0);
  CHECK_EQ_INT(count_kind(r, BG_EVENT_CONNECTION_LOST), 0);
  /* the server drops them: the next call finds out and reconnects */
  free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes"));
  for (int i = 0; i < 3; i++) CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_MSG(client_stat(c, BG_CLIENT_STAT_CONNECTIONS_LOST) >= 1, "no connection counted lost");
  long lost = find(r, BG_EVENT_CONNECTION_LOST, 0);
  CHECK_MSG(lost >= 0, "no CONNECTION_LOST event");
  if (lost >= 0) {
    CHECK_EQ_STR(r->ev[lost].name, "");
    CHECK_EQ_INT(r->ev[lost].v[BG_EV_STATUS], BG_ECONN);
    CHECK_CONTAINS(r->ev[lost].msg, "lost");
    CHECK(pthread_equal(r->ev[lost].thread, pthread_self()));
  }
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_CONNECTIONS), server_side_connections());
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

static void test_lock_lost(void) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(1000, -1, -1);
  bg_lock *l = NULL;
  bg_options *o = NULL;
  uint64_t token = 0;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, 300));   /* renewed every 100 ms */
  CHECK_OK(bg_lock_open(&l, c, "obs-lock", o));
  bg_options_free(o);
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, &token));
  free(bgt_redis_cmd(&srv, "DEL %s", bg_lock_key(l)));
  long at = wait_for(r, BG_EVENT_LOCK_LOST, 5000);
  CHECK_MSG(at >= 0, "no LOCK_LOST event within 5 s of the lock's key being deleted");
  if (at >= 0) {
    CHECK_EQ_STR(r->ev[at].name, "obs-lock");
    CHECK_EQ_INT(r->ev[at].v[BG_EV_COUNT], (int64_t)token);
    CHECK_CONTAINS(r->ev[at].msg, "was lost");
    CHECK(!pthread_equal(r->ev[at].thread, pthread_self()));   /* the renewal thread */
  }
  bg_lock_release(l);
  bg_lock_close(l);
  bg_client_close(c);
  recorder_free(r);
}

/* A rotation's lease deleted under it: its keeper's next renewal finds it gone (LOCK_LOST, on the
 * keeper's thread), and the commit fails (ROTATION_ABORT with BG_EROTATING). */
static void test_rotation_lease_lost(void) {
  flush();
  recorder *r = recorder_new();
  bg_client *c = open_client(1000, -1, -1);
  bg_filter *f = NULL;
  bg_rotation *rot = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  CHECK_OK(bg_filter_open(&f, c, "obs-lease"));
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, 300));   /* renewed every 100 ms */
  CHECK_OK(bg_rotation_begin(&rot, f, 1000, 0.01, BG_ROTATE_SWAP, o));
  bg_options_free(o);
  free(bgt_redis_cmd(&srv, "DEL {obs-lease}:rotation"));
  long at = wait_for(r, BG_EVENT_LOCK_LOST, 5000);
  CHECK_MSG(at >= 0, "no LOCK_LOST event within 5 s of the rotation's lease being deleted");
  if (at >= 0) {
    CHECK_EQ_STR(r->ev[at].name, "obs-lease");
    CHECK_CONTAINS(r->ev[at].msg, "rotation lease");
    CHECK(!pthread_equal(r->ev[at].thread, pthread_self()));   /* the lease keeper */
  }
  CHECK_STATUS(bg_rotation_commit(rot), BG_EROTATING);
  long ab = find(r, BG_EVENT_ROTATION_ABORT, 0);
  CHECK_MSG(ab >= 0, "no ROTATION_ABORT after the failed commit");
  if (ab >= 0) CHECK_EQ_INT(r->ev[ab].v[BG_EV_STATUS], BG_EROTATING);
  CHECK_EQ_U64(hist_count(f, BG_OP_ROTATE_SWAP, BG_FAIL_OTHER), 1);   /* BG_EROTATING's class */
  bg_rotation_free(rot);
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

/* The faults of the cases above, on one client: a breaker trip and recovery, degraded answers, a
 * rotation committed and one aborted, the connections killed. Returns the events heard. */
static void faults(bg_client *c) {
  bg_filter *f = NULL;
  bg_rotation *rot = NULL;
  int present, created;
  CHECK_OK(bg_filter_open(&f, c, "obs-cost"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  bg_policy *p = breaker_policy(2, 100);
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  free(bgt_redis_cmd(&srv, "CLIENT PAUSE 600 ALL"));
  for (int i = 0; i < 4; i++) CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_MSG(bgt_redis_wait_pong(&srv, 5000) == 0, "the pause did not end");
  usleep(150 * 1000);
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_OK(bg_rotation_begin(&rot, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add(rot, "x", 1));
  CHECK_OK(bg_rotation_commit(rot));
  bg_rotation_free(rot);
  CHECK_OK(bg_rotation_begin(&rot, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  bg_rotation_free(rot);
  free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes"));
  for (int i = 0; i < 3; i++) CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK(stat_of(f, BG_STAT_BREAKER_TRIPS) == 1);
  bg_filter_close(f);
}

/* No observer, no cost: the relaxed load at each event's place is all (bgi_obs_emit, where the
 * message is formatted, is never called). Counted, not timed. */
static void test_no_observer_no_cost(void) {
  flush();
  bg_client *c = open_client(150, -1, -1);
  faults(c);
  CHECK_EQ_INT(bgi_obs_get(&c->obs, BGI_OBS_EMITS), 0);
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_EVENTS), 0);
  CHECK_MSG(client_stat(c, BG_CLIENT_STAT_CONNECTIONS_LOST) >= 1, "the faults happened: a connection was lost");
  bg_client_close(c);
  /* the control: with an observer the same faults reach bgi_obs_emit, every call delivered */
  flush();
  recorder *r = recorder_new();
  c = open_client(150, -1, -1);
  CHECK_OK(bg_client_set_observer(c, on_event, r));
  faults(c);
  int64_t emits = bgi_obs_get(&c->obs, BGI_OBS_EMITS);
  CHECK_MSG(emits >= 6, "only %lld emits with an observer", (long long)emits);
  CHECK_EQ_INT(emits, atomic_load(&r->calls));
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_EVENTS), emits);
  /* removed again: nothing more reaches it */
  CHECK_OK(bg_client_set_observer(c, NULL, NULL));
  long before = atomic_load(&r->calls);
  bg_filter *f = NULL;
  bg_rotation *rot = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-cost"));
  CHECK_OK(bg_rotation_begin(&rot, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  bg_rotation_free(rot);
  CHECK_EQ_INT(atomic_load(&r->calls), before);
  bg_filter_close(f);
  bg_client_close(c);
  recorder_free(r);
}

/* ---- threads: queries while the observer comes and goes and the breaker flaps (TSan) -------------- */

typedef struct hammer {
  bg_filter *f;
  atomic_int stop;
  atomic_long calls, failed;
} hammer;

static void *query_loop(void *arg) {
  hammer *h = arg;
  int present;
  for (int i = 0; i < 20000 && !atomic_load(&h->stop); i++) {
    if (bg_filter_contains(h->f, "a", 1, &present) != BG_OK) atomic_fetch_add(&h->failed, 1);
    atomic_fetch_add(&h->calls, 1);
  }
  return NULL;
}

static void test_observer_set_while_querying(void) {
  flush();
  recorder *r1 = recorder_new(), *r2 = recorder_new();
  bg_client *c = open_client(100, 1000, -1);
  hammer h = {0};
  int created;
  CHECK_OK(bg_filter_open(&h.f, c, "obs-threads"));
  CHECK_OK(bg_filter_init(h.f, 1000, 0.01, &created));
  bg_policy *p = breaker_policy(2, 50);
  CHECK_OK(bg_filter_set_policy(h.f, p));
  bg_policy_free(p);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, query_loop, &h);
  uint64_t until = bgt_now_ns() + 3000000000ull;
  for (int round = 0; round < 30 && bgt_now_ns() < until; round++) {
    CHECK_OK(bg_client_set_observer(c, on_event, round % 2 ? r1 : r2));
    if (round % 5 == 0) free(bgt_redis_cmd(&srv, "CLIENT PAUSE 250 ALL"));
    usleep(30 * 1000);
    if (round % 3 == 0) CHECK_OK(bg_client_set_observer(c, NULL, NULL));
  }
  atomic_store(&h.stop, 1);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  CHECK_MSG(bgt_redis_wait_pong(&srv, 5000) == 0, "the pause did not end");
  CHECK_EQ_INT(atomic_load(&h.failed), 0);   /* every answer from Redis or the policy */
  long heard = atomic_load(&r1->calls) + atomic_load(&r2->calls);
  CHECK_MSG(heard > 0, "no event heard while the breaker flapped");
  CHECK_EQ_INT(client_stat(c, BG_CLIENT_STAT_EVENTS), heard);
  /* the hub kept one sink per observer set, however often it was set */
  size_t sinks = 0;
  for (bgi_obs_sink *s = c->obs.all; s; s = s->next) sinks++;
  CHECK_EQ_INT(sinks, 2);
  bg_filter_close(h.f);
  bg_client_close(c);
  recorder_free(r1);
  recorder_free(r2);
}

static void setup(void) { bgt_redis_start(&srv, NULL); }

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
    BGT_CASE(test_names_and_buckets),
    BGT_CASE(test_histograms_count_operations),
    BGT_CASE(test_histograms_off_record_nothing),
    BGT_CASE(test_breaker_events),
    BGT_CASE(test_degraded_sampled),
    BGT_CASE(test_rotation_events),
    BGT_CASE(test_connections_counted_and_lost),
    BGT_CASE(test_lock_lost),
    BGT_CASE(test_rotation_lease_lost),
    BGT_CASE(test_no_observer_no_cost),
    BGT_CASE(test_observer_set_while_querying),
  };
  setup();
  int rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  bgt_redis_stop(&srv);
  return rc;
}
