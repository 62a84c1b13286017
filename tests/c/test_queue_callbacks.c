/*
 * The submission queue (include/bloomguard/queue.h) against a real redis-server: persist, the
 * last admin operation, submitted like the others.
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

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_persist_submit), BGT_CASE(teardown))
