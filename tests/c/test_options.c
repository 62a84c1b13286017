/*
 * bg_options and the _ex rule (issue 16, item 4), against a real redis-server:
 *  - bg_options_bounds / bg_policy_bounds answer exactly what the setters accept (both edges and
 *    one past each, for every integer option and setting);
 *  - each consumer (bg_client_open, bg_rotation_begin, bg_lock_open, bg_lock_open_filter) refuses
 *    an explicitly set option of another one with BG_ENOTSUP and a message naming it and where it
 *    belongs, and takes nothing (no client, no lease, no lock handle) when it does;
 *  - every _ex form added for the rule puts its message on the call, not on the shared handle.
 */
#include <bloomguard.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;

static const int int_options[] = {
  BG_OPT_CONNECT_TIMEOUT_MS, BG_OPT_COMMAND_TIMEOUT_MS, BG_OPT_POOL_SIZE, BG_OPT_DB, BG_OPT_CONFIG_RETRIES,
  BG_OPT_WRITE_LOCK_WAIT_MS, BG_OPT_TRACKING, BG_OPT_CLUSTER, BG_OPT_WAIT_REPLICAS, BG_OPT_WAIT_TIMEOUT_MS,
  BG_OPT_TLS_VERIFY, BG_OPT_ROTATE_LEASE_MS, BG_OPT_ROTATE_WAIT_MS, BG_OPT_ROTATE_STAGING_TTL_MS,
  BG_OPT_ROTATE_THREADS, BG_OPT_ROTATE_CHUNK_BYTES, BG_OPT_ROTATE_BATCH, BG_OPT_ROTATE_NICE, BG_OPT_LOCK_LEASE_MS,
  BG_OPT_LOCK_RENEW, BG_OPT_LOCK_SUBSCRIBE, BG_OPT_LOCK_POLL_MAX_MS,
};
static const int str_options[] = {
  BG_OPT_USERNAME, BG_OPT_PASSWORD, BG_OPT_CLIENT_NAME, BG_OPT_SENTINEL_USERNAME, BG_OPT_SENTINEL_PASSWORD,
  BG_OPT_TLS_CA_FILE, BG_OPT_TLS_CA_DIR, BG_OPT_TLS_CERT_FILE, BG_OPT_TLS_KEY_FILE, BG_OPT_TLS_SERVER_NAME,
};
static const int policy_settings[] = {
  BG_POLICY_RETRY_COUNT, BG_POLICY_BACKOFF_BASE_MS, BG_POLICY_BACKOFF_MAX_MS, BG_POLICY_JITTER_PCT,
  BG_POLICY_BREAKER_THRESHOLD, BG_POLICY_BREAKER_COOLDOWN_MS, BG_POLICY_CALLBACK_RATE, BG_POLICY_CALLBACK_BURST,
  BG_POLICY_SNAPSHOT_INTERVAL_MS, BG_POLICY_SNAPSHOT_MAX_AGE_MS, BG_POLICY_SNAPSHOT_CHUNK_BYTES,
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void test_options_bounds_match_the_setter(void) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  for (size_t i = 0; i < COUNT(int_options); i++) {
    int64_t lo = 7, hi = 3;
    int opt = int_options[i];
    CHECK_OK(bg_options_bounds(opt, &lo, &hi));
    CHECK_MSG(lo <= hi, "option %d: %lld..%lld", opt, (long long)lo, (long long)hi);
    CHECK_MSG(bg_options_set_int(o, opt, lo) == BG_OK, "option %d accepts its lo %lld", opt, (long long)lo);
    CHECK_MSG(bg_options_set_int(o, opt, hi) == BG_OK, "option %d accepts its hi %lld", opt, (long long)hi);
    CHECK_MSG(bg_options_set_int(o, opt, lo - 1) == BG_EINVAL, "option %d refuses lo - 1", opt);
    CHECK_MSG(bg_options_set_int(o, opt, hi + 1) == BG_EINVAL, "option %d refuses hi + 1", opt);
  }
  /* values the headers document */
  int64_t lo, hi;
  CHECK_OK(bg_options_bounds(BG_OPT_ROTATE_LEASE_MS, &lo, &hi));
  CHECK_EQ_INT(lo, 100);
  CHECK_EQ_INT(hi, 3600000);
  CHECK_OK(bg_options_bounds(BG_OPT_CLUSTER, &lo, &hi));
  CHECK_EQ_INT(lo, BG_CLUSTER_OFF);
  CHECK_EQ_INT(hi, BG_CLUSTER_AUTO);
  CHECK_OK(bg_options_bounds(BG_OPT_POOL_SIZE, NULL, &hi));   /* either pointer may be NULL */
  CHECK_EQ_INT(hi, 1024);
  CHECK_OK(bg_options_bounds(BG_OPT_POOL_SIZE, NULL, NULL));
  for (size_t i = 0; i < COUNT(str_options); i++)
    CHECK_MSG(bg_options_bounds(str_options[i], &lo, &hi) == BG_ENOTSUP, "string option %d", str_options[i]);
  CHECK_STATUS(bg_options_bounds(0, &lo, &hi), BG_ENOTSUP);
  CHECK_STATUS(bg_options_bounds(9999, &lo, &hi), BG_ENOTSUP);
  bg_options_free(o);
}

static void test_policy_bounds_match_the_setter(void) {
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  for (size_t i = 0; i < COUNT(policy_settings); i++) {
    int64_t lo = 7, hi = 3, v = -5;
    int s = policy_settings[i];
    CHECK_OK(bg_policy_bounds(s, &lo, &hi));
    CHECK_MSG(lo <= hi, "setting %d: %lld..%lld", s, (long long)lo, (long long)hi);
    CHECK_MSG(bg_policy_set_int(p, s, lo) == BG_OK, "setting %d accepts its lo %lld", s, (long long)lo);
    CHECK_OK(bg_policy_get_int(p, s, &v));
    CHECK_EQ_INT(v, lo);
    CHECK_MSG(bg_policy_set_int(p, s, hi) == BG_OK, "setting %d accepts its hi %lld", s, (long long)hi);
    /* the one documented value outside a range: 0 = never refresh */
    if (!(s == BG_POLICY_SNAPSHOT_INTERVAL_MS && lo - 1 == 99))
      CHECK_MSG(bg_policy_set_int(p, s, lo - 1) == BG_EINVAL, "setting %d refuses lo - 1", s);
    CHECK_MSG(bg_policy_set_int(p, s, hi + 1) == BG_EINVAL, "setting %d refuses hi + 1", s);
  }
  int64_t lo, hi;
  CHECK_OK(bg_policy_bounds(BG_POLICY_SNAPSHOT_INTERVAL_MS, &lo, &hi));
  CHECK_EQ_INT(lo, 100);
  CHECK_STATUS(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 99), BG_EINVAL);
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 0));
  CHECK_STATUS(bg_policy_bounds(0, &lo, &hi), BG_ENOTSUP);
  CHECK_STATUS(bg_policy_bounds(9999, NULL, NULL), BG_ENOTSUP);
  bg_policy_free(p);
}

static bg_options *opts_int(int option, int64_t v) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, option, v));
  return o;
}

static void test_client_refuses_rotation_and_lock_options(void) {
  bg_call *call = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_call_new(&call));
  bg_options *o = opts_int(BG_OPT_ROTATE_LEASE_MS, 30000);   /* its default, but set: a mistake */
  CHECK_STATUS(bg_client_open_ex(&c, call, srv.url, o), BG_ENOTSUP);
  CHECK(c == NULL);
  CHECK_EQ_STR(bg_call_errmsg(call), "BG_OPT_ROTATE_LEASE_MS is a rotation option (bg_rotation_begin), not a "
                                     "client option (bg_client_open)");
  CHECK_STATUS(bg_client_open(&c, srv.url, o), BG_ENOTSUP);   /* the plain form too */
  CHECK(c == NULL);
  bg_options_free(o);

  o = opts_int(BG_OPT_LOCK_POLL_MAX_MS, 10);
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 2));   /* a client option beside it changes nothing */
  CHECK_STATUS(bg_client_open_ex(&c, call, srv.url, o), BG_ENOTSUP);
  CHECK_EQ_STR(bg_call_errmsg(call), "BG_OPT_LOCK_POLL_MAX_MS is a lock option (bg_lock_open), not a client "
                                     "option (bg_client_open)");
  bg_options_free(o);

  /* the client's own options, string ones included, open as before */
  o = opts_int(BG_OPT_POOL_SIZE, 2);
  CHECK_OK(bg_options_set_str(o, BG_OPT_CLIENT_NAME, "opts-test"));
  CHECK_OK(bg_client_open_ex(&c, call, srv.url, o));
  CHECK_EQ_STR(bg_call_errmsg(call), "");
  bg_client_close(c);
  bg_options_free(o);
  bg_call_free(call);
}

static void test_rotation_refuses_client_options_and_takes_no_lease(void) {
  bg_filter *f = NULL;
  bg_rotation *r = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&f, cl, "opts-rot"));
  bg_options *o = opts_int(BG_OPT_ROTATE_THREADS, 1);
  CHECK_OK(bg_options_set_str(o, BG_OPT_PASSWORD, "s3cret-pw"));
  CHECK_STATUS(bg_rotation_begin_ex(&r, call, f, 1000, 0.01, BG_ROTATE_SWAP, o), BG_ENOTSUP);
  CHECK(r == NULL);
  CHECK_EQ_STR(bg_call_errmsg(call), "BG_OPT_PASSWORD is a client option (bg_client_open), not a rotation option "
                                     "(bg_rotation_begin)");
  CHECK(strstr(bg_filter_errmsg(f), "s3cret") == NULL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "BG_OPT_PASSWORD is a client option");
  char *lease = bgt_redis_cmd(&srv, "EXISTS {opts-rot}:rotation");
  CHECK_EQ_STR(lease, "0");   /* refused before the lease */
  free(lease);
  CHECK_STATUS(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_NAIVE, o), BG_ENOTSUP);
  char *cfg = bgt_redis_cmd(&srv, "EXISTS {opts-rot}:config");
  CHECK_EQ_STR(cfg, "0");     /* NAIVE deleted and re-created nothing */
  free(cfg);

  /* unset again (NULL, or "") is no longer a setting: the rotation proceeds */
  CHECK_OK(bg_options_set_str(o, BG_OPT_PASSWORD, NULL));
  CHECK_OK(bg_rotation_begin_ex(&r, call, f, 1000, 0.01, BG_ROTATE_SWAP, o));
  CHECK_OK(bg_rotation_add_ex(r, call, "a", 1));
  const void *items[2] = {"b", "c"};
  size_t lens[2] = {1, 1};
  CHECK_OK(bg_rotation_add_many_ex(r, call, items, lens, 2));
  CHECK_OK(bg_rotation_abort_ex(r, call));
  CHECK_OK(bg_rotation_abort_ex(r, call));   /* idempotent */
  CHECK_STATUS(bg_rotation_add_ex(r, call, "d", 1), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "already aborted");
  CHECK_CONTAINS(bg_rotation_errmsg(r), "already aborted");
  bg_rotation_free(r);
  CHECK_STATUS(bg_rotation_add_ex(NULL, call, "d", 1), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "rotation handle is NULL");
  CHECK_STATUS(bg_rotation_abort_ex(NULL, call), BG_EINVAL);

  CHECK_OK(bg_options_set_str(o, BG_OPT_USERNAME, ""));   /* "" is unset too */
  bg_options_free(o);
  o = opts_int(BG_OPT_LOCK_LEASE_MS, 1000);
  CHECK_STATUS(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_LOCKED, o), BG_ENOTSUP);
  CHECK_EQ_STR(bg_filter_errmsg(f), "BG_OPT_LOCK_LEASE_MS is a lock option (bg_lock_open), not a rotation option "
                                    "(bg_rotation_begin)");
  bg_options_free(o);
  bg_filter_close(f);
  bg_call_free(call);
}

static void test_lock_refuses_client_and_rotation_options(void) {
  bg_lock *l = NULL;
  bg_filter *f = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  bg_options *o = opts_int(BG_OPT_COMMAND_TIMEOUT_MS, 500);
  CHECK_STATUS(bg_lock_open_ex(&l, call, cl, "opts-lock", o), BG_ENOTSUP);
  CHECK(l == NULL);
  CHECK_EQ_STR(bg_call_errmsg(call), "BG_OPT_COMMAND_TIMEOUT_MS is a client option (bg_client_open), not a lock "
                                     "option (bg_lock_open)");
  CHECK_STATUS(bg_lock_open(&l, cl, "opts-lock", o), BG_ENOTSUP);
  CHECK_CONTAINS(bg_client_errmsg(cl), "BG_OPT_COMMAND_TIMEOUT_MS is a client option");
  bg_options_free(o);

  CHECK_OK(bg_filter_open(&f, cl, "opts-flock"));
  o = opts_int(BG_OPT_ROTATE_WAIT_MS, 5);
  CHECK_STATUS(bg_lock_open_filter_ex(&l, call, f, o), BG_ENOTSUP);
  CHECK(l == NULL);
  CHECK_EQ_STR(bg_call_errmsg(call), "BG_OPT_ROTATE_WAIT_MS is a rotation option (bg_rotation_begin), not a lock "
                                     "option (bg_lock_open)");
  CHECK_STATUS(bg_lock_open_filter(&l, f, o), BG_ENOTSUP);
  CHECK_CONTAINS(bg_filter_errmsg(f), "BG_OPT_ROTATE_WAIT_MS is a rotation option");
  bg_options_free(o);

  /* its own options: the lock opens and works */
  o = opts_int(BG_OPT_LOCK_LEASE_MS, 5000);
  CHECK_OK(bg_lock_open_filter_ex(&l, call, f, o));
  CHECK_EQ_STR(bg_lock_key(l), "{opts-flock}:lock");
  CHECK_OK(bg_lock_acquire_ex(l, call, BG_LOCK_EXCLUSIVE, 0, NULL));
  int mode = 0;
  uint32_t count = 0;
  CHECK_OK(bg_lock_held_ex(l, call, &mode, &count, NULL));
  CHECK_EQ_INT(mode, BG_LOCK_EXCLUSIVE);
  CHECK_EQ_INT(count, 1);
  CHECK_OK(bg_lock_release_ex(l, call));
  CHECK_OK(bg_lock_held_ex(l, call, &mode, &count, NULL));
  CHECK_EQ_INT(mode, 0);
  CHECK_STATUS(bg_lock_held_ex(NULL, call, &mode, NULL, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "lock handle is NULL");
  bg_lock_close(l);
  l = NULL;
  CHECK_OK(bg_lock_open_ex(&l, call, cl, "opts-lock", o));
  bg_lock_close(l);
  bg_options_free(o);
  bg_filter_close(f);
  bg_call_free(call);
}

/* The forms the rule added: each failure's message on the call, the handle's slot untouched. */
static void test_new_ex_forms_report_on_the_call(void) {
  bg_call *call = NULL;
  bg_filter *f = NULL;
  bg_lock *l = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_call_new(&call));

  CHECK_STATUS(bg_client_open_ex(&c, call, "redis://127.0.0.1:notaport", NULL), BG_EBADURL);
  CHECK(c == NULL);
  CHECK_CONTAINS(bg_call_errmsg(call), "port");
  CHECK_EQ_INT(bg_call_status(call), BG_EBADURL);
  CHECK_STATUS(bg_client_open_ex(NULL, call, srv.url, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "out must not be NULL");

  CHECK_OK(bg_filter_open_ex(&f, call, cl, "opts-ex"));
  CHECK_OK(bg_filter_init_ex(f, call, 1000, 0.01, NULL));
  int added = 0, present = 0;
  CHECK_OK(bg_filter_add_ex(f, call, "x", 1, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  CHECK_OK(bg_filter_contains_ex(f, call, "x", 1, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  CHECK_OK(bg_filter_contains_ex(f, call, "y", 1, &present));
  CHECK_EQ_INT(present, 0);

  /* a failure's message goes to the call, not to the shared filter handle */
  CHECK_STATUS(bg_filter_contains_ex(f, call, "x", 1, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "present must not be NULL");
  CHECK_EQ_STR(bg_filter_errmsg(f), "");
  CHECK_STATUS(bg_filter_add_ex(f, call, NULL, 3, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "item 0 is NULL");
  CHECK_EQ_STR(bg_filter_errmsg(f), "");
  CHECK_STATUS(bg_filter_contains_ex(NULL, call, "x", 1, &present), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "filter handle is NULL");

  char node[64];
  int32_t slot = -1;
  CHECK_OK(bg_filter_node_ex(f, call, node, sizeof node, &slot));
  CHECK(slot >= 0 && slot < 16384);
  CHECK(strstr(node, "127.0.0.1:") == node);
  CHECK_STATUS(bg_filter_node_ex(f, call, NULL, 8, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "buf must not be NULL");
  CHECK_EQ_STR(bg_filter_errmsg(f), "");

  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_INTERVAL_MS, 1000));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_SNAPSHOT_MAX_AGE_MS, 500));
  CHECK_STATUS(bg_filter_set_policy_ex(f, call, p), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "SNAPSHOT_MAX_AGE");
  CHECK_EQ_STR(bg_filter_errmsg(f), "");
  CHECK_STATUS(bg_filter_set_policy(f, p), BG_EINVAL);   /* the plain form: on the handle */
  CHECK_CONTAINS(bg_filter_errmsg(f), "SNAPSHOT_MAX_AGE");
  CHECK_OK(bg_filter_set_policy_ex(f, call, NULL));
  bg_policy_free(p);

  CHECK_OK(bg_filter_snapshot_refresh_ex(f, call));
  int64_t bytes = 0;
  CHECK_OK(bg_filter_stat(f, BG_STAT_SNAPSHOT_BYTES, &bytes));
  CHECK(bytes > 0);
  CHECK_OK(bg_filter_snapshot_refresh(f));
  bg_filter *missing = NULL;
  CHECK_OK(bg_filter_open_ex(&missing, call, cl, "opts-never-made"));
  CHECK_STATUS(bg_filter_snapshot_refresh_ex(missing, call), BG_ENOTINIT);
  CHECK_STATUS(bg_filter_snapshot_refresh(missing), BG_ENOTINIT);
  bg_filter_close(missing);

  CHECK_STATUS(bg_lock_open_ex(&l, call, cl, "a{}b", NULL), BG_EBADNAME);
  CHECK(l == NULL);
  CHECK_CONTAINS(bg_call_errmsg(call), "different cluster slots");
  CHECK_STATUS(bg_lock_open_ex(&l, call, NULL, "x", NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "client handle is NULL");
  CHECK_STATUS(bg_lock_open_filter_ex(&l, call, NULL, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "filter handle is NULL");

  uint64_t size = 0;
  uint32_t k = 0;
  CHECK_OK(bg_optimal_params_ex(call, 1000000, 0.01, &size, &k));
  CHECK_EQ_INT(size, 9585058);
  CHECK_EQ_INT(k, 7);
  CHECK_STATUS(bg_optimal_params_ex(call, 100, -0.5, &size, &k), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_call_errmsg(call), "can't be negative");
  CHECK_STATUS(bg_optimal_params_ex(NULL, 100, -0.5, &size, &k), BG_EBADPARAMS);

  bg_filter_delete(f, NULL);
  bg_filter_close(f);
  bg_call_free(call);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_options_bounds_match_the_setter), BGT_CASE(test_policy_bounds_match_the_setter),
        BGT_CASE(test_client_refuses_rotation_and_lock_options),
        BGT_CASE(test_rotation_refuses_client_options_and_takes_no_lease),
        BGT_CASE(test_lock_refuses_client_and_rotation_options), BGT_CASE(test_new_ex_forms_report_on_the_call),
        BGT_CASE(teardown))
