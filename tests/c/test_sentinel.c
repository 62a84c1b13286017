/*
 * Redis Sentinel: a real master, replica and 3 sentinels (tests/c/sentinel_fixture.h). The client
 * finds the master through the sentinels, follows a kill -9 failover (the degrade policy answers
 * meanwhile, queries come back from Redis within seconds, adds go to the new master, no item
 * replicated before the kill is missing), and says clearly what is wrong with a bad URL, an unknown
 * master name, sentinels that are all down, or the wrong credentials.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fault_server.h"
#include "filters.h"
#include "harness.h"
#include "items.h"
#include "load.h"
#include "sentinel_fixture.h"

static bgt_sentinel_set ss;

/* Opens url with BG_OPT_CONNECT_AT_OPEN: the sentinels are asked, and the master checked, by open. */
static bg_client *open_opts(const char *url, const char *sentinel_password, char *msg, size_t cap, int *st) {
  bg_client *c = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  if (sentinel_password) CHECK_OK(bg_options_set_str(o, BG_OPT_SENTINEL_PASSWORD, sentinel_password));
  *st = bgt_client_open(&c, url, o, msg, cap);
  bg_options_free(o);
  return c;
}

static bg_client *open_ok(const char *url) {
  char msg[512];
  int st;
  bg_client *c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK_MSG(st == BG_OK, "open %s: %s (%s)", url, bg_strerror(st), msg);
  return c;
}

static void want_node(bg_filter *f, int node) {
  char addr[300], want[64];
  CHECK_OK(bg_filter_node(f, addr, sizeof addr, NULL));
  snprintf(want, sizeof want, "127.0.0.1:%d", ss.data_port[node]);
  CHECK_EQ_STR(addr, want);
}

static void test_finds_the_master(void) {
  bg_client *c = open_ok(ss.url);
  items it = make_items("sent", 500);
  bg_filter *f = bgt_fresh_filter(c, "sentinel-basic", 10000, 0.01, &it);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  want_node(f, bgt_sentinel_master(&ss));
  /* a rotation and a lock, classic pub/sub here (Redisson does the same behind Sentinel) */
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  bg_lock *l = NULL;
  CHECK_OK(bg_lock_open(&l, c, "sentinel-lock", NULL));
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release(l));
  bg_lock_close(l);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

static void test_bad_input(void) {
  char msg[512], url[256];
  int st;
  bg_client *c;
  snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d", ss.sentinel_port[0]);
  c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK_STATUS(st, BG_EBADURL);
  CHECK_CONTAINS(msg, "names the master after '#'");
  snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#no-such-master", ss.sentinel_port[0],
           ss.sentinel_port[1]);
  c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK_STATUS(st, BG_EINVAL);
  CHECK_CONTAINS(msg, "know no master named \"no-such-master\"");
  CHECK(c == NULL);
  /* a sentinel URL pointed at data nodes: they answer SENTINEL with an error */
  snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#%s", ss.data_port[0], ss.master_name);
  c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK(st != BG_OK);
  CHECK(c == NULL);
  /* every sentinel down */
  for (int i = 0; i < 3; i++) bgt_sentinel_kill_sentinel(&ss, i);
  c = open_opts(ss.url, NULL, msg, sizeof msg, &st);
  CHECK_STATUS(st, BG_ECONN);
  CHECK_CONTAINS(msg, "no sentinel of the URL answered (3 tried");
  /* opened without BG_OPT_CONNECT_AT_OPEN meanwhile: it opens, its calls get the same answer
   * until the sentinels are back, then the same client finds the master */
  bg_client *lazy = NULL;
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bgt_client_open(&lazy, ss.url, NULL, msg, sizeof msg));
  CHECK_STATUS(bg_client_ping_ex(lazy, call), BG_ECONN);
  CHECK_CONTAINS(bg_call_errmsg(call), "no sentinel of the URL answered (3 tried");
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(bgt_sentinel_restart_sentinel(&ss, i), 0);
  CHECK_EQ_INT(bgt_sentinel_wait_master(&ss, bgt_sentinel_master(&ss), 20000), 0);
  CHECK_MSG(bg_client_ping_ex(lazy, call) == BG_OK, "after the sentinels came back: %s", bg_call_errmsg(call));
  bg_client_close(lazy);
  bg_call_free(call);
  CHECK_EQ_INT(bgt_sentinel_wait_master(&ss, bgt_sentinel_master(&ss), 20000), 0);
  c = open_ok(ss.url);
  bg_client_close(c);
}

/* ---- a lying sentinel ------------------------------------------------------------------------ */

/* A fake sentinel that names the replica as the master: what a sentinel behind a failover (or one
 * cut off from the others) says. */
static char lie[128];
static const char *lying_sentinel(void *ud, int argc, char **argv) {
  (void)ud;
  if (argc >= 2 && !strcasecmp(argv[0], "SENTINEL") && !strcasecmp(argv[1], "get-master-addr-by-name")) return lie;
  return "+OK\r\n";   /* CLIENT SETNAME and the like */
}

/* Discovery follows the Sentinel client guidelines: the lying sentinel, listed first, is asked
 * first; the address it names fails the ROLE check, so the next sentinel is asked, and the one that
 * answered right moves to the front (the next discovery asks it first: the liar is asked once). */
static void test_a_lying_sentinel_first(void) {
  int m = bgt_sentinel_master(&ss), replica = 1 - m;
  char port[16];
  snprintf(port, sizeof port, "%d", ss.data_port[replica]);
  snprintf(lie, sizeof lie, "*2\r\n$9\r\n127.0.0.1\r\n$%zu\r\n%s\r\n", strlen(port), port);
  bgt_fault *liar = bgt_fake_start(lying_sentinel, NULL);
  char url[512], msg[512];
  snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#%s",
           bgt_fault_port(liar), ss.sentinel_port[0], ss.sentinel_port[1], ss.sentinel_port[2], ss.master_name);
  int st;
  bg_client *c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK_MSG(st == BG_OK, "open with a lying sentinel first: %s (%s)", bg_strerror(st), msg);
  CHECK_EQ_INT(bgt_fault_accepted(liar), 1);
  if (c) {
    items it = make_items("liar", 200);
    bg_filter *f = bgt_fresh_filter(c, "sentinel-liar", 2000, 0.01, &it);
    want_node(f, m);
    CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
    /* a refresh asks the sentinel that answered right first: the liar is not asked again */
    int64_t reloads = 0;
    uint64_t t0 = bgt_now_ns();
    do {
      CHECK_OK(bg_filter_stat(f, BG_STAT_CLUSTER_MAP_RELOADS, &reloads));
      if (reloads < 2) usleep(20000);
    } while (reloads < 2 && bgt_now_ns() - t0 < 15000000000ull);
    CHECK_MSG(reloads >= 2, "no refresh within 15 s (%lld reloads)", (long long)reloads);
    CHECK_EQ_INT(bgt_fault_accepted(liar), 1);
    bg_filter_close(f);
    bg_client_close(c);
    items_free(&it);
  }
  /* the negative control: the liar alone, nobody to skip to: open fails, naming the replica */
  snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#%s", bgt_fault_port(liar), ss.master_name);
  c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK_STATUS(st, BG_ESERVER);
  CHECK_CONTAINS(msg, "is not the master");
  if (c) bg_client_close(c);
  bgt_fault_stop(liar);
}

/* kill -9 of the master under readers, an adder and a rotation. */
static void test_failover(void) {
  bg_client *c = open_ok(ss.url);
  items it = make_items("sent-fo", 2000);
  bg_filter *f = bgt_fresh_filter(c, "sentinel-fo", 20000, 0.01, &it);
  int m = bgt_sentinel_master(&ss), other = 1 - m;
  want_node(f, m);
  /* the preloaded items have reached the replica: they must survive the failover */
  free(bgt_sentinel_data_cmd(&ss, m, "WAIT 1 2000"));
  load l;
  load_start(&l, c, "sentinel-fo", &it, 1);
  /* a rotation begun on the old master, committed after the failover: it commits correctly or
   * fails cleanly (its staging keys may not all have reached the replica), the live filter intact */
  items next = make_items("sent-fo-next", 3000);
  bg_rotation *across = NULL;
  CHECK_OK(bg_rotation_begin(&across, f, 20000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(across, PTRS(it), it.len, it.n));
  CHECK_OK(bg_rotation_add_many(across, PTRS(next), next.len, next.n));
  uint64_t t0 = bgt_now_ns();
  bgt_sentinel_kill_data(&ss, m);
  long before = atomic_load(&l.redis_answers);
  int served = 0;
  for (int i = 0; i < 300 && !served; i++) {
    sleep_ms(50);
    char addr[300], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", ss.data_port[other]);
    served = bg_filter_node(f, addr, sizeof addr, NULL) == BG_OK && strcmp(addr, want) == 0 &&
             atomic_load(&l.redis_answers) > before + 10;
  }
  double secs = (double)(bgt_now_ns() - t0) / 1e9;
  printf("    queries answered by the new master %.1f s after the kill\n", secs);
  CHECK(served);
  int cst = bg_rotation_commit(across);
  printf("    the rotation begun before the kill: %s%s%s\n", bg_strerror(cst), cst ? ": " : "",
         cst ? bg_rotation_errmsg(across) : "");
  if (cst == BG_OK) CHECK_EQ_INT(bgt_count_present(f, &next), next.n);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  bg_rotation_free(across);
  items_free(&next);
  /* a rotation on the new master */
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  pthread_mutex_lock(&l.mu);
  l.check_from = l.tried + 1;
  pthread_mutex_unlock(&l.mu);
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  sleep_ms(300);
  atomic_store(&l.stop, 1);
  long lost = load_stop(&l, f);
  CHECK_EQ_INT(atomic_load(&l.errors), 0);
  CHECK_EQ_INT(atomic_load(&l.false_negatives), 0);
  CHECK(atomic_load(&l.degraded) > 0);
  CHECK_EQ_INT(lost, 0);
  CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
  int64_t reloads = 0;
  CHECK_OK(bg_filter_stat(f, BG_STAT_CLUSTER_MAP_RELOADS, &reloads));
  printf("    %ld adds acknowledged, %ld failed during the outage; %lld asks of the sentinels\n", l.acked,
         atomic_load(&l.add_errors), (long long)reloads);
  CHECK_EQ_INT(bgt_sentinel_restart_data(&ss, m), 0);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

/* Data nodes and sentinels with passwords of their own: each is used where it belongs, the wrong
 * one is named as such, and neither appears in a message. */
static void test_credentials(void) {
  bgt_sentinel_set sec;
  bgt_sentinel_opts o = {.data_password = "d4ta-pw", .sentinel_password = "s3nt-pw"};
  bgt_sentinel_start(&sec, &o);
  char url[1100], msg[512];
  int st;
  const char *hosts = strchr(sec.url, '@') + 1;
  CHECK(strncmp(sec.url, "redis-sentinel://:d4ta-pw@", 26) == 0);
  snprintf(url, sizeof url, "%s", sec.url);
  bg_client *c = open_opts(url, "s3nt-pw", msg, sizeof msg, &st);
  CHECK_MSG(st == BG_OK, "%s", msg);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "sec"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  bg_filter_close(f);
  bg_client_close(c);
  /* no sentinel password: refused by the sentinels */
  c = open_opts(url, NULL, msg, sizeof msg, &st);
  CHECK(st == BG_EAUTH || st == BG_ECONN);
  CHECK_CONTAINS(msg, "BG_OPT_SENTINEL_PASSWORD");
  /* the wrong data password: refused by the master */
  snprintf(url, sizeof url, "redis-sentinel://:wr0ng-pw@%s", hosts);
  c = open_opts(url, "s3nt-pw", msg, sizeof msg, &st);
  CHECK_STATUS(st, BG_EAUTH);
  CHECK_MSG(!strstr(msg, "wr0ng-pw") && !strstr(msg, "s3nt-pw") && !strstr(msg, "d4ta-pw"), "password in: %s", msg);
  bgt_sentinel_stop(&sec);
}

static void stop_set(void) { bgt_sentinel_stop(&ss); }

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_finds_the_master),
      BGT_CASE(test_bad_input),
      BGT_CASE(test_a_lying_sentinel_first),
      BGT_CASE(test_failover),
      BGT_CASE(test_credentials),
  };
  bgt_sentinel_start(&ss, NULL);
  atexit(stop_set);
  return bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
