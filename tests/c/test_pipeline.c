/*
 * Multiplexed connections (BG_OPT_PIPELINE) against a real redis-server: many threads share one
 * client, each asking about items whose answer it knows (present: added before; absent: checked
 * absent at the start, at a false positive rate of 1e-9), singly and in batches of a size of its
 * own, and adding items it then must find - while another client rotates the filter (swap, with
 * other parameters: config changes; and in place, under the write lock) and connections are
 * killed. Any answer another caller's reply produced shows as a wrong answer or a batch of the
 * wrong length (BG_EPROTO). A caller whose deadline passes gets BG_ETIMEOUT at once and its late
 * reply goes to nobody; the negative control (the set's fault_no_discard) shows the same harness
 * then catches the next caller reading it.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "filters.h"
#include "harness.h"
#include "lateness.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;

enum { THREADS = 8, ROUNDS = 1500, NPRESENT = 400, NABSENT = 400, ADDED_MAX = THREADS * ROUNDS };

static items present_items, absent_items;
/* items the threads add, for the rotations' source of truth: published before the add is sent,
 * so one a rotation does not see yet is added after its begin (and recorded by it) */
static char *_Atomic added[ADDED_MAX];
static size_t added_len[ADDED_MAX];   /* unused by the rotations (strlen): written before publishing */
static atomic_int nadded;

typedef struct worker {
  bg_filter *f;
  int id;
  atomic_int *stop;
  int wrong, wrong_added, eproto, errors, answers;
  char errmsg[256];
} worker;

static int rnd(unsigned *seed, int n) { return (int)(rand_r(seed) % (unsigned)n); }

static void note_error(worker *w, int st) {
  if (st == BG_EPROTO) w->eproto++;
  else w->errors++;
  if (!w->errmsg[0]) snprintf(w->errmsg, sizeof w->errmsg, "%d: %s", st, bg_filter_errmsg(w->f));
}

static void *hammer(void *p) {
  worker *w = p;
  unsigned seed = 1234u + (unsigned)w->id;
  size_t batch = 2 + (size_t)w->id;   /* a length of its own: a crossed batch reply shows */
  const void *bi[16];
  size_t bl[16];
  int expect[16];
  uint8_t got[16];
  char mine[64];
  for (int round = 0; round < ROUNDS && !atomic_load(w->stop); round++) {
    int present = -1, st;
    int i = rnd(&seed, NPRESENT), j = rnd(&seed, NABSENT);
    st = bg_filter_contains(w->f, present_items.p[i], present_items.len[i], &present);
    if (st != BG_OK) note_error(w, st);
    else w->answers++, w->wrong += present != 1;
    st = bg_filter_contains(w->f, absent_items.p[j], absent_items.len[j], &present);
    if (st != BG_OK) note_error(w, st);
    else w->answers++, w->wrong += present != 0;
    for (size_t k = 0; k < batch; k++) {
      int in = rnd(&seed, 2);
      int x = rnd(&seed, in ? NPRESENT : NABSENT);
      bi[k] = in ? present_items.p[x] : absent_items.p[x];
      bl[k] = in ? present_items.len[x] : absent_items.len[x];
      expect[k] = in;
    }
    memset(got, 9, sizeof got);
    st = bg_filter_contains_many(w->f, bi, bl, batch, got);
    if (st != BG_OK) note_error(w, st);
    else
      for (size_t k = 0; k < batch; k++) w->answers++, w->wrong += got[k] != expect[k];
    /* an add, then it must be there */
    int len = snprintf(mine, sizeof mine, "added-%d-%d", w->id, round);
    int slot = atomic_fetch_add(&nadded, 1);
    added_len[slot] = (size_t)len;
    atomic_store(&added[slot], strdup(mine));
    st = bg_filter_add(w->f, mine, (size_t)len, NULL);
    if (st != BG_OK) {
      note_error(w, st);
      continue;
    }
    st = bg_filter_contains(w->f, mine, (size_t)len, &present);
    if (st != BG_OK) note_error(w, st);
    else w->answers++, w->wrong += present != 1, w->wrong_added += present != 1;
  }
  return NULL;
}

/* Rebuilds with the present items and every acknowledged add (read after begin). */
static int rotate(bg_filter *f, int64_t n, double p, int strategy) {
  bg_rotation *r = NULL;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  int st = bg_rotation_begin(&r, f, n, p, strategy, o);
  bg_options_free(o);
  if (st != BG_OK) return st;
  st = bg_rotation_add_many(r, PTRS(present_items), present_items.len, present_items.n);
  int upto = atomic_load(&nadded);
  for (int i = 0; st == BG_OK && i < upto; i++) {
    char *item = atomic_load(&added[i]);
    if (item) st = bg_rotation_add(r, item, strlen(item));
  }
  if (st == BG_OK) st = bg_rotation_commit(r);
  if (st != BG_OK) bg_rotation_abort(r);
  bg_rotation_free(r);
  return st;
}

static int spin_us;   /* BG_OPT_PIPELINE_SPIN_US of the clients opened next */

static bg_client *open_client_tr(int pipeline, int conns, int64_t timeout_ms, int tracking) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_SPIN_US, spin_us));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, pipeline));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, conns));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 2000));
  if (timeout_ms) CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, timeout_ms));
  CHECK_OK(bg_options_set_int(o, BG_OPT_TRACKING, tracking));
  CHECK_OK(bg_client_open(&c, srv.url, o));
  bg_options_free(o);
  return c;
}

static bg_client *open_client(int pipeline, int conns, int64_t timeout_ms) {
  return open_client_tr(pipeline, conns, timeout_ms, 1);
}

static void test_options(void) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_PIPELINE, 2), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 0), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 65), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_CONNS, 64));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_PIPELINE_SPIN_US, -1), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_PIPELINE_SPIN_US, 1001), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE_SPIN_US, 1000));
  CHECK_OK(bg_options_set_int(o, BG_OPT_PIPELINE, 0));
  bg_options_free(o);
}

/* rapid: kills back to back (no rotations), so reconnects race with writers of batches the
 * killed connection's calls left behind */
static void hammer_run(int pipeline, int conns, int rapid) {
  bg_client *c = open_client(pipeline, conns, 0), *other = open_client(1, 2, 0);
  bg_filter *f = NULL, *g = NULL;
  CHECK_OK(bg_filter_open(&f, c, "ham"));
  CHECK_OK(bg_filter_open(&g, other, "ham"));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 20000, 1e-9, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(present_items), present_items.len, present_items.n, NULL));
  uint8_t *a = calloc(absent_items.n, 1);
  CHECK_OK(bg_filter_contains_many(f, PTRS(absent_items), absent_items.len, absent_items.n, a));
  for (size_t i = 0; i < absent_items.n; i++) CHECK_MSG(!a[i], "absent item %zu present at the start", i);
  free(a);
  atomic_store(&nadded, 0);
  atomic_int stop = 0;
  worker w[THREADS];
  pthread_t th[THREADS];
  memset(w, 0, sizeof w);
  for (int i = 0; i < THREADS; i++) {
    w[i].f = f, w[i].id = i, w[i].stop = &stop;
    pthread_create(&th[i], NULL, hammer, &w[i]);
  }
  /* the chaos, from another client and the server's side, a bounded number of steps */
  int rotations = 0, kills = 0;
  for (int step = 0; step < (rapid ? 60 : 9); step++) {
    usleep(rapid ? 2000 : 30 * 1000);
    int st;
    switch (rapid ? 2 : step % 3) {
      case 0: st = rotate(g, step % 2 ? 30000 : 20000, step % 2 ? 1e-10 : 1e-9, BG_ROTATE_SWAP); break;
      case 1: st = rotate(g, 20000, 1e-9, BG_ROTATE_LOCKED); break;
      default:
        free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE %s", "normal"));
        kills++;
        st = BG_OK;
    }
    if (!rapid && step % 3 != 2) {
      CHECK_MSG(st == BG_OK || st == BG_ECONN, "rotation %d: %d (%s)", step, st, bg_filter_errmsg(g));
      rotations += st == BG_OK;
    }
  }
  atomic_store(&stop, 1);
  int wrong = 0, eproto = 0, errors = 0, answers = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    wrong += w[i].wrong, eproto += w[i].eproto, errors += w[i].errors, answers += w[i].answers;
    if (w[i].errmsg[0]) printf("    thread %d's first error: %s\n", i, w[i].errmsg);
    if (w[i].wrong) printf("    thread %d: %d wrong, %d of them its own adds\n", i, w[i].wrong, w[i].wrong_added);
  }
  printf("    pipeline %d x %d: %d answers, %d wrong, %d BG_EPROTO, %d other errors; %d rotations, %d kills\n",
         pipeline, conns, answers, wrong, eproto, errors, rotations, kills);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(eproto, 0);
  CHECK(answers > THREADS * 10);
  /* a kill may fail a call whose every retry met a killed connection; never more than a few */
  CHECK_MSG(errors <= kills * THREADS, "%d errors", errors);
  for (int i = 0; i < atomic_load(&nadded); i++) free(atomic_load(&added[i])), atomic_store(&added[i], NULL);
  bg_filter_close(g);
  bg_filter_close(f);
  bg_client_close(other);
  bg_client_close(c);
}

static void test_hammer_pipelined(void) { hammer_run(1, 2, 0); }
static void test_hammer_one_connection(void) { hammer_run(1, 1, 0); }
static void test_hammer_pooled(void) { hammer_run(0, 1, 0); }
/* waiting calls spin before they sleep: their replies are taken by the spinner or the sleeper */
static void test_hammer_spinning(void) {
  spin_us = 200;
  hammer_run(1, 2, 0);
  hammer_run(1, 2, 1);
  spin_us = 0;
}
/* a crossed answer seen first in the Python test: a writer holding a torn-down connection's
 * batch wrote it onto the new connection (the generation moved only after the new one was in) */
static void test_hammer_rapid_kills(void) { hammer_run(1, 2, 1); }

/*
 * A caller whose deadline passes while the server is paused gets BG_ETIMEOUT at once; the next
 * caller, on the same single connection, asks about an absent item: with its own reply it says
 * absent, with the first caller's (a present item's) it would say present. no_discard: the
 * negative control, run without tracking (with it, a push may happen to make the next caller
 * drop the bits it was given and check again, which hides the crossing from this harness).
 */
static int late_reply_case(int no_discard, int tracking) {
  bg_client *c = open_client_tr(1, 1, 2000, tracking);
  bg_filter *f = NULL;
  bg_call *call = NULL;
  int present = -1, wrong = 0;
  CHECK_OK(bg_filter_open(&f, c, "late"));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 1000, 1e-9, NULL));
  CHECK_OK(bg_filter_add(f, "here", 4, NULL));
  /* twice: the second reads the bits alone on the verdict the first left */
  CHECK_OK(bg_filter_contains(f, "here", 4, &present));
  CHECK_OK(bg_filter_contains(f, "nothere", 7, &present));
  CHECK_EQ_INT(present, 0);
  atomic_store(&c->mux.fault_no_discard, no_discard);
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_call_set_timeout_ms(call, 50));
  free(bgt_redis_cmd(&srv, "CLIENT PAUSE %s", "400"));
  uint64_t t0 = bgt_now_ns();
  const void *item = "here";
  size_t len = 4;
  uint8_t got = 9;
  int st = bg_filter_contains_many_ex(f, call, &item, &len, 1, &got);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  CHECK_STATUS(st, BG_ETIMEOUT);
  CHECK_MSG(ms <= 50 + 50 + bgt_lateness_ms(ms), "BG_ETIMEOUT after %.0f ms with a 50 ms deadline (the machine woke a "
            "sleeper up to %.0f ms late meanwhile)", ms, bgt_lateness_ms(ms));
  /* the next caller: sent behind the first, answered after the pause */
  st = bg_filter_contains(f, "nothere", 7, &present);
  printf("    next caller: status %d, present %d (%s)\n", st, present, st ? bg_filter_errmsg(f) : "");
  if (st == BG_OK) wrong = present != 0;
  else wrong = 1;   /* a stream out of step: the crossed reply broke the connection */
  if (!no_discard) {
    CHECK_OK(st);
    CHECK_EQ_INT(present, 0);
    CHECK_OK(bg_filter_contains(f, "here", 4, &present));
    CHECK_EQ_INT(present, 1);
  }
  atomic_store(&c->mux.fault_no_discard, 0);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
  return wrong;
}

static void test_deadline_drops_late_reply(void) {
  CHECK_EQ_INT(late_reply_case(0, 1), 0);
  CHECK_EQ_INT(late_reply_case(0, 0), 0);
}

static void test_negative_control_no_discard(void) {
  int wrong = late_reply_case(1, 0);
  CHECK_MSG(wrong, "the harness did not see the late reply given to the next caller");
}

/* A killed connection fails what is in flight on it; the calls retry and nothing hangs. */
static void test_kill_mid_flight(void) {
  bg_client *c = open_client(1, 1, 1000);
  bg_filter *f = NULL;
  int present = -1;
  CHECK_OK(bg_filter_open(&f, c, "kill"));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, 1000, 0.001, NULL));
  CHECK_OK(bg_filter_add(f, "k", 1, NULL));
  for (int i = 0; i < 5; i++) {
    free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE %s", "normal"));
    CHECK_OK(bg_filter_contains(f, "k", 1, &present));
    CHECK_EQ_INT(present, 1);
  }
  bg_filter_close(f);
  bg_client_close(c);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bgt_lateness_start();
  present_items = make_items("present", NPRESENT);
  absent_items = make_items("absent", NABSENT);
}

static void teardown(void) {
  items_free(&present_items);
  items_free(&absent_items);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_options), BGT_CASE(test_hammer_pipelined), BGT_CASE(test_hammer_one_connection),
        BGT_CASE(test_hammer_pooled), BGT_CASE(test_hammer_spinning), BGT_CASE(test_hammer_rapid_kills), BGT_CASE(test_deadline_drops_late_reply),
        BGT_CASE(test_negative_control_no_discard), BGT_CASE(test_kill_mid_flight), BGT_CASE(teardown))
