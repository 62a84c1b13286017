/*
 * Multiplexed connections (BG_OPT_PIPELINE) under the faults test_pipeline.c does not make: the
 * server killed (-9) and restarted on its port with its data, and (Redis Cluster) the filter's slot
 * migrated step by step there and back (ASK, TRYAGAIN, MOVED). Eight threads share ONE pipelined
 * client and ask only about items whose answer they know: the present items (added before), the
 * absent ones (checked absent at the start, at a false positive rate of 1e-9) and their own adds
 * that were acknowledged (BG_OK), singly and in batches of a length of each thread's own (a reply
 * given to the wrong caller shows as a wrong answer or a batch of the wrong length, BG_EPROTO).
 * An add that failed is never asked about: it may or may not have been applied.
 *
 * Asserted: 0 wrong answers, 0 BG_EPROTO, no status but BG_ECONN / BG_ETIMEOUT / BG_ESERVER
 * (LOADING) while the server is down or loading (none at all during a migration), no call slower
 * than its deadline plus a margin (no hang), every thread served again on the same client after
 * each restart, and every acknowledged add present at the end.
 *
 * Negative controls, the same harness with the fault made harmful: the server restarted from a
 * snapshot older than its acknowledged adds (without its AOF) must show lost adds; during the
 * migration, the cluster client's fault_ask_bits_only (queries without MULTI, so ASK comes on any
 * server, then a bits-only read after ASK, on the importing node's missing bitmap) must show
 * false negatives.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "cluster_fixture.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"
#include "server_proc.h"

enum { THREADS = 8, NPRESENT = 400, NABSENT = 400, MAX_ROUNDS = 20000, BATCH_MAX = 16 };

#define TIMEOUT_MS 500   /* the client's command timeout */
#define CLUSTER_TIMEOUT_MS 2000   /* the cluster client's */
#define HANG_MS 5000
#define DEADLINE_MS 300         /* the batch queries' own deadline (bg_call_set_timeout_ms) */
#define DEADLINE_MARGIN_MS 400  /* "at once": scheduling on a loaded machine, sanitizers */     /* a call slower than this hangs (timeout, retries, a loaded sanitizer build) */

/* with fsync always, the AOF has every write before its reply is sent: a kill -9 loses none */
static const char *const AOF_ARGS[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};

static items present_items, absent_items;

typedef struct worker {
  bg_filter *f;
  int id;
  atomic_int *stop;
  int *acked;                 /* rounds whose add was acknowledged: "<prefix>-<id>-<round>" */
  int nacked;
  long wrong, wrong_acked, eproto, transient, unexpected, answers, calls;
  long econn, etimeout, eserver;   /* the transient ones */
  double worst_ms;
  double worst_deadline_ms;   /* the batches, each with a deadline of DEADLINE_MS (bg_call) */
  atomic_ullong last_ok_ns;   /* the last call Redis answered */
  char errmsg[256];
} worker;

static const char *prefix;   /* the adds' names, per case */
/* the batches' deadline, per case: DEADLINE_MS; during a migration longer than the half-migrated
 * window, whose TRYAGAIN is waited out until the deadline */
static int64_t batch_deadline_ms = DEADLINE_MS;

static int rnd(unsigned *seed, int n) { return (int)(rand_r(seed) % (unsigned)n); }

static int own_name(char *buf, size_t cap, int id, int round) { return snprintf(buf, cap, "%s-%d-%d", prefix, id, round); }

/* The call's status and time: 1 when it answered (check the answer), 0 otherwise. */
static int took(worker *w, int st, uint64_t t0) {
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  w->calls++;
  if (ms > w->worst_ms) w->worst_ms = ms;
  if (st == BG_OK) {
    atomic_store(&w->last_ok_ns, bgt_now_ns());
    return 1;
  }
  if (st == BG_ECONN || st == BG_ETIMEOUT || st == BG_ESERVER) {
    w->transient++;
    w->econn += st == BG_ECONN, w->etimeout += st == BG_ETIMEOUT, w->eserver += st == BG_ESERVER;
  }
  else if (st == BG_EPROTO) w->eproto++;
  else w->unexpected++;
  if (!w->errmsg[0] || (st != BG_ECONN && st != BG_ETIMEOUT && st != BG_ESERVER))
    snprintf(w->errmsg, sizeof w->errmsg, "%d: %s", st, bg_filter_errmsg(w->f));
  usleep(1000);   /* a server down refuses at once: do not spin */
  return 0;
}

static void *hammer(void *p) {
  worker *w = p;
  unsigned seed = 4321u + (unsigned)w->id;
  size_t batch = 2 + (size_t)w->id;   /* a length of its own */
  const void *bi[BATCH_MAX];
  size_t bl[BATCH_MAX];
  int expect[BATCH_MAX];
  char names[BATCH_MAX][64], mine[64];
  uint8_t got[BATCH_MAX];
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, batch_deadline_ms));
  for (int round = 0; round < MAX_ROUNDS && !atomic_load(w->stop); round++) {
    int present = -1, st, i = rnd(&seed, NPRESENT), j = rnd(&seed, NABSENT);
    uint64_t t0 = bgt_now_ns();
    st = bg_filter_contains(w->f, present_items.p[i], present_items.len[i], &present);
    if (took(w, st, t0)) w->answers++, w->wrong += present != 1;
    t0 = bgt_now_ns();
    st = bg_filter_contains(w->f, absent_items.p[j], absent_items.len[j], &present);
    if (took(w, st, t0)) w->answers++, w->wrong += present != 0;
    /* a batch: present, absent and its own acknowledged adds */
    for (size_t k = 0; k < batch; k++) {
      int kind = rnd(&seed, w->nacked ? 3 : 2);
      if (kind == 2) {
        int len = own_name(names[k], sizeof names[k], w->id, w->acked[rnd(&seed, w->nacked)]);
        bi[k] = names[k], bl[k] = (size_t)len, expect[k] = 1;
      } else {
        int x = rnd(&seed, kind ? NPRESENT : NABSENT);
        bi[k] = kind ? present_items.p[x] : absent_items.p[x];
        bl[k] = kind ? present_items.len[x] : absent_items.len[x];
        expect[k] = kind;
      }
    }
    memset(got, 9, sizeof got);
    t0 = bgt_now_ns();
    st = bg_filter_contains_many_ex(w->f, call, bi, bl, batch, got);
    double ms = (double)(bgt_now_ns() - t0) / 1e6;
    if (ms > w->worst_deadline_ms) w->worst_deadline_ms = ms;
    if (took(w, st, t0))
      for (size_t k = 0; k < batch; k++) {
        w->answers++, w->wrong += got[k] != expect[k];
        if (got[k] != expect[k] && expect[k] && bi[k] == names[k]) w->wrong_acked++;
      }
    /* an add; acknowledged, it must be there from now on */
    int len = own_name(mine, sizeof mine, w->id, round);
    t0 = bgt_now_ns();
    st = bg_filter_add(w->f, mine, (size_t)len, NULL);
    if (!took(w, st, t0)) continue;
    w->acked[w->nacked++] = round;
    t0 = bgt_now_ns();
    st = bg_filter_contains(w->f, mine, (size_t)len, &present);
    if (took(w, st, t0)) w->answers++, w->wrong += present != 1, w->wrong_acked += present != 1;
  }
  bg_call_free(call);
  return NULL;
}

typedef struct run {
  bg_filter *f;
  atomic_int stop;
  worker w[THREADS];
  pthread_t th[THREADS];
} run;

static void run_start(run *r, bg_filter *f) {
  memset(r, 0, sizeof *r);
  r->f = f;
  for (int i = 0; i < THREADS; i++) {
    worker *w = &r->w[i];
    w->f = f, w->id = i, w->stop = &r->stop;
    w->acked = calloc(MAX_ROUNDS, sizeof *w->acked);
    pthread_create(&r->th[i], NULL, hammer, w);
  }
}

/* Waits until every thread had a call answered after since_ns; the threads still waiting, or 0. */
static int wait_all_served(run *r, uint64_t since_ns, int timeout_ms) {
  long long end = bgt_now_ms() + timeout_ms;
  int waiting;
  do {
    waiting = 0;
    for (int i = 0; i < THREADS; i++) waiting += atomic_load(&r->w[i].last_ok_ns) <= since_ns;
    if (waiting) bgt_sleep_ms(10);
  } while (waiting && bgt_now_ms() < end);
  return waiting;
}

typedef struct totals {
  long wrong, wrong_acked, eproto, transient, unexpected, answers, calls, acked, lost;
  long econn, etimeout, eserver;
  double worst_ms, worst_deadline_ms;
} totals;

/* Stops and joins the threads, then asks (one batch per thread, through f) for every acknowledged
 * add: a missing one is lost. */
static totals run_stop(run *r) {
  totals t;
  memset(&t, 0, sizeof t);
  atomic_store(&r->stop, 1);
  for (int i = 0; i < THREADS; i++) {
    worker *w = &r->w[i];
    pthread_join(r->th[i], NULL);
    t.wrong += w->wrong, t.wrong_acked += w->wrong_acked, t.eproto += w->eproto, t.transient += w->transient;
    t.unexpected += w->unexpected, t.answers += w->answers, t.calls += w->calls, t.acked += w->nacked;
    t.econn += w->econn, t.etimeout += w->etimeout, t.eserver += w->eserver;
    if (w->worst_ms > t.worst_ms) t.worst_ms = w->worst_ms;
    if (w->worst_deadline_ms > t.worst_deadline_ms) t.worst_deadline_ms = w->worst_deadline_ms;
    if (w->errmsg[0]) printf("    thread %d: %ld answered, %ld wrong (%ld of its acknowledged adds), %ld transient, "
                             "%ld other errors; last error %s\n", i, w->answers, w->wrong, w->wrong_acked,
                             w->transient, w->unexpected + w->eproto, w->errmsg);
    if (w->nacked) {
      const void **p = calloc((size_t)w->nacked, sizeof *p);
      size_t *len = calloc((size_t)w->nacked, sizeof *len);
      uint8_t *got = calloc((size_t)w->nacked, 1);
      char (*names)[64] = calloc((size_t)w->nacked, sizeof *names);
      for (int k = 0; k < w->nacked; k++) {
        len[k] = (size_t)own_name(names[k], sizeof names[k], i, w->acked[k]);
        p[k] = names[k];
      }
      int st = BG_ECONN;
      for (int tries = 0; tries < 50 && st != BG_OK; tries++) {   /* a cluster map settling, a loading server */
        st = bg_filter_contains_many(r->f, p, len, (size_t)w->nacked, got);
        if (st != BG_OK) bgt_sleep_ms(100);
      }
      CHECK_MSG(st == BG_OK, "the final check of thread %d: %d (%s)", i, st, bg_filter_errmsg(r->f));
      for (int k = 0; k < w->nacked; k++) t.lost += !got[k];
      free(p), free(len), free(got), free(names);
    }
    free(w->acked);
  }
  printf("    %ld calls, %ld answers: %ld wrong (%ld of acknowledged adds), %ld BG_EPROTO, %ld transient errors, "
         "%ld other errors; %ld adds acknowledged, %ld of them lost; slowest call %.0f ms\n"
         "    transient: %ld BG_ECONN, %ld BG_ETIMEOUT, %ld BG_ESERVER; slowest batch with a %lld ms deadline %.0f ms\n",
         t.calls, t.answers, t.wrong, t.wrong_acked, t.eproto, t.transient, t.unexpected, t.acked, t.lost, t.worst_ms,
         t.econn, t.etimeout, t.eserver, (long long)batch_deadline_ms, t.worst_deadline_ms);
  return t;
}

static bg_client *open_pipelined(const char *url, int conns, int64_t timeout_ms) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  char msg[512];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, 1));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, conns));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, timeout_ms));
  /* discovered at open: the migration cases flip a fault switch in c->cluster right after */
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1));
  int st = bgt_client_open(&c, url, o, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open %s: %s (%s)", url, bg_strerror(st), msg);
  bg_options_free(o);
  return c;
}

/* The filter on c, fresh, with the present items; the absent ones checked absent. */
static bg_filter *prepared_filter(bg_client *c, const char *name) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, name));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 200000, 1e-9, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(present_items), present_items.len, present_items.n, NULL));
  uint8_t *a = calloc(absent_items.n, 1);
  CHECK_OK(bg_filter_contains_many(f, PTRS(absent_items), absent_items.len, absent_items.n, a));
  for (size_t i = 0; i < absent_items.n; i++) CHECK_MSG(!a[i], "absent item %zu present at the start", i);
  free(a);
  return f;
}

/* ---- the server killed and restarted ------------------------------------------------------------- */

enum { RESTARTS = 3 };

/* the last restart loads slowly (50 us a key, 10,000 filler keys in the AOF): calls meet LOADING */
static const char *const AOF_SLOW_LOAD_ARGS[] = {"--appendonly", "yes", "--appendfsync", "always", "--key-load-delay", "50",
                                                 "--loading-process-events-interval-bytes", "1024", NULL};

/* Waits until the server has no AOF rewrite running or scheduled. */
static void wait_rewrite(const bgt_redis *srv) {
  int rewriting = 1;
  for (int i = 0; i < 500 && rewriting; i++) {
    char *info = bgt_redis_cmd(srv, "INFO persistence");
    rewriting = !strstr(info, "aof_rewrite_in_progress:0") || !strstr(info, "aof_rewrite_scheduled:0");
    free(info);
    if (rewriting) bgt_sleep_ms(10);
  }
  CHECK_MSG(!rewriting, "the AOF rewrite did not end within 5 s");
}

/*
 * Three restarts, each a kill -9 with calls in flight: the first while the server runs; the second
 * after it was frozen (SIGSTOP) for longer than the command timeout, so calls time out, their
 * connections are given up with calls abandoned on them, and the reconnects hang too; the third
 * then restarts it loading slowly (LOADING for a while).
 * stale: the negative control. The server restarts once, from a snapshot (SAVE) taken before the
 * threads began, without its AOF: every add acknowledged since is gone.
 */
static totals restart_case(int stale) {
  bgt_redis srv;
  bgt_redis_start(&srv, AOF_ARGS);
  bg_client *c = open_pipelined(srv.url, 2, TIMEOUT_MS);
  prefix = stale ? "stale" : "kept";
  batch_deadline_ms = DEADLINE_MS;
  bg_filter *f = prepared_filter(c, stale ? "pf-stale" : "pf-restart");
  if (stale) {
    char *ok = bgt_redis_cmd(&srv, "SAVE");
    CHECK_EQ_STR(ok, "OK");
    free(ok);
  } else {
    free(bgt_redis_cmd(&srv, "DEBUG POPULATE 10000 filler"));
    free(bgt_redis_cmd(&srv, "BGREWRITEAOF"));   /* the filler in the AOF's base: loaded at every restart */
    wait_rewrite(&srv);
  }
  run r;
  run_start(&r, f);
  int restarts = 0;
  for (int k = 0; k < (stale ? 1 : RESTARTS); k++) {
    bgt_sleep_ms(300);
    if (k == 1) {
      kill(srv.pid, SIGSTOP);
      bgt_sleep_ms(3 * TIMEOUT_MS / 2);
    }
    bgt_redis_kill(&srv);
    bgt_sleep_ms(150);   /* down: calls meet a refused connection */
    uint64_t up_ns = bgt_now_ns();
    CHECK_EQ_INT(bgt_redis_restart(&srv, stale ? NULL : k == 2 ? AOF_SLOW_LOAD_ARGS : AOF_ARGS), 0);
    restarts++;
    int waiting = wait_all_served(&r, up_ns, 15000);
    printf("    restart %d: every thread served again after %.0f ms (%d still waiting)\n", k + 1,
           (double)(bgt_now_ns() - up_ns) / 1e6, waiting);
    CHECK_MSG(waiting == 0, "%d threads not served within 15 s of restart %d", waiting, k + 1);
  }
  bgt_sleep_ms(300);
  totals t = run_stop(&r);
  CHECK_EQ_INT(restarts, stale ? 1 : RESTARTS);
  bg_filter_close(f);
  bg_client_close(c);
  bgt_redis_stop(&srv);
  return t;
}

static void test_server_restart(void) {
  totals t = restart_case(0);
  CHECK_EQ_INT(t.wrong, 0);
  CHECK_EQ_INT(t.eproto, 0);
  CHECK_EQ_INT(t.unexpected, 0);
  CHECK_EQ_INT(t.lost, 0);
  CHECK(t.econn > 0);      /* the kills were seen */
  CHECK(t.etimeout > 0);   /* the freeze was */
  CHECK(t.eserver > 0);    /* the slow load (LOADING) was */
  CHECK(t.acked > THREADS);
  CHECK_MSG(t.worst_ms < HANG_MS, "a call took %.0f ms", t.worst_ms);
  CHECK_MSG(t.worst_deadline_ms < DEADLINE_MS + DEADLINE_MARGIN_MS, "a batch with a %d ms deadline took %.0f ms",
            DEADLINE_MS, t.worst_deadline_ms);
}

static void test_negative_control_restart_loses_acknowledged_adds(void) {
  totals t = restart_case(1);
  CHECK_MSG(t.lost > 0 && t.wrong_acked > 0,
            "the harness saw no lost acknowledged add after a restart from a stale snapshot: it proves nothing");
}

/* ---- the filter's slot migrated (Redis Cluster) ----------------------------------------------------- */

static bgt_cluster cl;
static int cluster_up;

static void name_on(int master, const char *pfx, char *out, size_t cap) {
  for (int i = 0; i < 100000; i++) {
    snprintf(out, cap, "%s-%d", pfx, i);
    if (bgt_cluster_owner(&cl, bgt_cluster_slot(out)) == master) return;
  }
  bgt_fail(__FILE__, __LINE__, "no name found for master %d", master);
}

static int first_master(void) {
  for (int i = 0; i < cl.n; i++)
    if (cl.node[i].pid && cl.node[i].is_master) return i;
  return -1;
}

enum { LEGS = 4 };

/* fault: the negative control (the cluster client's fault_ask_bits_only). */
static totals migration_case(int fault) {
  if (!cluster_up) {
    bgt_cluster_start(&cl);
    cluster_up = 1;
  }
  /* TRYAGAIN is waited out for the command timeout: longer than the half-migrated window below
   * (250 ms, more on a loaded machine; 500 ms measured too short here) */
  bg_client *c = open_pipelined(cl.url, 2, CLUSTER_TIMEOUT_MS);
  CHECK_MSG(c->cluster != NULL, "the client did not open in cluster mode");
  char name[64], config[80];
  int from = first_master(), to = bgt_cluster_other_master(&cl, from);
  prefix = fault ? "mctrl" : "mig";
  batch_deadline_ms = CLUSTER_TIMEOUT_MS;
  name_on(from, fault ? "pf-mctrl" : "pf-mig", name, sizeof name);
  /* Redisson's layout: the bitmap is the name itself, the config {name}:config: one slot */
  snprintf(config, sizeof config, "{%s}:config", name);
  unsigned slot = bgt_cluster_slot(name);
  CHECK_EQ_INT(bgt_cluster_slot(config), slot);
  bg_filter *f = prepared_filter(c, name);
  if (fault) c->cluster->fault_ask_bits_only = 1;
  run r;
  run_start(&r, f);
  int ends[2] = {to, from};
  for (int leg = 0; leg < LEGS; leg++) {
    int dest = ends[leg % 2];
    bgt_sleep_ms(100);
    CHECK_EQ_INT(bgt_cluster_migrate_begin(&cl, slot, dest), 0);
    bgt_sleep_ms(150);   /* IMPORTING / MIGRATING, no key moved */
    CHECK_EQ_INT(bgt_cluster_migrate_key(&cl, slot, dest, config, strlen(config)), 0);
    bgt_sleep_ms(250);   /* the config there, the bitmap here: ASK, TRYAGAIN */
    CHECK_EQ_INT(bgt_cluster_migrate_all_keys(&cl, slot, dest), 0);
    bgt_sleep_ms(100);   /* every key there, the slot still the source's: ASK */
    CHECK_EQ_INT(bgt_cluster_migrate_end(&cl, slot, dest), 0);
    printf("    leg %d: slot %u now on node %d\n", leg + 1, slot, bgt_cluster_owner(&cl, slot));
  }
  bgt_sleep_ms(200);
  uint64_t settled = bgt_now_ns();
  int waiting = wait_all_served(&r, settled, 15000);
  totals t = run_stop(&r);
  c->cluster->fault_ask_bits_only = 0;   /* written only with no thread running (a plain int) */
  int64_t ask = -1, moved = -1, busy = -1;
  CHECK_OK(bg_filter_stat(f, BG_STAT_CLUSTER_ASK, &ask));
  CHECK_OK(bg_filter_stat(f, BG_STAT_CLUSTER_MOVED, &moved));
  CHECK_OK(bg_filter_stat(f, BG_STAT_CLUSTER_BUSY_RETRIES, &busy));
  printf("    redirects: %lld ASK, %lld MOVED, %lld busy retries\n", (long long)ask, (long long)moved, (long long)busy);
  if (!fault) {
    CHECK_MSG(waiting == 0, "%d threads not served after the migrations", waiting);
    CHECK(ask > 0);
    CHECK(moved > 0);
  }
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_filter_close(f);
  bg_client_close(c);
  return t;
}

static void test_slot_migration(void) {
  totals t = migration_case(0);
  CHECK_EQ_INT(t.wrong, 0);
  CHECK_EQ_INT(t.eproto, 0);
  CHECK_EQ_INT(t.unexpected, 0);
  CHECK_EQ_INT(t.transient, 0);   /* a migration is no outage: every call is redirected, none fails */
  CHECK_EQ_INT(t.lost, 0);
  CHECK(t.acked > THREADS);
  CHECK_MSG(t.worst_ms < HANG_MS, "a call took %.0f ms", t.worst_ms);
  CHECK_MSG(t.worst_deadline_ms < CLUSTER_TIMEOUT_MS + DEADLINE_MARGIN_MS, "a batch with a %d ms deadline took %.0f ms",
            CLUSTER_TIMEOUT_MS, t.worst_deadline_ms);
}

static void test_negative_control_migration_wrong_ask_handling(void) {
  totals t = migration_case(1);
  CHECK_MSG(t.wrong > 0, "the harness saw no wrong answer with bits-only reads after ASK: it proves nothing");
}

static void setup(void) {
  bgt_ignore_sigpipe();
  present_items = make_items("present", NPRESENT);
  absent_items = make_items("absent", NABSENT);
}

static void teardown(void) {
  items_free(&present_items);
  items_free(&absent_items);
  if (cluster_up) bgt_cluster_stop(&cl);
  cluster_up = 0;
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_server_restart), BGT_CASE(test_negative_control_restart_loses_acknowledged_adds),
        BGT_CASE(test_slot_migration), BGT_CASE(test_negative_control_migration_wrong_ask_handling),
        BGT_CASE(teardown))
