/*
 * The library never raises SIGPIPE in its host. This test keeps SIGPIPE's default action (the
 * process dies, exit 141), as a C program or a Python one that restored it does, and writes big
 * calls (megabytes: several writes, the later ones after the server's reset has arrived) to
 * connections the server has closed: killed by CLIENT KILL (pooled connections with BG_OPT_PIPELINE
 * 0, a bulk call with the default options, a swap rotation's upload, TLS), or closed for being idle
 * (redis.conf `timeout 1`, no fault at all). Each call must answer from Redis (the write fails as
 * BG_ECONN and the call is sent again on a fresh connection). If the library raised SIGPIPE, this
 * binary would die and ctest report it. The negative control: a child writing the same way with
 * raw hiredis (write(2)) to a connection the server killed dies of SIGPIPE.
 */
#include <bloomguard.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "filters.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"
#include "tls_fixture.h"

#define BIG 20000   /* items of a big call: about 3 MB of commands */

static bgt_redis srv;
static items big;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static bg_client *open_with(const char *url, int pipeline, bg_options *o) {
  bg_client *c = NULL;
  char msg[512];
  int own = !o;
  if (own) CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, pipeline));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  int st = bgt_client_open(&c, url, o, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open: %s", msg);
  if (own) bg_options_free(o);
  return c;
}

/* A big contains_many: every item present, from Redis. */
static void big_query(bg_filter *f, const char *when) {
  uint8_t *present = calloc(big.n, 1);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  int st = bg_filter_contains_many_ex(f, call, PTRS(big), big.len, big.n, present);
  CHECK_MSG(st == BG_OK, "%s: %s", when, bg_call_errmsg(call));
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_REDIS);
  size_t n = 0;
  for (size_t i = 0; i < big.n; i++) n += present[i];
  CHECK_EQ_INT(n, big.n);
  bg_call_free(call);
  free(present);
}

static void kill_clients(const bgt_redis *r) { free(bgt_redis_cmd(r, "CLIENT KILL TYPE normal")); }

/* Its pooled connection(s) killed, then a big call: sent again on a fresh one. */
static void killed_then_big(const char *url, int pipeline, bg_options *o, const bgt_redis *r, const char *what) {
  bg_client *c = open_with(url, pipeline, o);
  bg_filter *f = bgt_fresh_filter(c, what, 100000, 0.01, &big);
  big_query(f, "before the kill");
  kill_clients(r);
  big_query(f, what);
  bg_filter_close(f);
  bg_client_close(c);
}

static void test_pooled_connection_killed(void) { killed_then_big(srv.url, 0, NULL, &srv, "sp-pooled"); }
/* default options: a call this big takes a pooled connection of its own (bulk) */
static void test_bulk_call_on_a_killed_connection(void) { killed_then_big(srv.url, 1, NULL, &srv, "sp-bulk"); }

static void test_swap_upload_on_killed_connections(void) {
  bg_client *c = open_with(srv.url, 1, NULL);
  bg_filter *f = bgt_fresh_filter(c, "sp-swap", 100000, 0.01, &big);
  bg_rotation *r = NULL;
  bg_options *ro = NULL;
  CHECK_OK(bg_options_new(&ro));
  CHECK_OK(bg_options_set_int(ro, BG_OPT_ROTATE_CHUNK_BYTES, 8 << 20));   /* one call, several writes */
  CHECK_OK(bg_rotation_begin(&r, f, 4000000, 0.001, BG_ROTATE_SWAP, ro));   /* a bitmap of ~7 MB */
  bg_options_free(ro);
  CHECK_OK(bg_rotation_add_many(r, PTRS(big), big.len, big.n));
  kill_clients(&srv);
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "commit after the kill: %s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  big_query(f, "after the rotation");
  bg_filter_close(f);
  bg_client_close(c);
}

/* No fault at all: the server closes connections idle for a second (redis.conf `timeout 1`). */
static void test_idle_timeout_closes_pooled_connections(void) {
  static const char *const args[] = {"--timeout", "1", NULL};
  bgt_redis idle;
  bgt_redis_start(&idle, args);
  for (int pipeline = 0; pipeline <= 1; pipeline++) {
    bg_client *c = open_with(idle.url, pipeline, NULL);
    bg_filter *f = bgt_fresh_filter(c, "sp-idle", 100000, 0.01, &big);
    big_query(f, "before the idle timeout");
    /* waits for the event: the server has closed every bloomguard connection (bounded: 10 s) */
    int left = 1;
    for (int i = 0; i < 500 && left; i++) {
      char *list = bgt_redis_cmd(&idle, "CLIENT LIST");
      left = list && strstr(list, "name=bloomguard") != NULL;
      free(list);
      if (left) sleep_ms(20);
    }
    CHECK_MSG(!left, "the server kept the idle connections for 10 s");
    big_query(f, pipeline ? "after the idle timeout (bulk)" : "after the idle timeout (pooled)");
    bg_filter_close(f);
    bg_client_close(c);
  }
  bgt_redis_stop(&idle);
}

static void test_tls_connection_killed(void) {
  if (!(bg_features() & BG_FEATURE_TLS)) return;
  bgt_tls_redis t;
  if (bgt_tls_redis_start_or_skip(&t, "server", 0) != 0) return;
  char ca[400];
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(&t, "ca.crt", ca, sizeof ca)));
  /* the kill is sent over TLS by redis-cli (the server has no plain port) */
  bg_client *c = open_with(t.url, 0, o);
  bg_filter *f = bgt_fresh_filter(c, "sp-tls", 100000, 0.01, &big);
  big_query(f, "TLS, before the kill");
  char port[16], out[256];
  snprintf(port, sizeof port, "%d", t.port);
  const char *const argv[] = {"redis-cli", "--tls", "--cacert", ca, "-p", port, "CLIENT", "KILL", "TYPE", "normal", NULL};
  CHECK_EQ_INT(bgt_tls_run(argv, NULL, 5000, out, sizeof out), 0);
  big_query(f, "TLS, after the kill");
  bg_filter_close(f);
  bg_client_close(c);
  bg_options_free(o);
  bgt_tls_redis_stop(&t);
}

/* The negative control: the same fault with a writer that does not guard its writes (raw hiredis:
 * write(2)) kills the process with SIGPIPE: the scenario does raise it. In a child. */
static void test_negative_control_an_unguarded_writer_dies(void) {
  pid_t pid = fork();
  if (pid == 0) {
    redisContext *ctx = redisConnect("127.0.0.1", srv.port);
    if (!ctx || ctx->err) _exit(3);
    redisReply *r = redisCommand(ctx, "PING");
    freeReplyObject(r);
    kill_clients(&srv);
    size_t n = 8u << 20;
    char *blob = calloc(n, 1);
    for (int i = 0; i < 20; i++) {   /* the first write may still be taken: the reset comes with it */
      r = redisCommand(ctx, "SET sp-control %b", blob, n);
      if (r) freeReplyObject(r);
      redisFree(ctx);
      if (!(ctx = redisConnect("127.0.0.1", srv.port)) || ctx->err) _exit(3);
      r = redisCommand(ctx, "PING");
      freeReplyObject(r);
      kill_clients(&srv);
    }
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE,
            "the unguarded writer was not killed by SIGPIPE (status %#x): the scenario proves nothing", status);
}

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_negative_control_an_unguarded_writer_dies),
      BGT_CASE(test_pooled_connection_killed),
      BGT_CASE(test_bulk_call_on_a_killed_connection),
      BGT_CASE(test_swap_upload_on_killed_connections),
      BGT_CASE(test_idle_timeout_closes_pooled_connections),
      BGT_CASE(test_tls_connection_killed),
  };
  /* the default action, unblocked: a SIGPIPE kills this binary, as it would a host that kept it */
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_UNBLOCK, &pipe_set, NULL);
  signal(SIGPIPE, SIG_DFL);
  big = make_items("sigpipe", BIG);
  bgt_redis_start(&srv, NULL);
  int rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  bgt_redis_stop(&srv);
  items_free(&big);
  return rc;
}
