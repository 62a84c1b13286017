/*
 * The policy engine without a server: the bg_policy object, classification, backoff, the breaker
 * and the token bucket (time passed in), and the chain driven by scripted fake attempts.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/call.h"
#include "harness.h"
#include "lateness.h"
#include "filter/filter.h"

#define MS 1000000ull

/* ---- the settings object ------------------------------------------------------------------ */

static void test_policy_object_defaults_and_ranges(void) {
  bg_policy *p = NULL;
  int64_t v = -1;
  int acts[BG_POLICY_MAX_CHAIN + 1];
  size_t n = 99;
  CHECK_STATUS(bg_policy_new(NULL), BG_EINVAL);
  CHECK_OK(bg_policy_new(&p));
  /* defaults as documented in policy.h */
  struct { int opt; int64_t def, lo, hi; } opts[] = {
    {BG_POLICY_RETRY_COUNT, 2, 0, 100},
    {BG_POLICY_BACKOFF_BASE_MS, 10, 0, 60000},
    {BG_POLICY_BACKOFF_MAX_MS, 100, 0, 600000},
    {BG_POLICY_JITTER_PCT, 50, 0, 100},
    {BG_POLICY_BREAKER_THRESHOLD, 5, 0, 1000000},
    {BG_POLICY_BREAKER_COOLDOWN_MS, 1000, 1, 3600000},
    {BG_POLICY_CALLBACK_RATE, 100, 0, 1000000},
    {BG_POLICY_CALLBACK_BURST, 100, 1, 1000000},
    {BG_POLICY_SNAPSHOT_INTERVAL_MS, 0, 0, 86400000},
    {BG_POLICY_SNAPSHOT_MAX_AGE_MS, 0, 0, 31536000000},
    {BG_POLICY_SNAPSHOT_CHUNK_BYTES, 1048576, 4096, 67108864},
  };
  for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
    CHECK_OK(bg_policy_get_int(p, opts[i].opt, &v));
    CHECK_MSG(v == opts[i].def, "option %d: default %lld, wanted %lld", opts[i].opt, (long long)v,
              (long long)opts[i].def);
    CHECK_STATUS(bg_policy_set_int(p, opts[i].opt, opts[i].lo - 1), BG_EINVAL);
    CHECK_STATUS(bg_policy_set_int(p, opts[i].opt, opts[i].hi + 1), BG_EINVAL);
    CHECK_OK(bg_policy_set_int(p, opts[i].opt, opts[i].hi));
    CHECK_OK(bg_policy_get_int(p, opts[i].opt, &v));
    CHECK_EQ_INT(v, opts[i].hi);
    CHECK_OK(bg_policy_set_int(p, opts[i].opt, opts[i].def));
  }
  /* a refresh every few milliseconds is refused */
  CHECK_STATUS(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 99), BG_EINVAL);
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 100));
  CHECK_STATUS(bg_policy_set_int(p, 0, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_set_int(p, 12, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_get_int(p, 12, &v), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_set_int(NULL, BG_POLICY_RETRY_COUNT, 1), BG_EINVAL);
  CHECK_STATUS(bg_policy_get_int(p, BG_POLICY_RETRY_COUNT, NULL), BG_EINVAL);

  /* default chains: retry briefly, then fail open */
  struct { int cls; int len; int a0, a1; } chains[] = {
    {BG_FAIL_NOTINIT, 2, BG_ACT_RETRY, BG_ACT_ASSUME_PRESENT},
    {BG_FAIL_CONFIG, 2, BG_ACT_RETRY, BG_ACT_ASSUME_PRESENT},
    {BG_FAIL_LOCKED, 1, BG_ACT_ASSUME_PRESENT, 0},
    {BG_FAIL_CONNECTION, 2, BG_ACT_RETRY, BG_ACT_ASSUME_PRESENT},
    {BG_FAIL_TIMEOUT, 1, BG_ACT_ASSUME_PRESENT, 0},
    {BG_FAIL_SERVER, 2, BG_ACT_RETRY, BG_ACT_ASSUME_PRESENT},
    {BG_FAIL_CORRUPT, 1, BG_ACT_ASSUME_PRESENT, 0},
    {BG_FAIL_OTHER, 1, BG_ACT_ERROR, 0},
  };
  for (size_t i = 0; i < sizeof chains / sizeof *chains; i++) {
    memset(acts, 0, sizeof acts);
    CHECK_OK(bg_policy_get_chain(p, chains[i].cls, acts, BG_POLICY_MAX_CHAIN, &n));
    CHECK_EQ_INT(n, chains[i].len);
    CHECK_EQ_INT(acts[0], chains[i].a0);
    if (chains[i].len > 1) CHECK_EQ_INT(acts[1], chains[i].a1);
  }
  /* set_chain: validation, copy, get with a short buffer */
  int chain[] = {BG_ACT_RETRY, BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_ABSENT, BG_ACT_ERROR};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, chain, 5));
  CHECK_OK(bg_policy_get_chain(p, BG_FAIL_TIMEOUT, acts, 2, &n));
  CHECK_EQ_INT(n, 5);
  CHECK_EQ_INT(acts[1], BG_ACT_SNAPSHOT);
  CHECK_OK(bg_policy_get_chain(p, BG_FAIL_TIMEOUT, NULL, 0, &n));
  CHECK_EQ_INT(n, 5);
  CHECK_STATUS(bg_policy_get_chain(p, BG_FAIL_TIMEOUT, NULL, 1, &n), BG_EINVAL);
  CHECK_STATUS(bg_policy_set_chain(p, 0, chain, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_set_chain(p, 9, chain, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_get_chain(p, 9, acts, 1, &n), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, chain, 0), BG_EINVAL);
  CHECK_STATUS(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, NULL, 1), BG_EINVAL);
  int long_chain[BG_POLICY_MAX_CHAIN + 1];
  for (int i = 0; i <= BG_POLICY_MAX_CHAIN; i++) long_chain[i] = BG_ACT_RETRY;
  CHECK_STATUS(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, long_chain, BG_POLICY_MAX_CHAIN + 1), BG_EINVAL);
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, long_chain, BG_POLICY_MAX_CHAIN));
  int bad[] = {BG_ACT_RETRY, 7};
  CHECK_STATUS(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, bad, 2), BG_ENOTSUP);
  bad[1] = 0;
  CHECK_STATUS(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, bad, 2), BG_ENOTSUP);
  /* a refused chain leaves the previous one */
  CHECK_OK(bg_policy_get_chain(p, BG_FAIL_TIMEOUT, acts, BG_POLICY_MAX_CHAIN, &n));
  CHECK_EQ_INT(n, BG_POLICY_MAX_CHAIN);
  CHECK_STATUS(bg_policy_set_fallback(NULL, NULL, NULL), BG_EINVAL);
  CHECK_OK(bg_policy_set_fallback(p, NULL, NULL));
  bg_policy_free(p);
  bg_policy_free(NULL);
}

static void test_classification(void) {
  CHECK_EQ_INT(bgi_fail_class(BG_OK), 0);
  CHECK_EQ_INT(bgi_fail_class(BG_EINVAL), 0);
  CHECK_EQ_INT(bgi_fail_class(BG_ENOTINIT), BG_FAIL_NOTINIT);
  CHECK_EQ_INT(bgi_fail_class(BG_ECONFIG), BG_FAIL_CONFIG);
  CHECK_EQ_INT(bgi_fail_class(BG_ELOCKED), BG_FAIL_LOCKED);
  CHECK_EQ_INT(bgi_fail_class(BG_ECONN), BG_FAIL_CONNECTION);
  CHECK_EQ_INT(bgi_fail_class(BG_ETIMEOUT), BG_FAIL_TIMEOUT);
  CHECK_EQ_INT(bgi_fail_class(BG_ESERVER), BG_FAIL_SERVER);
  CHECK_EQ_INT(bgi_fail_class(BG_ECORRUPT), BG_FAIL_CORRUPT);
  CHECK_EQ_INT(bgi_fail_class(BG_EWRONGTYPE), BG_FAIL_CORRUPT);
  CHECK_EQ_INT(bgi_fail_class(BG_EAUTH), BG_FAIL_OTHER);
  CHECK_EQ_INT(bgi_fail_class(BG_EPROTO), BG_FAIL_OTHER);
  CHECK_EQ_INT(bgi_fail_class(BG_ENOMEM), BG_FAIL_OTHER);
  CHECK_EQ_INT(bgi_fail_class(-1000), BG_FAIL_OTHER);
}

static void test_backoff(void) {
  bgi_policy_cfg c;
  bgi_policy_defaults(&c);
  c.jitter_pct = 0;
  uint64_t want[] = {10, 20, 40, 80, 100, 100};
  for (int a = 0; a < 6; a++) CHECK_EQ_U64(bgi_backoff_ns(&c, a, UINT64_MAX), want[a] * MS);
  CHECK_EQ_U64(bgi_backoff_ns(&c, 100, UINT64_MAX), 100 * MS);
  c.jitter_pct = 50;
  CHECK_EQ_U64(bgi_backoff_ns(&c, 0, 0), 10 * MS);                 /* no random cut */
  uint64_t w = bgi_backoff_ns(&c, 0, UINT64_MAX);                   /* the largest cut: half */
  CHECK_MSG(w >= 5 * MS && w < 5 * MS + 1000, "50%% jitter at most: %llu", (unsigned long long)w);
  c.jitter_pct = 100;
  CHECK(bgi_backoff_ns(&c, 3, UINT64_MAX) < 1000);
  c.backoff_base_ms = 0;
  CHECK_EQ_U64(bgi_backoff_ns(&c, 5, 12345), 0);
  c.backoff_base_ms = 500;  /* base above the cap: the cap */
  c.jitter_pct = 0;
  CHECK_EQ_U64(bgi_backoff_ns(&c, 0, 0), 100 * MS);
}

/* ---- breaker ---------------------------------------------------------------------------------- */

static void test_breaker_state_machine(void) {
  bgi_breaker b;
  bgi_err err = {0};
  uint64_t t = 1000 * MS;
  bgi_breaker_init(&b);
  bgi_breaker_reset(&b, 3, 100);
  CHECK(bgi_breaker_admit(&b, t, &err));
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  bgi_breaker_record(&b, t, BG_ETIMEOUT, "slow");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  /* an answer from the server (even an error reply) breaks the run */
  bgi_breaker_record(&b, t, BG_ESERVER, "LOADING");
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  bgi_breaker_record(&b, t, BG_ETIMEOUT, "no answer within 200 ms");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_OPEN);
  CHECK_EQ_INT(atomic_load(&b.trips), 1);
  /* open: rejected with the status that opened it, until the cooldown has passed */
  CHECK(!bgi_breaker_admit(&b, t + 99 * MS, &err));
  CHECK_EQ_INT(err.status, BG_ETIMEOUT);
  CHECK_CONTAINS(err.msg, "circuit breaker open");
  CHECK_CONTAINS(err.msg, "no answer within 200 ms");
  CHECK_CONTAINS(err.msg, "next probe in 1 ms");
  CHECK_EQ_INT(atomic_load(&b.rejected), 1);
  /* one probe after the cooldown; others still rejected while it runs */
  CHECK(bgi_breaker_admit(&b, t + 100 * MS, &err));
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_HALF_OPEN);
  CHECK_EQ_INT(atomic_load(&b.probes), 1);
  CHECK(!bgi_breaker_admit(&b, t + 101 * MS, &err));
  CHECK_CONTAINS(err.msg, "probe under way");
  /* the probe fails: open again for a new cooldown, not a new trip */
  bgi_breaker_record(&b, t + 150 * MS, BG_ECONN, "refused");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_OPEN);
  CHECK_EQ_INT(atomic_load(&b.trips), 1);
  CHECK_EQ_INT(err.status, BG_ETIMEOUT);
  CHECK(!bgi_breaker_admit(&b, t + 249 * MS, &err));
  CHECK_EQ_INT(err.status, BG_ECONN);
  CHECK(bgi_breaker_admit(&b, t + 250 * MS, &err));
  /* a probe that never reports is replaced after another cooldown */
  CHECK(!bgi_breaker_admit(&b, t + 300 * MS, &err));
  CHECK(bgi_breaker_admit(&b, t + 350 * MS, &err));
  CHECK_EQ_INT(atomic_load(&b.probes), 3);
  /* the probe succeeds: closed, and the run starts from zero */
  bgi_breaker_record(&b, t + 360 * MS, BG_OK, NULL);
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  /* threshold 0: off */
  bgi_breaker_reset(&b, 0, 100);
  for (int i = 0; i < 100; i++) bgi_breaker_record(&b, t, BG_ECONN, "refused");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  CHECK(bgi_breaker_admit(&b, t, &err));
  /* reset closes an open breaker and keeps the counts */
  bgi_breaker_reset(&b, 1, 100);
  bgi_breaker_record(&b, t, BG_ECONN, "refused");
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_OPEN);
  bgi_breaker_reset(&b, 1, 100);
  CHECK_EQ_INT(bgi_breaker_state(&b), BG_BREAKER_CLOSED);
  CHECK_EQ_INT(atomic_load(&b.trips), 2);
  bgi_breaker_destroy(&b);
}

/* ---- token bucket ------------------------------------------------------------------------------ */

static void test_token_bucket(void) {
  bgi_bucket b;
  uint64_t t = 5000 * MS;
  int got = 0;
  bgi_bucket_init(&b);
  bgi_bucket_reset(&b, 10, 5, t);  /* 10 per second, burst 5, starts full */
  for (int i = 0; i < 20; i++) got += bgi_bucket_take(&b, t);
  CHECK_EQ_INT(got, 5);
  CHECK(!bgi_bucket_take(&b, t + 99 * MS));
  CHECK(bgi_bucket_take(&b, t + 100 * MS));   /* 0.1 s at 10/s: one token */
  CHECK(!bgi_bucket_take(&b, t + 100 * MS));
  /* a long idle time refills to the burst, not beyond */
  got = 0;
  for (int i = 0; i < 20; i++) got += bgi_bucket_take(&b, t + 3600000 * MS);
  CHECK_EQ_INT(got, 5);
  /* over one simulated second of steady demand: burst + rate */
  bgi_bucket_reset(&b, 100, 100, t);
  got = 0;
  for (int i = 0; i <= 1000; i++) got += bgi_bucket_take(&b, t + (uint64_t)i * MS);
  CHECK_MSG(got >= 199 && got <= 201, "got %d tokens in 1 s at 100/s with burst 100", got);
  /* a clock that goes backwards (it cannot: monotonic) gives nothing */
  CHECK(!bgi_bucket_take(&b, t));
  /* rate 0: unlimited */
  bgi_bucket_reset(&b, 0, 1, t);
  got = 0;
  for (int i = 0; i < 1000; i++) got += bgi_bucket_take(&b, t);
  CHECK_EQ_INT(got, 1000);
  bgi_bucket_destroy(&b);
}

/* ---- the engine with scripted attempts ----------------------------------------------------------- */

typedef struct fake {
  const int *script;      /* statuses of successive attempts; after the end: the last one */
  size_t len;
  atomic_int calls;
  size_t done_on_fail;    /* items finished by a failing attempt (a partial batch) */
  uint8_t redis_answer;   /* what a successful attempt answers */
} fake;

static int fake_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err) {
  fake *fk = ctx;
  (void)deadline_ns;
  int i = atomic_fetch_add(&fk->calls, 1);
  int st = fk->script[(size_t)i < fk->len ? (size_t)i : fk->len - 1];
  if (st == BG_OK) {
    *done = (size_t)-1;   /* the engine only uses done on failure; it must not rely on it here */
    return BG_OK;
  }
  *done = from > fk->done_on_fail ? from : fk->done_on_fail;
  return bgi_err_set(err, st, "fake failure %d (%s)", i, bg_strerror(st));
}

typedef struct fake_query {
  fake fk;
  uint8_t *present;
} fake_query;

/* Successful attempts write the "redis" answer for items [from, n). */
static int fake_query_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err) {
  fake_query *q = ctx;
  size_t d = 0;
  int st = fake_attempt(&q->fk, deadline_ns, from, &d, err);
  if (st == BG_OK) d = 3;
  for (size_t i = from; i < d && i < 3; i++) q->present[i] = q->fk.redis_answer;
  *done = d > 3 ? 3 : d;
  return st;
}

static const void *ITEMS[3] = {"a", "b", "c"};
static const size_t LENS[3] = {1, 1, 1};

/* The engine takes its attempts as tasks (common/task.h): this one runs a fake step (above) when
 * resumed and ends at once. */
typedef int (*fake_step_fn)(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err);
typedef struct fake_op {
  bgi_task t;
  fake_step_fn fn;
  void *inner;
  uint64_t deadline_ns;
  size_t from, *done;
} fake_op;

static int resume_fake(bgi_task *t, int st, bgi_err *err) {
  fake_op *fo = (fake_op *)t;
  size_t d = fo->from;
  (void)st;
  st = fo->fn(fo->inner, fo->deadline_ns, fo->from, &d, err);
  /* the engine's attempts count what they finished from `from` on */
  *fo->done = st != BG_OK && d > fo->from ? d - fo->from : 0;
  return bgi_task_done(t, st);
}

static bgi_task *fake_task(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  fake_op *fo = ctx;
  bgi_task_init(&fo->t, resume_fake);
  fo->deadline_ns = deadline_ns;
  fo->from = from;
  fo->done = done;
  return &fo->t;
}

/* An op whose attempts run fn(inner, ...). */
static bgi_op fake_op_of(fake_op *fo, int is_add, fake_step_fn fn, void *inner, uint8_t *present) {
  fo->fn = fn;
  fo->inner = inner;
  return (bgi_op){is_add, fake_task, fo, ITEMS, LENS, 3, present, NULL};
}

static int run_query(bgi_guard *g, fake_query *q, uint64_t deadline, int *source, bgi_err *err) {
  fake_op fo;
  bgi_op op = fake_op_of(&fo, 0, fake_query_attempt, q, q->present);
  memset(err, 0, sizeof *err);
  return bgi_guard_run(g, &op, deadline, NULL, source, err);
}

static bg_policy *quick_policy(void) {
  bg_policy *p = NULL;
  bg_policy_new(&p);
  bg_policy_set_int(p, BG_POLICY_BACKOFF_BASE_MS, 1);
  bg_policy_set_int(p, BG_POLICY_BACKOFF_MAX_MS, 2);
  return p;
}

static int64_t stat(bgi_guard *g, int id) {
  int known;
  int64_t v = bgi_stat_read(g, NULL, id, &known);
  CHECK_MSG(known, "stat %d unknown", id);
  return v;
}

typedef struct cb_state {
  int rc;
  atomic_int calls;
  size_t last_n;
  const void *first_item;
} cb_state;

static int fallback(void *userdata, const void *const *items, const size_t *lens, size_t n, uint8_t *present) {
  cb_state *s = userdata;
  (void)lens;
  atomic_fetch_add(&s->calls, 1);
  s->last_n = n;
  s->first_item = n ? items[0] : NULL;
  for (size_t i = 0; i < n; i++) present[i] = 7;   /* any non-zero: normalized to 1 */
  return s->rc;
}

/* For threads: counts only. */
static int fallback_mt(void *userdata, const void *const *items, const size_t *lens, size_t n, uint8_t *present) {
  cb_state *s = userdata;
  (void)items, (void)lens;
  atomic_fetch_add(&s->calls, 1);
  memset(present, 1, n);
  return 0;
}

static void test_engine_chain(void) {
  bgi_guard g;
  bgi_err err;
  int source;
  uint8_t present[3];
  bgi_guard_init(&g);

  /* no policy: one attempt, the plain status, counted */
  int notinit[] = {BG_ENOTINIT};
  fake_query q = {{notinit, 1, 0, 0, 1}, present};
  CHECK_STATUS(run_query(&g, &q, 0, &source, &err), BG_ENOTINIT);
  CHECK_EQ_INT(source, BG_SOURCE_NONE);
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_FAIL_NOTINIT), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_QUERY_ERRORS), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_QUERIES), 1);

  /* default policy: retry twice, then assume present; the message keeps the failure */
  bg_policy *p = quick_policy();
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  atomic_store(&q.fk.calls, 0);
  memset(present, 9, sizeof present);
  CHECK_OK(run_query(&g, &q, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_PRESENT);
  CHECK(present[0] == 1 && present[1] == 1 && present[2] == 1);
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 3);
  CHECK_EQ_INT(stat(&g, BG_STAT_RETRIES), 2);
  CHECK_EQ_INT(stat(&g, BG_STAT_FAIL_NOTINIT), 4);
  CHECK_EQ_INT(stat(&g, BG_STAT_ANSWERS_ASSUMED_PRESENT), 1);
  CHECK_CONTAINS(err.msg, "assumed present: fake failure 2");

  /* a retry that succeeds: Redis's answer */
  int then_ok[] = {BG_ECONN, BG_OK};
  fake_query q2 = {{then_ok, 2, 0, 0, 0}, present};
  memset(present, 9, sizeof present);
  CHECK_OK(run_query(&g, &q2, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_REDIS);
  CHECK(present[0] == 0 && present[2] == 0);
  CHECK_EQ_INT(stat(&g, BG_STAT_ANSWERS_REDIS), 1);

  /* snapshot first, then callback, then absent */
  int chain[] = {BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_ABSENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, chain, 3));
  cb_state cb = {0};
  CHECK_OK(bg_policy_set_fallback(p, fallback, &cb));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int timeout[] = {BG_ETIMEOUT};
  fake_query q3 = {{timeout, 1, 0, 0, 0}, present};
  int64_t retries = stat(&g, BG_STAT_RETRIES);
  /* no snapshot yet: the callback answers (normalized to 1) */
  CHECK_OK(run_query(&g, &q3, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
  CHECK(present[0] == 1 && present[1] == 1 && present[2] == 1);
  CHECK_EQ_INT(cb.last_n, 3);
  CHECK_EQ_INT(stat(&g, BG_STAT_CALLBACK_CALLS), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_RETRIES), retries);   /* no RETRY in this chain */
  /* the callback declines: the chain moves on */
  cb.rc = 1;
  CHECK_OK(run_query(&g, &q3, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_ABSENT);
  CHECK(present[0] == 0 && present[1] == 0 && present[2] == 0);
  CHECK_EQ_INT(stat(&g, BG_STAT_CALLBACK_DECLINED), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_ANSWERS_ASSUMED_ABSENT), 1);
  /* a snapshot answers exactly what it holds */
  bgi_snapshot *s = bgi_snapshot_new(bgi_cfg_pack(1000, 3), bgi_now_ns());
  CHECK(s != NULL);
  bgi_snapshot_add(s, "b", 1);
  bgi_guard_publish_snapshot(&g, s);
  CHECK_OK(run_query(&g, &q3, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_SNAPSHOT);
  CHECK(present[0] == 0 && present[1] == 1 && present[2] == 0);
  CHECK_CONTAINS(err.msg, "answered from the local snapshot: fake failure");
  CHECK_EQ_INT(stat(&g, BG_STAT_SNAPSHOT_BYTES), 125);
  CHECK(stat(&g, BG_STAT_SNAPSHOT_AGE_MS) >= 0);
  /* too old for max age: skipped */
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 1));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  usleep(5000);
  cb.rc = 0;
  CHECK_OK(run_query(&g, &q3, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 0));

  /* a partial batch: the items Redis answered keep their answers, the rest come from the chain */
  int partial_chain[] = {BG_ACT_CALLBACK};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CONNECTION, partial_chain, 1));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int conn[] = {BG_ECONN};
  fake_query q4 = {{conn, 1, 0, 2, 0}, present};  /* items 0 and 1 answered 0 by "redis" */
  CHECK_OK(run_query(&g, &q4, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
  CHECK(present[0] == 0 && present[1] == 0 && present[2] == 1);
  CHECK_EQ_INT(cb.last_n, 1);
  CHECK(cb.first_item == ITEMS[2]);

  /* ERROR stops the chain; a chain that runs out fails with the last failure */
  int error_chain[] = {BG_ACT_ERROR, BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_SERVER, error_chain, 2));
  int retry_only[] = {BG_ACT_RETRY};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CORRUPT, retry_only, 1));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int server[] = {BG_ESERVER};
  fake_query q5 = {{server, 1, 0, 0, 0}, present};
  CHECK_STATUS(run_query(&g, &q5, 0, &source, &err), BG_ESERVER);
  CHECK_EQ_INT(source, BG_SOURCE_NONE);
  CHECK_EQ_INT(atomic_load(&q5.fk.calls), 1);
  /* the chain of the first failure is followed; the last failure is reported */
  int corrupt_then[] = {BG_ECORRUPT, BG_ECONN, BG_ETIMEOUT};
  fake_query q6 = {{corrupt_then, 3, 0, 0, 0}, present};
  CHECK_STATUS(run_query(&g, &q6, 0, &source, &err), BG_ETIMEOUT);
  CHECK_EQ_INT(atomic_load(&q6.fk.calls), 3);
  CHECK_CONTAINS(err.msg, "fake failure 2");
  /* BG_EINVAL is never degraded */
  int inval[] = {BG_EINVAL};
  fake_query q7 = {{inval, 1, 0, 0, 0}, present};
  CHECK_STATUS(run_query(&g, &q7, 0, &source, &err), BG_EINVAL);
  CHECK_EQ_INT(atomic_load(&q7.fk.calls), 1);

  /* a callback chain with no callback set moves on */
  CHECK_OK(bg_policy_set_fallback(p, NULL, NULL));
  int cb_then_present[] = {BG_ACT_CALLBACK, BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CONNECTION, cb_then_present, 2));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int64_t calls_before = stat(&g, BG_STAT_CALLBACK_CALLS);
  fake_query q8 = {{conn, 1, 0, 0, 0}, present};
  CHECK_OK(run_query(&g, &q8, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_PRESENT);
  CHECK_EQ_INT(stat(&g, BG_STAT_CALLBACK_CALLS), calls_before);

  /* the totals add up */
  int64_t answers = 0;
  for (int id = BG_STAT_ANSWERS_REDIS; id <= BG_STAT_ANSWERS_ASSUMED_ABSENT; id++) answers += stat(&g, id);
  CHECK_EQ_INT(stat(&g, BG_STAT_QUERIES), answers + stat(&g, BG_STAT_QUERY_ERRORS));
  int known;
  bgi_stat_read(&g, NULL, 999, &known);
  CHECK(!known);
  bg_policy_free(p);
  bgi_guard_destroy(&g);
}

/* Adds: only RETRY applies; never an assumed answer. */
static void test_engine_adds(void) {
  bgi_guard g;
  bgi_err err = {0};
  int source;
  bgi_guard_init(&g);
  bg_policy *p = quick_policy();
  int chain[] = {BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_PRESENT, BG_ACT_RETRY, BG_ACT_ASSUME_ABSENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CONNECTION, chain, 5));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, 0));
  cb_state cb = {0};
  CHECK_OK(bg_policy_set_fallback(p, fallback, &cb));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  bgi_snapshot *s = bgi_snapshot_new(bgi_cfg_pack(100, 2), bgi_now_ns());
  bgi_guard_publish_snapshot(&g, s);
  int conn[] = {BG_ECONN};
  fake fk = {conn, 1, 0, 0, 0};
  fake_op fo;
  bgi_op op = fake_op_of(&fo, 1, fake_attempt, &fk, NULL);
  CHECK_STATUS(bgi_guard_run(&g, &op, 0, NULL, &source, &err), BG_ECONN);
  CHECK_EQ_INT(atomic_load(&fk.calls), 3);   /* the first attempt and two retries */
  CHECK_EQ_INT(atomic_load(&cb.calls), 0);
  CHECK_EQ_INT(stat(&g, BG_STAT_ADDS), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_ADD_ERRORS), 1);
  CHECK_EQ_INT(stat(&g, BG_STAT_QUERIES), 0);
  /* a retry that works */
  int then_ok[] = {BG_ECONN, BG_ECONN, BG_OK};
  fake fk2 = {then_ok, 3, 0, 0, 0};
  op = fake_op_of(&fo, 1, fake_attempt, &fk2, NULL);
  CHECK_OK(bgi_guard_run(&g, &op, 0, NULL, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_REDIS);
  CHECK_EQ_INT(stat(&g, BG_STAT_ADDS), 2);
  CHECK_EQ_INT(stat(&g, BG_STAT_ADD_ERRORS), 1);
  bg_policy_free(p);
  bgi_guard_destroy(&g);
}

/* The breaker inside the engine: no attempt while open; a probe after the cooldown. */
static void test_engine_breaker(void) {
  bgi_guard g;
  bgi_err err;
  int source;
  uint8_t present[3];
  bgi_guard_init(&g);
  bg_policy *p = quick_policy();
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, 4));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_COOLDOWN_MS, 50));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int conn[] = {BG_ECONN};
  fake_query q = {{conn, 1, 0, 0, 0}, present};
  /* call 1: attempt + 2 retries = 3 failures; call 2: the 4th opens it, its retries are skipped */
  CHECK_OK(run_query(&g, &q, 0, &source, &err));
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  CHECK_OK(run_query(&g, &q, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_PRESENT);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_OPEN);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_TRIPS), 1);
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 4);
  /* open: answered at once, nothing sent */
  for (int i = 0; i < 100; i++) {
    CHECK_OK(run_query(&g, &q, 0, &source, &err));
    CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_PRESENT);
  }
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 4);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_REJECTED), 100);
  CHECK_CONTAINS(err.msg, "circuit breaker open");
  CHECK_EQ_INT(stat(&g, BG_STAT_FAIL_CONNECTION), 4);   /* rejections are not failures */
  /* after the cooldown, one probe; it succeeds and closes the breaker */
  usleep(60000);
  int ok[] = {BG_OK};
  fake_query q2 = {{ok, 1, 0, 0, 1}, present};
  CHECK_OK(run_query(&g, &q2, 0, &source, &err));
  CHECK_EQ_INT(source, BG_SOURCE_REDIS);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_PROBES), 1);
  /* adds fail at once while it is open */
  atomic_store(&q.fk.calls, 0);
  for (int i = 0; i < 2; i++) run_query(&g, &q, 0, &source, &err);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_OPEN);
  fake fk = {conn, 1, 0, 0, 0};
  fake_op fo;
  bgi_op add = fake_op_of(&fo, 1, fake_attempt, &fk, NULL);
  memset(&err, 0, sizeof err);
  CHECK_STATUS(bgi_guard_run(&g, &add, 0, NULL, &source, &err), BG_ECONN);
  CHECK_EQ_INT(atomic_load(&fk.calls), 0);
  CHECK_CONTAINS(err.msg, "circuit breaker open");
  /* a new policy resets it */
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  /* removing the policy: plain errors, no breaker */
  CHECK_OK(bgi_guard_set_policy(&g, NULL, &err));
  for (int i = 0; i < 10; i++) CHECK_STATUS(run_query(&g, &q, 0, &source, &err), BG_ECONN);
  CHECK_EQ_INT(stat(&g, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  bg_policy_free(p);
  bgi_guard_destroy(&g);
}

/* Retries never wait past the call's deadline, and the backoff is really waited. */
static void test_engine_retry_timing(void) {
  bgi_guard g;
  bgi_err err;
  int source;
  uint8_t present[3];
  bgi_guard_init(&g);
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_RETRY_COUNT, 3));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_BASE_MS, 40));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_MAX_MS, 80));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_JITTER_PCT, 0));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, 0));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  int conn[] = {BG_ECONN};
  fake_query q = {{conn, 1, 0, 0, 0}, present};
  uint64_t t0 = bgi_now_ns();
  CHECK_OK(run_query(&g, &q, 0, &source, &err));
  uint64_t took = bgi_now_ns() - t0;
  CHECK_MSG(took >= 200 * MS, "3 retries after 40 + 80 + 80 ms took %llu ms", (unsigned long long)(took / MS));
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 4);
  /* a deadline 100 ms away: the first retry (after 40 ms) fits, the second (80 ms more) does not */
  atomic_store(&q.fk.calls, 0);
  bgt_lateness_start();
  t0 = bgi_now_ns();
  CHECK_OK(run_query(&g, &q, t0 + 100 * MS, &source, &err));
  took = bgi_now_ns() - t0;
  CHECK_EQ_INT(atomic_load(&q.fk.calls), 2);
  double late = bgt_lateness_ms((double)took / MS);
  CHECK_MSG((double)took / MS <= 100 + late, "a 100 ms deadline took %llu ms (the machine woke a sleeper up to %.0f "
            "ms late meanwhile)", (unsigned long long)(took / MS), late);
  bgt_lateness_stop();
  CHECK_EQ_INT(source, BG_SOURCE_ASSUMED_PRESENT);
  bg_policy_free(p);
  bgi_guard_destroy(&g);
}

/* Threads sharing a guard while policies are swapped and snapshots published (run under TSan). */
typedef struct shared {
  bgi_guard *g;
  atomic_int stop;
  atomic_llong calls;
  atomic_llong bad;
} shared;

static void *hammer(void *arg) {
  shared *sh = arg;
  int script[] = {BG_OK, BG_ECONN, BG_OK, BG_ETIMEOUT, BG_ESERVER, BG_OK, BG_ENOTINIT};
  uint8_t present[3];
  for (int i = 0; i < 3000 && !atomic_load(&sh->stop); i++) {
    fake_query q = {{script + i % 7, 1, 0, (size_t)(i % 3), 1}, present};
    bgi_err err;
    int source;
    int st = run_query(sh->g, &q, 0, &source, &err);
    atomic_fetch_add(&sh->calls, 1);
    /* every policy used here ends its chains in an answer */
    if (st != BG_OK || source == BG_SOURCE_NONE) atomic_fetch_add(&sh->bad, 1);
  }
  return NULL;
}

static void test_engine_threads(void) {
  bgi_guard g;
  bgi_err err = {0};
  shared sh = {&g, 0, 0, 0};
  pthread_t th[4];
  bgi_guard_init(&g);
  bg_policy *a = quick_policy(), *b = quick_policy();
  int chain[] = {BG_ACT_SNAPSHOT, BG_ACT_CALLBACK, BG_ACT_ASSUME_ABSENT};
  cb_state cb = {0};
  for (int c = 1; c <= BG_FAIL_OTHER; c++) CHECK_OK(bg_policy_set_chain(b, c, chain, 3));
  CHECK_OK(bg_policy_set_chain(a, BG_FAIL_OTHER, chain + 2, 1));
  CHECK_OK(bg_policy_set_fallback(b, fallback_mt, &cb));
  CHECK_OK(bg_policy_set_int(b, BG_POLICY_CALLBACK_RATE, 1000));
  CHECK_OK(bg_policy_set_int(a, BG_POLICY_RETRY_COUNT, 1));
  CHECK_OK(bg_policy_set_int(a, BG_POLICY_BREAKER_COOLDOWN_MS, 1));
  CHECK_OK(bgi_guard_set_policy(&g, a, &err));
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, hammer, &sh);
  for (int i = 0; i < 200; i++) {
    CHECK_OK(bgi_guard_set_policy(&g, i % 2 ? a : b, &err));
    bgi_snapshot *s = bgi_snapshot_new(bgi_cfg_pack(64, 2), bgi_now_ns());
    bgi_snapshot_add(s, "a", 1);
    bgi_guard_publish_snapshot(&g, i % 5 ? s : NULL);
    if (i % 5 == 0) bgi_snapshot_unref(s);
    int known;
    (void)bgi_stat_read(&g, NULL, BG_STAT_SNAPSHOT_AGE_MS, &known);
    usleep(500);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  CHECK_EQ_INT(atomic_load(&sh.bad), 0);
  CHECK_EQ_INT(stat(&g, BG_STAT_QUERIES), atomic_load(&sh.calls));
  int64_t answers = 0;
  for (int id = BG_STAT_ANSWERS_REDIS; id <= BG_STAT_ANSWERS_ASSUMED_ABSENT; id++) answers += stat(&g, id);
  CHECK_EQ_INT(answers, atomic_load(&sh.calls));
  CHECK_EQ_INT(stat(&g, BG_STAT_CALLBACK_CALLS), atomic_load(&cb.calls));
  bg_policy_free(a);
  bg_policy_free(b);
  bgi_guard_destroy(&g);
}

/* Threads taking tokens: never more than burst + rate * elapsed. */
typedef struct taker {
  bgi_bucket *b;
  atomic_llong taken;
} taker;

static void *take_tokens(void *arg) {
  taker *t = arg;
  for (int i = 0; i < 20000; i++)
    if (bgi_bucket_take(t->b, bgi_now_ns())) atomic_fetch_add(&t->taken, 1);
  return NULL;
}

static void test_bucket_threads(void) {
  bgi_bucket b;
  taker t = {&b, 0};
  pthread_t th[4];
  bgi_bucket_init(&b);
  uint64_t t0 = bgi_now_ns();
  bgi_bucket_reset(&b, 1000, 50, t0);
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, take_tokens, &t);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  double secs = (double)(bgi_now_ns() - t0) / 1e9;
  long long limit = 50 + (long long)(1000 * secs) + 1;
  CHECK_MSG(atomic_load(&t.taken) <= limit, "%lld tokens taken in %.3f s at 1000/s, burst 50",
            (long long)atomic_load(&t.taken), secs);
  CHECK(atomic_load(&t.taken) >= 50);
  bgi_bucket_destroy(&b);
}

/* Settings that cannot work together are refused when the policy is given to a filter (issue 11's
 * audit): a snapshot max age shorter than the refresh interval; a max age of at least the interval,
 * or 0, is taken. The policy held before is kept after a refusal. */
static void test_snapshot_age_shorter_than_interval_is_refused(void) {
  bgi_guard g;
  bgi_err err = {0};
  bg_policy *p = NULL;
  bgi_guard_init(&g);
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 60000));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 1000));
  CHECK_STATUS(bgi_guard_set_policy(&g, p, &err), BG_EINVAL);
  CHECK_CONTAINS(err.msg, "BG_POLICY_SNAPSHOT_MAX_AGE_MS (1000 ms) is shorter than BG_POLICY_SNAPSHOT_INTERVAL_MS "
                 "(60000 ms)");
  CHECK_CONTAINS(err.msg, "set the max age to at least the interval");
  CHECK(atomic_load(&g.policy) == NULL);
  err = (bgi_err){0};
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 60000));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 0));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  /* no refresh: any max age is fine (snapshots come from bg_filter_snapshot_refresh) */
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 0));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 1));
  CHECK_OK(bgi_guard_set_policy(&g, p, &err));
  bg_policy_free(p);
  bgi_guard_destroy(&g);
}

BGT_RUN(BGT_CASE(test_snapshot_age_shorter_than_interval_is_refused), BGT_CASE(test_policy_object_defaults_and_ranges), BGT_CASE(test_classification), BGT_CASE(test_backoff),
        BGT_CASE(test_breaker_state_machine), BGT_CASE(test_token_bucket), BGT_CASE(test_engine_chain),
        BGT_CASE(test_engine_adds), BGT_CASE(test_engine_breaker), BGT_CASE(test_engine_retry_timing),
        BGT_CASE(test_engine_threads), BGT_CASE(test_bucket_threads))
