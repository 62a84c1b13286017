/*
 * Queries with tracking (BG_OPT_TRACKING) against a real redis-server: after one full check a
 * connection sends BITFIELD_RO alone, and every change another client makes to the config or the
 * write lock - a rebuild with other parameters, a write hold, an interrupted rebuild's mark, a
 * TTL, FLUSHDB, a killed connection - is seen by the very next query, never answered from bits
 * read under the old state. Each case has its control: a reader that caches the config the
 * same way but without the server's invalidations answers wrongly in the same scenario.
 *
 * With a hiredis before 1.0 (no RESP3) tracking cannot be had: the cases then check that queries
 * keep the full check (no tracked reads) and answer the same.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "filters.h"
#include "items.h"
#include "redis/tracking.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *tr;     /* tracking (the default), one connection: verdicts are deterministic */
static bg_client *plain;  /* BG_OPT_TRACKING 0 */
static int supported;
/* BG_TEST_PIPELINE=0 runs every case on pooled connections (test_tracking_nopipe); with
 * pipelining the reader thread may take a push before the next query is even built, which then
 * makes the full check at once instead of reading the bits and dropping them */
static int pipelined = 1;

static char *cmd(const char *fmt, const char *arg) { return bgt_redis_cmd(&srv, fmt, arg); }

static int64_t stat_of(bg_filter *f, int stat) {
  int64_t v = -1;
  CHECK_OK(bg_filter_stat(f, stat, &v));
  return v;
}

/* calls of a command since the last CONFIG RESETSTAT */
static long long calls_of(const char *command) {
  char *info = cmd("INFO %s", "commandstats");
  char key[64];
  snprintf(key, sizeof key, "cmdstat_%s:calls=", command);
  const char *p = strstr(info, key);
  long long n = p ? atoll(p + strlen(key)) : 0;
  free(info);
  return n;
}

/* Present items: one query per item, or (one_by_one 0) one batch query for all. */
static size_t count_present(bg_filter *f, const items *it, int one_by_one) {
  size_t c = 0;
  if (!one_by_one) return bgt_count_present(f, it);
  for (size_t i = 0; i < it->n; i++) {
    int present = 0;
    CHECK_OK(bg_filter_contains(f, it->p[i], it->len[i], &present));
    c += (size_t)present;
  }
  return c;
}

/* The control: a reader that keeps the config it saw and reads BITFIELD_RO alone, with nothing
 * telling it when the config changes. Returns how many items it finds present. */
static size_t naive_cached_present(const char *name, uint64_t size, uint32_t k, const items *it) {
  size_t present = 0;
  for (size_t i = 0; i < it->n; i++) {
    uint64_t idx[64];
    CHECK_OK(bg_indexes(it->p[i], it->len[i], size, k, idx));
    char command[64 * 32] = "BITFIELD_RO %s";
    for (uint32_t j = 0; j < k; j++)
      snprintf(command + strlen(command), sizeof command - strlen(command), " GET u1 %llu",
               (unsigned long long)idx[j]);
    char *bits = cmd(command, name);
    int all = bits[0] != '(';
    for (const char *b = bits; *b; b++) all &= *b != '0';
    present += (size_t)all;
    free(bits);
  }
  return present;
}

static void test_option_range(void) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_TRACKING, 2), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_TRACKING, -1), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_TRACKING, 0));
  CHECK_OK(bg_options_set_int(o, BG_OPT_TRACKING, 1));
  bg_options_free(o);
}

/* One full check, then BITFIELD_RO alone - counted by the handle and by the server. */
static void test_bits_only_after_one_check(void) {
  items in = make_items("in", 200), out = make_items("out", 200);
  bg_filter *f = bgt_fresh_filter(tr, "t1", 1000, 0.01, &in), *g = NULL;
  CHECK_OK(bg_filter_open(&g, plain, "t1"));
  free(cmd("CONFIG %s", "RESETSTAT"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  size_t false_pos = count_present(f, &out, 1);
  CHECK_EQ_U64(count_present(f, &in, 0), in.n);
  long long exec = calls_of("exec"), bitfield = calls_of("bitfield_ro");
  if (supported) {
    /* 401 queries: the first one checks, the other 400 read the bits alone */
    CHECK_EQ_INT(exec, 1);
    CHECK_EQ_INT(bitfield, 401);
    CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), 400);
  } else {
    CHECK_EQ_INT(exec, 401);
    CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), 0);
  }
  CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_STALE), 0);
  /* the same answers as the full check on every query */
  CHECK_EQ_U64(count_present(g, &in, 1), in.n);
  CHECK_EQ_U64(count_present(g, &out, 1), false_pos);
  CHECK_EQ_INT(stat_of(g, BG_STAT_TRACKED_READS), 0);
  CHECK_MSG(false_pos < 20, "%zu false positives of 200 at p = 0.01", false_pos);
  bg_filter_close(g);
  bg_filter_close(f);
  items_free(&in), items_free(&out);
}

/* Adds (from any client) change only the bitmap, which is not tracked: the verdict stays, so a
 * workload that adds while it queries keeps reading the bits alone - and sees every new item. */
static void test_adds_keep_the_verdict(void) {
  items in = make_items("ka", 100), later = make_items("ka-later", 100);
  bg_filter *f = bgt_fresh_filter(tr, "t8", 1000, 0.01, &in), *other = NULL;
  CHECK_OK(bg_filter_open(&other, plain, "t8"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  int64_t tracked = stat_of(f, BG_STAT_TRACKED_READS);
  for (size_t i = 0; i < later.n; i++) {
    int present = 0;
    /* alternately added by another client and by this one, each then queried here */
    CHECK_OK(bg_filter_add(i % 2 ? f : other, later.p[i], later.len[i], NULL));
    CHECK_OK(bg_filter_contains(f, later.p[i], later.len[i], &present));
    CHECK_MSG(present, "item %zu added just before is absent", i);
  }
  if (supported) {
    CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), tracked + (int64_t)later.n);
    CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_STALE), 0);
  }
  bg_filter_close(other);
  bg_filter_close(f);
  items_free(&in), items_free(&later);
}

/* Another client rebuilds the filter with other parameters: the next query sees it. */
static void test_rebuild_by_another_client(void) {
  items old_items = make_items("old", 300), new_items = make_items("new", 300);
  bg_filter *f = bgt_fresh_filter(tr, "t2", 1000, 0.01, &old_items);
  CHECK_EQ_U64(count_present(f, &old_items, 1), old_items.n);
  uint64_t size1 = 0;
  uint32_t k1 = 0;
  CHECK_OK(bg_filter_info(f, &size1, &k1, NULL, NULL));
  int64_t stale0 = stat_of(f, BG_STAT_TRACKED_STALE);

  /* the rebuild a Redisson service does: delete, tryInit(n, p) with new parameters, add */
  bg_filter *other = bgt_fresh_filter(plain, "t2", 50, 0.1, &new_items);
  uint64_t size2 = 0;
  uint32_t k2 = 0;
  CHECK_OK(bg_filter_info(other, &size2, &k2, NULL, NULL));
  CHECK(size2 != size1 && k2 != k1);

  CHECK_EQ_U64(count_present(f, &new_items, 1), new_items.n);
  if (supported && !pipelined) CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_STALE), stale0 + 1);
  if (supported && pipelined) CHECK(stat_of(f, BG_STAT_TRACKED_STALE) - stale0 <= 1);
  /* the control: the old config kept without invalidations misses items of the new generation */
  size_t naive = naive_cached_present("t2", size1, k1, &new_items);
  CHECK_MSG(naive < new_items.n / 2, "a reader with the old config found %zu of %zu new items", naive,
            new_items.n);
  bg_filter_close(other);
  bg_filter_close(f);
  items_free(&old_items), items_free(&new_items);
}

/* A write hold taken by another process (a Redisson RReadWriteLock writes the same hash). */
static void test_write_hold_by_another_client(void) {
  items in = make_items("w", 100);
  bg_filter *f = bgt_fresh_filter(tr, "t3", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  int64_t tracked = stat_of(f, BG_STAT_TRACKED_READS);
  free(cmd("HSET %s mode write", "{t3}:lock"));
  free(cmd("HSET %s other-process:1 1", "{t3}:lock"));
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_ELOCKED);
  CHECK_CONTAINS(bg_filter_errmsg(f), "write-locked");
  /* the control: bits alone say nothing about the lock */
  CHECK_EQ_U64(naive_cached_present("t3", 9585, 7, &in), in.n);
  free(cmd("DEL %s", "{t3}:lock"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  if (supported) {
    /* the locked query read the bits alone once (dropped: the push came first), then checked;
     * after the release, two checks - the push for the DEL arrives during the first, which
     * therefore leaves no verdict - then the bits alone again */
    if (!pipelined) {
      CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), tracked + 1 + in.n - 2);
      CHECK(stat_of(f, BG_STAT_TRACKED_STALE) >= 1);
    } else {
      /* the pushes for the HSET and the DEL may each be read before the next query is built */
      int64_t reads = stat_of(f, BG_STAT_TRACKED_READS) - tracked;
      CHECK_MSG(reads >= (int64_t)in.n - 3 && reads <= (int64_t)in.n - 1, "%lld tracked reads", (long long)reads);
    }
  }
  bg_filter_close(f);
  items_free(&in);
}

/* An in-place rebuild's mark left by a dead rotator. */
static void test_interrupted_rebuild_mark(void) {
  items in = make_items("m", 50);
  bg_filter *f = bgt_fresh_filter(tr, "t4", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  free(cmd("HSET %s bgRebuilding dead-rotator", "{t4}:config"));
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_ELOCKED);
  CHECK_CONTAINS(bg_filter_errmsg(f), "stopped half-way");
  CHECK_STATUS(bg_filter_contains(f, in.p[1], in.len[1], &present), BG_ELOCKED);
  free(cmd("HDEL %s bgRebuilding", "{t4}:config"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  bg_filter_close(f);
  items_free(&in);
}

/* A config with a TTL is never trusted between checks: it can expire untouched while only the
 * bitmap is read. Here the bitmap has no TTL, so after the config expires the bits are still
 * there - and the query must say "not initialized", not answer from them. */
static void test_config_with_ttl(void) {
  items in = make_items("ttl", 50);
  bg_filter *f = bgt_fresh_filter(tr, "t5", 1000, 0.01, &in);
  int64_t tracked = stat_of(f, BG_STAT_TRACKED_READS);
  free(cmd("PEXPIRE %s 400", "{t5}:config"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), tracked);
  usleep(600 * 1000);
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_ENOTINIT);
  /* the control: the bits are still there */
  CHECK_EQ_U64(naive_cached_present("t5", 9585, 7, &in), in.n);
  bg_filter_close(f);
  items_free(&in);
}

/* A TTL set after the verdict, FLUSHDB, a killed connection. */
static void test_expire_flush_and_reconnect(void) {
  items in = make_items("fl", 50);
  bg_filter *f = bgt_fresh_filter(tr, "t6", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_OK(bg_filter_expire(f, 300, NULL));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  usleep(500 * 1000);
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_ENOTINIT);

  bg_filter_close(f);
  f = bgt_fresh_filter(tr, "t6", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  free(cmd("FLUSHDB %s", "SYNC"));
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_ENOTINIT);

  bg_filter_close(f);
  f = bgt_fresh_filter(tr, "t6", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  free(cmd("CLIENT KILL TYPE %s", "normal"));
  bg_filter *other = bgt_fresh_filter(plain, "t6", 50, 0.1, NULL);
  CHECK_STATUS(bg_filter_contains(f, in.p[0], in.len[0], &present), BG_OK);
  CHECK_OK(bg_filter_add_many(other, PTRS(in), in.len, in.n, NULL));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  bg_filter_close(other);
  bg_filter_close(f);
  items_free(&in);
}

/* Two handles and two filters share the connection's verdicts without mixing them up. */
static void test_many_filters_one_connection(void) {
  enum { N = 40 };
  bg_filter *f[N];
  items in = make_items("many", 20);
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "many%d", i);
    f[i] = bgt_fresh_filter(tr, name, 100 + 50 * i, 0.01, &in);
  }
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < N; i++) CHECK_EQ_U64(count_present(f[i], &in, 1), in.n);
  /* rebuild every other one elsewhere with other parameters and other items */
  items other = make_items("many-other", 20);
  for (int i = 0; i < N; i += 2) {
    snprintf(name, sizeof name, "many%d", i);
    bg_filter_close(bgt_fresh_filter(plain, name, 30, 0.2, &other));
  }
  for (int i = 0; i < N; i++) CHECK_EQ_U64(count_present(f[i], i % 2 ? &in : &other, 1), in.n);
  for (int i = 0; i < N; i++) bg_filter_close(f[i]);
  items_free(&in), items_free(&other);
}

/* A user who may not write the handshake's probe key: tracking is not trusted, queries keep the
 * full check. */
static void test_acl_without_the_probe_key(void) {
  free(cmd("ACL SETUSER keys-only on >secret ~t9 ~{t9}:* &* %s", "+@all"));
  char url[160];
  snprintf(url, sizeof url, "redis://keys-only:secret@127.0.0.1:%d", srv.port);
  bg_client *c = NULL;
  CHECK_OK(bg_client_open(&c, url, NULL));
  items in = make_items("probe", 50);
  bg_filter *f = bgt_fresh_filter(c, "t9", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), 0);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&in);
}

/* A user the ACL denies CLIENT: the handshake's TRACKING is refused, queries keep the full check. */
static void test_acl_without_client_command(void) {
  free(cmd("ACL SETUSER limited on >secret ~* &* +@all %s", "-client"));
  char url[160];
  snprintf(url, sizeof url, "redis://limited:secret@127.0.0.1:%d", srv.port);
  bg_client *c = NULL;
  CHECK_OK(bg_client_open(&c, url, NULL));
  items in = make_items("acl", 50);
  bg_filter *f = bgt_fresh_filter(c, "t7", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_U64(count_present(f, &in, 0), in.n);
  CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), 0);
  bg_filter_close(f);
  bg_client_close(c);

  /* the ACL changes under a connection that tracks: queries go on, with the full check */
  free(cmd("ACL SETUSER changing on >secret ~* &* %s", "+@all"));
  snprintf(url, sizeof url, "redis://changing:secret@127.0.0.1:%d", srv.port);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 1));
  CHECK_OK(bg_client_open(&c, url, o));
  bg_options_free(o);
  f = bgt_fresh_filter(c, "t7", 1000, 0.01, &in);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  free(cmd("ACL SETUSER changing %s", "-client"));
  free(cmd("HSET %s mode write", "{t7}:lock"));   /* drops the verdict: the next query checks */
  free(cmd("DEL %s", "{t7}:lock"));
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_U64(count_present(f, &in, 0), in.n);
  int64_t tracked = stat_of(f, BG_STAT_TRACKED_READS);
  CHECK_EQ_U64(count_present(f, &in, 1), in.n);
  CHECK_EQ_INT(stat_of(f, BG_STAT_TRACKED_READS), tracked);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&in);
}

static void setup(void) {
  supported = bgi_tracking_supported();
  printf("    tracking %s (hiredis %d.%d)\n", supported ? "available" : "not available", HIREDIS_MAJOR,
         HIREDIS_MINOR);
  /* the public feature query tells the same (bindings use it to know whether to expect tracked reads) */
  CHECK_EQ_INT((bg_features() & BG_FEATURE_TRACKING) != 0, supported);
  CHECK_EQ_INT(supported, HIREDIS_MAJOR >= 1);
  /* TLS comes with hiredis's TLS part (hiredis >= 1.0): never without tracking */
  if (bg_features() & BG_FEATURE_TLS) CHECK(supported);
  bgt_redis_start(&srv, NULL);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 1));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 100));
  const char *env = getenv("BG_TEST_PIPELINE");
  pipelined = !env || strcmp(env, "0") != 0;
  printf("    pipelining %s\n", pipelined ? "on (one multiplexed connection)" : "off");
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, pipelined));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 1));
  CHECK_OK(bg_client_open(&tr, srv.url, o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_TRACKING, 0));
  CHECK_OK(bg_client_open(&plain, srv.url, o));
  bg_options_free(o);
}

static void teardown(void) {
  bg_client_close(plain);
  bg_client_close(tr);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_option_range), BGT_CASE(test_bits_only_after_one_check),
        BGT_CASE(test_adds_keep_the_verdict), BGT_CASE(test_rebuild_by_another_client), BGT_CASE(test_write_hold_by_another_client),
        BGT_CASE(test_interrupted_rebuild_mark), BGT_CASE(test_config_with_ttl),
        BGT_CASE(test_expire_flush_and_reconnect), BGT_CASE(test_many_filters_one_connection),
        BGT_CASE(test_acl_without_client_command), BGT_CASE(test_acl_without_the_probe_key),
        BGT_CASE(teardown))
