/*
 * A native filter's query (filter/native.c): what the server receives per read, and the tracked
 * read's guarantee - a key deleted, renamed away, replaced or expired between two reads is never
 * answered 0 - against a real redis-server 7.0 with RedisBloom 2.8.2 (native_fixture.c). The
 * negative controls (bgi_native_fault) show the harness catching the 0s the rules prevent.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filter/native.h"
#include "harness.h"
#include "filters.h"
#include "native_fixture.h"

static bgt_redis srv;
static bg_client *cl;        /* the defaults: multiplexed connections (BG_OPT_PIPELINE), tracking */
static bg_client *pooled;    /* pooled connections of its own per call, tracking */

/* calls=N of one command in INFO commandstats (0 when it was never called). */
static long calls(const char *cmd) {
  char *info = bgt_redis_cmd(&srv, "INFO commandstats"), key[64];
  snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
  const char *p = strstr(info, key);
  long n = p ? atol(p + strlen(key)) : 0;
  free(info);
  return n;
}

static void reset_stats(void) { free(bgt_redis_cmd(&srv, "CONFIG RESETSTAT")); }

static void cmd(const char *fmt, const char *arg) {
  free(bgt_redis_cmd(&srv, fmt, arg));
}

static int64_t stat(const bg_filter *f, int which) {
  int64_t v = -1;
  CHECK_OK(bg_filter_stat(f, which, &v));
  return v;
}

static bg_filter *native(bg_client *c, const char *name, int init) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open_native(&f, c, name));
  bgt_policy_errors_only(f);
  if (init) {
    CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
    CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  }
  return f;
}

static int contains(bg_filter *f, const char *item, int *present) {
  *present = -1;
  return bg_filter_contains(f, item, strlen(item), present);
}

enum { N = 40 };

/* a build with hiredis 0.14 (no RESP3) has no tracking: every read is the check there, and what
 * the cases assert of the tracked read they assert of the check instead */
static int tracking;

/* With tracking, the first read checks (MULTI TYPE BF.MEXISTS PTTL EXEC) and the next ones send
 * BF.MEXISTS alone: no EVALSHA, one BF.MEXISTS per read. */
static void test_fast_read_taken(void) {
  bg_filter *f = native(cl, "nr-fast", 1);
  int present;
  reset_stats();
  for (int i = 0; i < N; i++) {
    CHECK_OK(contains(f, i % 2 ? "in" : "out", &present));
    CHECK_EQ_INT(present, i % 2);
  }
  long tracked = stat(f, BG_STAT_TRACKED_READS);
  CHECK_EQ_INT(calls("evalsha"), 0);
  CHECK_EQ_INT(calls("bf.mexists"), N);
  CHECK_EQ_INT(calls("type") + tracked, N);
  /* a connection or two checks once each */
  if (tracking) CHECK_MSG(tracked >= N - 2, "only %ld of %d reads sent BF.MEXISTS alone", tracked, N);
  else CHECK_EQ_INT(tracked, 0);
  CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_STALE), 0);
  /* a batch: one BF.MEXISTS per chunk, the answers in order */
  enum { M = 2500 };
  static char buf[M][12];
  static const void *items[M];
  static size_t lens[M];
  static uint8_t pres[M];
  for (int i = 0; i < M; i++) {
    lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "b%d", i);
    items[i] = buf[i];
  }
  size_t added = 0;
  CHECK_OK(bg_filter_add_many(f, items, lens, M / 2, &added));
  CHECK_OK(bg_filter_contains_many(f, items, lens, M, pres));   /* the add's push: this one checks */
  reset_stats();
  CHECK_OK(bg_filter_contains_many(f, items, lens, M, pres));
  int in = 0;
  for (int i = 0; i < M / 2; i++) in += pres[i];
  CHECK_EQ_INT(in, M / 2);
  CHECK_EQ_INT(calls("evalsha"), 0);
  CHECK_EQ_INT(calls("type"), tracking ? 0 : 3);
  CHECK_EQ_INT(calls("bf.mexists"), 3);   /* 1,024 items a chunk */
  bg_filter_close(f);
}

/* The same through a submission queue (its multiplexed connection, whose reader takes the pushes). */
static void test_fast_read_queue(void) {
  bg_queue *q = NULL;
  CHECK_OK(bg_queue_open(&q, cl));
  bg_filter *f = native(cl, "nr-queue", 1);
  reset_stats();
  for (int i = 0; i < N; i++) {
    bg_completion *c[1];
    size_t n = 0;
    CHECK_OK(bg_filter_contains_submit(f, q, (uint64_t)i, i % 2 ? "in" : "out", i % 2 ? 2 : 3));
    CHECK_OK(bg_queue_poll(q, 5000, c, 1, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_OK(bg_completion_status(c[0]));
    CHECK_EQ_INT(bg_completion_value(c[0]), i % 2);
  }
  long tracked = stat(f, BG_STAT_TRACKED_READS);
  CHECK_EQ_INT(calls("evalsha"), 0);
  CHECK_EQ_INT(calls("bf.mexists"), N);
  CHECK_EQ_INT(calls("type") + tracked, N);
  if (tracking) CHECK_MSG(tracked >= N - 2, "only %ld of %d queued reads sent BF.MEXISTS alone", tracked, N);
  else CHECK_EQ_INT(tracked, 0);
  bg_filter_close(f);
  bg_queue_close(q);
}

/* Without tracking: MULTI TYPE BF.MEXISTS EXEC per read, still no script. */
static void test_block_without_tracking(void) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_TRACKING, 0));
  CHECK_OK(bg_client_open(&c, srv.url, o));
  bg_options_free(o);
  bg_filter *f = native(c, "nr-plain", 1);
  int present;
  reset_stats();
  for (int i = 0; i < N; i++) {
    CHECK_OK(contains(f, "in", &present));
    CHECK_EQ_INT(present, 1);
  }
  CHECK_EQ_INT(calls("evalsha"), 0);
  CHECK_EQ_INT(calls("multi"), N);
  CHECK_EQ_INT(calls("type"), N);
  CHECK_EQ_INT(calls("bf.mexists"), N);
  CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_READS), 0);
  /* a missing key: the block, then the script says "not initialized" */
  cmd("DEL %s", "nr-plain");
  CHECK_STATUS(contains(f, "in", &present), BG_ENOTINIT);
  CHECK_CONTAINS(bg_filter_errmsg(f), "not initialized");
  bg_filter_close(f);
  bg_client_close(c);
}

/* Two reads leave a verdict and take the fast path once; then change() runs on another connection
 * (its invalidation waits in the socket, ahead of the next reply). Returns the next read's status. */
static int read_after(bg_filter *f, const char *change, const char *arg, int *present) {
  int64_t stale = stat(f, BG_STAT_TRACKED_STALE), tracked = stat(f, BG_STAT_TRACKED_READS);
  CHECK_OK(contains(f, "in", present));
  CHECK_OK(contains(f, "in", present));
  CHECK_EQ_INT(*present, 1);
  if (!tracking) {
    /* the check itself sees the change */
    cmd(change, arg);
    int st = contains(f, "in", present);
    CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_READS), 0);
    return st;
  }
  CHECK_MSG(stat(f, BG_STAT_TRACKED_READS) > tracked, "no fast read before the change");
  tracked = stat(f, BG_STAT_TRACKED_READS);
  cmd(change, arg);
  int st = contains(f, "in", present);
  /* the read after the change was the fast one, and its answer came after the push */
  CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_READS), tracked + 1);
  CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_STALE), stale + 1);
  return st;
}

static void invalidation_before_reply(bg_client *c) {
  bg_filter *f = native(c, "nr-inv", 1);
  int present;
  /* DEL: not initialized, never a 0 */
  CHECK_STATUS(read_after(f, "DEL %s", "nr-inv", &present), BG_ENOTINIT);
  CHECK_CONTAINS(bg_filter_errmsg(f), "not initialized");
  /* RENAME away: the same */
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  CHECK_STATUS(read_after(f, "RENAME %s nr-inv-moved", "nr-inv", &present), BG_ENOTINIT);
  /* a rotation's RENAME onto NAME: the new generation answers */
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  cmd("BF.RESERVE %s 0.01 1000", "nr-inv-next");
  cmd("BF.ADD %s in", "nr-inv-next");
  CHECK_OK(read_after(f, "RENAME %s nr-inv", "nr-inv-next", &present));
  CHECK_EQ_INT(present, 1);
  /* another kind renamed onto it: refused by name */
  cmd("SET %s x", "nr-inv-str");
  CHECK_STATUS(read_after(f, "RENAME %s nr-inv", "nr-inv-str", &present), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(f), "not a native Bloom filter");
  /* a Redisson-layout filter there (its config hash, no key at NAME) */
  cmd("DEL %s", "nr-inv");
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  cmd("HSET {nr-inv}:config size 100 hashIterations 3", NULL);
  CHECK_STATUS(read_after(f, "DEL %s", "nr-inv", &present), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(f), "Redisson-layout");
  cmd("DEL {nr-inv}:config", NULL);
  if (!tracking) {   /* no push to ignore: the control is the tracked read's */
    bg_filter_close(f);
    return;
  }
  /* negative control: the answer used in spite of the push is the 0 the rule prevents */
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  bgi_native_fault(BGI_NFAULT_IGNORE_PUSH);
  int st = read_after(f, "DEL %s", "nr-inv", &present);
  bgi_native_fault(0);
  CHECK_MSG(st == BG_OK && present == 0, "the control did not answer 0 for a deleted key (status %d, present %d)", st,
            present);
  bg_filter_close(f);
}

static void test_invalidation_before_reply(void) {
  invalidation_before_reply(cl);
  invalidation_before_reply(pooled);
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* A key with a TTL leaves no verdict: past its TTL, BF.MEXISTS alone would delete it and answer 0
 * with the invalidation after the reply. The server's active expiry is off, so the key is still
 * there, past its TTL, when the read comes. */
static int read_past_ttl(bg_filter *f, int *present) {
  cmd("PEXPIRE %s 30", "nr-ttl");
  CHECK_OK(contains(f, "in", present));   /* the push of the PEXPIRE: this one checks */
  CHECK_OK(contains(f, "in", present));
  CHECK_EQ_INT(*present, 1);
  nap_ms(60);   /* a lower bound only: the key is past its TTL after 30 ms, however late we wake */
  return contains(f, "in", present);
}

/* On a pooled connection: a multiplexed one's reader may take a push that follows the reply before
 * the call's parse runs (then the answer is dropped anyway), which would hide the control's 0. */
static void test_ttl_no_verdict(void) {
  bg_filter *f = native(pooled, "nr-ttl", 1);
  int present;
  cmd("DEBUG SET-ACTIVE-EXPIRE %s", "0");
  cmd("PEXPIRE %s 100000", "nr-ttl");
  int64_t tracked = stat(f, BG_STAT_TRACKED_READS);
  for (int i = 0; i < 5; i++) CHECK_OK(contains(f, "in", &present));
  CHECK_EQ_INT(stat(f, BG_STAT_TRACKED_READS), tracked);
  CHECK_STATUS(read_past_ttl(f, &present), BG_ENOTINIT);
  if (!tracking) {   /* no verdict to take: the control is the tracked read's */
    cmd("DEBUG SET-ACTIVE-EXPIRE %s", "1");
    bg_filter_close(f);
    return;
  }
  /* negative control: a verdict from a key with a TTL answers 0 once it is past it */
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "in", 2, NULL));
  bgi_native_fault(BGI_NFAULT_IGNORE_TTL);
  int st = read_past_ttl(f, &present);
  bgi_native_fault(0);
  CHECK_MSG(st == BG_OK && present == 0, "the control did not answer 0 for an expired key (status %d, present %d)", st,
            present);
  cmd("DEBUG SET-ACTIVE-EXPIRE %s", "1");
  bg_filter_close(f);
}

static void setup(void) {
  tracking = (bg_features() & BG_FEATURE_TRACKING) != 0;
  printf("    tracking %s\n", tracking ? "available: the tracked read" : "not in this build: the check on every read");
  const char *args[] = {"--enable-debug-command", "yes", NULL};
  bgt_redis_start_bloom(&srv, args);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, 0));
  CHECK_OK(bg_client_open(&pooled, srv.url, o));
  bg_options_free(o);
}

static void teardown(void) {
  bg_client_close(pooled);
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_fast_read_taken), BGT_CASE(test_fast_read_queue),
        BGT_CASE(test_block_without_tracking), BGT_CASE(test_invalidation_before_reply), BGT_CASE(test_ttl_no_verdict),
        BGT_CASE(teardown))
