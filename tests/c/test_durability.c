/*
 * BG_OPT_WAIT_REPLICAS: adds, lock steps and rotation commits followed by WAIT in the same round
 * trip. Against a real master alone (no replica can acknowledge: BG_ETIMEOUT, the lock given back)
 * and with a real replica (acknowledged: BG_OK). The failover that this protects against is in
 * test_cluster (kill -9 of a master with the option on: 0 acknowledged adds lost).
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

static bgt_redis master, replica;

static bg_client *client_with_wait(const char *url, int replicas, int timeout_ms) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  char msg[512];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, replicas));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WAIT_TIMEOUT_MS, timeout_ms));
  int st = bgt_client_open(&c, url, o, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open: %s", msg);
  bg_options_free(o);
  return c;
}

static void test_options_bounds(void) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, -1), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, 65), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_WAIT_TIMEOUT_MS, 0), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, 64));
  bg_options_free(o);
}

/* A master alone: nothing can acknowledge, so every durable step says so and the lock is not kept. */
static void test_without_a_replica_writes_are_not_acknowledged(void) {
  bg_client *c = client_with_wait(master.url, 1, 100);
  bg_filter *f = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_filter_open(&f, c, "durable-alone"));
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  const void *item = "x";
  size_t len = 1;
  int st = bg_filter_add_many_ex(f, call, &item, &len, 1, NULL);
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_CONTAINS(bg_call_errmsg(call), "only 0 of 1 replicas acknowledged it within 100 ms");
  /* applied on the master all the same, and queries are not slowed by WAIT */
  int present = 0;
  CHECK_OK(bg_filter_contains(f, "x", 1, &present));
  CHECK_EQ_INT(present, 1);

  /* a lock taken on the master only is given back: another client gets it at once */
  bg_lock *l = NULL, *other = NULL;
  bg_client *plain = NULL;
  CHECK_OK(bg_client_open(&plain, master.url, NULL));
  CHECK_OK(bg_lock_open(&l, c, "durable-lock", NULL));
  CHECK_OK(bg_lock_open(&other, plain, "durable-lock", NULL));
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ETIMEOUT);
  uint32_t count = 99;
  CHECK_OK(bg_lock_held(l, NULL, &count, NULL));
  CHECK_EQ_INT(count, 0);
  CHECK_OK(bg_lock_acquire(other, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release(other));
  bg_lock_close(l);
  bg_lock_close(other);
  bg_client_close(plain);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
}

static void wait_link_up(void) {
  for (int i = 0; i < 200; i++) {
    char *r = bgt_redis_cmd(&replica, "INFO replication");
    int up = r && strstr(r, "master_link_status:up");
    free(r);
    if (up) return;
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  bgt_fail(__FILE__, __LINE__, "the replica never came up");
}

/* With a replica: the same steps are acknowledged, and what was acknowledged is on the replica. */
static void test_with_a_replica_writes_are_acknowledged(void) {
  char port[16];
  snprintf(port, sizeof port, "%d", master.port);
  const char *args[] = {"--replicaof", "127.0.0.1", port, NULL};
  bgt_redis_start(&replica, args);
  wait_link_up();
  bg_client *c = client_with_wait(master.url, 1, 2000);
  items it = make_items("durable", 500);
  bg_filter *f = bgt_fresh_filter(c, "durable-pair", 10000, 0.01, &it);
  bg_lock *l = NULL;
  CHECK_OK(bg_lock_open(&l, c, "durable-pair-lock", NULL));
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release(l));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  /* acknowledged = on the replica: read it there */
  bg_client *rc = NULL;
  bg_filter *rf = NULL;
  CHECK_OK(bg_client_open(&rc, replica.url, NULL));
  CHECK_OK(bg_filter_open(&rf, rc, "durable-pair"));
  CHECK_EQ_INT(bgt_count_present(rf, &it), it.n);
  bg_filter_close(rf);
  bg_client_close(rc);
  bg_lock_close(l);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
  bgt_redis_stop(&replica);
}

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_options_bounds),
      BGT_CASE(test_without_a_replica_writes_are_not_acknowledged),
      BGT_CASE(test_with_a_replica_writes_are_acknowledged),
  };
  bgt_redis_start(&master, NULL);
  int rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  bgt_redis_stop(&master);
  return rc;
}
