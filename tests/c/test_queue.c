/*
 * The submission queue (include/bloomguard/queue.h) against a real redis-server: the same answers
 * as the blocking calls, from one thread with many operations in flight, driven through the fd.
 */
#include <bloomguard.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "items.h"
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
  env_open(&e, "q-basic");
  items in = make_items("in", 1000), out = make_items("out", 1000);
  CHECK_OK(bg_filter_init(e.f, 100000, 1e-9, NULL));
  tally adds = {0};
  for (size_t i = 0; i < in.n; i++) CHECK_OK(bg_filter_add_submit(e.f, e.q, (uint64_t)i << 1 | 1, in.p[i], in.len[i]));
  CHECK_EQ_INT((int)drain(e.q, in.n, check_value, &adds), (int)in.n);
  CHECK_EQ_INT(adds.failed, 0);
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

static void setup(void) { bgt_redis_start(&srv, NULL); }
static void teardown(void) { bgt_redis_stop(&srv); }

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_one_thread_many_in_flight), BGT_CASE(test_bad_input_is_refused_at_submit),
        BGT_CASE(test_not_initialized_goes_through_the_policy), BGT_CASE(teardown))
