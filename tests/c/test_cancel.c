/*
 * bg_call_cancel against a real redis-server: a cancel from another thread (or from a signal
 * handler) in the middle of each kind of wait - a lock acquire (subscribed and polling), a
 * rotation waiting for another one, a query waiting out a write lock, a policy retry backoff -
 * ends it within 150 ms with BG_ECANCELED and leaves nothing behind; a LOCKED commit's wait for
 * the write lock (a wait of the library's own inner lock acquire) too, and a wait for a free
 * pooled connection. Each has its negative
 * control: the same wait without a cancel takes its full time.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "harness.h"
#include "lateness.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;
/* what the issue asks: a cancel is observed within 100 ms, the call returns within 150 ms */
#define CANCEL_RETURN_MS 150
/* the negative controls wait this long (and must not end sooner) */
#define CONTROL_WAIT_MS 600
/* the cancel comes this long after the wait started (it is then in the middle of it) */
#define CANCEL_AFTER_MS 300

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static int64_t ms_between(uint64_t a, uint64_t b) { return b > a ? (int64_t)((b - a) / 1000000u) : 0; }

/* A thread that cancels `call` after_ms from now. */
typedef struct canceller {
  bg_call *call;
  int64_t after_ms;
  uint64_t at_ns;
  pthread_t th;
} canceller;

static void *cancel_main(void *p) {
  canceller *c = p;
  sleep_ms(c->after_ms);
  c->at_ns = bgt_now_ns();
  bg_call_cancel(c->call);
  return NULL;
}

static void cancel_later(canceller *c, bg_call *call, int64_t after_ms) {
  c->call = call;
  c->after_ms = after_ms;
  c->at_ns = 0;
  CHECK(pthread_create(&c->th, NULL, cancel_main, c) == 0);
}

/* Joins; checks the call returned within CANCEL_RETURN_MS of the cancel (and not before it). */
static void check_cancel_latency(canceller *c, uint64_t returned_ns, const char *what) {
  pthread_join(c->th, NULL);
  CHECK_MSG(c->at_ns && returned_ns >= c->at_ns, "%s: returned before the cancel", what);
  int64_t ms = ms_between(c->at_ns, returned_ns);
  double late = bgt_lateness_ms((double)ms);
  CHECK_MSG(ms <= CANCEL_RETURN_MS + late, "%s: returned %lld ms after the cancel (at most %d + %.0f ms the machine "
            "woke a sleeper late)", what, (long long)ms, CANCEL_RETURN_MS, late);
}

static bg_call *new_call(void) {
  bg_call *c = NULL;
  CHECK_OK(bg_call_new(&c));
  return c;
}

static bg_lock *open_lock(const char *name, int subscribe) {
  bg_options *o = NULL;
  bg_lock *l = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_SUBSCRIBE, subscribe));
  CHECK_OK(bg_lock_open(&l, cl, name, o));
  bg_options_free(o);
  return l;
}

/* The holder: another thread holds `l` exclusively until told to stop. */
typedef struct holder {
  bg_lock *l;
  int mode;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int held, stop;
} holder;

static void *holder_main(void *p) {
  holder *h = p;
  int st = bg_lock_acquire(h->l, h->mode, 0, NULL);
  pthread_mutex_lock(&h->mu);
  h->held = st == BG_OK ? 1 : -1;
  pthread_cond_broadcast(&h->cv);
  while (!h->stop) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
  if (st == BG_OK) bg_lock_release(h->l);
  return NULL;
}

static void hold(holder *h, bg_lock *l, int mode) {
  memset(h, 0, sizeof *h);
  h->l = l;
  h->mode = mode;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  CHECK(pthread_create(&h->th, NULL, holder_main, h) == 0);
  pthread_mutex_lock(&h->mu);
  while (!h->held) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
  CHECK_MSG(h->held == 1, "the holder could not take the lock");
}

static void unhold(holder *h) {
  pthread_mutex_lock(&h->mu);
  h->stop = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  pthread_join(h->th, NULL);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
}

static long long zcard(const char *key) {
  char *got = bgt_redis_cmd(&srv, "ZCARD %s", key);
  long long v = atoll(got);
  free(got);
  return v;
}

static void lock_wait_case(int subscribe) {
  const char *name = subscribe ? "cancel-lock-sub" : "cancel-lock-poll";
  bg_lock *a = open_lock(name, subscribe), *b = open_lock(name, subscribe);
  char writers[128];
  snprintf(writers, sizeof writers, "{%s:lock}:writers", name);
  holder h;
  hold(&h, a, BG_LOCK_EXCLUSIVE);

  /* negative control: without a cancel the wait takes its full time */
  bg_call *call = new_call();
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_lock_acquire_ex(b, call, BG_LOCK_WRITE, CONTROL_WAIT_MS, NULL), BG_ELOCKED);
  CHECK_MSG(ms_between(t0, bgt_now_ns()) >= CONTROL_WAIT_MS, "the uncancelled wait ended early");

  /* a cancel from another thread in the middle of a 60 s wait */
  canceller c;
  cancel_later(&c, call, CANCEL_AFTER_MS);
  int st = bg_lock_acquire_ex(b, call, BG_LOCK_WRITE, 60000, NULL);
  check_cancel_latency(&c, bgt_now_ns(), subscribe ? "lock wait (subscribed)" : "lock wait (polling)");
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK_STATUS(bg_call_status(call), BG_ECANCELED);
  CHECK_CONTAINS(bg_call_errmsg(call), "cancelled");
  CHECK(bg_call_cancelled(call));
  /* nothing left behind: no hold, no writer intent holding readers back */
  int mode = -1;
  CHECK_OK(bg_lock_held(b, &mode, NULL, NULL));
  CHECK_EQ_INT(mode, 0);
  CHECK_EQ_INT(zcard(writers), 0);

  /* the flag is sticky: a later wait with the object ends at once, until it is cleared */
  t0 = bgt_now_ns();
  CHECK_STATUS(bg_lock_acquire_ex(b, call, BG_LOCK_EXCLUSIVE, 60000, NULL), BG_ECANCELED);
  CHECK(ms_between(t0, bgt_now_ns()) <= CANCEL_RETURN_MS + bgt_lateness_ms(CANCEL_RETURN_MS));
  CHECK_OK(bg_call_clear_cancel(call));
  CHECK(!bg_call_cancelled(call));
  unhold(&h);
  uint64_t tok = 0;
  CHECK_OK(bg_lock_acquire_ex(b, call, BG_LOCK_EXCLUSIVE, 1000, &tok));
  CHECK_OK(bg_lock_release_ex(b, call));
  bg_call_free(call);
  bg_lock_close(a);
  bg_lock_close(b);
}

static void test_lock_wait_subscribed(void) { lock_wait_case(1); }
static void test_lock_wait_polling(void) { lock_wait_case(0); }

/* async-signal-safe: a SIGALRM handler cancels the waiting call */
static bg_call *volatile signal_call;
static volatile uint64_t signal_at_ns;
static void on_alarm(int sig) {
  (void)sig;
  signal_at_ns = bgt_now_ns();  /* clock_gettime is async-signal-safe */
  bg_call_cancel(signal_call);
}

static void test_cancel_from_signal_handler(void) {
  bg_lock *a = open_lock("cancel-lock-signal", 1), *b = open_lock("cancel-lock-signal", 1);
  holder h;
  hold(&h, a, BG_LOCK_EXCLUSIVE);
  bg_call *call = new_call();
  signal_call = call;
  signal_at_ns = 0;
  struct sigaction sa = {0}, old;
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGALRM, &sa, &old) == 0);
  struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = CANCEL_AFTER_MS * 1000}};
  CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
  int st = bg_lock_acquire_ex(b, call, BG_LOCK_EXCLUSIVE, 60000, NULL);
  uint64_t back = bgt_now_ns();
  sigaction(SIGALRM, &old, NULL);
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK(signal_at_ns != 0);
  CHECK_MSG(ms_between(signal_at_ns, back) <= CANCEL_RETURN_MS + bgt_lateness_ms(CANCEL_RETURN_MS),
            "returned %lld ms after the signal", (long long)ms_between(signal_at_ns, back));
  unhold(&h);
  bg_call_free(call);
  bg_lock_close(a);
  bg_lock_close(b);
}

static bg_options *rotate_opts(int64_t wait_ms) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_WAIT_MS, wait_ms));
  return o;
}

static void test_rotation_wait(void) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, cl, "cancel-rot"));
  bg_rotation *first = NULL, *second = NULL;
  CHECK_OK(bg_rotation_begin(&first, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));

  /* negative control: BG_EROTATING after the full wait */
  bg_options *o = rotate_opts(CONTROL_WAIT_MS);
  bg_call *call = new_call();
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_rotation_begin_ex(&second, call, f, 1000, 0.01, BG_ROTATE_SWAP, o), BG_EROTATING);
  CHECK_MSG(ms_between(t0, bgt_now_ns()) >= CONTROL_WAIT_MS, "the uncancelled wait ended early");
  CHECK(second == NULL);
  bg_options_free(o);

  o = rotate_opts(60000);
  canceller c;
  cancel_later(&c, call, CANCEL_AFTER_MS);
  int st = bg_rotation_begin_ex(&second, call, f, 1000, 0.01, BG_ROTATE_SWAP, o);
  check_cancel_latency(&c, bgt_now_ns(), "rotation wait");
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK(second == NULL);
  CHECK_CONTAINS(bg_call_errmsg(call), "cancelled");
  CHECK_CONTAINS(bg_filter_errmsg(f), "cancelled");
  bg_options_free(o);

  /* no lease taken: once the first rotation ends, the next begins at once */
  CHECK_OK(bg_rotation_add(first, "a", 1));
  CHECK_OK(bg_rotation_commit(first));
  bg_rotation_free(first);
  CHECK_OK(bg_call_clear_cancel(call));
  CHECK_OK(bg_rotation_begin_ex(&second, call, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_commit_ex(second, call));
  bg_rotation_free(second);
  bg_filter_delete(f, NULL);
  bg_call_free(call);
  bg_filter_close(f);
}

/* a LOCKED commit waits for the filter's write lock: the call of bg_rotation_commit_ex reaches
 * that inner wait (the library's own bg_lock_acquire), and a cancel aborts the rotation */
static void test_locked_commit_wait(void) {
  bg_filter *f = NULL;
  bg_lock *other = NULL;
  CHECK_OK(bg_filter_open(&f, cl, "cancel-locked"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add(f, "old", 3, NULL));
  CHECK_OK(bg_lock_open_filter(&other, f, NULL));
  holder h;
  hold(&h, other, BG_LOCK_EXCLUSIVE);  /* e.g. a Redisson RLock on "{NAME}:lock" */
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, CONTROL_WAIT_MS));
  bg_call *call = new_call();

  /* control: the commit waits for the holder up to the lease, then fails */
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin_ex(&r, call, f, 1000, 0.01, BG_ROTATE_LOCKED, o));
  CHECK_OK(bg_rotation_add(r, "new", 3));
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_rotation_commit_ex(r, call), BG_ELOCKED);
  CHECK_MSG(ms_between(t0, bgt_now_ns()) >= CONTROL_WAIT_MS, "the uncancelled commit ended early");
  bg_rotation_free(r);

  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, 60000));
  r = NULL;
  CHECK_OK(bg_rotation_begin_ex(&r, call, f, 1000, 0.01, BG_ROTATE_LOCKED, o));
  CHECK_OK(bg_rotation_add(r, "new", 3));
  canceller c;
  cancel_later(&c, call, CANCEL_AFTER_MS);
  int st = bg_rotation_commit_ex(r, call);
  check_cancel_latency(&c, bgt_now_ns(), "locked commit wait");
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK_CONTAINS(bg_call_errmsg(call), "cancelled");
  bg_rotation_free(r);
  unhold(&h);
  /* the rotation was aborted: its lease is gone (the next one begins at once), the filter is the old one */
  int present = 0;
  CHECK_OK(bg_filter_contains(f, "old", 3, &present));
  CHECK(present);
  CHECK_OK(bg_call_clear_cancel(call));
  r = NULL;
  CHECK_OK(bg_rotation_begin_ex(&r, call, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  bg_rotation_free(r);
  bg_options_free(o);
  bg_call_free(call);
  bg_lock_close(other);
  bg_filter_delete(f, NULL);
  bg_filter_close(f);
}

static void test_write_lock_wait(void) {
  bg_options *o = NULL;
  bg_client *patient = NULL;
  bg_filter *f = NULL, *own = NULL;
  bg_lock *wl = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 60000));
  CHECK_OK(bg_client_open(&patient, srv.url, o));
  bg_options_free(o);
  CHECK_OK(bg_filter_open(&own, cl, "cancel-wl"));
  CHECK_OK(bg_filter_init(own, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add(own, "x", 1, NULL));
  CHECK_OK(bg_filter_open(&f, patient, "cancel-wl"));
  CHECK_OK(bg_lock_open_filter(&wl, own, NULL));
  holder h;
  hold(&h, wl, BG_LOCK_WRITE);

  /* negative control: a call deadline of CONTROL_WAIT_MS ends the wait (BG_ELOCKED), not sooner */
  bg_call *call = new_call();
  int present = 0;
  const void *item = "x";
  size_t len = 1;
  uint8_t found = 0;
  CHECK_OK(bg_call_set_timeout_ms(call, CONTROL_WAIT_MS));
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains_many_ex(f, call, &item, &len, 1, &found), BG_ELOCKED);
  CHECK_MSG(ms_between(t0, bgt_now_ns()) >= CONTROL_WAIT_MS - 50, "the uncancelled wait ended early (%lld ms)",
            (long long)ms_between(t0, bgt_now_ns()));
  CHECK_OK(bg_call_set_timeout_ms(call, 0));

  canceller c;
  cancel_later(&c, call, CANCEL_AFTER_MS);
  int st = bg_filter_contains_many_ex(f, call, &item, &len, 1, &found);
  check_cancel_latency(&c, bgt_now_ns(), "write-lock wait");
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_NONE);
  unhold(&h);
  CHECK_OK(bg_filter_contains(f, "x", 1, &present));
  CHECK(present);
  bg_call_free(call);
  bg_lock_close(wl);
  bg_filter_delete(own, NULL);
  bg_filter_close(f);
  bg_filter_close(own);
  bg_client_close(patient);
}

static void test_policy_backoff(void) {
  bg_filter *f = NULL;
  bg_policy *p = NULL;
  CHECK_OK(bg_filter_open(&f, cl, "cancel-policy-missing"));
  CHECK_OK(bg_policy_new(&p));
  int chain[] = {BG_ACT_RETRY, BG_ACT_ERROR};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_NOTINIT, chain, 2));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_RETRY_COUNT, 1));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_JITTER_PCT, 0));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_MAX_MS, 60000));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_BASE_MS, CONTROL_WAIT_MS));
  CHECK_OK(bg_filter_set_policy(f, p));
  const void *item = "x";
  size_t len = 1;
  uint8_t found = 0;

  /* negative control: the retry waits out its backoff, then fails as the filter has no config */
  bg_call *call = new_call();
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains_many_ex(f, call, &item, &len, 1, &found), BG_ENOTINIT);
  CHECK_MSG(ms_between(t0, bgt_now_ns()) >= CONTROL_WAIT_MS, "the uncancelled backoff ended early");

  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_BASE_MS, 60000));
  CHECK_OK(bg_filter_set_policy(f, p));
  canceller c;
  cancel_later(&c, call, CANCEL_AFTER_MS);
  int st = bg_filter_contains_many_ex(f, call, &item, &len, 1, &found);
  check_cancel_latency(&c, bgt_now_ns(), "policy backoff");
  CHECK_STATUS(st, BG_ECANCELED);
  /* a cancel is not a failure the policy answers for */
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_NONE);
  bg_call_free(call);
  bg_policy_free(p);
  bg_filter_close(f);
}

/* The server sleeps (DEBUG SLEEP, from a connection of the test's own) while the only pooled
 * connection of a client waits for its answer: a second call of that client queues for the pool. */
typedef struct pinger {
  bg_client *c;
  int st;
  pthread_t th;
} pinger;

static void *debug_sleep_main(void *arg) {
  (void)arg;
  free(bgt_redis_cmd(&srv, "DEBUG SLEEP %.1f", (CANCEL_AFTER_MS + CONTROL_WAIT_MS) / 1000.0 + 0.3));
  return NULL;
}

static void *hold_main(void *arg) {
  pinger *h = arg;
  h->st = bg_client_ping(h->c);
  return NULL;
}

/* One round of the pool case: the connection held, then a call queueing for it, cancelled after
 * cancel_ms (0: not cancelled). Returns how long the queued call took; *st its status. */
static int64_t pool_round(bg_client *c, int64_t cancel_ms, int *st) {
  pthread_t sleeper;
  pinger h = {c, -1, 0};
  pthread_create(&sleeper, NULL, debug_sleep_main, NULL);
  sleep_ms(50);   /* the server is asleep: the holder's ping will wait for it ... */
  pthread_create(&h.th, NULL, hold_main, &h);
  sleep_ms(50);   /* ... on the only pooled connection */
  bg_call *call = new_call();
  canceller cn;
  if (cancel_ms) cancel_later(&cn, call, cancel_ms);
  uint64_t t0 = bgt_now_ns();
  *st = bg_client_ping_ex(c, call);
  uint64_t t1 = bgt_now_ns();
  if (cancel_ms) check_cancel_latency(&cn, t1, "pool wait");
  pthread_join(h.th, NULL);
  pthread_join(sleeper, NULL);
  CHECK_OK(h.st);
  bg_call_free(call);
  return ms_between(t0, t1);
}

/* The wait for a free pooled connection ends with the cancel. */
static void test_pool_wait(void) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, 0));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 1));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000));
  CHECK_OK(bg_client_open(&c, srv.url, o));
  bg_options_free(o);
  CHECK_OK(bg_client_ping(c));
  int st;
  /* negative control: uncancelled, it waits for the holder, then answers */
  int64_t ms = pool_round(c, 0, &st);
  CHECK_OK(st);
  CHECK_MSG(ms >= CONTROL_WAIT_MS, "the uncancelled pool wait ended after %lld ms", (long long)ms);
  pool_round(c, CANCEL_AFTER_MS, &st);
  CHECK_STATUS(st, BG_ECANCELED);
  bg_client_close(c);
}

static void test_strerror_and_null(void) {
  CHECK_EQ_INT(BG_ECANCELED, -20);
  CHECK_EQ_STR(bg_strerror(BG_ECANCELED), "cancelled");
  CHECK_STATUS(bg_call_cancel(NULL), BG_EINVAL);
  CHECK_STATUS(bg_call_clear_cancel(NULL), BG_EINVAL);
  CHECK_EQ_INT(bg_call_cancelled(NULL), 0);
}

/* the interrupt callback cancels as bg_call_cancel does (without setting the flag) */
typedef struct ticks {
  uint64_t start_ns;
  int calls;
} ticks;

static int interrupt_after(void *p) {
  ticks *t = p;
  t->calls++;
  return ms_between(t->start_ns, bgt_now_ns()) >= CANCEL_AFTER_MS;
}

static void test_interrupt_callback(void) {
  bg_lock *a = open_lock("cancel-lock-cb", 1), *b = open_lock("cancel-lock-cb", 1);
  holder h;
  hold(&h, a, BG_LOCK_EXCLUSIVE);
  bg_call *call = new_call();
  ticks t = {bgt_now_ns(), 0};
  CHECK_OK(bg_call_set_interrupt(call, interrupt_after, &t));
  int st = bg_lock_acquire_ex(b, call, BG_LOCK_EXCLUSIVE, 60000, NULL);
  int64_t took = ms_between(t.start_ns, bgt_now_ns());
  CHECK_STATUS(st, BG_ECANCELED);
  CHECK_MSG(took >= CANCEL_AFTER_MS && took <= CANCEL_AFTER_MS + CANCEL_RETURN_MS + bgt_lateness_ms((double)took),
            "took %lld ms", (long long)took);
  CHECK(t.calls >= 2);  /* polled during the wait, not only once */
  CHECK(!bg_call_cancelled(call));
  CHECK_OK(bg_call_set_interrupt(call, NULL, NULL));
  unhold(&h);
  bg_call_free(call);
  bg_lock_close(a);
  bg_lock_close(b);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bgt_lateness_start();
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_strerror_and_null), BGT_CASE(test_lock_wait_subscribed),
        BGT_CASE(test_lock_wait_polling), BGT_CASE(test_cancel_from_signal_handler), BGT_CASE(test_interrupt_callback),
        BGT_CASE(test_rotation_wait), BGT_CASE(test_locked_commit_wait), BGT_CASE(test_write_lock_wait), BGT_CASE(test_policy_backoff),
        BGT_CASE(test_pool_wait), BGT_CASE(teardown))
