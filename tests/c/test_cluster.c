/*
 * Redis Cluster: every operation routed by slot, through migrations, reshards and failovers, on a
 * real 6-node cluster (tests/c/cluster_fixture.h). Each topology case runs reader and adder threads
 * against a filter whose slot moves and asserts 0 errors, 0 false negatives and 0 lost
 * acknowledged adds; the negative control runs the same harness with a deliberately wrong ASK
 * handling (queries without MULTI, so ASK comes on Redis 7.0 and Valkey alike, answered by a
 * bits-only read with ASKING on the importing node) and must see false negatives.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "cluster_fixture.h"
#include "filters.h"
#include "harness.h"
#include "lateness.h"
#include "items.h"
#include "load.h"
#include "redis/tracking.h"
#include "redis_fixture.h"
#include "server_proc.h"

static bgt_cluster cl;

/* Opens url with BG_OPT_CONNECT_AT_OPEN: the cluster is discovered by open (the cases that flip a
 * fault switch in c->cluster need it there), and a failure is open's; o may be NULL. */
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

static bg_client *open_client(const char *url) {
  bg_client *c = NULL;
  char msg[512];
  int st = open_checked(&c, url, NULL, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open %s: %s (%s)", url, bg_strerror(st), msg);
  return c;
}

/* Opens url connecting nothing, then pings: the first call's status and message. */
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

static int64_t stat_of(bg_filter *f, int stat) {
  int64_t v = -1;
  CHECK_OK(bg_filter_stat(f, stat, &v));
  return v;
}

/* A filter name whose slot the given master serves (searching "prefix-N"). */
static void name_on(int master, const char *prefix, char *out, size_t cap) {
  for (int i = 0; i < 100000; i++) {
    snprintf(out, cap, "%s-%d", prefix, i);
    if (bgt_cluster_owner(&cl, bgt_cluster_slot(out)) == master) return;
  }
  bgt_fail(__FILE__, __LINE__, "no name found for master %d", master);
}

static int first_master(void) {
  for (int i = 0; i < cl.n; i++)
    if (cl.node[i].pid && cl.node[i].is_master) return i;
  return -1;
}

/* ---- cases ------------------------------------------------------------------------------- */

/* Filters on all 3 masters, every operation (rotations with each strategy too). */
static void test_filters_on_every_master(void) {
  bg_client *c = open_client(cl.url);
  items it = make_items("spread", 300);
  int masters = 0;
  for (int m = 0; m < cl.n; m++) {
    if (!cl.node[m].is_master) continue;
    masters++;
    char name[64], node[300], want[64];
    int32_t slot = -1;
    name_on(m, "spread", name, sizeof name);
    bg_filter *f = bgt_fresh_filter(c, name, 1000, 0.01, &it);
    CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
    int64_t count = 0;
    CHECK_OK(bg_filter_count(f, &count));
    CHECK(count > 250 && count < 350);
    uint64_t size = 0;
    CHECK_OK(bg_filter_info(f, &size, NULL, NULL, NULL));
    CHECK_EQ_U64(size, 9585);
    CHECK_OK(bg_filter_node(f, node, sizeof node, &slot));
    snprintf(want, sizeof want, "127.0.0.1:%d", cl.node[m].port);
    CHECK_EQ_STR(node, want);
    CHECK_EQ_INT(slot, bgt_cluster_slot(name));
    int applied = 0;
    CHECK_OK(bg_filter_expire(f, 60000, &applied));
    CHECK_EQ_INT(applied, 1);
    CHECK_OK(bg_filter_persist(f, &applied));
    CHECK_OK(bg_filter_snapshot_refresh(f));
    CHECK(stat_of(f, BG_STAT_SNAPSHOT_BYTES) > 0);
    /* the bitmap is on that master: a raw GET there (not elsewhere) finds it */
    char *raw = bgt_cluster_cmd(&cl, m, "STRLEN %s", name);
    CHECK_MSG(raw && atoi(raw) > 1000, "STRLEN on its master: %s", raw ? raw : "(null)");
    free(raw);
    /* tracking on every master: the second query of a filter sends BITFIELD_RO alone */
    if (bgi_tracking_supported()) {
      int present = 0;
      for (int i = 0; i < 3; i++) CHECK_OK(bg_filter_contains(f, it.p[i], it.len[i], &present));
      CHECK_MSG(stat_of(f, BG_STAT_TRACKED_READS) > 0, "no tracked read on master %d (port %d)", m,
                cl.node[m].port);
    }
    /* the three strategies on this master: the new generation is there, nothing else is left */
    items next = make_items("spread-next", 500);
    for (int strategy = BG_ROTATE_SWAP; strategy <= BG_ROTATE_LOCKED; strategy++) {
      bg_rotation *r = NULL;
      CHECK_OK(bg_rotation_begin(&r, f, 2000, 0.01, strategy, NULL));
      CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
      CHECK_OK(bg_rotation_commit(r));
      bg_rotation_free(r);
      CHECK_EQ_INT(bgt_count_present(f, &next), next.n);
    }
    items_free(&next);
    int deleted = 0;
    CHECK_OK(bg_filter_delete(f, &deleted));
    CHECK_EQ_INT(deleted, 1);
    bg_filter_close(f);
  }
  CHECK_EQ_INT(masters, 3);
  bg_client_close(c);
  items_free(&it);
}

/* A slot moved at once (all keys, then SETSLOT NODE): the next call gets MOVED and follows it. */
static void test_moved(void) {
  bg_client *c = open_client(cl.url);
  char name[64];
  int from = first_master();
  name_on(from, "moved", name, sizeof name);
  unsigned slot = bgt_cluster_slot(name);
  int to = bgt_cluster_other_master(&cl, from);
  items it = make_items("moved", 2000);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  load l;
  load_start(&l, c, name, &it, 0);
  CHECK_EQ_INT(bgt_cluster_move_slot(&cl, slot, to), 0);
  sleep_ms(300);
  CHECK_EQ_INT(bgt_cluster_move_slot(&cl, slot, from), 0);
  sleep_ms(300);
  check_clean(&l, load_stop(&l, f));
  CHECK(stat_of(f, BG_STAT_CLUSTER_MOVED) >= 2);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

/* One slot migrated by hand, config first, a pause, then the rest (ASK, TRYAGAIN), there and back.
 * fault: the negative control (see the file's comment). Returns the false negatives seen. */
static long migrate_by_hand(int fault, const char *prefix) {
  bg_client *c = open_client(cl.url);
  if (fault) c->cluster->fault_ask_bits_only = 1;
  char name[64], config[80];
  int from = first_master();
  name_on(from, prefix, name, sizeof name);
  snprintf(config, sizeof config, "{%s}:config", name);
  unsigned slot = bgt_cluster_slot(name);
  int to = bgt_cluster_other_master(&cl, from);
  items it = make_items(prefix, 2000);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  load l;
  load_start(&l, c, name, &it, 0);
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
  atomic_store(&l.stop, 1);
  long lost = load_stop(&l, f);
  long fn = atomic_load(&l.false_negatives);
  if (!fault) {
    check_clean(&l, lost);
    CHECK(stat_of(f, BG_STAT_CLUSTER_ASK) > 0);
    CHECK(stat_of(f, BG_STAT_CLUSTER_BUSY_RETRIES) > 0);
    CHECK(stat_of(f, BG_STAT_CLUSTER_MOVED) > 0);
  }
  printf("    redirects: %lld MOVED, %lld ASK, %lld busy retries, %lld map reloads\n",
         (long long)stat_of(f, BG_STAT_CLUSTER_MOVED), (long long)stat_of(f, BG_STAT_CLUSTER_ASK),
         (long long)stat_of(f, BG_STAT_CLUSTER_BUSY_RETRIES), (long long)stat_of(f, BG_STAT_CLUSTER_MAP_RELOADS));
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
  return fn;
}

static void test_ask_and_tryagain_during_a_migration(void) { migrate_by_hand(0, "migr"); }

/* The negative control: the same harness must catch a wrong redirect handling. */
static void test_negative_control_wrong_ask_handling_is_caught(void) {
  long fn = migrate_by_hand(1, "ctrl");
  CHECK_MSG(fn > 0, "the harness saw no false negative with bits-only reads after ASK: it proves nothing");
}

/* redis-cli --cluster reshard of many slots, the filter's among them. */
static void test_reshard(void) {
  bg_client *c = open_client(cl.url);
  int from = first_master(), to = bgt_cluster_other_master(&cl, from);
  /* reshard takes the source's lowest slots first: a filter in the first few hundred of them */
  int lowest = 16384;
  for (unsigned s = 0; s < 16384; s++)
    if (bgt_cluster_owner(&cl, s) == from) {
      lowest = (int)s;
      break;
    }
  char name[64];
  for (int i = 0;; i++) {
    snprintf(name, sizeof name, "reshard-%d", i);
    int s = (int)bgt_cluster_slot(name);
    if (s >= lowest && s < lowest + 300 && bgt_cluster_owner(&cl, (unsigned)s) == from) break;
  }
  items it = make_items("reshard", 2000);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  load l;
  load_start(&l, c, name, &it, 0);
  CHECK_EQ_INT(bgt_cluster_reshard(&cl, from, to, 500), 0);
  sleep_ms(300);
  CHECK_EQ_INT(bgt_cluster_owner(&cl, bgt_cluster_slot(name)), to);
  CHECK_EQ_INT(bgt_cluster_reshard(&cl, to, from, 500), 0);
  sleep_ms(300);
  check_clean(&l, load_stop(&l, f));
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

/* A graceful CLUSTER FAILOVER of the filter's master. */
static void test_graceful_failover(void) {
  bg_client *c = open_client(cl.url);
  int m = first_master();
  char name[64];
  name_on(m, "failover", name, sizeof name);
  items it = make_items("failover", 2000);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  load l;
  load_start(&l, c, name, &it, 0);
  int r = bgt_cluster_replica_of(&cl, m);
  CHECK(r >= 0);
  CHECK_EQ_INT(bgt_cluster_failover(&cl, r), 0);
  sleep_ms(500);
  check_clean(&l, load_stop(&l, f));
  char node[300], want[64];
  CHECK_OK(bg_filter_node(f, node, sizeof node, NULL));
  snprintf(want, sizeof want, "127.0.0.1:%d", cl.node[r].port);
  CHECK_EQ_STR(node, want);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

/* kill -9 of the filter's master: the degrade policy answers while the cluster is down, the
 * promoted replica then serves; acknowledged adds lost to asynchronous replication are reported -
 * and with BG_OPT_WAIT_REPLICAS 1 there must be none. */
static void kill_a_master(int wait_replicas) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  char msg[512];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, wait_replicas));
  CHECK_MSG(bgt_client_open(&c, cl.seeds, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  int m = first_master();
  char name[64];
  name_on(m, wait_replicas ? "killw" : "kill", name, sizeof name);
  items it = make_items("kill", 2000);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  /* the preloaded items must have reached the replica before the kill */
  char *w = bgt_cluster_cmd(&cl, m, "WAIT 1 2000");
  free(w);
  load l;
  load_start(&l, c, name, &it, 1);
  int r = bgt_cluster_replica_of(&cl, m);
  uint64_t t0 = bgt_now_ns();
  bgt_cluster_kill(&cl, m);
  /* until a query is answered by the new master */
  long before = atomic_load(&l.redis_answers);
  sleep_ms(500);
  int served = 0;
  for (int i = 0; i < 200 && !served; i++) {
    sleep_ms(100);
    char node[300], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", cl.node[r].port);
    served = bg_filter_node(f, node, sizeof node, NULL) == BG_OK && strcmp(node, want) == 0 &&
             atomic_load(&l.redis_answers) > before + 10;
  }
  printf("    the replica served queries %.1f s after the kill\n", (double)(bgt_now_ns() - t0) / 1e9);
  CHECK(served);
  sleep_ms(300);
  atomic_store(&l.stop, 1);
  long lost = load_stop(&l, f);
  /* during the outage the policy answered (assume-present); nothing failed, nothing was absent */
  CHECK_EQ_INT(atomic_load(&l.errors), 0);
  CHECK_EQ_INT(atomic_load(&l.false_negatives), 0);
  CHECK(atomic_load(&l.degraded) > 0);
  /* adds have no degrade: those during the outage fail (and are not acknowledged) */
  printf("    BG_OPT_WAIT_REPLICAS %d: acknowledged adds lost in the failover: %ld of %ld (%ld adds failed during "
         "the outage)\n", wait_replicas, lost, l.acked, atomic_load(&l.add_errors));
  if (wait_replicas) CHECK_EQ_INT(lost, 0);
  else CHECK(lost <= 50);
  CHECK_EQ_INT(bgt_cluster_restart(&cl, m), 0);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
}

static void test_kill_a_master(void) { kill_a_master(0); }
static void test_kill_a_master_with_wait_replicas(void) { kill_a_master(1); }

typedef struct mid_move {
  unsigned slot;
  int to, done;
} mid_move;

static int move_during_upload(void *ud, int phase, uint64_t items_, uint64_t done, uint64_t total) {
  mid_move *m = ud;
  (void)items_, (void)done, (void)total;
  if (phase == BG_PHASE_UPLOADING && !m->done) {
    m->done = 1;
    CHECK_EQ_INT(bgt_cluster_move_slot(&cl, m->slot, m->to), 0);
  }
  return 0;
}

/* A swap rotation whose slot moves during its upload commits correctly or fails cleanly. */
static void test_rotation_while_its_slot_moves(void) {
  /* the locked strategy's readers wait while the rewrite holds the write lock, by design; with the
   * default 100 ms a rewrite slowed by a loaded machine (TSan beside other tests) made them fail
   * with BG_ELOCKED, which this test, counting errors, took for a defect of the slot move */
  bg_options *copt = NULL;
  bg_client *c = NULL;
  char msg[512];
  CHECK_OK(bg_options_new(&copt));
  CHECK_OK(bg_options_set_int(copt, BG_OPT_WRITE_LOCK_WAIT_MS, 30000));
  CHECK_MSG(open_checked(&c, cl.url, copt, msg, sizeof msg) == BG_OK, "open %s: %s", cl.url, msg);
  bg_options_free(copt);
  int from = first_master();
  char name[64];
  name_on(from, "rot", name, sizeof name);
  items it = make_items("rot", 2000), next = make_items("rot-next", 10000);
  bg_filter *f = bgt_fresh_filter(c, name, 100000, 0.01, &it);
  load l;
  load_start(&l, c, name, &it, 0);
  for (int strategy = BG_ROTATE_SWAP; strategy <= BG_ROTATE_LOCKED; strategy += BG_ROTATE_LOCKED - BG_ROTATE_SWAP) {
    mid_move mm = {bgt_cluster_slot(name), bgt_cluster_other_master(&cl, bgt_cluster_owner(&cl, bgt_cluster_slot(name))),
                   0};
    bg_options *o = NULL;
    bg_rotation *r = NULL;
    CHECK_OK(bg_options_new(&o));
    CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096));
    CHECK_OK(bg_rotation_begin(&r, f, 100000, 0.01, strategy, o));
    /* the adds that started after the rotation began must be there after it commits */
    pthread_mutex_lock(&l.mu);
    l.check_from = l.tried + 1;
    pthread_mutex_unlock(&l.mu);
    CHECK_OK(bg_rotation_set_progress(r, move_during_upload, &mm));
    /* the live items and the next ones: readers keep finding theirs either way */
    CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
    CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
    int st = bg_rotation_commit(r);
    printf("    %s rotation while its slot moved: %s (%s)\n", strategy == BG_ROTATE_SWAP ? "swap" : "locked",
           bg_strerror(st), st == BG_OK ? "committed" : bg_rotation_errmsg(r));
    CHECK(mm.done);
    if (st == BG_OK) CHECK_EQ_INT(bgt_count_present(f, &next), next.n);
    CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
    bg_rotation_free(r);
    bg_options_free(o);
  }
  check_clean(&l, load_stop(&l, f));
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
  items_free(&next);
}

/* ---- a rotation's steps while its slot is MIGRATING (nothing moved yet) ---------------- */

typedef struct migrating {
  unsigned slot;
  int to, begun;
  pthread_t finisher;
} migrating;

static void *finish_migration(void *arg) {
  migrating *m = arg;
  sleep_ms(400);
  CHECK_EQ_INT(bgt_cluster_migrate_all_keys(&cl, m->slot, m->to), 0);
  CHECK_EQ_INT(bgt_cluster_migrate_end(&cl, m->slot, m->to), 0);
  return NULL;
}

/* after the last chunk, before the delta's drain: the slot starts migrating, and ends 400 ms later */
static int migrate_before_the_drain(void *ud, int phase, uint64_t items_, uint64_t done, uint64_t total) {
  migrating *m = ud;
  (void)items_;
  if (phase == BG_PHASE_UPLOADING && done == total && total && !m->begun) {
    m->begun = 1;
    CHECK_EQ_INT(bgt_cluster_migrate_begin(&cl, m->slot, m->to), 0);
    pthread_create(&m->finisher, NULL, finish_migration, m);
  }
  return 0;
}

/* Found by the race suite: the delta merge consumed the delta list and read it again in the same
 * script; on a MIGRATING source Redis failed that second read ("non local key") after the first
 * part had run. Every Lua step now declares a key that never exists, so it waits the migration
 * out (TRYAGAIN) instead of starting. fault: the negative control (no guard). */
static int rotate_into_a_migration(int fault, int strategy, char *why, size_t cap) {
  bg_client *c = open_client(cl.url);
  if (fault) c->cluster->fault_no_migration_guard = 1;
  char name[64];
  int from = first_master();
  name_on(from, strategy == BG_ROTATE_SWAP ? (fault ? "guard-off" : "guard-swap") : (fault ? "guard-offl" : "guard-lck"),
          name, sizeof name);
  items it = make_items("guard", 1000), late = make_items("guard-late", 20);
  bg_filter *f = bgt_fresh_filter(c, name, 10000, 0.01, &it);
  migrating m = {bgt_cluster_slot(name), bgt_cluster_other_master(&cl, from), 0, 0};
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 10000, 0.01, strategy, NULL));
  CHECK_OK(bg_rotation_set_progress(r, migrate_before_the_drain, &m));
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  /* adds during the rotation: the delta the drain consumes */
  CHECK_OK(bg_filter_add_many(f, PTRS(late), late.len, late.n, NULL));
  int st = bg_rotation_commit(r);
  snprintf(why, cap, "%s", st == BG_OK ? "" : bg_rotation_errmsg(r));
  CHECK(m.begun);
  if (m.begun) pthread_join(m.finisher, NULL);
  if (st == BG_OK) {
    CHECK_EQ_INT(bgt_count_present(f, &it), it.n);
    CHECK_EQ_INT(bgt_count_present(f, &late), late.n);
  }
  bg_rotation_free(r);
  bg_filter_close(f);
  bg_client_close(c);
  items_free(&it);
  items_free(&late);
  return st;
}

static void test_rotation_steps_wait_out_a_migration(void) {
  char why[512];
  for (int strategy = BG_ROTATE_SWAP; strategy <= BG_ROTATE_LOCKED; strategy += BG_ROTATE_LOCKED - BG_ROTATE_SWAP) {
    int st = rotate_into_a_migration(0, strategy, why, sizeof why);
    CHECK_MSG(st == BG_OK, "%s: %s", bg_strerror(st), why);
  }
}

static void test_negative_control_unguarded_steps_break_in_a_migration(void) {
  char why[512];
  int st = rotate_into_a_migration(1, BG_ROTATE_SWAP, why, sizeof why);
  printf("    unguarded: %s (%s)\n", bg_strerror(st), why);
  CHECK_MSG(st != BG_OK && strstr(why, "non local key"), "the unguarded drain did not fail: %s", why);
}

/* A lock waiter hears the release through the sharded channel, also across a failover (the
 * server ends the sharded subscription on the demoted node: the waiter subscribes again). */
static void test_lock_wake_up_and_failover(void) {
  bg_client *c = open_client(cl.url);
  bg_lock *holder = NULL, *other = NULL;
  CHECK_OK(bg_lock_open(&holder, c, "cluster-lock", NULL));
  CHECK_OK(bg_lock_open(&other, c, "cluster-lock", NULL));
  for (int round = 0; round < 2; round++) {
    CHECK_OK(bg_lock_acquire(holder, BG_LOCK_EXCLUSIVE, 0, NULL));
    bgt_waiter w = {other, 20000, -1, 0};
    pthread_t t;
    pthread_create(&t, NULL, bgt_waiter_main, &w);
    sleep_ms(300);
    if (round == 1) {
      int m = bgt_cluster_owner(&cl, bgt_cluster_slot("cluster-lock:lock"));
      CHECK_EQ_INT(bgt_cluster_failover(&cl, bgt_cluster_replica_of(&cl, m)), 0);
      sleep_ms(300);
    }
    uint64_t released = bgt_now_ns();
    CHECK_OK(bg_lock_release(holder));
    pthread_join(t, NULL);
    CHECK_OK(w.st);
    double ms = (double)(w.got_ns - released) / 1e6;
    printf("    %s: the waiter acquired %.1f ms after the release\n", round ? "after a failover" : "steady", ms);
    /* a wake-up, not the waiter's once-a-second recheck */
    CHECK_MSG(ms < 900 + bgt_lateness_ms(ms), "the waiter took %.1f ms", ms);
  }
  bg_lock_close(holder);
  bg_lock_close(other);
  bg_client_close(c);
}

/* A db other than 0 in a cluster URL: refused as bad input, saying what to fix. */
static void test_a_db_other_than_0_is_refused(void) {
  bg_client *c = NULL;
  char msg[512];
  char url[256];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", cl.node[0].port);
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_EINVAL);
  CHECK_CONTAINS(msg, "only db 0");
  CHECK(c == NULL);
  CHECK_STATUS(open_then_ping(url, NULL, msg, sizeof msg), BG_EINVAL);
  CHECK_CONTAINS(msg, "only db 0");
}

/* Bad input: seeds, cluster mode forced against a standalone server, uncovered slots. */
static void test_bad_input(void) {
  bg_client *c = NULL;
  char msg[512];
  char url[256];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", cl.node[0].port);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_OFF));
  /* known without a server: refused by open itself, whether or not it connects */
  CHECK_STATUS(bgt_client_open(&c, cl.seeds, o, msg, sizeof msg), BG_EBADURL);
  CHECK_CONTAINS(msg, "only a Redis Cluster takes");
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_CLUSTER, 3), BG_EINVAL);
  /* cluster mode on with a db: the same */
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_ON));
  CHECK_STATUS(bgt_client_open(&c, url, o, msg, sizeof msg), BG_EINVAL);
  CHECK_CONTAINS(msg, "only db 0");
  bg_options_free(o);
  /* the first seed unreachable: the next one is used */
  snprintf(url, sizeof url, "redis://127.0.0.1:1,127.0.0.1:%d", cl.node[1].port);
  c = open_client(url);
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);
  c = NULL;
  CHECK_OK(open_then_ping(url, NULL, msg, sizeof msg));
  /* no seed reachable */
  CHECK_STATUS(open_checked(&c, "redis://127.0.0.1:1,127.0.0.1:2", NULL, msg, sizeof msg), BG_ECONN);
  CHECK_CONTAINS(msg, "no seed");
  CHECK_STATUS(open_then_ping("redis://127.0.0.1:1,127.0.0.1:2", NULL, msg, sizeof msg), BG_ECONN);
  CHECK_CONTAINS(msg, "no seed");
}

/* BG_CLUSTER_ON against a standalone server, and a standalone server given several hosts. */
static void test_cluster_mode_on_a_standalone_server(void) {
  bgt_redis r;
  bgt_redis_start(&r, NULL);
  bg_client *c = NULL;
  char msg[512], url[256];
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_CLUSTER, BG_CLUSTER_ON));
  CHECK_STATUS(open_then_ping(r.url, o, msg, sizeof msg), BG_ENOTSUP);
  CHECK_CONTAINS(msg, "is not a Redis Cluster node");
  CHECK_STATUS(open_checked(&c, r.url, o, msg, sizeof msg), BG_ENOTSUP);
  CHECK_CONTAINS(msg, "is not a Redis Cluster node");
  bg_options_free(o);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d,127.0.0.1:%d", r.port, cl.node[0].port);
  CHECK_STATUS(open_checked(&c, url, NULL, msg, sizeof msg), BG_EBADURL);
  CHECK_CONTAINS(msg, "standalone server");
  /* auto: a standalone server is used as before */
  c = open_client(r.url);
  CHECK_OK(bg_client_ping(c));
  bg_client_close(c);
  bgt_redis_stop(&r);
}

/* A cluster with slots no master serves: open says which and what to do. */
static void test_uncovered_slots(void) {
  /* its owner gives the slot up and takes it back: no other node's view changes */
  int m = bgt_cluster_owner(&cl, 16383);
  char *raw = bgt_cluster_cmd(&cl, m, "CLUSTER DELSLOTS 16383");
  free(raw);
  bg_client *c = NULL;
  char msg[512], url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", cl.node[m].port);
  int st = open_checked(&c, url, NULL, msg, sizeof msg);
  raw = bgt_cluster_cmd(&cl, m, "CLUSTER ADDSLOTS 16383");
  free(raw);
  if (st == BG_OK) bg_client_close(c);
  /* DELSLOTS on one node only: that node's own map lacks the slot */
  CHECK_STATUS(st, BG_ESERVER);
  CHECK_CONTAINS(msg, "slot 16383 has no master");
  CHECK_EQ_INT(bgt_cluster_wait_ok(&cl, 10000), 0);
}

static void stop_cluster(void) { bgt_cluster_stop(&cl); }

int main(int argc, char **argv) {
  static const bgt_case cases[] = {
      BGT_CASE(test_filters_on_every_master),
      BGT_CASE(test_a_db_other_than_0_is_refused), BGT_CASE(test_bad_input),
      BGT_CASE(test_cluster_mode_on_a_standalone_server),
      BGT_CASE(test_moved),
      BGT_CASE(test_ask_and_tryagain_during_a_migration),
      BGT_CASE(test_negative_control_wrong_ask_handling_is_caught),
      BGT_CASE(test_reshard),
      BGT_CASE(test_rotation_while_its_slot_moves),
      BGT_CASE(test_rotation_steps_wait_out_a_migration),
      BGT_CASE(test_negative_control_unguarded_steps_break_in_a_migration),
      BGT_CASE(test_lock_wake_up_and_failover),
      BGT_CASE(test_graceful_failover),
      BGT_CASE(test_kill_a_master),
      BGT_CASE(test_kill_a_master_with_wait_replicas),
      BGT_CASE(test_uncovered_slots),
  };
  bgt_cluster_start(&cl);
  bgt_lateness_start();
  atexit(stop_cluster);
  return bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
