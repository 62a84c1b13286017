/* URL parsing (pure logic, no server). */
#include <string.h>

#include <bloomguard/options.h>

#include "harness.h"
#include "redis/url.h"

static bgi_url parse_ok(const char *s) {
  bgi_url u;
  bgi_err e = {0};
  int st = bgi_url_parse(s, &u, &e);
  CHECK_MSG(st == BG_OK, "parse(%s): %d %s", s, st, e.msg);
  return u;
}

static void parse_bad(const char *s, const char *why) {
  bgi_url u;
  bgi_err e = {0};
  CHECK_STATUS(bgi_url_parse(s, &u, &e), BG_EBADURL);
  CHECK_CONTAINS(e.msg, why);
  CHECK_MSG(!strstr(e.msg, "s3cret"), "password leaked: %s", e.msg);
}

static void test_tcp_forms(void) {
  bgi_url u = parse_ok("redis://localhost");
  CHECK_EQ_STR(u.host, "localhost");
  CHECK_EQ_INT(u.port, 6379);
  CHECK_EQ_INT(u.db, 0);
  CHECK(!u.user && !u.password && !u.is_unix);
  bgi_url_free(&u);

  u = parse_ok("redis://10.1.2.3:6380/5");
  CHECK_EQ_STR(u.host, "10.1.2.3");
  CHECK_EQ_INT(u.port, 6380);
  CHECK_EQ_INT(u.db, 5);
  bgi_url_free(&u);

  u = parse_ok("redis://[fe80::1%eth0]:7000");
  CHECK_EQ_STR(u.host, "fe80::1%eth0");
  bgi_url_free(&u);

  u = parse_ok("redis://[::ffff:10.0.0.1]");
  CHECK_EQ_STR(u.host, "::ffff:10.0.0.1");
  bgi_url_free(&u);

  u = parse_ok("redis://my_host-1.example.com:7000");
  CHECK_EQ_STR(u.host, "my_host-1.example.com");
  bgi_url_free(&u);

  u = parse_ok("redis://[::1]:7000/");
  CHECK_EQ_STR(u.host, "::1");
  CHECK_EQ_INT(u.port, 7000);
  bgi_url_free(&u);
}

static void test_credentials(void) {
  bgi_url u = parse_ok("redis://:s3cret@h:1/2");
  CHECK(u.user == NULL);
  CHECK_EQ_STR(u.password, "s3cret");
  bgi_url_free(&u);

  u = parse_ok("redis://alice:p%40ss%3Aword@h");
  CHECK_EQ_STR(u.user, "alice");
  CHECK_EQ_STR(u.password, "p@ss:word");
  bgi_url_free(&u);

  /* an unescaped '@' in the password: the last '@' ends the userinfo */
  u = parse_ok("redis://bob:a@b@host:6390");
  CHECK_EQ_STR(u.user, "bob");
  CHECK_EQ_STR(u.password, "a@b");
  CHECK_EQ_STR(u.host, "host");
  CHECK_EQ_INT(u.port, 6390);
  bgi_url_free(&u);

  u = parse_ok("redis://carol@host");
  CHECK_EQ_STR(u.user, "carol");
  CHECK(u.password == NULL);
  bgi_url_free(&u);

  /* issue 11: an unescaped '/' (or '?' or ',') in the password; the last '@' ends the userinfo */
  u = parse_ok("redis://:s3cret/x?y,z@127.0.0.1:6379");
  CHECK(u.user == NULL);
  CHECK_EQ_STR(u.password, "s3cret/x?y,z");
  CHECK_EQ_STR(u.host, "127.0.0.1");
  CHECK_EQ_INT(u.nhosts, 1);
  bgi_url_free(&u);
}

/* issue 11: an empty password (or user) is none, not an empty AUTH the server refuses */
static void test_empty_credentials(void) {
  static const char *const forms[] = {"redis://:@h", "redis://@h", "redis://:@h:7/1"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    bgi_url u = parse_ok(forms[i]);
    CHECK_MSG(u.user == NULL && u.password == NULL, "%s: user %s password %s", forms[i],
              u.user ? u.user : "(null)", u.password ? "(set)" : "(null)");
    CHECK_EQ_STR(u.host, "h");
    bgi_url_free(&u);
  }
  bgi_url u = parse_ok("redis://alice:@h");
  CHECK_EQ_STR(u.user, "alice");
  CHECK(u.password == NULL);
  bgi_url_free(&u);
  u = parse_ok("redis://:s3cret@h");
  CHECK(u.user == NULL);
  CHECK_EQ_STR(u.password, "s3cret");
  bgi_url_free(&u);
}

/* issue 11: ?db=N for redis:// too; the database given by path or query sets db_given */
static void test_query(void) {
  bgi_url u = parse_ok("redis://h:6379?db=1");
  CHECK_EQ_STR(u.host, "h");
  CHECK_EQ_INT(u.port, 6379);
  CHECK_EQ_INT(u.db, 1);
  CHECK_EQ_INT(u.db_given, 1);
  bgi_url_free(&u);
  u = parse_ok("redis://h/?db=4");
  CHECK_EQ_INT(u.db, 4);
  CHECK_EQ_INT(u.db_given, 1);
  bgi_url_free(&u);
  u = parse_ok("redis://h/3?db=3"); /* the same number twice is fine */
  CHECK_EQ_INT(u.db, 3);
  bgi_url_free(&u);
  u = parse_ok("redis://h?&db=2&");
  CHECK_EQ_INT(u.db, 2);
  bgi_url_free(&u);
  u = parse_ok("redis://h");
  CHECK_EQ_INT(u.db, 0);
  CHECK_EQ_INT(u.db_given, 0);
  bgi_url_free(&u);
  u = parse_ok("redis://h/0");
  CHECK_EQ_INT(u.db, 0);
  CHECK_EQ_INT(u.db_given, 1);
  bgi_url_free(&u);
  u = parse_ok("redis://h/");
  CHECK_EQ_INT(u.db_given, 0);
  bgi_url_free(&u);
  parse_bad("redis://h:6379?database=1", "query parameter \"database\" is not understood (known: db, client_name");
  parse_bad("redis://h:6379?db=1&frobnicate=5", "query parameter \"frobnicate\" is not understood");
  parse_bad("redis://h?protocol=3", "protocol is not taken from the URL");
  parse_bad("redis://h?timeout=soon", "timeout must be a duration");
  parse_bad("redis://h?pool_size=-1", "pool_size must be a whole number");
  parse_bad("redis://h?timeout=1&socket_timeout=2", "gave already");
  parse_bad("redis://h?client_name=", "client_name: an empty value");
  /* the client options redis-py and go-redis take in the query, by each of their names */
  u = parse_ok("redis://h?db=1&timeout=0.25&connect_timeout=2s&pool_size=8&client_name=svc%2D1");
  CHECK_EQ_INT(u.db, 1);
  CHECK_EQ_INT((int)u.nparams, 4);
  CHECK_EQ_INT(u.params[0].option, BG_OPT_COMMAND_TIMEOUT_MS);
  CHECK_EQ_INT(u.params[0].value, 250);
  CHECK_EQ_INT(u.params[1].option, BG_OPT_CONNECT_TIMEOUT_MS);
  CHECK_EQ_INT(u.params[1].value, 2000);
  CHECK_EQ_INT(u.params[2].option, BG_OPT_POOL_SIZE);
  CHECK_EQ_INT(u.params[2].value, 8);
  CHECK_EQ_INT(u.params[3].option, BG_OPT_CLIENT_NAME);
  CHECK_EQ_STR(u.params[3].text, "svc-1");
  bgi_url_free(&u);
  u = parse_ok("redis://h?socket_timeout=500ms&socket_connect_timeout=0.0001&max_connections=3");
  CHECK_EQ_INT(u.params[0].value, 500);
  CHECK_EQ_INT(u.params[1].value, 1);   /* rounded up: never 0 */
  CHECK_EQ_INT(u.params[2].value, 3);
  bgi_url_free(&u);
  u = parse_ok("redis://h?read_timeout=3&dial_timeout=1");
  CHECK_EQ_INT(u.params[0].option, BG_OPT_COMMAND_TIMEOUT_MS);
  CHECK_EQ_INT(u.params[1].option, BG_OPT_CONNECT_TIMEOUT_MS);
  bgi_url_free(&u);
  parse_bad("redis://h?db=x", "db must be a number");
  parse_bad("redis://h/1?db=2", "given twice");
  parse_bad("redis://:s3cret@h?s3cret", "query parameter 1");
}

static void test_seed_lists(void) {
  bgi_url u = parse_ok("redis://alice:s3cret@10.0.0.1:7000,10.0.0.2,[::1]:7002/2");
  CHECK_EQ_INT(u.nhosts, 3);
  CHECK_EQ_STR(u.hosts[0].host, "10.0.0.1");
  CHECK_EQ_INT(u.hosts[0].port, 7000);
  CHECK_EQ_STR(u.hosts[1].host, "10.0.0.2");
  CHECK_EQ_INT(u.hosts[1].port, 6379);
  CHECK_EQ_STR(u.hosts[2].host, "::1");
  CHECK_EQ_INT(u.hosts[2].port, 7002);
  CHECK_EQ_STR(u.host, "10.0.0.1"); /* host/port = the first seed, for code that knows one */
  CHECK_EQ_INT(u.port, 7000);
  CHECK_EQ_STR(u.user, "alice");
  CHECK_EQ_STR(u.password, "s3cret");
  CHECK_EQ_INT(u.db, 2);
  CHECK_EQ_INT(u.db_given, 1);
  bgi_url_free(&u);

  u = parse_ok("redis://a:1,b:2?db=5");
  CHECK_EQ_INT(u.nhosts, 2);
  CHECK_EQ_STR(u.hosts[1].host, "b");
  CHECK_EQ_INT(u.hosts[1].port, 2);
  CHECK_EQ_INT(u.db, 5);
  bgi_url_free(&u);

  /* exactly 16 seeds parse; 17 do not */
  char url[512] = "redis://";
  for (int i = 0; i < BGI_URL_MAX_HOSTS; i++)
    snprintf(url + strlen(url), sizeof url - strlen(url), "%sh%d:%d", i ? "," : "", i, 7000 + i);
  u = parse_ok(url);
  CHECK_EQ_INT(u.nhosts, BGI_URL_MAX_HOSTS);
  CHECK_EQ_STR(u.hosts[15].host, "h15");
  CHECK_EQ_INT(u.hosts[15].port, 7015);
  bgi_url_free(&u);
  strcat(url, ",h16");
  parse_bad(url, "17 seeds in the host list; at most 16");

  /* single-host URLs: one seed, equal to host/port */
  u = parse_ok("redis://[::1]:7000");
  CHECK_EQ_INT(u.nhosts, 1);
  CHECK_EQ_STR(u.hosts[0].host, "::1");
  CHECK_EQ_INT(u.hosts[0].port, 7000);
  bgi_url_free(&u);
  u = parse_ok("unix:///tmp/r.sock");
  CHECK_EQ_INT(u.nhosts, 0);
  bgi_url_free(&u);

  parse_bad("redis://:s3cret@h1,,h2", "seed 2 of 3: empty");
  parse_bad("redis://:s3cret@h1,h2,", "seed 3 of 3: empty");
  parse_bad("redis://,h1", "seed 1 of 2: empty");
  parse_bad("redis://:s3cret@h1:1,h2:0,h3", "seed 2 of 3: port must be a number from 1 to 65535");
  parse_bad("redis://h1,h2:x", "seed 2 of 2: port must be a number from 1 to 65535");
  parse_bad("redis://h1,[::1", "seed 2 of 2: unterminated [IPv6] host");
  parse_bad("redis://h1,[::1]x", "seed 2 of 2: unexpected text after ]");
  parse_bad("redis://h1,:7000", "seed 2 of 2: missing host");
}

/* issue 11: no message quotes the URL, however damaged; the password never shows */
static void test_no_echo(void) {
  static const struct { const char *url, *why; } cases[] = {
    {"redis:/:s3cret@h", "unknown scheme"},
    {"redis//:s3cret@h", "unknown scheme"},
    {"redis:s3cret@h", "unknown scheme"},
    {":s3cret@h:6379", "unknown scheme"},
    {"redis.//user:s3cret@h", "unknown scheme"},
    {"rediss:/:s3cret@h", "unknown scheme"},
    {"redis://:s3cret", "missing host"},            /* the '@' lost */
    {"redis://s3cret!x", "bad host"},               /* the '@' and ':' lost: no host name */
    {"redis://:s3cret@h/s3cret", "database number"},
    {"redis://:s3cret@[s3cret]", "IPv6"},
    {"redis://u:s3cret%@h", "escape"},
    {"unix://s3cret", "absolute"},
    {"redis://[::1%]", "IPv6"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bgi_url u;
    bgi_err e = {0};
    CHECK_STATUS(bgi_url_parse(cases[i].url, &u, &e), BG_EBADURL);
    CHECK_CONTAINS(e.msg, cases[i].why);
    CHECK_MSG(!strstr(e.msg, "s3cret"), "%s: the message holds the password: %s", cases[i].url, e.msg);
    CHECK_MSG(!strstr(e.msg, cases[i].url), "%s: the message quotes the URL: %s", cases[i].url, e.msg);
    CHECK_CONTAINS(e.msg, "host1[:port1][,host2[:port2],...]");
  }
}

static void test_unix(void) {
  bgi_url u = parse_ok("unix:///var/run/redis.sock");
  CHECK(u.is_unix);
  CHECK_EQ_STR(u.path, "/var/run/redis.sock");
  CHECK_EQ_INT(u.db, 0);
  bgi_url_free(&u);
  u = parse_ok("unix:///tmp/r.sock?db=7");
  CHECK_EQ_STR(u.path, "/tmp/r.sock");
  CHECK_EQ_INT(u.db, 7);
  bgi_url_free(&u);
}

static void test_malformed(void) {
  parse_bad("", "unknown scheme");
  parse_bad("localhost:6379", "unknown scheme");
  parse_bad("http://h", "unknown scheme");
  parse_bad("redis://", "missing host");
  parse_bad("redis://:s3cret@", "missing host");
  parse_bad("redis://h:0", "port");
  parse_bad("redis://h:65536", "port");
  parse_bad("redis://h:abc", "port");
  parse_bad("redis://:s3cret@h:12x", "port");
  parse_bad("redis://h/db1", "database number");
  parse_bad("redis://h/-1", "database number");
  parse_bad("redis://[::1", "IPv6");
  parse_bad("redis://u:s3cret%zz@h", "escape");
  parse_bad("unix://relative.sock", "absolute");
  parse_bad("unix:///tmp/x.sock?database=1", "db=N");
  parse_bad("redis://h_1:x", "port");
  parse_bad("redis://h:6379:1", "port");
  parse_bad("unix:///tmp/x.sock?db=x", "db must be");
  bgi_url u;
  bgi_err e = {0};
  CHECK_STATUS(bgi_url_parse(NULL, &u, &e), BG_EBADURL);
}

/* Lettuce's Sentinel form: the hosts are sentinels (default port 26379), the master's name after '#'. */
static void test_sentinel(void) {
  bgi_url u = parse_ok("redis-sentinel://:s3cret@10.0.0.1,10.0.0.2:5000,[::1]/3#mymaster");
  CHECK(u.is_sentinel);
  CHECK_EQ_INT(u.nhosts, 3);
  CHECK_EQ_STR(u.hosts[0].host, "10.0.0.1");
  CHECK_EQ_INT(u.hosts[0].port, 26379);
  CHECK_EQ_INT(u.hosts[1].port, 5000);
  CHECK_EQ_STR(u.hosts[2].host, "::1");
  CHECK_EQ_INT(u.db, 3);
  CHECK_EQ_STR(u.master_name, "mymaster");
  CHECK_EQ_STR(u.password, "s3cret");
  bgi_url_free(&u);
  /* a '#' in the password is the password's (the userinfo ends at the last '@') */
  u = parse_ok("redis-sentinel://user:s3c#ret@h:1?db=2#m-1.a_b");
  CHECK_EQ_STR(u.password, "s3c#ret");
  CHECK_EQ_STR(u.master_name, "m-1.a_b");
  CHECK_EQ_INT(u.db, 2);
  bgi_url_free(&u);
  parse_bad("redis-sentinel://:s3cret@h:26379", "names the master after '#'");
  parse_bad("redis-sentinel://:s3cret@h#", "names the master after '#'");
  parse_bad("redis-sentinel://:s3cret@h#a b", "master name after '#' may hold only");
  parse_bad("redis-sentinel://:s3cret@h:0#m", "port must be a number");
  u = parse_ok("rediss-sentinel://:s3cret@h#m");
  CHECK(u.tls && u.is_sentinel);
  bgi_url_free(&u);
  u = parse_ok("rediss://:s3cret@h:6380/1");
  CHECK(u.tls && !u.is_sentinel);
  bgi_url_free(&u);
  /* a plain redis:// URL has no fragment: '#' is not a host character */
  parse_bad("redis://:s3cret@h#m", "bad host");
}

/* How messages name a URL's host: an IP address as it is, any name by its place (a name can be a
 * password whose '@' went missing). */
static void test_host_labels(void) {
  char buf[300];
  bgi_url_host_label("127.0.0.1", 6379, "the URL's host", buf, sizeof buf);
  CHECK_EQ_STR(buf, "127.0.0.1:6379");
  bgi_url_host_label("::1", 7000, "seed 2 of the URL", buf, sizeof buf);
  CHECK_EQ_STR(buf, "[::1]:7000");
  bgi_url_host_label("localhost", 1, "the URL's host", buf, sizeof buf);
  CHECK_EQ_STR(buf, "localhost:1");
  bgi_url_host_label("redis.example", 6380, "seed 2 of the URL", buf, sizeof buf);
  CHECK_EQ_STR(buf, "seed 2 of the URL (port 6380)");
  /* "redis://:S3cr3tPw@127.0.0.1" with its ':' and '@' lost */
  bgi_url u = parse_ok("redis://S3cr3tPw127.0.0.1:6996");
  bgi_url_host_label(u.host, u.port, "the URL's host", buf, sizeof buf);
  CHECK_EQ_STR(buf, "the URL's host (port 6996)");
  bgi_url_free(&u);
}

BGT_RUN(BGT_CASE(test_sentinel), BGT_CASE(test_host_labels), BGT_CASE(test_tcp_forms), BGT_CASE(test_credentials), BGT_CASE(test_empty_credentials),
        BGT_CASE(test_query), BGT_CASE(test_seed_lists), BGT_CASE(test_no_echo), BGT_CASE(test_unix),
        BGT_CASE(test_malformed))
