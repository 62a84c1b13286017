/*
 * BG_ROTATE_LOCKED and the filter's write lock against a real redis-server: queries wait for a
 * write hold and then degrade, the in-place rebuild matches a fresh build, adds are kept, and a
 * rotator killed half-way leaves a filter that answers through the policy until the next rebuild.
 * (The rotate-vs-query race of LOCKED, with the naive control, is in test_race.c.)
 */
#include <bloomguard.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "filters.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;        /* queries wait up to 5 s for a write lock */
static bg_client *impatient; /* queries wait 50 ms */

static char *cmd(const char *fmt, const char *arg) { return bgt_redis_cmd(&srv, fmt, arg); }

static void expect_reply(const char *fmt, const char *arg, const char *want) {
  char *got = cmd(fmt, arg);
  CHECK_MSG(!strcmp(got, want), "%s %s: got \"%s\", want \"%s\"", fmt, arg, got, want);
  free(got);
}

static bg_filter *open_on(bg_client *c, const char *name) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, name));
  return f;
}

static bg_lock *filter_lock(bg_filter *f) {
  bg_lock *l = NULL;
  CHECK_OK(bg_lock_open_filter(&l, f, NULL));
  return l;
}

static void test_lock_key_is_in_the_filters_slot(void) {
  bg_filter *a = open_on(cl, "plain"), *b = open_on(cl, "users{tag}");
  bg_lock *la = filter_lock(a), *lb = filter_lock(b);
  CHECK_EQ_STR(bg_lock_key(la), "{plain}:lock");
  CHECK_EQ_STR(bg_lock_key(lb), "users{tag}:lock");
  CHECK_STATUS(bg_lock_open_filter(NULL, a, NULL), BG_EINVAL);
  bg_lock *none = (bg_lock *)1;
  CHECK_STATUS(bg_lock_open_filter(&none, NULL, NULL), BG_EINVAL);
  CHECK(none == NULL);
  bg_lock_close(la), bg_lock_close(lb);
  bg_filter_close(a), bg_filter_close(b);
}

typedef struct timed_query {
  bg_filter *f;
  const void *item;
  size_t len;
  int status, present;
  uint64_t took_ns, done_ns;
} timed_query;

static void *query_thread(void *arg) {
  timed_query *q = arg;
  uint64_t t0 = bgt_now_ns();
  q->status = bg_filter_contains(q->f, q->item, q->len, &q->present);
  q->done_ns = bgt_now_ns();
  q->took_ns = q->done_ns - t0;
  return NULL;
}

/* MULTI blocks the server has run (INFO commandstats): a query's tries. */
static long long exec_calls(void) {
  char *info = bgt_redis_cmd(&srv, "INFO %s", "commandstats");
  const char *k = strstr(info, "cmdstat_exec:calls=");
  long long n = k ? atoll(k + strlen("cmdstat_exec:calls=")) : 0;
  free(info);
  return n;
}

static void test_queries_wait_for_a_write_hold_only(void) {
  items it = make_items("w", 100);
  bg_filter *f = bgt_fresh_filter(cl, "waits", 100, 0.01, &it);
  bg_lock *l = filter_lock(f);
  int present = 0;
  /* exclusive and read holds are not rebuilds: queries go on */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_filter_contains(f, it.p[0], it.len[0], &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_lock_release(l));
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_READ, 0, NULL));
  CHECK_OK(bg_filter_contains(f, it.p[0], it.len[0], &present));
  CHECK_OK(bg_lock_release(l));

  /* a write hold: the query waits, and answers as soon as the hold ends (released once the server
   * has seen it ask twice: it found the hold and is waiting) */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, NULL));
  timed_query q = {.f = f, .item = it.p[1], .len = it.len[1]};
  pthread_t t;
  long long tries = exec_calls();
  pthread_create(&t, NULL, query_thread, &q);
  for (uint64_t w0 = bgt_now_ns(); exec_calls() < tries + 2 && bgt_now_ns() - w0 < 20000000000ull;) usleep(2000);
  uint64_t released = bgt_now_ns();
  CHECK_OK(bg_lock_release(l));
  pthread_join(t, NULL);
  CHECK_OK(q.status);
  CHECK_EQ_INT(q.present, 1);
  CHECK_MSG(q.done_ns >= released, "the query answered %llu ns before the write lock was released",
            (unsigned long long)(released - q.done_ns));

  /* negative control: the same query with no hold does not wait (for what it stands against:
   * the 5 s write-lock wait) */
  uint64_t t0 = bgt_now_ns();
  CHECK_OK(bg_filter_contains(f, it.p[1], it.len[1], &present));
  CHECK_MSG(bgt_now_ns() - t0 < 2500000000u, "a query waited with no lock held");

  /* a hold longer than the wait: BG_ELOCKED, the batch form too; a call's deadline bounds the wait */
  bg_filter *fi = open_on(impatient, "waits");
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, NULL));
  t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains(fi, it.p[0], it.len[0], &present), BG_ELOCKED);
  uint64_t took = bgt_now_ns() - t0;
  CHECK_MSG(took >= 45000000u, "gave up after %llu ns, before the 50 ms wait", (unsigned long long)took);
  CHECK_CONTAINS(bg_filter_errmsg(fi), "write-locked");
  CHECK_CONTAINS(bg_filter_errmsg(fi), "{waits}:lock");
  uint8_t many[100];
  CHECK_STATUS(bg_filter_contains_many(fi, PTRS(it), it.len, it.n, many), BG_ELOCKED);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  /* 1 s: its round trips fit in it on a loaded machine, and it ends long before the 5 s wait */
  CHECK_OK(bg_call_set_timeout_ms(call, 1000));
  t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains_many_ex(f, call, PTRS(it), it.len, 1, many), BG_ELOCKED);
  took = bgt_now_ns() - t0;
  CHECK_MSG(took < 4000000000u, "a 1 s call waited %llu ns for the lock (its wait is 5 s)", (unsigned long long)took);

  /* with a policy the class is BG_FAIL_LOCKED: by default, assume present */
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_filter_set_policy(fi, p));
  bg_policy_free(p);
  CHECK_OK(bg_filter_contains_many_ex(fi, call, PTRS(it), it.len, 1, many));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_ASSUMED_PRESENT);
  CHECK_EQ_INT(bg_call_degraded_status(call), BG_ELOCKED);
  CHECK_CONTAINS(bg_call_errmsg(call), "write-locked");
  CHECK_OK(bg_lock_release(l));
  CHECK_OK(bg_filter_contains_many_ex(fi, call, PTRS(it), it.len, 1, many));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  CHECK_EQ_INT(bg_call_degraded_status(call), BG_OK);

  /* snapshots are not taken of a bitmap being rewritten */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, NULL));
  CHECK_STATUS(bg_filter_snapshot_refresh(fi), BG_ELOCKED);
  CHECK_OK(bg_lock_release(l));
  CHECK_OK(bg_filter_snapshot_refresh(fi));

  bg_call_free(call);
  bg_lock_close(l);
  bg_filter_close(fi);
  bg_filter_close(f);
  items_free(&it);
}

static void test_locked_rebuild_matches_a_fresh_build(void) {
  items old_items = make_items("old", 3000), new_items = make_items("new", 5000);
  bg_filter *f = bgt_fresh_filter(cl, "inplace", 3000, 0.01, &old_items);
  CHECK_OK(bg_filter_expire(f, 600000, NULL));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.001, BG_ROTATE_LOCKED, NULL));
  /* rotations of any strategy exclude each other */
  bg_rotation *other = NULL;
  CHECK_STATUS(bg_rotation_begin(&other, f, 20000, 0.001, BG_ROTATE_SWAP, NULL), BG_EROTATING);
  CHECK_STATUS(bg_rotation_begin(&other, f, 20000, 0.001, BG_ROTATE_LOCKED, NULL), BG_EROTATING);
  CHECK_OK(bg_rotation_add_many(r, PTRS(new_items), new_items.len, new_items.n));
  CHECK_EQ_U64(bgt_count_present(f, &old_items), old_items.n);  /* serving the old generation until the commit */
  free(bgt_redis_cmd(&srv, "SCRIPT FLUSH"));  /* the steps re-send their scripts */
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);

  CHECK_EQ_U64(bgt_count_present(f, &new_items), new_items.n);
  expect_reply("HGETALL %s", "{inplace}:config",
               "size 287551 hashIterations 10 expectedInsertions 20000 falseProbability 0.001");
  expect_reply("EXISTS %s", "{inplace}:rotation", "0");
  expect_reply("EXISTS %s", "{inplace}:delta", "0");
  expect_reply("EXISTS %s", "{inplace}:next", "0");
  expect_reply("EXISTS %s", "{inplace}:lock", "0");
  char *ttl = cmd("PTTL %s", "inplace");
  CHECK_MSG(atol(ttl) > 500000, "the bitmap lost its time to live: PTTL %s", ttl);
  free(ttl);

  bg_filter *ref = bgt_fresh_filter(cl, "inplace-ref", 20000, 0.001, &new_items);
  size_t a_len, b_len;
  unsigned char *a = bgt_redis_get(&srv, "inplace", &a_len), *b = bgt_redis_get(&srv, "inplace-ref", &b_len);
  CHECK_EQ_U64(a_len, b_len);
  CHECK(a_len == b_len && memcmp(a, b, a_len) == 0);
  free(a), free(b);
  bg_filter_close(ref);
  bg_filter_close(f);
  items_free(&old_items), items_free(&new_items);
}

/* Adds from another client while the rotation builds and while it rewrites the bitmap. */
static bg_filter *adder_filter;
static items during_upload;
static int add_at_upload(void *data, int phase, uint64_t n, uint64_t done, uint64_t total) {
  (void)data, (void)n, (void)total;
  if (phase == BG_PHASE_UPLOADING && done > 0 && during_upload.n == 0) {
    during_upload = make_items("upl", 50);
    CHECK_OK(bg_filter_add_many(adder_filter, PTRS(during_upload), during_upload.len, during_upload.n, NULL));
  }
  return 0;
}

static void test_adds_during_a_locked_rebuild_are_kept(void) {
  items base = make_items("b", 4000), during_build = make_items("dur", 300);
  bg_filter *f = bgt_fresh_filter(cl, "keep", 4000, 0.01, &base);
  bg_client *other = NULL;
  CHECK_OK(bg_client_open(&other, srv.url, NULL));
  adder_filter = open_on(other, "keep");
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 5000, 0.01, BG_ROTATE_LOCKED, o));  /* other parameters: adds must use both */
  bg_options_free(o);
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_filter_add_many(adder_filter, PTRS(during_build), during_build.len, during_build.n, NULL));
  CHECK_OK(bg_rotation_set_progress(r, add_at_upload, NULL));
  /* the adds during the upload come from this thread's progress callback, through another client:
   * adds do not wait for the write lock */
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_MSG(during_upload.n == 50, "the upload had fewer than two chunks");
  CHECK_EQ_U64(bgt_count_present(f, &base), base.n);
  CHECK_EQ_U64(bgt_count_present(f, &during_build), during_build.n);
  CHECK_EQ_U64(bgt_count_present(f, &during_upload), during_upload.n);
  bg_filter_close(adder_filter);
  bg_client_close(other);
  bg_filter_close(f);
  items_free(&base), items_free(&during_build), items_free(&during_upload);
}

/* With the same parameters the bytes are overwritten in place: items of both generations keep
 * their bits at every moment, which is what a Redisson reader (blind to the lock) relies on. */
static items common_items;
static int checks_at_upload;
static int check_common_bits(void *data, int phase, uint64_t n, uint64_t done, uint64_t total) {
  (void)data, (void)n;
  if (phase != BG_PHASE_UPLOADING || done == 0 || done >= total) return 0;
  size_t len = 0;
  unsigned char *bits = bgt_redis_get(&srv, "redisson-view", &len);
  uint64_t size = 0;
  uint32_t k = 0;
  CHECK_OK(bg_optimal_params(20000, 0.01, &size, &k));
  size_t missing = 0;
  for (size_t i = 0; i < common_items.n; i++) {
    uint64_t idx[32];
    CHECK_OK(bg_indexes(common_items.p[i], common_items.len[i], size, k, idx));
    for (uint32_t j = 0; j < k; j++)
      if (idx[j] / 8 >= len || !(bits[idx[j] / 8] & (0x80 >> (idx[j] % 8)))) {
        missing++;
        break;
      }
  }
  CHECK_EQ_U64(missing, 0);
  checks_at_upload++;
  free(bits);
  return 0;
}

static void test_same_size_rebuild_keeps_common_bits_throughout(void) {
  items gone = make_items("gone", 10000), next_only = make_items("nextonly", 10000);
  common_items = make_items("common", 10000);
  bg_filter *f = bgt_fresh_filter(cl, "redisson-view", 20000, 0.01, &gone);
  CHECK_OK(bg_filter_add_many(f, PTRS(common_items), common_items.len, common_items.n, NULL));
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, BG_ROTATE_LOCKED, o));
  bg_options_free(o);
  CHECK_OK(bg_rotation_add_many(r, PTRS(common_items), common_items.len, common_items.n));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next_only), next_only.len, next_only.n));
  CHECK_OK(bg_rotation_set_progress(r, check_common_bits, NULL));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_MSG(checks_at_upload > 0, "no check ran between two upload chunks");
  CHECK_EQ_U64(bgt_count_present(f, &common_items), common_items.n);
  CHECK_EQ_U64(bgt_count_present(f, &next_only), next_only.n);
  /* stale bits were cleared: the gone items are (nearly all) absent */
  CHECK_MSG(bgt_count_present(f, &gone) < 400, "the in-place rebuild kept the old generation's bits");
  bg_filter_close(f);
  items_free(&gone), items_free(&next_only), items_free(&common_items);
}

/* The rotation's commit waits for whoever holds the filter's lock (here an exclusive hold, as a
 * Redisson RLock on "{NAME}:lock" would be). */
typedef struct commit_arg {
  bg_rotation *r;
  int status;
  uint64_t took_ns;
} commit_arg;

static void *commit_thread(void *arg) {
  commit_arg *c = arg;
  uint64_t t0 = bgt_now_ns();
  c->status = bg_rotation_commit(c->r);
  c->took_ns = bgt_now_ns() - t0;
  return NULL;
}

static void test_commit_waits_for_the_lock(void) {
  items it = make_items("cw", 500);
  bg_filter *f = bgt_fresh_filter(cl, "commitwait", 500, 0.01, &it);
  bg_lock *l = filter_lock(f);
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  commit_arg c = {0};
  CHECK_OK(bg_rotation_begin(&c.r, f, 500, 0.01, BG_ROTATE_LOCKED, NULL));
  CHECK_OK(bg_rotation_add_many(c.r, PTRS(it), it.len, it.n));
  pthread_t t;
  pthread_create(&t, NULL, commit_thread, &c);
  usleep(300000);
  CHECK_OK(bg_lock_release(l));
  pthread_join(t, NULL);
  CHECK_OK(c.status);
  CHECK_MSG(c.took_ns >= 250000000u, "the commit did not wait for the exclusive hold");
  bg_rotation_free(c.r);
  CHECK_EQ_U64(bgt_count_present(f, &it), it.n);
  bg_lock_close(l);
  bg_filter_close(f);
  items_free(&it);
}

/* A rotator killed half-way through rewriting the bitmap. */
static int die_mid_upload(void *data, int phase, uint64_t n, uint64_t done, uint64_t total) {
  (void)data, (void)n, (void)total;
  if (phase == BG_PHASE_UPLOADING && done > 0) raise(SIGKILL);
  return 0;
}

static void test_kill9_mid_rewrite(void) {
  items base = make_items("k", 3000);
  bg_filter *f = bgt_fresh_filter(cl, "crash-inplace", 3000, 0.01, &base);
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *c = NULL;
    bg_filter *cf = NULL;
    bg_rotation *r = NULL;
    bg_options *o = NULL;
    bg_options_new(&o);
    bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, 1000);
    bg_options_set_int(o, BG_OPT_ROTATE_STAGING_TTL_MS, 2000);
    bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096);
    if (bg_client_open(&c, srv.url, NULL) || bg_filter_open(&cf, c, "crash-inplace") ||
        bg_rotation_begin(&r, cf, 3000, 0.01, BG_ROTATE_LOCKED, o))
      _exit(3);
    bg_rotation_add_many(r, PTRS(base), base.len, base.n);
    bg_rotation_set_progress(r, die_mid_upload, NULL);
    bg_rotation_commit(r);
    _exit(4);  /* not reached */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "rotator exited with status %d", st);
  expect_reply("HEXISTS %s bgRebuilding", "{crash-inplace}:config", "1");

  /* once the dead rotator's lock runs out (1 s), queries fail at once: never from the half-written bitmap */
  usleep(1200000);
  expect_reply("EXISTS %s", "{crash-inplace}:lock", "0");
  int present = 0;
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains(f, base.p[0], base.len[0], &present), BG_ELOCKED);
  CHECK_MSG(bgt_now_ns() - t0 < 1000000000u, "a query waited for a lock nobody holds");
  CHECK_CONTAINS(bg_filter_errmsg(f), "stopped half-way");
  CHECK_STATUS(bg_filter_snapshot_refresh(f), BG_ELOCKED);
  /* the policy answers meanwhile: assume present keeps the no-false-negative promise */
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  uint8_t one = 0;
  CHECK_OK(bg_filter_contains_many_ex(f, call, PTRS(base), base.len, 1, &one));
  CHECK_EQ_INT(one, 1);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_ASSUMED_PRESENT);

  /* the rebuild is redone once the dead rotator's lease is gone (it is already: 1 s) */
  usleep(1000000);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 3000, 0.01, BG_ROTATE_LOCKED, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  expect_reply("HEXISTS %s bgRebuilding", "{crash-inplace}:config", "0");
  CHECK_OK(bg_filter_contains_many_ex(f, call, PTRS(base), base.len, 1, &one));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  CHECK_OK(bg_filter_set_policy(f, NULL));
  bg_policy_free(p);
  CHECK_EQ_U64(bgt_count_present(f, &base), base.n);
  bg_call_free(call);
  bg_filter_close(f);
  items_free(&base);
}

/* A SWAP rotation also clears an interrupted in-place rebuild's mark. */
static void test_swap_repairs_an_interrupted_rebuild(void) {
  items base = make_items("rep", 500);
  bg_filter *f = bgt_fresh_filter(cl, "repair", 500, 0.01, &base);
  free(cmd("HSET %s bgRebuilding dead-rotator", "{repair}:config"));
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, base.p[0], base.len[0], &present), BG_ELOCKED);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 500, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &base), base.n);
  bg_filter_close(f);
  items_free(&base);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, -1), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 5000));
  CHECK_OK(bg_client_open(&cl, srv.url, o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 50));
  CHECK_OK(bg_client_open(&impatient, srv.url, o));
  bg_options_free(o);
}

static void teardown(void) {
  bg_client_close(impatient);
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_lock_key_is_in_the_filters_slot), BGT_CASE(test_queries_wait_for_a_write_hold_only),
        BGT_CASE(test_locked_rebuild_matches_a_fresh_build), BGT_CASE(test_adds_during_a_locked_rebuild_are_kept),
        BGT_CASE(test_same_size_rebuild_keeps_common_bits_throughout), BGT_CASE(test_commit_waits_for_the_lock),
        BGT_CASE(test_kill9_mid_rewrite), BGT_CASE(test_swap_repairs_an_interrupted_rebuild), BGT_CASE(teardown))
