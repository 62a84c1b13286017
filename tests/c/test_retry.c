/*
 * A step whose first try meets a connection the server closed while it sat idle (CLIENT KILL, a
 * restart) is sent again on a fresh one; the public call then reports that success, not the dead
 * connection's failure. Every kind of step (queries, adds, rotation steps and upload chunks, lock
 * steps), with multiplexed connections and with pooled ones. Found by the Go pipeline test: a
 * SWAP rotation's upload chunk retried and succeeded, yet bg_rotation_commit returned BG_ECONN
 * (the retry left the first try's status in the error the API reads).
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;

static void kill_idle_connections(void) { free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE %s", "normal")); }

static bg_client *open_client(int pipeline) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, pipeline));
  CHECK_OK(bg_client_open(&c, srv.url, o));
  bg_options_free(o);
  return c;
}

static void rotate_after_kill(bg_filter *f, int strategy) {
  bg_rotation *r = NULL;
  kill_idle_connections();
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.001, strategy, NULL));
  CHECK_OK(bg_rotation_add(r, "kept", 4));
  kill_idle_connections();
  int st = bg_rotation_commit(r);
  if (st != BG_OK) fprintf(stderr, "    commit: %d (%s)\n", st, bg_rotation_errmsg(r));
  CHECK_OK(st);
  bg_rotation_free(r);
  int present = 0;
  CHECK_OK(bg_filter_contains(f, "kept", 4, &present));
  CHECK(present);
}

static void every_step_after_kill(int pipeline) {
  bg_client *c = open_client(pipeline);
  bg_filter *f = NULL;
  bg_lock *l = NULL;
  int present = 0;
  int64_t count = 0;
  CHECK_OK(bg_filter_open(&f, c, "retry"));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 20000, 0.001, NULL));
  /* every connection of the client has served a call before it is killed */
  CHECK_OK(bg_filter_add(f, "a", 1, NULL));
  rotate_after_kill(f, BG_ROTATE_SWAP);
  rotate_after_kill(f, BG_ROTATE_LOCKED);
  kill_idle_connections();
  CHECK_OK(bg_filter_add(f, "b", 1, NULL));
  kill_idle_connections();
  CHECK_OK(bg_filter_contains(f, "b", 1, &present));
  CHECK(present);
  kill_idle_connections();
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_OK(bg_lock_open(&l, c, "retry-lock", NULL));
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 1000, NULL));
  kill_idle_connections();
  CHECK_OK(bg_lock_release(l));
  bg_lock_close(l);
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_filter_close(f);
  bg_client_close(c);
}

static void test_multiplexed(void) { every_step_after_kill(1); }
static void test_pooled(void) { every_step_after_kill(0); }

static void setup(void) { bgt_redis_start(&srv, NULL); }
static void teardown(void) { bgt_redis_stop(&srv); }

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_multiplexed), BGT_CASE(test_pooled), BGT_CASE(teardown))
