/* Filter operations against a real redis-server: Redisson's layout, batches, config changes. */
#include <bloomguard.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;

static bg_filter *open_filter(const char *name) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, cl, name));
  return f;
}


static void test_init_writes_redisson_config(void) {
  bg_filter *f = open_filter("cfg");
  int created = -1;
  CHECK_OK(bg_filter_init(f, 1000000, 0.01, &created));
  CHECK_EQ_INT(created, 1);
  char *all = bgt_redis_cmd(&srv, "HGETALL {cfg}:config");
  CHECK_EQ_STR(all, "size 9585058 hashIterations 7 expectedInsertions 1000000 falseProbability 0.01");
  free(all);
  /* tryInit semantics: a second init, even with other parameters, keeps the first config */
  CHECK_OK(bg_filter_init(f, 10, 0.5, &created));
  CHECK_EQ_INT(created, 0);
  uint64_t size = 0;
  uint32_t k = 0;
  int64_t n = 0;
  double p = 0;
  CHECK_OK(bg_filter_info(f, &size, &k, &n, &p));
  CHECK_EQ_U64(size, 9585058);
  CHECK_EQ_INT(k, 7);
  CHECK_EQ_INT(n, 1000000);
  CHECK(p == 0.01);
  bg_filter_close(f);

  f = open_filter("cfg-small-p");
  CHECK_OK(bg_filter_init(f, 1000, 1e-4, NULL));
  all = bgt_redis_cmd(&srv, "HGET {cfg-small-p}:config falseProbability");
  CHECK_EQ_STR(all, "1.0E-4");
  free(all);
  bg_filter_close(f);
}

static void test_add_contains_single_and_empty_item(void) {
  bg_filter *f = open_filter("single");
  int added = -1, present = -1;
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_contains(f, "apple", 5, &present));
  CHECK_EQ_INT(present, 0);
  CHECK_OK(bg_filter_add(f, "apple", 5, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_add(f, "apple", 5, &added));
  CHECK_EQ_INT(added, 0);
  CHECK_OK(bg_filter_contains(f, "apple", 5, &present));
  CHECK_EQ_INT(present, 1);
  /* the empty item is a valid item, distinct from every other */
  CHECK_OK(bg_filter_contains(f, NULL, 0, &present));
  CHECK_EQ_INT(present, 0);
  CHECK_OK(bg_filter_add(f, NULL, 0, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_contains(f, "", 0, &present));
  CHECK_EQ_INT(present, 1);
  /* binary items with NUL bytes */
  const char bin[] = {0, 1, 2, 0, (char)0xff};
  CHECK_OK(bg_filter_add(f, bin, sizeof bin, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_contains(f, bin, sizeof bin, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_contains(f, bin, 3, &present));
  CHECK_EQ_INT(present, 0);
  bg_filter_close(f);
}

/* Batches crossing the chunk (1024) and window (16384) sizes, with no false negative. */
static void test_batches(void) {
  bg_filter *f = open_filter("batch");
  CHECK_OK(bg_filter_init(f, 100000, 0.001, NULL));
  size_t sizes[] = {0, 1, 100, 1023, 1024, 1025, 20000};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "b%zu", sizes[s]);
    items it = make_items(prefix, sizes[s]);
    uint8_t *present = calloc(sizes[s] + 1, 1);
    size_t added = 99999;
    CHECK_OK(bg_filter_add_many(f, (const void *const *)it.p, it.len, it.n, &added));
    CHECK_MSG(added + 3 >= it.n && added <= it.n, "batch %zu: added %zu", it.n, added);
    CHECK_OK(bg_filter_contains_many(f, (const void *const *)it.p, it.len, it.n, present));
    size_t missing = 0;
    for (size_t i = 0; i < it.n; i++) missing += !present[i];
    CHECK_MSG(missing == 0, "batch %zu: %zu false negatives", it.n, missing);
    CHECK_OK(bg_filter_add_many(f, (const void *const *)it.p, it.len, it.n, &added));
    CHECK_EQ_U64(added, 0);
    items_free(&it);
    free(present);
  }
  /* absent items: false positives stay near the configured rate */
  items other = make_items("absent", 20000);
  uint8_t *present = calloc(other.n, 1);
  CHECK_OK(bg_filter_contains_many(f, (const void *const *)other.p, other.len, other.n, present));
  size_t fp = 0;
  for (size_t i = 0; i < other.n; i++) fp += present[i];
  CHECK_MSG(fp < 100, "false positives: %zu of 20000 at p=0.001", fp);
  items_free(&other);
  free(present);
  bg_filter_close(f);
}

static void test_count_matches_redisson_formula(void) {
  bg_filter *f = open_filter("count");
  int64_t c = -1;
  CHECK_OK(bg_filter_init(f, 10000, 0.01, NULL));
  CHECK_OK(bg_filter_count(f, &c));
  CHECK_EQ_INT(c, 0);
  items it = make_items("c", 5000);
  CHECK_OK(bg_filter_add_many(f, (const void *const *)it.p, it.len, it.n, NULL));
  CHECK_OK(bg_filter_count(f, &c));
  CHECK_MSG(c > 4900 && c < 5100, "count %lld for 5000 items", (long long)c);
  char *bits = bgt_redis_cmd(&srv, "BITCOUNT count");
  double size = 95850, k = 7, b = atof(bits);
  free(bits);
  /* Redisson: Math.round(-size / k * Math.log(1 - bits / size)) */
  CHECK_EQ_INT(c, (long long)floor(-size / k * log(1 - b / size) + 0.5));
  items_free(&it);
  bg_filter_close(f);
}

static void test_delete_expire_persist(void) {
  bg_filter *f = open_filter("life{t}");
  int r = -1, present = 0;
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  CHECK_OK(bg_filter_add(f, "x", 1, NULL));
  CHECK_OK(bg_filter_expire(f, 100000, &r));
  CHECK_EQ_INT(r, 1);
  char *ttl1 = bgt_redis_cmd(&srv, "PTTL life{t}"), *ttl2 = bgt_redis_cmd(&srv, "PTTL life{t}:config");
  CHECK_MSG(atol(ttl1) > 90000 && atol(ttl2) > 90000, "ttl %s / %s", ttl1, ttl2);
  free(ttl1), free(ttl2);
  /* issue 11: a TTL Redis would refuse ("invalid expire time") is BG_EINVAL, before any I/O;
   * the largest one accepted, 2^46 ms, is set */
  CHECK_STATUS(bg_filter_expire(f, INT64_MAX, &r), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "at most 70368744177664");
  CHECK_STATUS(bg_filter_expire(f, (INT64_C(1) << 46) + 1, &r), BG_EINVAL);
  CHECK_OK(bg_filter_expire(f, INT64_C(1) << 46, &r));
  ttl1 = bgt_redis_cmd(&srv, "PTTL life{t}");
  CHECK_MSG(atoll(ttl1) > (INT64_C(1) << 46) - 60000, "pttl %s", ttl1);
  free(ttl1);
  CHECK_OK(bg_filter_persist(f, &r));
  CHECK_EQ_INT(r, 1);
  ttl1 = bgt_redis_cmd(&srv, "PTTL life{t}:config");
  CHECK_EQ_STR(ttl1, "-1");
  free(ttl1);
  CHECK_OK(bg_filter_persist(f, &r));
  CHECK_EQ_INT(r, 0);
  CHECK_OK(bg_filter_delete(f, &r));
  CHECK_EQ_INT(r, 1);
  char *ex = bgt_redis_cmd(&srv, "EXISTS life{t} life{t}:config");
  CHECK_EQ_STR(ex, "0");
  free(ex);
  CHECK_OK(bg_filter_delete(f, &r));
  CHECK_EQ_INT(r, 0);
  CHECK_STATUS(bg_filter_contains(f, "x", 1, &present), BG_ENOTINIT);
  CHECK_CONTAINS(bg_filter_errmsg(f), "not initialized");
  CHECK_STATUS(bg_filter_add(f, "x", 1, NULL), BG_ENOTINIT);
  int64_t c;
  CHECK_STATUS(bg_filter_count(f, &c), BG_ENOTINIT);
  CHECK_STATUS(bg_filter_info(f, NULL, NULL, NULL, NULL), BG_ENOTINIT);
  bg_filter_close(f);
}

/* Another client rebuilds the filter with other parameters: this handle follows, no error. */
static void test_config_change_is_followed(void) {
  bg_filter *a = open_filter("moving"), *b = open_filter("moving");
  int present = 0, added = 0;
  CHECK_OK(bg_filter_init(a, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add(a, "k1", 2, NULL));
  CHECK_OK(bg_filter_contains(a, "k1", 2, &present));
  CHECK_EQ_INT(present, 1);
  /* b: delete + tryInit with other (n, p) + add, the way a rebuild does it */
  CHECK_OK(bg_filter_delete(b, NULL));
  CHECK_OK(bg_filter_init(b, 50000, 0.001, NULL));
  CHECK_OK(bg_filter_add(b, "k1", 2, NULL));
  CHECK_OK(bg_filter_add(b, "k2", 2, NULL));
  /* a still caches size 9585/k 7; the step returns the new config and a retries transparently */
  CHECK_OK(bg_filter_contains(a, "k2", 2, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_contains(a, "k1", 2, &present));
  CHECK_EQ_INT(present, 1);
  /* and adds through a land with the new indexes, visible to b */
  CHECK_OK(bg_filter_delete(b, NULL));
  CHECK_OK(bg_filter_init(b, 200, 0.1, NULL));
  CHECK_OK(bg_filter_add(a, "k3", 2, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_contains(b, "k3", 2, &present));
  CHECK_EQ_INT(present, 1);
  bg_filter_close(a);
  bg_filter_close(b);
}

static void test_filter_outlives_closed_client(void) {
  bg_client *c2 = NULL;
  bg_filter *f = NULL;
  int present = 0;
  CHECK_OK(bg_client_open(&c2, srv.url, NULL));
  CHECK_OK(bg_filter_open(&f, c2, "outlive"));
  bg_client_close(c2); /* the filter keeps the pool alive */
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  CHECK_OK(bg_filter_add(f, "a", 1, NULL));
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_EQ_INT(present, 1);
  bg_filter_close(f);
  bg_filter_close(NULL);
  bg_client_close(NULL);
}

static void test_unix_socket_and_db(void) {
  char url[256];
  bg_client *c2 = NULL;
  bg_filter *f = NULL;
  snprintf(url, sizeof url, "unix://%s?db=3", srv.sock);
  CHECK_OK(bg_client_open(&c2, url, NULL));
  CHECK_OK(bg_client_ping(c2));
  CHECK_OK(bg_filter_open(&f, c2, "in-db3"));
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  char *ex = bgt_redis_cmd(&srv, "EXISTS {in-db3}:config");
  CHECK_EQ_STR(ex, "0"); /* not in db 0 */
  free(ex);
  bg_filter_close(f);
  bg_client_close(c2);

  snprintf(url, sizeof url, "%s/3", srv.url);
  CHECK_OK(bg_client_open(&c2, url, NULL));
  CHECK_OK(bg_filter_open(&f, c2, "in-db3"));
  uint64_t size = 0;
  CHECK_OK(bg_filter_info(f, &size, NULL, NULL, NULL));
  CHECK_EQ_U64(size, 958);
  bg_filter_close(f);
  bg_client_close(c2);

  /* issue 11: ?db=N on redis:// (was "port must be a number") */
  snprintf(url, sizeof url, "%s?db=3", srv.url);
  CHECK_OK(bg_client_open(&c2, url, NULL));
  CHECK_OK(bg_filter_open(&f, c2, "in-db3"));
  size = 0;
  CHECK_OK(bg_filter_info(f, &size, NULL, NULL, NULL));
  CHECK_EQ_U64(size, 958);
  bg_filter_close(f);
  bg_client_close(c2);
}

/* issue 11: an empty password (URL or BG_OPT_PASSWORD) is none: the server has no password and
 * refuses AUTH with "" ("AUTH <password> called without any password configured") */
static void test_empty_password_is_none(void) {
  char url[640];
  bg_client *c2 = NULL;
  bg_options *o = NULL;
  snprintf(url, sizeof url, "redis://:@%s", srv.url + strlen("redis://"));
  CHECK_OK(bg_client_open(&c2, url, NULL));
  CHECK_OK(bg_client_ping(c2));
  bg_client_close(c2);
  c2 = NULL;
  snprintf(url, sizeof url, "redis://@%s", srv.url + strlen("redis://"));
  CHECK_OK(bg_client_open(&c2, url, NULL));
  bg_client_close(c2);
  c2 = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_str(o, BG_OPT_PASSWORD, ""));
  CHECK_OK(bg_options_set_str(o, BG_OPT_USERNAME, ""));
  CHECK_OK(bg_client_open(&c2, srv.url, o));
  CHECK_OK(bg_client_ping(c2));
  bg_client_close(c2);
  bg_options_free(o);
}

/* Many threads share one client (pool of 3) and one filter handle. */
typedef struct worker {
  bg_filter *f;
  int id;
  size_t missing;
  int errors;
  char first_error[256];
} worker;

static void worker_failed(worker *w, int st) {
  if (!w->errors++)
    snprintf(w->first_error, sizeof w->first_error, "%s: %s", bg_strerror(st), bg_filter_errmsg(w->f));
}

static void *work(void *arg) {
  worker *w = arg;
  char prefix[16];
  snprintf(prefix, sizeof prefix, "t%d", w->id);
  items it = make_items(prefix, 2000);
  uint8_t *present = calloc(it.n, 1);
  for (size_t i = 0; i < it.n; i += 100) {
    int p = 0, st = bg_filter_add_many(w->f, (const void *const *)it.p + i, it.len + i, 100, NULL);
    if (st != BG_OK) worker_failed(w, st);
    if ((st = bg_filter_contains(w->f, it.p[i], it.len[i], &p)) != BG_OK) worker_failed(w, st);
    w->missing += !p;
  }
  int st = bg_filter_contains_many(w->f, (const void *const *)it.p, it.len, it.n, present);
  if (st != BG_OK) worker_failed(w, st);
  for (size_t i = 0; i < it.n; i++) w->missing += !present[i];
  items_free(&it);
  free(present);
  return NULL;
}

static void test_threads_share_client_and_filter(void) {
  bg_options *o = NULL;
  bg_client *c2 = NULL;
  bg_filter *f = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 3));
  /* 8 threads queue for 3 connections: under sanitizers on a loaded machine a wait can pass 1 s */
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 30000));
  CHECK_OK(bg_client_open(&c2, srv.url, o));
  bg_options_free(o);
  CHECK_OK(bg_filter_open(&f, c2, "threads"));
  CHECK_OK(bg_filter_init(f, 100000, 0.01, NULL));
  pthread_t th[8];
  worker w[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (worker){f, i, 0, 0, ""};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(w[i].errors == 0, "thread %d: %d errors, first: %s", i, w[i].errors, w[i].first_error);
    CHECK_EQ_INT(w[i].missing, 0);
  }
  bg_filter_close(f);
  bg_client_close(c2);
}

/* A pooled connection killed while idle is replaced without the caller seeing an error. */
static void test_killed_connection_is_replaced(void) {
  bg_filter *f = open_filter("reconnect");
  int present = 0;
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  CHECK_OK(bg_filter_add(f, "a", 1, NULL));
  free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes"));
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_EQ_INT(present, 1);
  bg_filter_close(f);
}

static void test_script_cache_flush(void) {
  bg_filter *f = open_filter("flushed");
  int added = 0;
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  free(bgt_redis_cmd(&srv, "SCRIPT FLUSH"));
  CHECK_OK(bg_filter_add(f, "a", 1, &added));
  CHECK_EQ_INT(added, 1);
  free(bgt_redis_cmd(&srv, "SCRIPT FLUSH"));
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  bg_filter_close(f);
}

/* Stops the server from answering for ms: CLIENT PAUSE returns at once, so the stall has surely
 * begun when this returns (a DEBUG SLEEP sent from another thread might not have, under load). */
static void pause_server(int ms) { free(bgt_redis_cmd(&srv, "CLIENT PAUSE %d", ms)); }
static void unpause_server(void) { free(bgt_redis_cmd(&srv, "CLIENT UNPAUSE")); }

/* A server stuck longer than the command timeout: BG_ETIMEOUT, and the next call works again. */
static void test_command_timeout(void) {
  bg_options *o = NULL;
  bg_client *c2 = NULL;
  bg_filter *f = NULL;
  int present = 0;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 200));
  CHECK_OK(bg_client_open(&c2, srv.url, o));
  bg_options_free(o);
  CHECK_OK(bg_filter_open(&f, c2, "slow"));
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  pause_server(5000);
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &present), BG_ETIMEOUT);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  CHECK_CONTAINS(bg_filter_errmsg(f), "did not answer within 200 ms");
  CHECK_MSG(ms < 200 + 700, "timed out after %.0f ms with a 200 ms timeout", ms);
  unpause_server();
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));
  CHECK_EQ_INT(present, 0);
  bg_filter_close(f);
  bg_client_close(c2);
}

/* A bg_call carries its own timeout, message and answer source. */
static void test_call_object(void) {
  bg_call *call = NULL;
  bg_filter *f = open_filter("percall");
  uint8_t present = 9;
  const void *item = "x";
  size_t len = 1;
  CHECK_STATUS(bg_call_new(NULL), BG_EINVAL);
  CHECK_OK(bg_call_new(&call));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_NONE);
  CHECK_STATUS(bg_call_set_timeout_ms(call, -1), BG_EINVAL);
  CHECK_STATUS(bg_call_set_timeout_ms(call, 3600001), BG_EINVAL);

  /* failure: the message is on the call, and the handle's message is left alone */
  CHECK_STATUS(bg_filter_contains_many_ex(f, call, &item, &len, 1, &present), BG_ENOTINIT);
  CHECK_EQ_INT(bg_call_status(call), BG_ENOTINIT);
  CHECK_CONTAINS(bg_call_errmsg(call), "not initialized");
  CHECK_EQ_STR(bg_filter_errmsg(f), "");
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_NONE);

  CHECK_OK(bg_filter_init_ex(f, call, 100, 0.01, NULL));
  CHECK_EQ_STR(bg_call_errmsg(call), "");
  CHECK_OK(bg_filter_add_many_ex(f, call, &item, &len, 1, NULL));
  CHECK_OK(bg_filter_contains_many_ex(f, call, &item, &len, 1, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  int64_t count = 0;
  CHECK_OK(bg_filter_count_ex(f, call, &count));
  CHECK_EQ_INT(count, 1);
  CHECK_STATUS(bg_filter_expire_ex(f, call, -5, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "ttl_ms must be positive");

  /* a per-call timeout shorter than the client's (1 s default) */
  pause_server(5000);
  CHECK_OK(bg_call_set_timeout_ms(call, 150));
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_contains_many_ex(f, call, &item, &len, 1, &present), BG_ETIMEOUT);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  CHECK_MSG(ms < 150 + 500, "per-call timeout of 150 ms took %.0f ms", ms);
  unpause_server();
  CHECK_OK(bg_call_set_timeout_ms(call, 0));
  CHECK_OK(bg_filter_contains_many_ex(f, call, &item, &len, 1, &present));
  CHECK_OK(bg_filter_delete_ex(f, call, NULL));

  /* every failure lands on the call, even for a NULL handle: never the previous call's status */
  int64_t n = 0;
  CHECK_STATUS(bg_filter_count_ex(NULL, call, &n), BG_EINVAL);
  CHECK_EQ_INT(bg_call_status(call), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "filter handle is NULL");
  bg_filter *g = NULL;
  CHECK_STATUS(bg_filter_open_ex(&g, call, cl, "a{}b"), BG_EBADNAME);
  CHECK_CONTAINS(bg_call_errmsg(call), "different cluster slots");
  CHECK_OK(bg_filter_open_ex(&g, call, cl, "fine"));
  CHECK_EQ_STR(bg_call_errmsg(call), "");
  bg_filter_close(g);
  uint64_t size;
  uint32_t k;
  CHECK_STATUS(bg_optimal_params_ex(call, 100, 2.0, &size, &k), BG_EBADPARAMS);
  CHECK_EQ_STR(bg_call_errmsg(call), "Bloom filter false probability can't be greater than 1");
  CHECK_OK(bg_client_ping_ex(cl, call));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  bg_call_free(call);
  bg_call_free(NULL);
  bg_filter_close(f);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_init_writes_redisson_config), BGT_CASE(test_add_contains_single_and_empty_item),
        BGT_CASE(test_batches), BGT_CASE(test_count_matches_redisson_formula), BGT_CASE(test_delete_expire_persist),
        BGT_CASE(test_config_change_is_followed), BGT_CASE(test_filter_outlives_closed_client),
        BGT_CASE(test_unix_socket_and_db), BGT_CASE(test_empty_password_is_none), BGT_CASE(test_threads_share_client_and_filter),
        BGT_CASE(test_killed_connection_is_replaced), BGT_CASE(test_script_cache_flush), BGT_CASE(test_command_timeout), BGT_CASE(test_call_object), BGT_CASE(teardown))
