/*
 * Host names are resolved off the calling thread and within the call's deadline (redis/resolve.h),
 * against a resolver that never answers: the process runs in a mount namespace of its own where
 * /etc/resolv.conf names an address of 127.77/16, whose port 53 is a UDP socket nobody reads (queries arrive
 * and are dropped: no ICMP refusal ends them early), with glibc's timeout at 1 s per query.
 *  - a blocking call ends at its deadline with BG_ETIMEOUT saying the resolver did not answer;
 *  - one thread driving two queues keeps serving the queue of a reachable server while the other
 *    queue's connection waits for the resolver, and that operation ends at its deadline; no
 *    bg_queue_poll or submit call blocks;
 *  - the abandoned resolutions end on their own (their threads free what they hold).
 * Negative control (bgi_resolve_fault_inline: the resolution on the calling thread, as inside
 * hiredis's connect before): the blocking call outlives its deadline, and a queue call blocks for
 * the resolver's timeout - the harness sees a loop blocked when it is.
 * Names with an address in /etc/hosts ("localhost") and IP literals still connect.
 */
#include <bloomguard.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "lateness.h"
#include "redis/resolve.h"
#include "redis_fixture.h"

#define UNANSWERED "bloomguard-unanswered.example"
#define RESOLVER_TIMEOUT_MS 1000   /* options timeout:1 attempts:1 */
#define DEADLINE_MS 300

static bgt_redis srv;
static int dropper = -1;        /* the resolver that never answers */
static const char *no_namespace;   /* why the cases cannot run, or NULL */
static char conf[64];

/* A mount namespace whose /etc/resolv.conf names the silent resolver. Before any thread starts. */
static const char *silent_resolver(void) {
  static char why[160];
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    snprintf(why, sizeof why, "needs a mount namespace of its own (root): %s", strerror(errno));
    return why;
  }
  /* an address of its own in 127/8: a second copy of the suite (or this test's poll twin) binds
   * another one beside it */
  char addr[32] = "";
  dropper = socket(AF_INET, SOCK_DGRAM, 0);
  for (int i = 0; dropper >= 0 && i < 250; i++) {
    snprintf(addr, sizeof addr, "127.77.%d.%d", (int)(getpid() >> 8) & 255, 1 + ((int)getpid() + i) % 250);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    if (bind(dropper, (struct sockaddr *)&a, sizeof a) == 0) break;
    if (errno != EADDRINUSE || i == 249) {
      snprintf(why, sizeof why, "cannot bind %s:53 for the silent resolver: %s", addr, strerror(errno));
      return why;
    }
  }
  if (dropper < 0) return "cannot make a UDP socket for the silent resolver";
  snprintf(conf, sizeof conf, "/tmp/bg-resolv-%d.conf", (int)getpid());
  FILE *f = fopen(conf, "w");
  if (!f) return "cannot write a resolv.conf";
  fprintf(f, "nameserver %s\noptions timeout:%d attempts:1\n", addr, RESOLVER_TIMEOUT_MS / 1000);
  fclose(f);
  if (mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0) {
    snprintf(why, sizeof why, "cannot bind a resolv.conf over /etc/resolv.conf: %s", strerror(errno));
    return why;
  }
  return NULL;
}

/* cluster off: the queue's connection is made by its own loop (with cluster detection, the first
 * one is made by the discovery's thread) */
static void open_client(bg_client **c, const char *host, int port) {
  char url[160], msg[256];
  bg_options *o = NULL;
  snprintf(url, sizeof url, "redis://%s:%d", host, port);
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_OFF));
  CHECK_OK(bgt_client_open(c, url, o, msg, sizeof msg));
  bg_options_free(o);
}

static double ms_since(uint64_t t0) { return (double)(bgt_now_ns() - t0) / 1e6; }

/* ---- blocking ------------------------------------------------------------------------------------ */

/* One contains with a DEADLINE_MS deadline on a client of the unanswered name: its status and how
 * long it took. */
static int blocking_contains(double *took_ms, char *msg, size_t n) {
  bg_client *c = NULL;
  bg_filter *f = NULL;
  bg_call *call = NULL;
  int present = 0;
  open_client(&c, UNANSWERED, 6379);
  CHECK_OK(bg_filter_open(&f, c, "resolve"));
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, DEADLINE_MS));
  uint64_t t0 = bgt_now_ns();
  int st = bg_filter_contains_ex(f, call, "x", 1, &present);
  *took_ms = ms_since(t0);
  snprintf(msg, n, "%s", bg_call_errmsg(call));
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
  return st;
}

static void test_blocking_call_ends_at_its_deadline(void) {
  if (no_namespace) return bgt_skip_case(no_namespace);
  double took;
  char msg[512];
  CHECK_STATUS(blocking_contains(&took, msg, sizeof msg), BG_ETIMEOUT);
  CHECK_CONTAINS(msg, "the resolver did not answer (the call's deadline)");
  double late = bgt_lateness_ms(took);
  CHECK_MSG(took <= DEADLINE_MS + late + 100, "took %.0f ms for a %d ms deadline (lateness %.0f ms)", took,
            DEADLINE_MS, late);
}

static void test_control_inline_resolution_outlives_the_deadline(void) {
  if (no_namespace) return bgt_skip_case(no_namespace);
  double took;
  char msg[512];
  bgi_resolve_fault_inline(1);
  int st = blocking_contains(&took, msg, sizeof msg);
  bgi_resolve_fault_inline(0);
  /* the call ends after the resolver gave up, not at its deadline */
  CHECK_MSG(took >= RESOLVER_TIMEOUT_MS * 0.9, "the control took %.0f ms (status %d: %s): the resolver answered?",
            took, st, msg);
}

/* ---- the queue ----------------------------------------------------------------------------------- */

typedef struct drive {
  int served;               /* completions of the reachable server's queue */
  int bad_status;           /* the unanswered name's operation: its status (1: not done yet) */
  double bad_ms;            /* and when it ended, after its submit */
  double worst_call_ms;     /* the longest bg_queue_poll or submit call */
} drive;

/* One thread drives a queue on srv and one on the unanswered name, as a host loop drives both:
 * the second's operation has a DEADLINE_MS deadline; the first serves one contains after another. */
static void drive_two_queues(drive *d) {
  bg_client *good = NULL, *bad = NULL;
  bg_filter *gf = NULL, *bf = NULL;
  bg_queue *gq = NULL, *bq = NULL;
  bg_call *call = NULL;
  memset(d, 0, sizeof *d);
  d->bad_status = 1;
  open_client(&good, "127.0.0.1", srv.port);
  open_client(&bad, UNANSWERED, 6379);
  CHECK_OK(bg_filter_open(&gf, good, "resolve-good"));
  CHECK_OK(bg_filter_open(&bf, bad, "resolve-bad"));
  CHECK_OK(bg_filter_init(gf, 1000, 0.01, NULL));
  CHECK_OK(bg_queue_open(&gq, good));
  CHECK_OK(bg_queue_open(&bq, bad));
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, DEADLINE_MS));
  uint64_t t0 = bgt_now_ns(), t;
  t = bgt_now_ns();
  CHECK_OK(bg_filter_contains_submit_ex(bf, call, bq, 1, "x", 1));
  if (ms_since(t) > d->worst_call_ms) d->worst_call_ms = ms_since(t);
  int good_in_flight = 0;
  while (d->bad_status == 1 && ms_since(t0) < 10000) {
    if (!good_in_flight) {
      t = bgt_now_ns();
      CHECK_OK(bg_filter_contains_submit(gf, gq, 2, "y", 1));
      if (ms_since(t) > d->worst_call_ms) d->worst_call_ms = ms_since(t);
      good_in_flight = 1;
    }
    struct pollfd p[2] = {{.fd = bg_queue_fd(gq), .events = POLLIN}, {.fd = bg_queue_fd(bq), .events = POLLIN}};
    poll(p, 2, 20);
    bg_completion *cs[8];
    size_t n = 0;
    t = bgt_now_ns();
    CHECK_OK(bg_queue_poll(gq, 0, cs, 8, &n));
    if (ms_since(t) > d->worst_call_ms) d->worst_call_ms = ms_since(t);
    for (size_t i = 0; i < n; i++) {
      CHECK_OK(bg_completion_status(cs[i]));
      d->served++;
      good_in_flight = 0;
    }
    t = bgt_now_ns();
    CHECK_OK(bg_queue_poll(bq, 0, cs, 8, &n));
    if (ms_since(t) > d->worst_call_ms) d->worst_call_ms = ms_since(t);
    for (size_t i = 0; i < n; i++) {
      d->bad_status = bg_completion_status(cs[i]);
      d->bad_ms = ms_since(t0);
    }
  }
  bg_call_free(call);
  bg_queue_close(bq);
  bg_queue_close(gq);
  bg_filter_close(bf);
  bg_filter_close(gf);
  bg_client_close(bad);
  bg_client_close(good);
}

static void test_queue_keeps_serving_while_a_name_resolves(void) {
  if (no_namespace) return bgt_skip_case(no_namespace);
  drive d;
  drive_two_queues(&d);
  CHECK_STATUS(d.bad_status, BG_ETIMEOUT);
  double late = bgt_lateness_ms(d.bad_ms);
  CHECK_MSG(d.bad_ms <= DEADLINE_MS + late + 100, "the operation ended after %.0f ms for a %d ms deadline "
            "(lateness %.0f ms)", d.bad_ms, DEADLINE_MS, late);
  CHECK_MSG(d.served >= 5, "the reachable server's queue served %d operations meanwhile", d.served);
  CHECK_MSG(d.worst_call_ms <= 50 + late, "a queue call took %.0f ms (lateness %.0f ms)", d.worst_call_ms, late);
}

static void test_control_inline_resolution_blocks_the_loop(void) {
  if (no_namespace) return bgt_skip_case(no_namespace);
  drive d;
  bgi_resolve_fault_inline(1);
  drive_two_queues(&d);
  bgi_resolve_fault_inline(0);
  CHECK_MSG(d.worst_call_ms >= RESOLVER_TIMEOUT_MS * 0.9,
            "the control's longest queue call took %.0f ms: the harness would not see a blocked loop",
            d.worst_call_ms);
}

static void test_abandoned_resolutions_end(void) {
  if (no_namespace) return bgt_skip_case(no_namespace);
  /* the queue's operation above gave up on its resolution at its deadline; the resolution's thread
   * still waits for the resolver, which gives up after its timeout per address family (IPv4, then
   * IPv6), then frees the request */
  CHECK_MSG(bgi_resolve_inflight() >= 1, "no abandoned resolution still running (%d)", bgi_resolve_inflight());
  uint64_t t0 = bgt_now_ns();
  while (bgi_resolve_inflight() > 0 && ms_since(t0) < 4 * RESOLVER_TIMEOUT_MS + 5000) usleep(20000);
  CHECK_EQ_INT(bgi_resolve_inflight(), 0);
}

/* ---- names that resolve --------------------------------------------------------------------------- */

static void test_names_with_an_address_connect(void) {
  const char *hosts[] = {"localhost", "127.0.0.1"};
  for (size_t i = 0; i < 2; i++) {
    bg_client *c = NULL;
    bg_filter *f = NULL;
    bg_queue *q = NULL;
    open_client(&c, hosts[i], srv.port);
    CHECK_OK(bg_filter_open(&f, c, "resolve-ok"));
    CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));   /* blocking */
    CHECK_OK(bg_queue_open(&q, c));
    CHECK_OK(bg_filter_add_submit(f, q, 1, "z", 1)); /* the queue's own connection */
    bg_completion *cs[1];
    size_t n = 0;
    uint64_t t0 = bgt_now_ns();
    while (!n && ms_since(t0) < 10000) {
      struct pollfd p = {.fd = bg_queue_fd(q), .events = POLLIN};
      poll(&p, 1, 50);
      CHECK_OK(bg_queue_poll(q, 0, cs, 1, &n));
    }
    CHECK_MSG(n == 1 && bg_completion_status(cs[0]) == BG_OK, "%s: the queue's add did not complete", hosts[i]);
    bg_queue_close(q);
    bg_filter_close(f);
    bg_client_close(c);
  }
  CHECK(bgi_resolve_is_literal("127.0.0.1") && bgi_resolve_is_literal("::1") && !bgi_resolve_is_literal("localhost"));
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bgt_lateness_start();
}

static void teardown(void) {
  bgt_lateness_stop();
  bgt_redis_stop(&srv);
  if (dropper >= 0) close(dropper);
  if (conf[0]) unlink(conf);
}

static const bgt_case cases[] = {
    BGT_CASE(setup), BGT_CASE(test_names_with_an_address_connect), BGT_CASE(test_blocking_call_ends_at_its_deadline),
    BGT_CASE(test_queue_keeps_serving_while_a_name_resolves), BGT_CASE(test_abandoned_resolutions_end),
    BGT_CASE(test_control_inline_resolution_outlives_the_deadline), BGT_CASE(test_control_inline_resolution_blocks_the_loop),
    BGT_CASE(teardown)};

int main(int argc, char **argv) {
  no_namespace = silent_resolver();   /* before the fixture's and the library's threads */
  return bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
