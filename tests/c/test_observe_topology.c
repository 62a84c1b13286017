/*
 * The observer's topology events against real deployments (include/bloomguard/observe.h):
 *  - a 6-node Redis Cluster: the first map load (BG_EV_FIRST), then a slot moved to another
 *    master by hand is told by the next reload (CLUSTER_MAP with the slots that moved), counted
 *    in BG_CLIENT_STAT_CLUSTER_MAP_CHANGES; a reload that finds nothing new tells nothing (the
 *    control: the refresher reloads every 5 s);
 *  - Sentinel: kill -9 of the master, FAILOVER naming the new master, BG_CLIENT_STAT_FAILOVERS.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "harness.h"
#include "sentinel_fixture.h"

typedef struct heard {
  pthread_mutex_t mu;
  int kind[256];
  int64_t v[256][BG_EVENT_NVALUES];
  char msg[256][256];
  size_t n;
} heard;

static void on_event(void *ud, int kind, const char *name, const int64_t *v, size_t nv, const char *msg) {
  heard *h = ud;
  (void)name;
  pthread_mutex_lock(&h->mu);
  if (h->n < 256 && nv >= BG_EVENT_NVALUES) {
    h->kind[h->n] = kind;
    memcpy(h->v[h->n], v, sizeof h->v[0]);
    snprintf(h->msg[h->n], sizeof h->msg[0], "%s", msg);
    h->n++;
  }
  pthread_mutex_unlock(&h->mu);
}

/* The index of the first event of kind at or after from, waiting up to timeout_ms; -1 if none. */
static long wait_kind(heard *h, int kind, size_t from, int timeout_ms) {
  uint64_t until = bgt_now_ns() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    long at = -1;
    pthread_mutex_lock(&h->mu);
    for (size_t i = from; i < h->n && at < 0; i++)
      if (h->kind[i] == kind) at = (long)i;
    pthread_mutex_unlock(&h->mu);
    if (at >= 0 || bgt_now_ns() >= until) return at;
    usleep(20000);
  }
}

static size_t heard_n(heard *h) {
  pthread_mutex_lock(&h->mu);
  size_t n = h->n;
  pthread_mutex_unlock(&h->mu);
  return n;
}

static bg_client *open_with(const char *url, heard *h) {
  char msg[512];
  bg_client *c = NULL;
  int st = bgt_client_open(&c, url, NULL, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open %s: %s (%s)", url, bg_strerror(st), msg);
  if (c) CHECK_OK(bg_client_set_observer(c, on_event, h));
  return c;
}

static void test_cluster_map_events(void) {
  bgt_cluster cl;
  heard h = {.mu = PTHREAD_MUTEX_INITIALIZER};
  int created, present;
  int64_t changes = -1;
  bgt_cluster_start_with(&cl, 15000);   /* no node is killed here: a stall must not fail one over */
  bg_client *c = open_with(cl.url, &h);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-map"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));   /* discovers the cluster: the first load */
  long first = wait_kind(&h, BG_EVENT_CLUSTER_MAP, 0, 2000);
  CHECK_MSG(first >= 0, "no CLUSTER_MAP event for the first load");
  if (first >= 0) {
    CHECK_EQ_INT(h.v[first][BG_EV_FIRST], 1);
    CHECK_EQ_INT(h.v[first][BG_EV_COUNT], 16384);
    CHECK_CONTAINS(h.msg[first], "3 masters");
  }
  CHECK_OK(bg_client_stat(c, BG_CLIENT_STAT_CLUSTER_MAP_CHANGES, &changes));
  CHECK_EQ_INT(changes, 0);
  /* the control: the refresher's reload (every 5 s) of an unchanged map tells nothing */
  size_t n0 = heard_n(&h);
  int64_t reloads = 0;
  uint64_t until = bgt_now_ns() + 12ull * 1000000000ull;
  while (reloads < 2 && bgt_now_ns() < until) {
    usleep(50000);
    CHECK_OK(bg_client_stat(c, BG_CLIENT_STAT_CLUSTER_MAP_RELOADS, &reloads));
  }
  CHECK_MSG(reloads >= 2, "only %lld reloads in 12 s", (long long)reloads);
  CHECK_MSG(wait_kind(&h, BG_EVENT_CLUSTER_MAP, n0, 0) < 0, "a CLUSTER_MAP event for an unchanged map");
  /* one slot moved by hand: the next reload tells it */
  unsigned slot = bgt_cluster_slot("obs-map");
  int from = bgt_cluster_owner(&cl, slot), to = bgt_cluster_other_master(&cl, from);
  CHECK(bgt_cluster_move_slot(&cl, slot, to) == 0);
  CHECK_OK(bg_filter_contains(f, "a", 1, &present));   /* MOVED: a reload is asked for */
  long moved = wait_kind(&h, BG_EVENT_CLUSTER_MAP, n0, 7000);
  CHECK_MSG(moved >= 0, "no CLUSTER_MAP event after a slot moved");
  if (moved >= 0) {
    CHECK_EQ_INT(h.v[moved][BG_EV_FIRST], 0);
    CHECK_EQ_INT(h.v[moved][BG_EV_COUNT], 1);
    CHECK_CONTAINS(h.msg[moved], "1 slot is served by another master");
  }
  CHECK_OK(bg_client_stat(c, BG_CLIENT_STAT_CLUSTER_MAP_CHANGES, &changes));
  CHECK_EQ_INT(changes, 1);
  bg_filter_close(f);
  bg_client_close(c);
  bgt_cluster_stop(&cl);
}

static void test_sentinel_failover_event(void) {
  bgt_sentinel_set ss;
  heard h = {.mu = PTHREAD_MUTEX_INITIALIZER};
  int created, present;
  bgt_sentinel_start(&ss, NULL);
  bg_client *c = open_with(ss.url, &h);
  bg_filter *f = NULL;
  bg_policy *p = NULL;
  CHECK_OK(bg_filter_open(&f, c, "obs-failover"));
  CHECK_OK(bg_policy_new(&p));   /* answers while the master is down */
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
  CHECK_OK(bg_filter_init(f, 1000, 0.01, &created));
  CHECK_EQ_INT(wait_kind(&h, BG_EVENT_FAILOVER, 0, 0), -1);   /* finding the first master is no failover */
  int m = bgt_sentinel_master(&ss), other = 1 - m;
  bgt_sentinel_kill_data(&ss, m);
  long at = -1;
  uint64_t until = bgt_now_ns() + 30ull * 1000000000ull;
  while (at < 0 && bgt_now_ns() < until) {
    CHECK_OK(bg_filter_contains(f, "a", 1, &present));   /* connection errors ask for a reload */
    at = wait_kind(&h, BG_EVENT_FAILOVER, 0, 100);
  }
  CHECK_MSG(at >= 0, "no FAILOVER event within 30 s of the master's kill");
  if (at >= 0) {
    char want[64];
    snprintf(want, sizeof want, "calls go to 127.0.0.1:%d now", ss.data_port[other]);
    CHECK_CONTAINS(h.msg[at], want);
    CHECK_CONTAINS(h.msg[at], ss.master_name);
  }
  int64_t failovers = 0;
  CHECK_OK(bg_client_stat(c, BG_CLIENT_STAT_FAILOVERS, &failovers));
  CHECK_EQ_INT(failovers, 1);
  bg_filter_close(f);
  bg_client_close(c);
  bgt_sentinel_stop(&ss);
}

BGT_RUN(BGT_CASE(test_cluster_map_events), BGT_CASE(test_sentinel_failover_event))
