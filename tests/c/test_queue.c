/*
 * The submission queue (include/bloomguard/queue.h) against a real redis-server: the same answers
 * as the blocking calls, from one thread with many operations in flight, driven through the fd;
 * what a host's callback (the policy's fallback) learns of the operation it serves.
 */
#include <bloomguard.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <unistd.h>

#include "client/queue.h"
#include "harness.h"
#include "lateness.h"
#include "tls_fixture.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;

typedef struct env {
  bg_client *c;
  bg_filter *f;
  bg_queue *q;
} env;

/* command_timeout_ms 0: the library's default */
static void env_open_timeout(env *e, const char *name, int64_t command_timeout_ms) {
  char msg[256];
  bg_options *o = NULL;
  memset(e, 0, sizeof *e);
  if (command_timeout_ms) {
    CHECK_OK(bg_options_new(&o));
    CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, command_timeout_ms));
  }
  CHECK_OK(bgt_client_open(&e->c, srv.url, o, msg, sizeof msg));
  bg_options_free(o);
  CHECK_OK(bg_filter_open(&e->f, e->c, name));
  CHECK_OK(bg_queue_open(&e->q, e->c));
}

static void env_open(env *e, const char *name) { env_open_timeout(e, name, 0); }

static void env_close(env *e) {
  bg_queue_close(e->q);
  bg_filter_close(e->f);
  bg_client_close(e->c);
}

/* Polls until `want` completions came (each handed to fn), through the fd as a host loop would. */
typedef void (*on_completion)(bg_completion *c, void *ctx);
static size_t drain(bg_queue *q, size_t want, on_completion fn, void *ctx) {
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

typedef struct tally {
  int ok, failed, wrong;
  int64_t expect_value;
  char first_err[256];
} tally;

static void check_value(bg_completion *c, void *ctx) {
  tally *t = ctx;
  if (bg_completion_status(c) != BG_OK) {
    if (!t->failed++) snprintf(t->first_err, sizeof t->first_err, "%s", bg_completion_errmsg(c));
    return;
  }
  t->ok++;
  /* the tag says what the answer must be */
  if (bg_completion_value(c) != (int64_t)(bg_completion_tag(c) & 1)) t->wrong++;
}

static void test_one_thread_many_in_flight(void) {
  env e;
  /* 3000 requests in flight on one connection: under a sanitizer on a loaded machine their
   * replies may take longer than the default 1 s command timeout, which is not what this tests */
  env_open_timeout(&e, "q-basic", 15000);
  items in = make_items("in", 1000), out = make_items("out", 1000);
  CHECK_OK(bg_filter_init(e.f, 100000, 1e-9, NULL));
  tally adds = {0};
  for (size_t i = 0; i < in.n; i++) CHECK_OK(bg_filter_add_submit(e.f, e.q, (uint64_t)i << 1 | 1, in.p[i], in.len[i]));
  CHECK_EQ_INT((int)drain(e.q, in.n, check_value, &adds), (int)in.n);
  CHECK_MSG(adds.failed == 0, "%d failed: %s", adds.failed, adds.first_err);
  CHECK_EQ_INT(adds.wrong, 0);   /* each add set a new bit: value 1 */
  tally q = {0};
  for (size_t i = 0; i < in.n; i++) {
    CHECK_OK(bg_filter_contains_submit(e.f, e.q, (uint64_t)i << 1 | 1, in.p[i], in.len[i]));
    CHECK_OK(bg_filter_contains_submit(e.f, e.q, (uint64_t)i << 1, out.p[i], out.len[i]));
  }
  CHECK_EQ_INT((int)drain(e.q, 2 * in.n, check_value, &q), (int)(2 * in.n));
  CHECK_MSG(q.failed == 0, "%d failed: %s", q.failed, q.first_err);
  CHECK_EQ_INT(q.wrong, 0);
  CHECK_EQ_INT(q.ok, (int)(2 * in.n));
  items_free(&in);
  items_free(&out);
  env_close(&e);
}

static void test_bad_input_is_refused_at_submit(void) {
  env e;
  env_open(&e, "q-bad");
  CHECK_STATUS(bg_filter_contains_submit(e.f, NULL, 1, "x", 1), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(e.f), "queue handle is NULL");
  CHECK_STATUS(bg_filter_contains_many_submit(e.f, e.q, 1, NULL, NULL, 3), BG_EINVAL);
  CHECK_STATUS(bg_filter_expire_submit(e.f, e.q, 1, -5), BG_EINVAL);
  CHECK_STATUS(bg_filter_init_submit(e.f, e.q, 1, 0, 0.01), BG_EBADPARAMS);
  size_t n = 9;
  bg_completion *cs[4];
  CHECK_OK(bg_queue_poll(e.q, 0, cs, 4, &n));
  CHECK_EQ_INT((int)n, 0);   /* refused submits complete nothing */
  CHECK_STATUS(bg_queue_poll(e.q, 0, NULL, 4, &n), BG_EINVAL);
  env_close(&e);
}

static void test_not_initialized_goes_through_the_policy(void) {
  env e;
  env_open(&e, "q-notinit");
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 7, "x", 1));
  bg_completion *cs[4];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(e.q, 5000, cs, 4, &n));
  CHECK_EQ_INT((int)n, 1);
  if (n == 1) {
    CHECK_EQ_U64(bg_completion_tag(cs[0]), 7);
    CHECK_STATUS(bg_completion_status(cs[0]), BG_ENOTINIT);
    CHECK_CONTAINS(bg_completion_errmsg(cs[0]), "not initialized");
  }
  env_close(&e);
}

/* Waits for one completion (at most 5 s); its status, or -1000 if none came. */
static int one(bg_queue *q, uint64_t *tag, int64_t *value, uint64_t *at_ns) {
  bg_completion *c[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 5000, c, 1, &n));
  if (at_ns) *at_ns = bgt_now_ns();
  if (n != 1) return -1000;
  if (tag) *tag = bg_completion_tag(c[0]);
  if (value) *value = bg_completion_value(c[0]);
  return bg_completion_status(c[0]);
}

static void pause_server(int ms) {
  char *r = bgt_redis_cmd(&srv, "CLIENT PAUSE %d ALL", ms);
  CHECK_EQ_STR(r, "OK");
  free(r);
}

/*
 * A deadline ends the operation at once (BG_ETIMEOUT); its reply, which comes after the pause,
 * is read and dropped: the next operation on the same connection gets its own answer. With the
 * negative control (abandoned requests leave the FIFO) the same harness sees the late reply
 * answer the next operation.
 */
static int late_reply_round(int fault) {
  env e;
  int wrong = 0;
  env_open(&e, fault ? "q-late-fault" : "q-late");
  bgi_pipes_fault_no_discard(e.q->pipes, fault);
  CHECK_OK(bg_filter_init(e.f, 10000, 1e-9, NULL));
  CHECK_OK(bg_filter_add(e.f, "present", 7, NULL));
  /* connect the queue's connection first: the pause must meet a connection that is up */
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 1, "absent-0", 8));
  CHECK_OK(one(e.q, NULL, NULL, NULL));
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, 150));
  pause_server(700);
  uint64_t t0 = bgt_now_ns(), at = 0;
  CHECK_OK(bg_filter_contains_submit_ex(e.f, call, e.q, 2, "present", 7));
  CHECK_STATUS(one(e.q, NULL, NULL, &at), BG_ETIMEOUT);
  double ms = (double)(at - t0) / 1e6;
  /* at once: the deadline, plus what the machine imposed meanwhile - not the pause (700 ms) */
  CHECK_MSG(ms >= 149 && ms <= 150 + 50 + bgt_lateness_ms(ms), "the deadline of 150 ms ended the wait after %.1f ms "
            "(the machine woke a sleeper up to %.0f ms late)", ms, bgt_lateness_ms(ms));
  /* the next operation goes behind the abandoned one on the same connection */
  for (int i = 0; i < 4; i++) {
    int64_t v = -1;
    CHECK_OK(bg_filter_contains_submit(e.f, e.q, 10 + (uint64_t)i, "absent-1", 8));
    int st = one(e.q, NULL, &v, NULL);
    if (st != BG_OK || v != 0) wrong++;
  }
  bg_call_free(call);
  env_close(&e);
  return wrong;
}

static void test_deadline_drops_late_reply(void) { CHECK_EQ_INT(late_reply_round(0), 0); }

static void test_negative_control_no_discard(void) {
  /* the harness can fail: the late reply (present) answers the next operation (absent) */
  CHECK_MSG(late_reply_round(1) > 0, "the negative control saw no crossed answer");
}

/*
 * Without a deadline an operation waits up to the command timeout, and then times out
 * (BG_ETIMEOUT), as the blocking call does - not a connection failure, whatever the order the
 * queue's timers come in.
 */
static void test_command_timeout_is_a_timeout(void) {
  char msg[256];
  bg_options *o = NULL;
  bg_client *c = NULL;
  bg_filter *f = NULL;
  bg_queue *q = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 200));
  CHECK_OK(bgt_client_open(&c, srv.url, o, msg, sizeof msg));
  CHECK_OK(bg_filter_open(&f, c, "q-cmd-timeout"));
  CHECK_OK(bg_queue_open(&q, c));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_contains_submit(f, q, 1, "warm", 4));
  CHECK_OK(one(q, NULL, NULL, NULL));
  pause_server(700);
  uint64_t t0 = bgt_now_ns(), at = 0;
  CHECK_OK(bg_filter_contains_submit(f, q, 2, "x", 1));
  bg_completion *cs[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 5000, cs, 1, &n));
  at = bgt_now_ns();
  CHECK_EQ_INT((int)n, 1);
  if (n == 1) {
    CHECK_STATUS(bg_completion_status(cs[0]), BG_ETIMEOUT);
    CHECK_CONTAINS(bg_completion_errmsg(cs[0]), "did not answer within 200 ms");
  }
  CHECK_MSG((at - t0) / 1000000u < 600, "timed out after %llu ms", (unsigned long long)((at - t0) / 1000000u));
  /* the late reply is dropped: the next answer (after the pause) is the next operation's own */
  char *r = bgt_redis_cmd(&srv, "PING");
  CHECK_EQ_STR(r, "PONG");
  free(r);
  int64_t v = -1;
  CHECK_OK(bg_filter_contains_submit(f, q, 3, "warm", 4));
  CHECK_OK(one(q, NULL, &v, NULL));
  CHECK_EQ_INT(v, 0);
  bg_queue_close(q);
  bg_filter_close(f);
  bg_client_close(c);
  bg_options_free(o);
}

static void test_cancel_by_tag(void) {
  env e;
  env_open(&e, "q-cancel");
  CHECK_OK(bg_filter_init(e.f, 10000, 0.01, NULL));
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 1, "warm", 4));
  CHECK_OK(one(e.q, NULL, NULL, NULL));
  pause_server(600);
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 42, "x", 1));
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 43, "y", 1));
  size_t n = 9;
  bg_completion *cs[4];
  CHECK_OK(bg_queue_poll(e.q, 30, cs, 4, &n));
  CHECK_EQ_INT((int)n, 0);   /* paused: nothing yet */
  uint64_t t0 = bgt_now_ns(), at = 0, tag = 0;
  CHECK_OK(bg_queue_cancel(e.q, 42));
  CHECK_STATUS(one(e.q, &tag, NULL, &at), BG_ECANCELED);
  CHECK_EQ_U64(tag, 42);
  /* at the next poll: long before the pause (600 ms) ends */
  CHECK_MSG((at - t0) / 1000000u < 300, "the cancel took %llu ms", (unsigned long long)((at - t0) / 1000000u));
  /* the other one answers after the pause, and the queue goes on */
  CHECK_OK(one(e.q, &tag, NULL, NULL));
  CHECK_EQ_U64(tag, 43);
  CHECK_OK(bg_queue_cancel(e.q, 42));   /* already ended: nothing happens */
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 44, "z", 1));
  CHECK_OK(one(e.q, &tag, NULL, NULL));
  CHECK_EQ_U64(tag, 44);
  env_close(&e);
}

typedef struct later {
  bg_call *call;
  int ms;
  _Atomic uint64_t cancelled_at;
} later;

static void *cancel_later(void *p) {
  later *l = p;
  usleep((useconds_t)l->ms * 1000);
  atomic_store(&l->cancelled_at, bgt_now_ns());
  bg_call_cancel(l->call);
  return NULL;
}

/* A bg_call's flag is looked at every 50 ms: the operation ends soon after the cancel, long
 * before the pause that holds its reply (3 s) would have ended it (the bound leaves room for a
 * loaded machine). */
static void test_cancel_by_call_from_another_thread(void) {
  env e;
  env_open(&e, "q-cancel-call");
  CHECK_OK(bg_filter_init(e.f, 10000, 0.01, NULL));
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  pause_server(3000);
  CHECK_OK(bg_filter_contains_submit_ex(e.f, call, e.q, 5, "x", 1));
  later l = {call, 100, 0};
  pthread_t th;
  uint64_t at = 0;
  pthread_create(&th, NULL, cancel_later, &l);
  CHECK_STATUS(one(e.q, NULL, NULL, &at), BG_ECANCELED);
  pthread_join(th, NULL);
  double ms = (double)(at - atomic_load(&l.cancelled_at)) / 1e6;
  CHECK_MSG(ms < 1000, "the operation ended %.1f ms after the cancel", ms);
  free(bgt_redis_cmd(&srv, "CLIENT UNPAUSE"));
  bg_call_free(call);
  env_close(&e);
}

/* Closing a queue with operations in flight and asleep frees everything (ASan checks). */
static void test_close_with_operations_in_flight(void) {
  env e;
  env_open(&e, "q-close");
  CHECK_OK(bg_filter_init(e.f, 10000, 0.01, NULL));
  pause_server(300);
  for (uint64_t i = 0; i < 100; i++) CHECK_OK(bg_filter_contains_submit(e.f, e.q, i, "x", 1));
  size_t n = 0;
  bg_completion *cs[4];
  CHECK_OK(bg_queue_poll(e.q, 20, cs, 4, &n));
  env_close(&e);
  usleep(350 * 1000);
}

/* TLS: the queue's connections make their TLS handshake as the queue is polled; the answers are
 * the same; a certificate of the wrong CA fails the operations with BG_ETLS (not a hang). */
static void test_over_tls(void) {
  if (!(bg_features() & BG_FEATURE_TLS)) {
    printf("    (this build has no TLS)\n");
    return;
  }
  bgt_tls_redis r;
  if (bgt_tls_redis_start_or_skip(&r, NULL, 0) != 0) return;
  char path[400];
  for (int good = 1; good >= 0; good--) {
    bg_options *o = NULL;
    bg_client *c = NULL;
    bg_filter *f = NULL;
    bg_queue *q = NULL;
    CHECK_OK(bg_options_new(&o));
    CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(&r, good ? "ca.crt" : "other-ca.crt", path,
                                                                  sizeof path)));
    CHECK_OK(bg_client_open(&c, r.url, o));
    bg_options_free(o);
    CHECK_OK(bg_filter_open(&f, c, "q-tls"));
    CHECK_OK(bg_queue_open(&q, c));
    if (good) {
      CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));   /* blocking, on the client's own connections */
      CHECK_OK(bg_filter_add(f, "x", 1, NULL));
    }
    for (uint64_t i = 0; i < 50; i++) CHECK_OK(bg_filter_contains_submit(f, q, i, i % 2 ? "x" : "y", 1));
    tally t = {0};
    size_t got = drain(q, 50, check_value, &t);
    CHECK_EQ_INT((int)got, 50);
    if (good) {
      CHECK_MSG(t.failed == 0 && t.wrong == 0, "%d failed (%s), %d wrong", t.failed, t.first_err, t.wrong);
    } else {
      CHECK_EQ_INT(t.failed, 50);
      CHECK_CONTAINS(t.first_err, "certificate");
    }
    bg_queue_close(q);
    bg_filter_close(f);
    bg_client_close(c);
  }
  bgt_tls_redis_stop(&r);
}

/* A client opened during an outage: the queue's first operations find where calls go (on the
 * queue's discovery thread) and fail as calls do during an outage; once the server is back the same
 * client and queue answer. */
static void test_opened_during_an_outage(void) {
  env e;
  bgt_redis_kill(&srv);
  env_open(&e, "q-outage");
  for (uint64_t i = 0; i < 20; i++) CHECK_OK(bg_filter_contains_submit(e.f, e.q, i, "x", 1));
  tally t = {0};
  CHECK_EQ_INT((int)drain(e.q, 20, check_value, &t), 20);
  CHECK_EQ_INT(t.failed, 20);
  CHECK_CONTAINS(t.first_err, "connect");
  CHECK_EQ_INT(bgt_redis_restart(&srv, NULL), 0);
  CHECK_OK(bg_filter_init(e.f, 1000, 0.01, NULL));
  for (uint64_t i = 0; i < 20; i++) CHECK_OK(bg_filter_contains_submit(e.f, e.q, i << 1, "x", 1));
  memset(&t, 0, sizeof t);
  CHECK_EQ_INT((int)drain(e.q, 20, check_value, &t), 20);
  CHECK_MSG(t.failed == 0 && t.wrong == 0, "%d failed (%s), %d wrong", t.failed, t.first_err, t.wrong);
  env_close(&e);
}

/* What the fallback saw of each call: the tag bg_queue_running gave and the item it was asked. */
typedef struct seen {
  bg_queue *q;
  int calls, running_status;
  uint64_t tags[8];
  char items[8][16];
} seen;

static int record(void *userdata, const void *const *items, const size_t *lens, size_t n, uint8_t *present) {
  seen *s = userdata;
  uint64_t tag = 0;
  int st = bg_queue_running(s->q, &tag);
  if (st != BG_OK) s->running_status = st;
  if (s->calls < 8 && n == 1) {
    s->tags[s->calls] = tag;
    snprintf(s->items[s->calls], sizeof s->items[0], "%.*s", (int)lens[0], (const char *)items[0]);
  }
  s->calls++;
  for (size_t i = 0; i < n; i++) present[i] = 1;
  return 0;
}

static void set_policy(bg_filter *f, int cls, seen *s, int breaker) {
  bg_policy *p = NULL;
  int chain[] = {BG_ACT_CALLBACK, BG_ACT_ERROR};
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_chain(p, cls, chain, 2));
  CHECK_OK(bg_policy_set_fallback(p, record, s));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_CALLBACK_RATE, 0));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, breaker));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_COOLDOWN_MS, 60000));
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
}

/* Three queries of a missing filter in flight at once: each fallback call, made inside the poll,
 * names the tag of the query it answers. */
static void test_fallback_in_poll_knows_its_operation(void) {
  env e;
  env_open(&e, "qcb-notinit");
  seen s = {.q = e.q};
  set_policy(e.f, BG_FAIL_NOTINIT, &s, 0);
  const char *items[] = {"eleven", "twelve", "thirteen"};
  for (uint64_t i = 0; i < 3; i++) CHECK_OK(bg_filter_contains_submit(e.f, e.q, 11 + i, items[i], strlen(items[i])));
  for (int i = 0; i < 3; i++) {
    int64_t v = 0;
    CHECK_OK(one(e.q, NULL, &v, NULL));   /* the filter is missing: only the fallback answers */
    CHECK_EQ_INT(v, 1);
  }
  CHECK_EQ_INT(s.calls, 3);
  CHECK_OK(s.running_status);
  for (int i = 0; i < 3 && i < s.calls; i++) {
    uint64_t t = s.tags[i];
    CHECK_MSG(t >= 11 && t <= 13 && strcmp(s.items[i], items[t - 11]) == 0,
              "the fallback asked about \"%s\" was told tag %llu", s.items[i], (unsigned long long)t);
  }
  /* outside a callback: nothing runs */
  uint64_t tag = 99;
  CHECK_STATUS(bg_queue_running(e.q, &tag), BG_EINVAL);
  CHECK_EQ_U64(tag, 99);
  CHECK_STATUS(bg_queue_running(NULL, &tag), BG_EINVAL);
  CHECK_STATUS(bg_queue_running(e.q, NULL), BG_EINVAL);
  env_close(&e);
}

/* With the breaker open a query goes to the chain at once: the fallback runs inside the submit,
 * and is told that submit's tag. */
static void test_fallback_in_submit_knows_its_operation(void) {
  env e;
  env_open(&e, "qcb-breaker");
  CHECK_OK(bg_filter_init(e.f, 1000, 0.01, NULL));
  seen s = {.q = e.q};
  set_policy(e.f, BG_FAIL_TIMEOUT, &s, 1);
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 1, "warm", 4));   /* connects the queue */
  CHECK_OK(one(e.q, NULL, NULL, NULL));
  pause_server(400);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, 50));
  CHECK_OK(bg_filter_contains_submit_ex(e.f, call, e.q, 21, "first", 5));
  int64_t v = 0;
  CHECK_OK(one(e.q, NULL, &v, NULL));   /* timed out: the breaker opened, the fallback answered */
  CHECK_EQ_INT(v, 1);                   /* (never added: Redis would say 0) */
  CHECK_EQ_INT(s.calls, 1);
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 22, "second", 6));
  CHECK_EQ_INT(s.calls, 2);   /* answered by the submit itself */
  v = 0;
  CHECK_OK(one(e.q, NULL, &v, NULL));
  CHECK_EQ_INT(v, 1);
  CHECK_OK(s.running_status);
  CHECK_EQ_U64(s.tags[0], 21);
  CHECK_EQ_STR(s.items[0], "first");
  CHECK_EQ_U64(s.tags[1], 22);
  CHECK_EQ_STR(s.items[1], "second");
  char *r = bgt_redis_cmd(&srv, "PING");   /* the pause is over */
  CHECK_EQ_STR(r, "PONG");
  free(r);
  bg_call_free(call);
  env_close(&e);
}

/* persist clears the time to live of both keys, as bg_filter_persist does: 1, then 0. */
static void test_persist_submit(void) {
  env e;
  env_open(&e, "qcb-persist");
  CHECK_OK(bg_filter_init(e.f, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add(e.f, "x", 1, NULL));
  int applied = 0;
  CHECK_OK(bg_filter_expire(e.f, 60000, &applied));
  int64_t v = -1;
  CHECK_OK(bg_filter_persist_submit(e.f, e.q, 5));
  CHECK_OK(one(e.q, NULL, &v, NULL));
  CHECK_EQ_INT(v, 1);
  char *ttl = bgt_redis_cmd(&srv, "PTTL %s", "qcb-persist");
  CHECK_EQ_STR(ttl, "-1");
  free(ttl);
  ttl = bgt_redis_cmd(&srv, "PTTL %s", "{qcb-persist}:config");
  CHECK_EQ_STR(ttl, "-1");
  free(ttl);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_persist_submit_ex(e.f, call, e.q, 6));
  CHECK_OK(one(e.q, NULL, &v, NULL));
  CHECK_EQ_INT(v, 0);   /* nothing had a time to live */
  CHECK_STATUS(bg_filter_persist_submit(NULL, e.q, 7), BG_EINVAL);
  CHECK_STATUS(bg_filter_persist_submit_ex(e.f, call, NULL, 7), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "queue handle is NULL");
  bg_call_free(call);
  env_close(&e);
}

/* The backend is the one BG_QUEUE_POLLER names (the ctest runs labelled poller force poll), seen
 * from outside: what kind of descriptor bg_queue_fd is. A name this build lacks fails the open with
 * a message that names the variable, and makes no queue. */
static void test_backend_is_the_one_asked(void) {
  const char *asked = getenv("BG_QUEUE_POLLER");
  int want_poll = asked && !strcmp(asked, "poll");
  int want_kq = asked && !strcmp(asked, "kqueue");
  env e;
  env_open(&e, "qbackend");
  char path[64], target[128] = {0};
  snprintf(path, sizeof path, "/proc/self/fd/%d", bg_queue_fd(e.q));
  CHECK(readlink(path, target, sizeof target - 1) > 0);
  /* epoll: the instance; poll: the wake's read end, an eventfd on Linux; kqueue (libkqueue, a test
   * build's): the write end of the pipe libkqueue hands out as the kqueue */
  if (want_kq) CHECK_MSG(!strncmp(target, "pipe:", 5), "kqueue fd is %s", target);
  else CHECK_EQ_STR(target, want_poll ? "anon_inode:[eventfd]" : "anon_inode:[eventpoll]");
  CHECK_EQ_INT(e.q->poller.kind, want_poll ? BGI_POLLER_POLL : want_kq ? BGI_POLLER_KQUEUE : BGI_POLLER_EPOLL);
  char *saved = asked ? strdup(asked) : NULL;
#if defined(BGT_LIBKQUEUE)
  const char *bad[] = {"bogus"};   /* kqueue: built in on libkqueue (-DBG_TEST_LIBKQUEUE=ON) */
#else
  const char *bad[] = {"bogus", "kqueue"};   /* kqueue: not in a Linux build */
#endif
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("BG_QUEUE_POLLER", bad[i], 1);
    bg_queue *q = (bg_queue *)&e;   /* not NULL: the failed open must clear it */
    CHECK_STATUS(bg_queue_open(&q, e.c), BG_EINVAL);
    CHECK(q == NULL);
    CHECK_CONTAINS(bg_client_errmsg(e.c), "BG_QUEUE_POLLER=");
    CHECK_CONTAINS(bg_client_errmsg(e.c), bad[i]);
  }
  if (saved) setenv("BG_QUEUE_POLLER", saved, 1);
  else unsetenv("BG_QUEUE_POLLER");
  free(saved);
  env_close(&e);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bgt_lateness_start();
}
static void teardown(void) {
  bgt_lateness_stop();
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_backend_is_the_one_asked), BGT_CASE(test_one_thread_many_in_flight), BGT_CASE(test_bad_input_is_refused_at_submit),
        BGT_CASE(test_not_initialized_goes_through_the_policy), BGT_CASE(test_deadline_drops_late_reply),
        BGT_CASE(test_negative_control_no_discard), BGT_CASE(test_command_timeout_is_a_timeout),
        BGT_CASE(test_cancel_by_tag), BGT_CASE(test_fallback_in_poll_knows_its_operation),
        BGT_CASE(test_fallback_in_submit_knows_its_operation), BGT_CASE(test_persist_submit),
        BGT_CASE(test_cancel_by_call_from_another_thread), BGT_CASE(test_close_with_operations_in_flight),
        BGT_CASE(test_over_tls), BGT_CASE(test_opened_during_an_outage),
        BGT_CASE(teardown))
