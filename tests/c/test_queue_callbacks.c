/*
 * What a host's callback sees of the submission queue (include/bloomguard/queue.h), against a
 * real redis-server: the policy's fallback, run inside bg_queue_poll or inside a submit, learns the
 * tag of the operation it answers for (bg_queue_running); and persist, the last admin operation,
 * submitted like the others.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;

typedef struct env {
  bg_client *c;
  bg_filter *f;
  bg_queue *q;
} env;

static void env_open(env *e, const char *name) {
  char msg[256];
  memset(e, 0, sizeof *e);
  CHECK_OK(bgt_client_open(&e->c, srv.url, NULL, msg, sizeof msg));
  CHECK_OK(bg_filter_open(&e->f, e->c, name));
  CHECK_OK(bg_queue_open(&e->q, e->c));
}

static void env_close(env *e) {
  bg_queue_close(e->q);
  bg_filter_close(e->f);
  bg_client_close(e->c);
}

/* Waits for one completion (at most 5 s); its status, or -1000 if none came. */
static int one(bg_queue *q, uint64_t *tag, int64_t *value, int *source) {
  bg_completion *c[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 5000, c, 1, &n));
  if (n != 1) return -1000;
  if (tag) *tag = bg_completion_tag(c[0]);
  if (value) *value = bg_completion_value(c[0]);
  if (source) *source = bg_completion_source(c[0]);
  return bg_completion_status(c[0]);
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
    int source = 0;
    CHECK_OK(one(e.q, NULL, NULL, &source));
    CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
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
  char *r = bgt_redis_cmd(&srv, "CLIENT PAUSE %d ALL", 400);
  CHECK_EQ_STR(r, "OK");
  free(r);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, 50));
  CHECK_OK(bg_filter_contains_submit_ex(e.f, call, e.q, 21, "first", 5));
  int source = 0;
  CHECK_OK(one(e.q, NULL, NULL, &source));   /* timed out: the breaker opened, the fallback answered */
  CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
  CHECK_EQ_INT(s.calls, 1);
  CHECK_OK(bg_filter_contains_submit(e.f, e.q, 22, "second", 6));
  CHECK_EQ_INT(s.calls, 2);   /* answered by the submit itself */
  CHECK_OK(one(e.q, NULL, NULL, &source));
  CHECK_EQ_INT(source, BG_SOURCE_CALLBACK);
  CHECK_OK(s.running_status);
  CHECK_EQ_U64(s.tags[0], 21);
  CHECK_EQ_STR(s.items[0], "first");
  CHECK_EQ_U64(s.tags[1], 22);
  CHECK_EQ_STR(s.items[1], "second");
  r = bgt_redis_cmd(&srv, "CLIENT UNPAUSE");
  CHECK_EQ_STR(r, "OK");
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

static void setup(void) { bgt_redis_start(&srv, NULL); }
static void teardown(void) { bgt_redis_stop(&srv); }

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_fallback_in_poll_knows_its_operation),
        BGT_CASE(test_fallback_in_submit_knows_its_operation), BGT_CASE(test_persist_submit), BGT_CASE(teardown))
