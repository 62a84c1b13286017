/*
 * A client during an outage, against a real redis-server that is down, then back:
 *  - opened while the server is down: open succeeds (it connects nothing); a filter with the
 *    default degrade policy answers from the policy, one without a policy fails with BG_ECONN;
 *    once the server is back, the same client answers from Redis. The control: with
 *    BG_OPT_CONNECT_AT_OPEN open itself fails with BG_ECONN;
 *  - a server loading its data after a restart (LOADING) is waited out, as a cluster node's
 *    would be: a call whose deadline outlasts the load answers from Redis; one whose deadline
 *    ends first fails with BG_ESERVER (the policy's server class) at its deadline, not at once.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filters.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double ms_since(uint64_t t0) { return (double)(bgt_now_ns() - t0) / 1e6; }

static void test_open_during_an_outage(void) {
  bgt_redis r;
  bgt_redis_start(&r, NULL);
  bgt_redis_kill(&r);   /* down; its port stays reserved for the restart */
  char msg[512];
  bg_client *c = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  CHECK_STATUS(bgt_client_open(&c, r.url, o, msg, sizeof msg), BG_ECONN);   /* the control */
  CHECK(c == NULL);
  bg_options_free(o);

  CHECK_OK(bgt_client_open(&c, r.url, NULL, msg, sizeof msg));
  bg_filter *guarded = NULL, *plain = NULL;
  bg_policy *p = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&guarded, c, "outage"));
  CHECK_OK(bg_filter_open(&plain, c, "outage"));
  CHECK_OK(bg_policy_new(&p));   /* the defaults: a connection failure is retried, then assumed present */
  CHECK_OK(bg_filter_set_policy(guarded, p));
  bg_policy_free(p);
  uint8_t present = 0;
  const void *item = "x";
  size_t len = 1;
  CHECK_OK(bg_filter_contains_many_ex(guarded, call, &item, &len, 1, &present));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_ASSUMED_PRESENT);
  CHECK_EQ_INT(bg_call_degraded_status(call), BG_ECONN);
  CHECK_EQ_INT(present, 1);
  CHECK_STATUS(bg_filter_contains_many_ex(plain, call, &item, &len, 1, &present), BG_ECONN);
  CHECK_CONTAINS(bg_call_errmsg(call), "cannot connect to 127.0.0.1");

  CHECK_EQ_INT(bgt_redis_restart(&r, NULL), 0);
  /* the same client, the server back: the plain filter's first call connects */
  items it = make_items("outage", 100);
  CHECK_OK(bg_filter_init(plain, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(plain, PTRS(it), it.len, it.n, NULL));
  CHECK_EQ_INT(bgt_count_present(plain, &it), it.n);
  /* the guarded one answers from Redis once its breaker lets a call through (bounded: 5 s) */
  int source = 0;
  for (int i = 0; i < 250 && source != BG_SOURCE_REDIS; i++) {
    CHECK_OK(bg_filter_contains_many_ex(guarded, call, PTRS(it), it.len, 1, &present));
    source = bg_call_source(call);
    if (source != BG_SOURCE_REDIS) sleep_ms(20);
  }
  CHECK_EQ_INT(source, BG_SOURCE_REDIS);
  CHECK_EQ_INT(present, 1);
  bg_filter_close(guarded);
  bg_filter_close(plain);
  bg_client_close(c);
  bg_call_free(call);
  items_free(&it);
  bgt_redis_stop(&r);
}

/* LOADING from one server: waited out within the call's deadline. */
static void test_loading_is_waited_out(void) {
  static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
  /* slow loading (200 us a key, 20,000 keys: about 4 s), clients answered (LOADING) every 1 KiB */
  static const char *const slow[] = {"--appendonly", "yes", "--appendfsync", "always", "--key-load-delay", "200",
                                     "--loading-process-events-interval-bytes", "1024", NULL};
  bgt_redis r;
  bgt_redis_start(&r, aof);
  char msg[512];
  bg_client *c = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_OFF));
  CHECK_OK(bgt_client_open(&c, r.url, o, msg, sizeof msg));
  bg_options_free(o);
  items it = make_items("loading", 100);
  bg_filter *f = bgt_fresh_filter(c, "loading", 1000, 0.01, &it);
  free(bgt_redis_cmd(&r, "DEBUG POPULATE 20000 filler 8"));
  free(bgt_redis_cmd(&r, "BGREWRITEAOF"));
  /* the rewrite done (bounded: 10 s): the restart loads the keys from the AOF's base */
  for (int i = 0; i < 500; i++) {
    char *info = bgt_redis_cmd(&r, "INFO persistence");
    int busy = !info || strstr(info, "aof_rewrite_in_progress:1") || strstr(info, "aof_rewrite_scheduled:1");
    free(info);
    if (!busy) break;
    sleep_ms(20);
  }
  bgt_redis_kill(&r);
  CHECK_EQ_INT(bgt_redis_restart(&r, slow), 0);   /* returns once it answers, LOADING included */
  char *ping = bgt_redis_cmd(&r, "PING");
  int loading = ping && strstr(ping, "LOADING");
  free(ping);
  CHECK_MSG(loading, "the restarted server was not loading: the case proves nothing");

  uint8_t *present = calloc(it.n, 1);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  /* a deadline the load outlasts: BG_ESERVER at the deadline, having waited */
  CHECK_OK(bg_call_set_timeout_ms(call, 300));
  uint64_t t0 = bgt_now_ns();
  int st = bg_filter_contains_many_ex(f, call, PTRS(it), it.len, it.n, present);
  double ms = ms_since(t0);
  printf("    while loading, a 300 ms deadline: %s after %.0f ms (%s)\n", bg_strerror(st), ms, bg_call_errmsg(call));
  CHECK_STATUS(st, BG_ESERVER);
  CHECK_CONTAINS(bg_call_errmsg(call), "LOADING");
  CHECK_MSG(ms >= 150, "LOADING was not waited out: BG_ESERVER after %.0f ms of a 300 ms deadline", ms);
  /* a deadline that outlasts the load: answered from Redis */
  CHECK_OK(bg_call_set_timeout_ms(call, 30000));
  t0 = bgt_now_ns();
  st = bg_filter_contains_many_ex(f, call, PTRS(it), it.len, it.n, present);
  printf("    while loading, a 30 s deadline: %s after %.0f ms\n", bg_strerror(st), ms_since(t0));
  CHECK_MSG(st == BG_OK, "%s", bg_call_errmsg(call));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  for (size_t i = 0; i < it.n; i++) CHECK(present[i] == 1);
  free(present);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
  bgt_redis_stop(&r);
}

BGT_RUN(BGT_CASE(test_open_during_an_outage), BGT_CASE(test_loading_is_waited_out))
