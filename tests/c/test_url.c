/* URL parsing (pure logic, no server). */
#include <string.h>

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

  u = parse_ok("redis://[::1]:7000/");
  CHECK_EQ_STR(u.host, "::1");
  CHECK_EQ_INT(u.port, 7000);
  bgi_url_free(&u);
}

static void test_credentials(void) {
  bgi_url u = parse_ok("redis://:s3cret@h:1/2");
  CHECK(u.user == NULL);
  CHECK_EQ_STR(u.password, "s3cret");
  CHECK_MSG(!strstr(u.display, "s3cret"), "display shows the password: %s", u.display);
  CHECK_EQ_STR(u.display, "redis://:***@h:1/2");
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
  parse_bad("rediss://:s3cret@h", "TLS");
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
  parse_bad("unix:///tmp/x.sock?db=x", "db must be");
  bgi_url u;
  bgi_err e = {0};
  CHECK_STATUS(bgi_url_parse(NULL, &u, &e), BG_EBADURL);
}

BGT_RUN(BGT_CASE(test_tcp_forms), BGT_CASE(test_credentials), BGT_CASE(test_unix), BGT_CASE(test_malformed))
