/*
 * One absolute deadline per call, on every path: a server whose reply trickles in one byte at a
 * time (a proxy in the test, tests/c/fault_server.h, in front of a real redis-server) must not
 * stretch a call past its deadline, whether the reply is the answer on a pooled connection, on a
 * multiplexed one, or the handshake of a connection being made (at open, by a call, over TLS);
 * and callers queueing behind another's connect to a server that went silent get no more than
 * their own deadline either. The bound is the deadline + 50 ms (a correctness bound, not a speed
 * claim), plus what the machine imposed on any thread meanwhile: a probe thread sleeping 2 ms at a
 * time measures how late it wakes (on a loaded machine a timed-out caller's thread is woken late
 * too; what stretched deadlines did - a whole new budget per connect, 2x - stays far outside).
 * Each case has its control: the same call with the trickle off answers BG_OK.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault_server.h"
#include "filters.h"
#include "harness.h"
#include "items.h"
#include "lateness.h"
#include "redis_fixture.h"
#include "tls_fixture.h"

#define DEADLINE_MS 300
#define SLACK_MS 50
#define TRICKLE_US 2000   /* a byte every 2 ms: each read gets a byte long before any socket timeout */
/* a handshake's replies may be a few bytes ("+OK\r\n" with hiredis 0.14): slower, so they outlast it */
#define HANDSHAKE_TRICKLE_US 100000

static bgt_redis srv;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double ms_since(uint64_t t0) { return (double)(bgt_now_ns() - t0) / 1e6; }

/* A call of `ms` that had DEADLINE_MS kept to it: within the slack and what the machine imposed. */
#define CHECK_WITHIN_DEADLINE(ms, what)                                                                     \
  do {                                                                                                      \
    double late_ = bgt_lateness_ms(ms);                                                                         \
    CHECK_MSG((ms) <= DEADLINE_MS + SLACK_MS + late_, "%s: %.0f ms for a %d ms deadline (the machine woke a " \
              "sleeper up to %.0f ms late meanwhile)", what, (double)(ms), DEADLINE_MS, late_);             \
  } while (0)

static bg_options *options(int pipeline, int connect_at_open) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, pipeline));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, connect_at_open));
  return o;
}

static bg_client *open_via(const char *url, bg_options *o) {
  bg_client *c = NULL;
  char msg[512];
  int st = bgt_client_open(&c, url, o, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open %s: %s", url, msg);
  return c;
}

/* A contains_many with the call's deadline: its status, and how long it took in *ms. */
static int timed_contains(bg_filter *f, const items *it, int64_t deadline_ms, double *ms) {
  bg_call *call = NULL;
  uint8_t *present = calloc(it->n, 1);
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, deadline_ms));
  uint64_t t0 = bgt_now_ns();
  int st = bg_filter_contains_many_ex(f, call, PTRS(*it), it->len, it->n, present);
  *ms = ms_since(t0);
  if (st == BG_OK)
    for (size_t i = 0; i < it->n; i++) CHECK(present[i] == 1);
  bg_call_free(call);
  free(present);
  return st;
}

/* The answer to a call trickles in: BG_ETIMEOUT by the deadline; then, trickle off, the same client
 * answers (on a new connection: the one the reply was half-read from was dropped). */
static void reply_trickles(int pipeline, const char *what) {
  bgt_fault *p = bgt_proxy_start(srv.port);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", bgt_fault_port(p));
  bg_options *o = options(pipeline, 1);
  bg_client *c = open_via(url, o);
  items it = make_items(what, 60);
  bg_filter *f = bgt_fresh_filter(c, what, 10000, 0.01, &it);
  double ms;
  CHECK_OK(timed_contains(f, &it, DEADLINE_MS, &ms));   /* the control: answered at full speed */
  bgt_fault_trickle(p, TRICKLE_US);
  int st = timed_contains(f, &it, DEADLINE_MS, &ms);
  printf("    %s, the reply trickling: %s after %.0f ms (deadline %d ms)\n", what, bg_strerror(st), ms, DEADLINE_MS);
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_WITHIN_DEADLINE(ms, what);
  bgt_fault_trickle(p, 0);
  CHECK_OK(timed_contains(f, &it, 5000, &ms));
  bg_filter_close(f);
  bg_client_close(c);
  bg_options_free(o);
  items_free(&it);
  bgt_fault_stop(p);
}

static void test_pooled_reply_trickles(void) { reply_trickles(0, "pooled"); }

/* No call deadline, a pooled connection: each reply gets the command timeout (a big batch that
 * makes progress reply by reply goes on); the one that trickles in ends after it, not after the
 * seconds its bytes take (the replies before it are a few bytes each). */
static void test_pooled_reply_trickles_without_a_deadline(void) {
  bgt_fault *p = bgt_proxy_start(srv.port);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", bgt_fault_port(p));
  bg_options *o = options(0, 1);
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, DEADLINE_MS));
  bg_client *c = open_via(url, o);
  items it = make_items("paced", 60);
  bg_filter *f = bgt_fresh_filter(c, "paced", 10000, 0.01, &it);
  uint8_t present[60];
  bgt_fault_trickle(p, TRICKLE_US);
  uint64_t t0 = bgt_now_ns();
  int st = bg_filter_contains_many(f, PTRS(it), it.len, it.n, present);
  double ms = ms_since(t0);
  printf("    pooled, no call deadline, the reply trickling: %s after %.0f ms (command timeout %d ms)\n",
         bg_strerror(st), ms, DEADLINE_MS);
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_MSG(ms <= 2 * DEADLINE_MS, "%.0f ms for a %d ms command timeout", ms, DEADLINE_MS);
  bg_filter_close(f);
  bg_client_close(c);
  bg_options_free(o);
  items_free(&it);
  bgt_fault_stop(p);
}
static void test_multiplexed_reply_trickles(void) { reply_trickles(1, "multiplexed"); }

/* The handshake's replies trickle in while a connection is made: at open (BG_OPT_CONNECT_AT_OPEN),
 * bounded by the open call's deadline, and with no call deadline by the command timeout; by the
 * first call of a client that connected nothing at open, bounded by that call's deadline. */
static void test_handshake_trickles(void) {
  bgt_fault *p = bgt_proxy_start(srv.port);
  char url[64], msg[512];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", bgt_fault_port(p));
  bgt_fault_trickle(p, HANDSHAKE_TRICKLE_US);

  bg_options *o = options(1, 1);
  bg_call *call = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, DEADLINE_MS));
  uint64_t t0 = bgt_now_ns();
  int st = bg_client_open_ex(&c, call, url, o);
  double ms = ms_since(t0);
  printf("    open, the handshake trickling: %s after %.0f ms (%s)\n", bg_strerror(st), ms, bg_call_errmsg(call));
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_WITHIN_DEADLINE(ms, "open");
  if (c) bg_client_close(c);

  /* no call deadline: the command timeout bounds the handshake's round trip as a whole (not each
   * byte); one server (BG_OPT_CLUSTER off), so that is the only round trip of the open */
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, DEADLINE_MS));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_OFF));
  t0 = bgt_now_ns();
  st = bgt_client_open(&c, url, o, msg, sizeof msg);
  ms = ms_since(t0);
  printf("    open, no call deadline, command timeout %d ms: %s after %.0f ms\n", DEADLINE_MS, bg_strerror(st), ms);
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_WITHIN_DEADLINE(ms, "open (the command timeout as its deadline)");
  bg_options_free(o);

  /* connected by the first call */
  o = options(0, 0);
  c = open_via(url, o);
  t0 = bgt_now_ns();
  st = bg_client_ping_ex(c, call);
  ms = ms_since(t0);
  printf("    the first call connects, the handshake trickling: %s after %.0f ms\n", bg_strerror(st), ms);
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_WITHIN_DEADLINE(ms, "first call");
  bgt_fault_trickle(p, 0);
  CHECK_OK(bg_client_ping_ex(c, call));   /* the control */
  bg_client_close(c);
  bg_options_free(o);
  bg_call_free(call);
  bgt_fault_stop(p);
}

/* The TLS handshake trickles in (the proxy passes TLS through): bounded by the open's deadline. */
static void test_tls_handshake_trickles(void) {
  if (!(bg_features() & BG_FEATURE_TLS)) return;
  bgt_tls_redis t;
  if (bgt_tls_redis_start_or_skip(&t, "server", 0) != 0) return;
  bgt_fault *p = bgt_proxy_start(t.port);
  char url[64], ca[400];
  snprintf(url, sizeof url, "rediss://127.0.0.1:%d", bgt_fault_port(p));
  bg_options *o = options(1, 1);
  CHECK_OK(bg_options_set_str(o, BG_OPT_TLS_CA_FILE, bgt_tls_path(&t, "ca.crt", ca, sizeof ca)));
  bg_call *call = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, DEADLINE_MS));
  bgt_fault_trickle(p, TRICKLE_US);
  uint64_t t0 = bgt_now_ns();
  int st = bg_client_open_ex(&c, call, url, o);
  double ms = ms_since(t0);
  printf("    TLS open, the handshake trickling: %s after %.0f ms (%s)\n", bg_strerror(st), ms, bg_call_errmsg(call));
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_WITHIN_DEADLINE(ms, "TLS open");
  if (c) bg_client_close(c);
  bgt_fault_trickle(p, 0);
  CHECK_OK(bg_call_set_timeout_ms(call, 5000));
  st = bg_client_open_ex(&c, call, url, o);   /* the control */
  CHECK_MSG(st == BG_OK, "%s", bg_call_errmsg(call));
  if (st == BG_OK) {
    CHECK_OK(bg_client_ping(c));
    bg_client_close(c);
  }
  bg_call_free(call);
  bg_options_free(o);
  bgt_fault_stop(p);
  bgt_tls_redis_stop(&t);
}

/* ---- R3: queueing behind another caller's connect --------------------------------------------- */

#define CALLERS 4

typedef struct caller {
  bg_client *c;
  int64_t deadline_ms;
  int st;
  double ms;
} caller;

static void *ping_main(void *arg) {
  caller *k = arg;
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, k->deadline_ms));
  uint64_t t0 = bgt_now_ns();
  k->st = bg_client_ping_ex(k->c, call);
  k->ms = ms_since(t0);
  bg_call_free(call);
  return NULL;
}

/* The server goes silent: its connections dropped, and nothing it sends on new ones arrives (10 s a
 * byte). CALLERS calls at once must each reconnect, or wait for another's connect, within its own
 * deadline (a pool of 1, one multiplexed connection: all but the first wait for its connect, which
 * its shorter deadline ends first: then the next one connects, with what is left of its own). */
static void test_callers_behind_a_connect(void) {
  for (int pipeline = 0; pipeline <= 1; pipeline++) {
    const char *what = pipeline ? "multiplexed" : "pooled";
    bgt_fault *p = bgt_proxy_start(srv.port);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", bgt_fault_port(p));
    bg_options *o = options(pipeline, 1);
    CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, 1));
    CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 1));
    bg_client *c = open_via(url, o);
    CHECK_OK(bg_client_ping(c));
    /* the connection dies, and every new one hears nothing back */
    bgt_fault_trickle(p, 10 * 1000 * 1000);
    bgt_fault_drop_all(p);
    pthread_t t[CALLERS];
    caller k[CALLERS];
    int accepted = bgt_fault_accepted(p);
    for (int i = 0; i < CALLERS; i++) {
      /* the first with half the deadline: its connect ends while the others still have time */
      k[i] = (caller){c, i ? DEADLINE_MS : DEADLINE_MS / 2, 0, 0};
      pthread_create(&t[i], NULL, ping_main, &k[i]);
      /* the others come once the first is connecting: they queue behind its connect */
      for (int w = 0; i == 0 && w < 2000 && bgt_fault_accepted(p) == accepted; w++) sleep_ms(1);
    }
    double worst = 0;
    for (int i = 0; i < CALLERS; i++) {
      pthread_join(t[i], NULL);
      CHECK_MSG(k[i].st == BG_ETIMEOUT || k[i].st == BG_ECONN, "%s caller %d: %s", what, i, bg_strerror(k[i].st));
      if (k[i].ms > worst) worst = k[i].ms;
      printf("      caller %d: %s after %.0f ms\n", i, bg_strerror(k[i].st), k[i].ms);
    }
    printf("    %s, %d callers reconnecting to a silent server: the slowest %.0f ms (deadline %d ms)\n", what, CALLERS,
           worst, DEADLINE_MS);
    CHECK_WITHIN_DEADLINE(worst, what);
    bgt_fault_trickle(p, 0);
    CHECK_OK(bg_client_ping(c));   /* the control: the same client, the server answering again */
    bg_client_close(c);
    bg_options_free(o);
    bgt_fault_stop(p);
  }
}

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_pooled_reply_trickles),
      BGT_CASE(test_pooled_reply_trickles_without_a_deadline),
      BGT_CASE(test_multiplexed_reply_trickles),
      BGT_CASE(test_handshake_trickles),
      BGT_CASE(test_tls_handshake_trickles),
      BGT_CASE(test_callers_behind_a_connect),
  };
  bgt_redis_start(&srv, NULL);
  bgt_lateness_start();
  int rc = bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
  bgt_lateness_stop();
  bgt_redis_stop(&srv);
  return rc;
}
