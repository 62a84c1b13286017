/* Bad input: each case gets its own status and a message that says what to fix; nothing crashes. */
#include <arpa/inet.h>
#include <bloomguard.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;

/* Opens url reaching the server at open (BG_OPT_CONNECT_AT_OPEN 1): a wrong address or password
 * fails here; o may be NULL. */
static int open_checked(bg_client **c, const char *url, bg_options *o, char *msg, size_t cap) {
  bg_options *own = NULL;
  if (!o) {
    CHECK_OK(bg_options_new(&own));
    o = own;
  }
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  int st = bgt_client_open(c, url, o, msg, cap);
  bg_options_free(own);
  return st;
}

/* Opens url connecting nothing (the default), then pings: the first call's status and message. */
static int open_then_ping(const char *url, bg_options *o, char *msg, size_t cap) {
  bg_client *c = NULL;
  bg_call *call = NULL;
  CHECK_OK(bgt_client_open(&c, url, o, msg, cap));
  CHECK_OK(bg_call_new(&call));
  int st = bg_client_ping_ex(c, call);
  snprintf(msg, cap, "%s", bg_call_errmsg(call));
  bg_call_free(call);
  bg_client_close(c);
  return st;
}

static void test_null_handles_and_pointers(void) {
  bg_filter *f = NULL;
  bg_client *c = NULL;
  int i = 0;
  int64_t n = 0;
  size_t z = 0;
  uint8_t p = 0;
  const void *item = "a";
  size_t len = 1;
  CHECK_STATUS(bg_client_open(NULL, srv.url, NULL), BG_EINVAL);
  CHECK_STATUS(bg_client_open(&c, NULL, NULL), BG_EINVAL);
  CHECK(c == NULL);
  CHECK_STATUS(bg_client_ping(NULL), BG_EINVAL);
  CHECK_STATUS(bg_filter_open(NULL, cl, "x"), BG_EINVAL);
  CHECK_STATUS(bg_filter_open(&f, NULL, "x"), BG_EINVAL);
  CHECK_STATUS(bg_filter_open(&f, cl, NULL), BG_EINVAL);
  CHECK(f == NULL);
  CHECK_STATUS(bg_filter_init(NULL, 100, 0.01, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_add(NULL, "a", 1, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_add_many(NULL, &item, &len, 1, &z), BG_EINVAL);
  CHECK_STATUS(bg_filter_contains(NULL, "a", 1, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_contains_many(NULL, &item, &len, 1, &p), BG_EINVAL);
  CHECK_STATUS(bg_filter_count(NULL, &n), BG_EINVAL);
  CHECK_STATUS(bg_filter_info(NULL, NULL, NULL, NULL, NULL), BG_EINVAL);
  CHECK_STATUS(bg_filter_delete(NULL, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_expire(NULL, 10, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_persist(NULL, &i), BG_EINVAL);
  CHECK(bg_filter_name(NULL) == NULL);
  CHECK(bg_filter_errmsg(NULL) != NULL);
  CHECK(bg_client_errmsg(NULL) != NULL);

  CHECK_OK(bg_filter_open(&f, cl, "nulls"));
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  CHECK_STATUS(bg_filter_contains(f, "a", 1, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "present must not be NULL");
  CHECK_STATUS(bg_filter_contains(f, NULL, 3, &i), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "item 0 is NULL with length 3");
  CHECK_STATUS(bg_filter_add(f, NULL, 3, &i), BG_EINVAL);
  CHECK_STATUS(bg_filter_contains_many(f, NULL, &len, 1, &p), BG_EINVAL);
  CHECK_STATUS(bg_filter_contains_many(f, &item, &len, 1, NULL), BG_EINVAL);
  const void *items[2] = {"a", NULL};
  size_t lens[2] = {1, 4};
  CHECK_STATUS(bg_filter_add_many(f, items, lens, 2, &z), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "item 1 is NULL with length 4");
  CHECK_STATUS(bg_filter_count(f, NULL), BG_EINVAL);
  CHECK_STATUS(bg_filter_expire(f, 0, &i), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "ttl_ms must be positive");
  /* zero items is fine and needs no pointers */
  CHECK_OK(bg_filter_add_many(f, NULL, NULL, 0, NULL));
  CHECK_OK(bg_filter_contains_many(f, NULL, NULL, 0, NULL));
  /* add_many's count is optional */
  CHECK_OK(bg_filter_add_many(f, &item, &len, 1, NULL));
  bg_filter_close(f);
}

static void expect_params(int64_t n, double p, const char *msg) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, cl, "params"));
  CHECK_STATUS(bg_filter_init(f, n, p, NULL), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_filter_errmsg(f), msg);
  bg_filter_close(f);
  uint64_t size;
  uint32_t k;
  CHECK_STATUS(bg_optimal_params(n, p, &size, &k), BG_EBADPARAMS);
}

static void test_invalid_params_redisson_rules(void) {
  expect_params(100, 1.5, "Bloom filter false probability can't be greater than 1");
  expect_params(100, -0.1, "Bloom filter false probability can't be negative");
  expect_params(1, 0.9, "Bloom filter calculated size is 0");
  expect_params(1000, 1.0, "Bloom filter calculated size is 0");
  expect_params(400000000, 0.001, "Bloom filter size can't be greater than 4294967294. But calculated size is 5751035026");
  expect_params(0, 0.01, "expected");
  expect_params(-5, 0.01, "expected");
  expect_params(100, NAN, "");
  char *ex = bgt_redis_cmd(&srv, "EXISTS {params}:config");
  CHECK_EQ_STR(ex, "0");
  free(ex);
}

static void test_cross_slot_names(void) {
  bg_filter *f = NULL;
  CHECK_STATUS(bg_filter_open(&f, cl, "a{}b"), BG_EBADNAME);
  CHECK(f == NULL);
  CHECK_CONTAINS(bg_client_errmsg(cl), "different cluster slots");
  CHECK_STATUS(bg_filter_open(&f, cl, ""), BG_EBADNAME);
  /* names with a non-empty tag, or none, are fine */
  CHECK_OK(bg_filter_open(&f, cl, "a{x}b"));
  bg_filter_close(f);
  CHECK_OK(bg_filter_open(&f, cl, "plain:name with spaces"));
  bg_filter_close(f);
  /* '{' without a closing '}': Redisson appends ":config" to the raw name, which hashes elsewhere */
  CHECK_STATUS(bg_filter_open(&f, cl, "}{odd"), BG_EBADNAME);
}

static void test_wrong_type_keys(void) {
  bg_filter *f = NULL;
  int i = 0;
  free(bgt_redis_cmd(&srv, "RPUSH wt-bitmap x"));
  CHECK_OK(bg_filter_open(&f, cl, "wt-bitmap"));
  CHECK_STATUS(bg_filter_init(f, 100, 0.01, NULL), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(f), "wrong Redis type");
  free(bgt_redis_cmd(&srv, "HSET {wt-bitmap}:config size 958 hashIterations 7"));
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &i), BG_EWRONGTYPE);
  CHECK_STATUS(bg_filter_add(f, "a", 1, &i), BG_EWRONGTYPE);
  int64_t n;
  CHECK_STATUS(bg_filter_count(f, &n), BG_EWRONGTYPE);
  bg_filter_close(f);

  free(bgt_redis_cmd(&srv, "SET {wt-config}:config hello"));
  CHECK_OK(bg_filter_open(&f, cl, "wt-config"));
  CHECK_STATUS(bg_filter_init(f, 100, 0.01, NULL), BG_EWRONGTYPE);
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &i), BG_EWRONGTYPE);
  CHECK_STATUS(bg_filter_info(f, NULL, NULL, NULL, NULL), BG_EWRONGTYPE);
  bg_filter_close(f);
}

/* Writes a config hash of the given field/value pairs (NULL-terminated) and expects BG_ECORRUPT. */
static void expect_corrupt(const char *name, const char *msg, const char *const *fields) {
  bg_filter *f = NULL;
  int i = 0, checks_bits = 1;
  free(bgt_redis_cmd(&srv, "DEL {%s}:config", name));
  for (; *fields; fields += 2) {
    free(bgt_redis_cmd(&srv, "HSET {%s}:config %s %s", name, fields[0], fields[1]));
    if (!strcmp(fields[0], "falseProbability") || !strcmp(fields[0], "expectedInsertions")) checks_bits = 0;
  }
  CHECK_OK(bg_filter_open(&f, cl, name));
  CHECK_STATUS(bg_filter_info(f, NULL, NULL, NULL, NULL), BG_ECORRUPT);
  CHECK_CONTAINS(bg_filter_errmsg(f), msg);
  /* queries only read size and hashIterations: they must refuse a bad one, not guess */
  if (checks_bits) CHECK_STATUS(bg_filter_contains(f, "a", 1, &i), BG_ECORRUPT);
  bg_filter_close(f);
}

#define CORRUPT(name, msg, ...) expect_corrupt(name, msg, (const char *const[]){__VA_ARGS__, NULL})

static void test_corrupt_config(void) {
  CORRUPT("c1", "size \"abc\"", "size", "abc", "hashIterations", "7");
  CORRUPT("c2", "size \"0\"", "size", "0", "hashIterations", "7");
  CORRUPT("c3", "size \"99999999999\"", "size", "99999999999", "hashIterations", "7");
  CORRUPT("c4", "hashIterations \"0\"", "size", "958", "hashIterations", "0");
  CORRUPT("c5", "hashIterations \"100000\"", "size", "958", "hashIterations", "100000");
  CORRUPT("c6", "size \"-958\"", "size", "-958", "hashIterations", "7");
  CORRUPT("c7", "size \"0958\"", "size", "0958", "hashIterations", "7");
  CORRUPT("c8", "falseProbability \"0.0x1\"", "size", "958", "hashIterations", "7", "falseProbability", "0.0x1");
  CORRUPT("c9", "expectedInsertions \"ten\"", "size", "958", "hashIterations", "7", "expectedInsertions", "ten");
  /* a config hash without the two required fields reads as "not initialized", as in Redisson */
  bg_filter *f = NULL;
  int i = 0;
  free(bgt_redis_cmd(&srv, "HSET {half}:config size 958"));
  CHECK_OK(bg_filter_open(&f, cl, "half"));
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &i), BG_ENOTINIT);
  CHECK_STATUS(bg_filter_init(f, 100, 0.01, NULL), BG_ECORRUPT);
  bg_filter_close(f);
}

static void test_unreachable_server(void) {
  /* a port nobody listens on: refused at once */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
  close(fd);
  char url[64], msg[512];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
  bg_client *c = NULL;
  /* opening connects nothing: the first call says it */
  CHECK_STATUS(open_then_ping(url, NULL, msg, sizeof msg), BG_ECONN);
  CHECK_CONTAINS(msg, "cannot connect to 127.0.0.1");
  /* BG_OPT_CONNECT_AT_OPEN: open says it */
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_ECONN);
  CHECK(c == NULL);
  CHECK_CONTAINS(msg, "cannot connect to 127.0.0.1");

  /* a listener whose accept queue is full: the connect hangs until the connect timeout */
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  a.sin_port = 0;
  CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(lfd, 0) == 0);
  CHECK(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
  int fillers[4];
  for (int i = 0; i < 4; i++) {
    fillers[i] = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(fillers[i], F_SETFL, O_NONBLOCK);
    connect(fillers[i], (struct sockaddr *)&a, sizeof a);
  }
  usleep(50000);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_TIMEOUT_MS, 300));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 300));
  uint64_t t0 = bgt_now_ns();
  int st = open_checked(&c, url, o, msg, sizeof msg);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  CHECK_STATUS(st, BG_ECONN);
  CHECK_CONTAINS(msg, "within 300 ms");
  /* bounded by the connect timeout (plus scheduling slack), not by the kernel's SYN retries */
  CHECK_MSG(ms < 300 + 2000, "connect took %.0f ms with a 300 ms timeout", ms);
  bg_options_free(o);
  for (int i = 0; i < 4; i++) close(fillers[i]);
  close(lfd);
}

static void test_malformed_urls(void) {
  const char *bad[] = {"", "127.0.0.1:6379", "redis://", "redis://h:99999", "redis://h/x", "unix://rel", "rediss://"};
  char msg[512];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    bg_client *c = NULL;
    CHECK_STATUS(bgt_client_open(&c, bad[i], NULL, msg, sizeof msg), BG_EBADURL);
    CHECK_CONTAINS(msg, "expected redis://");
  }
}

static void test_auth(void) {
  static const char *const args[] = {"--requirepass", "s3cret-pw", NULL};
  bgt_redis locked;
  bgt_redis_start(&locked, args);
  char url[256], msg[512];
  bg_client *c = NULL;

  CHECK_STATUS(open_checked(&c, locked.url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_CONTAINS(msg, "requires a password");
  CHECK_STATUS(open_then_ping(locked.url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_CONTAINS(msg, "requires a password");

  snprintf(url, sizeof url, "redis://:wrong-s3cret-pw@127.0.0.1:%d", locked.port);
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_CONTAINS(msg, "authentication failed");
  CHECK_MSG(!strstr(msg, "wrong-s3cret-pw"), "password in message: %s", msg);
  CHECK_STATUS(open_then_ping(url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_MSG(!strstr(msg, "wrong-s3cret-pw"), "password in message: %s", msg);

  snprintf(url, sizeof url, "redis://:s3cret-pw@127.0.0.1:%d/2", locked.port);
  CHECK_OK(bgt_client_open(&c, url, NULL, msg, sizeof msg));
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);

  /* password from the options, not the URL */
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_str(o, BG_OPT_PASSWORD, "s3cret-pw"));
  CHECK_OK(bg_client_open(&c, locked.url, o));
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);
  bg_options_free(o);

  bgt_redis_stop(&locked);
}

static void test_acl_user(void) {
  bgt_redis s;
  bgt_redis_start(&s, NULL);
  free(bgt_redis_cmd(&s, "ACL SETUSER alice on >al1ce-pw ~* +@all"));
  char url[256], msg[512];
  bg_client *c = NULL;
  bg_filter *f = NULL;
  snprintf(url, sizeof url, "redis://alice:al1ce-pw@127.0.0.1:%d", s.port);
  CHECK_OK(bgt_client_open(&c, url, NULL, msg, sizeof msg));
  CHECK_OK(bg_filter_open(&f, c, "acl"));
  CHECK_OK(bg_filter_init(f, 100, 0.01, NULL));
  bg_filter_close(f);
  bg_client_close(c);
  snprintf(url, sizeof url, "redis://alice:not-al1ce-pw@127.0.0.1:%d", s.port);
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_CONTAINS(msg, "authentication failed");
  CHECK_MSG(!strstr(msg, "not-al1ce-pw"), "password in message: %s", msg);
  /* a URL whose ':' went missing holds the password in the user part: not named either */
  snprintf(url, sizeof url, "redis://al1ce-pw@127.0.0.1:%d", s.port);
  bg_options *po = NULL;
  CHECK_OK(bg_options_new(&po));
  CHECK_OK(bg_options_set_str(po, BG_OPT_PASSWORD, "wrong"));
  CHECK_STATUS(open_checked(&c, url, po, msg, sizeof msg), BG_EAUTH);
  CHECK_MSG(!strstr(msg, "al1ce-pw"), "password in message: %s", msg);
  bg_options_free(po);
  /* ... and with no password at all it cannot authenticate: refused at open, connecting nothing,
   * the user part not named either */
  CHECK_STATUS(bgt_client_open(&c, url, NULL, msg, sizeof msg), BG_EAUTH);
  CHECK_CONTAINS(msg, "no password");
  CHECK_MSG(!strstr(msg, "al1ce-pw"), "password in message: %s", msg);
  /* a user without permission for the commands: refused with BG_EAUTH, not a crash */
  free(bgt_redis_cmd(&s, "ACL SETUSER bob on >b0b-pw ~* +@all -hmget"));
  snprintf(url, sizeof url, "redis://bob:b0b-pw@127.0.0.1:%d", s.port);
  CHECK_OK(bg_client_open(&c, url, NULL));
  CHECK_OK(bg_filter_open(&f, c, "acl"));
  int present;
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &present), BG_EAUTH);
  CHECK_CONTAINS(bg_filter_errmsg(f), "NOPERM");
  bg_filter_close(f);
  bg_client_close(c);
  bgt_redis_stop(&s);
}

/* A database the server does not have: its SELECT is refused, for what the server is (here its
 * `databases` setting; a cluster node's only db is 0), never as an authentication failure, whatever
 * words the server uses (Redis and Valkey differ). */
static void test_select_refused(void) {
  static const char *const args[] = {"--databases", "4", NULL};
  bgt_redis few;
  bgt_redis_start(&few, args);
  char url[256], msg[512];
  bg_client *c = NULL;
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/7", few.port);
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_EINVAL);
  CHECK_CONTAINS(msg, "database 7 cannot be selected");
  CHECK_STATUS(open_then_ping(url, NULL, msg, sizeof msg), BG_EINVAL);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", few.port);   /* the control: one it has */
  CHECK_OK(open_checked(&c, url, NULL, msg, sizeof msg));
  bg_client_close(c);
  bgt_redis_stop(&few);
}

static void test_options(void) {
  bg_options *o = NULL;
  CHECK_STATUS(bg_options_new(NULL), BG_EINVAL);
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, 9999, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_options_set_str(o, 9999, "x"), BG_ENOTSUP);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_USERNAME, 1), BG_ENOTSUP);
  CHECK_STATUS(bg_options_set_str(o, BG_OPT_POOL_SIZE, "4"), BG_ENOTSUP);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_POOL_SIZE, 0), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, -1), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_CONFIG_RETRIES, 101), BG_EINVAL);
  CHECK_STATUS(bg_options_set_str(o, BG_OPT_CLIENT_NAME, "has space"), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(NULL, BG_OPT_POOL_SIZE, 1), BG_EINVAL);
  CHECK_OK(bg_options_set_str(o, BG_OPT_CLIENT_NAME, "svc-a"));
  CHECK_OK(bg_options_set_str(o, BG_OPT_USERNAME, NULL));
  bg_client *c = NULL;
  CHECK_OK(bg_client_open(&c, srv.url, o));
  bg_options_free(o);  /* the client copied what it needs */
  CHECK_OK(bg_client_ping(c));
  char *list = bgt_redis_cmd(&srv, "CLIENT LIST");
  CHECK_CONTAINS(list, "name=svc-a");
  free(list);
  bg_client_close(c);
  bg_options_free(NULL);
}

static void test_strerror_distinct(void) {
  for (int a = 0; a >= -19; a--) {
    CHECK(strcmp(bg_strerror(a), "unknown status") != 0);
    for (int b = a - 1; b >= -19; b--) CHECK_MSG(strcmp(bg_strerror(a), bg_strerror(b)), "%d and %d", a, b);
  }
  CHECK_EQ_STR(bg_strerror(-1000), "unknown status");
  CHECK_EQ_STR(bg_strerror(1), "unknown status");
  CHECK_EQ_INT(bg_version(), BG_VERSION_NUMBER);
  CHECK_EQ_STR(bg_version_string(), BG_VERSION_STRING);
  CHECK_EQ_INT(bg_features() & ~(BG_FEATURE_TRACKING | BG_FEATURE_TLS), 0);   /* no undefined bits */
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_null_handles_and_pointers), BGT_CASE(test_invalid_params_redisson_rules),
        BGT_CASE(test_cross_slot_names), BGT_CASE(test_wrong_type_keys), BGT_CASE(test_corrupt_config),
        BGT_CASE(test_unreachable_server), BGT_CASE(test_malformed_urls), BGT_CASE(test_auth),
        BGT_CASE(test_acl_user), BGT_CASE(test_select_refused), BGT_CASE(test_options), BGT_CASE(test_strerror_distinct), BGT_CASE(teardown))
