/*
 * A submission queue on a real 6-node Redis Cluster: one driving thread keeps hundreds of
 * operations in flight on one filter (queries with known answers, adds then queries of them)
 * while the main thread migrates the filter's slot by hand, there and back (ASK, TRYAGAIN, MOVED),
 * and fails its master over to a replica. 0 wrong answers, 0 errors, no hang; the redirects must
 * have reached the queue's operations. The negative control (the cluster's fault_ask_bits_only:
 * after an ASK, a query reads without the full check) shows the harness catches false negatives.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "cluster_fixture.h"
#include "harness.h"
#include "items.h"

static bgt_cluster cl;

/* The filter is made for CAPACITY items at 1e-9; the driver adds at most MAX_ADDS, so an absent
 * item that answers present is a defect, not the filter's rate: 45k adds into a filter made for 20k
 * (a failover window of seconds lets the driver add that many) raise the rate to ~1e-3, and with
 * 2,000 absent items queried a true false positive then shows in most runs. */
enum { IN_FLIGHT = 300, NITEMS = 2000, CAPACITY = 100000, MAX_ADDS = 60000 };

typedef struct driver {
  bg_client *c;
  const char *name;
  const items *present, *absent;
  atomic_int stop;
  long answers, wrong, false_negatives, errors, adds;
  char first_error[256];
  char added[IN_FLIGHT][48];
  int kind[IN_FLIGHT];   /* 0 query present, 1 query absent, 2 add, 3 query of what was added */
} driver;

static void submit(driver *d, bg_filter *f, bg_queue *q, uint64_t tag, unsigned *seed) {
  size_t slot = (size_t)(tag % IN_FLIGHT);
  int r = (int)(rand_r(seed) % 10);
  int st;
  if (r < 4) {
    size_t i = rand_r(seed) % d->present->n;
    d->kind[slot] = 0;
    st = bg_filter_contains_submit(f, q, tag, d->present->p[i], d->present->len[i]);
  } else if (r < 8) {
    size_t i = rand_r(seed) % d->absent->n;
    d->kind[slot] = 1;
    st = bg_filter_contains_submit(f, q, tag, d->absent->p[i], d->absent->len[i]);
  } else if (d->adds < MAX_ADDS) {
    d->adds++;
    snprintf(d->added[slot], sizeof d->added[slot], "added-%llu", (unsigned long long)tag);
    d->kind[slot] = 2;
    st = bg_filter_add_submit(f, q, tag, d->added[slot], strlen(d->added[slot]));
  } else {
    d->kind[slot] = 0;
    st = bg_filter_contains_submit(f, q, tag, d->present->p[0], d->present->len[0]);
  }
  CHECK_MSG(st == BG_OK, "submit: %d", st);
}

static void *drive(void *p) {
  driver *d = p;
  bg_filter *f = NULL;
  bg_queue *q = NULL;
  CHECK_OK(bg_filter_open(&f, d->c, d->name));
  CHECK_OK(bg_queue_open(&q, d->c));
  unsigned seed = 7;
  for (uint64_t tag = 0; tag < IN_FLIGHT; tag++) submit(d, f, q, tag, &seed);
  size_t inflight = IN_FLIGHT;
  uint64_t hang_guard = 0;
  while (inflight > 0) {
    if (atomic_load(&d->stop) && !hang_guard) hang_guard = bgt_now_ns() + 20ull * 1000000000ull;
    if (hang_guard && bgt_now_ns() > hang_guard) break;
    bg_completion *cs[128];
    size_t n = 0;
    CHECK_OK(bg_queue_poll(q, 50, cs, 128, &n));
    for (size_t i = 0; i < n; i++) {
      uint64_t t = bg_completion_tag(cs[i]);
      size_t slot = (size_t)(t % IN_FLIGHT);
      int st = bg_completion_status(cs[i]);
      inflight--;
      if (st != BG_OK) {
        if (!d->errors++) snprintf(d->first_error, sizeof d->first_error, "%d: %s", st, bg_completion_errmsg(cs[i]));
      } else if (d->kind[slot] == 2) {
        d->kind[slot] = 3;   /* added: now it must be there */
        CHECK_OK(bg_filter_contains_submit(f, q, t, d->added[slot], strlen(d->added[slot])));
        inflight++;
        continue;
      } else {
        int want = d->kind[slot] != 1, got = bg_completion_value(cs[i]) != 0;
        d->answers++;
        d->wrong += got != want;
        d->false_negatives += want && !got;
      }
      if (!atomic_load(&d->stop)) {
        submit(d, f, q, t + IN_FLIGHT, &seed);   /* the slot of the one that completed */
        inflight++;
      }
    }
  }
  CHECK_MSG(inflight == 0, "%zu operations never completed", inflight);
  bg_queue_close(q);
  bg_filter_close(f);
  return NULL;
}

static int first_master(void) {
  bgt_cluster_refresh(&cl);
  for (int i = 0; i < cl.n; i++)
    if (cl.node[i].pid && cl.node[i].is_master) return i;
  return -1;
}

/* A name whose slot node m owns. */
static void name_on(int m, const char *prefix, char *out, size_t cap) {
  for (int i = 0;; i++) {
    snprintf(out, cap, "%s-%d", prefix, i);
    if (bgt_cluster_owner(&cl, bgt_cluster_slot(out)) == m) return;
  }
}

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

static int64_t stat_of(bg_filter *f, int id) {
  int64_t v = 0;
  bg_filter_stat(f, id, &v);
  return v;
}

/* Runs the driver through a migration there and back and (unless fault) a failover; returns it. */
static driver run(int fault, const char *prefix) {
  char msg[512], name[64], config[80];
  bg_client *c = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000));
  CHECK_MSG(bgt_client_open(&c, cl.seeds, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  int from = first_master();
  name_on(from, prefix, name, sizeof name);
  snprintf(config, sizeof config, "{%s}:config", name);
  unsigned slot = bgt_cluster_slot(name);
  int to = bgt_cluster_other_master(&cl, from);
  items present = make_items("present", NITEMS), absent = make_items("absent", NITEMS);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, name));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, CAPACITY, 1e-9, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(present), present.len, present.n, NULL));
  /* the first calls found the cluster (opening connects nothing): its table exists now */
  if (fault) atomic_load(&c->cluster)->fault_ask_bits_only = 1;
  static driver d;
  memset(&d, 0, sizeof d);
  d.c = c, d.name = name, d.present = &present, d.absent = &absent;
  pthread_t th;
  pthread_create(&th, NULL, drive, &d);
  sleep_ms(200);
  int ends[2] = {to, from};
  for (int leg = 0; leg < 2; leg++) {
    CHECK_EQ_INT(bgt_cluster_migrate_begin(&cl, slot, ends[leg]), 0);
    sleep_ms(150);
    CHECK_EQ_INT(bgt_cluster_migrate_key(&cl, slot, ends[leg], config, strlen(config)), 0);
    sleep_ms(250);
    CHECK_EQ_INT(bgt_cluster_migrate_all_keys(&cl, slot, ends[leg]), 0);
    sleep_ms(100);
    CHECK_EQ_INT(bgt_cluster_migrate_end(&cl, slot, ends[leg]), 0);
    sleep_ms(200);
  }
  if (!fault) {
    int r = bgt_cluster_replica_of(&cl, from);
    CHECK(r >= 0);
    if (r >= 0) CHECK_EQ_INT(bgt_cluster_failover(&cl, r), 0);
    sleep_ms(500);
  }
  atomic_store(&d.stop, 1);
  pthread_join(th, NULL);
  printf("    %s: %ld answers, %ld wrong (%ld false negatives), %ld errors%s%s; %ld adds; %lld MOVED, %lld ASK, %lld busy\n",
         prefix, d.answers, d.wrong, d.false_negatives, d.errors, d.errors ? ": " : "", d.first_error, d.adds,
         (long long)stat_of(f, BG_STAT_CLUSTER_MOVED), (long long)stat_of(f, BG_STAT_CLUSTER_ASK),
         (long long)stat_of(f, BG_STAT_CLUSTER_BUSY_RETRIES));
  if (!fault) {
    CHECK(stat_of(f, BG_STAT_CLUSTER_MOVED) > 0);
    CHECK(stat_of(f, BG_STAT_CLUSTER_ASK) + stat_of(f, BG_STAT_CLUSTER_BUSY_RETRIES) > 0);
  }
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&present);
  items_free(&absent);
  return d;
}

static void test_migrations_and_a_failover(void) {
  driver d = run(0, "qmig");
  CHECK_EQ_INT((int)d.wrong, 0);
  CHECK_MSG(d.errors == 0, "%ld errors, first: %s", d.errors, d.first_error);
  CHECK_MSG(d.answers > 1000, "only %ld answers", d.answers);
}

static void test_negative_control_wrong_ask_handling_is_caught(void) {
  driver d = run(1, "qctl");
  CHECK_MSG(d.false_negatives > 0, "the harness saw no false negative with bits-only reads after ASK");
}

static void stop_cluster(void) { bgt_cluster_stop(&cl); }

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_migrations_and_a_failover),
      BGT_CASE(test_negative_control_wrong_ask_handling_is_caught),
  };
  /* a node timeout of 15 s: the manual failover's window (the old master's writes paused) stays
   * open for seconds, with the queue's requests queued behind the pause */
  bgt_cluster_start_with(&cl, 15000);
  atexit(stop_cluster);
  return bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
