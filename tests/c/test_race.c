/*
 * The rotate-vs-query race: threads query (single items and batches) and add continuously while a
 * rotator runs hundreds of rotations of the same filter, alternating its parameters.
 *
 *  - SWAP must give 0 reader errors, 0 false negatives for items present in every generation,
 *    and 0 lost adds (every item added during the run is present at the end).
 *  - NAIVE, the same harness, must be caught: errors or false negatives observed. If it is not,
 *    the harness proves nothing and the test fails.
 *
 * The adders model a service writing to its database first and then to the filter; the rotator
 * reads that "database" after bg_rotation_begin, as rotation.h requires.
 */
#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "redis_fixture.h"

#define BASE_ITEMS 3000
/* adds stop here, so every rotation re-reads a bounded database (sanitizer builds run slower) */
#define MAX_DB (BASE_ITEMS + 2000)
#define QUERIERS 2

static bgt_redis srv;

typedef struct race {
  const char *name;
  int strategy;
  bg_filter *f;              /* shared by queriers and adders */
  atomic_int stop;
  /* the "database": base items, then items the adders added */
  pthread_mutex_t db_mu;
  char *db[MAX_DB];
  size_t db_len[MAX_DB];
  size_t db_n;
  /* a rotation is under way (begin returned, commit not yet), and the count of its starts and ends */
  atomic_int rotating;
  atomic_long rotation_edges;
  /* results; *_in_window: those that overlapped a rotation (the window the race is about) */
  atomic_long queries, errors, false_negatives, adds, add_errors, queries_in_window, adds_in_window;
  char first_error[256];
  char first_add_error[256];
} race;

/* The state of the rotations when an operation starts; whether it overlapped one when it ended. */
static long window_mark(race *r) { return atomic_load(&r->rotating) ? -1 : atomic_load(&r->rotation_edges); }
static int in_window(race *r, long mark) {
  return mark < 0 || atomic_load(&r->rotating) || atomic_load(&r->rotation_edges) != mark;
}

static void *querier(void *arg) {
  race *r = arg;
  unsigned seed = (unsigned)(uintptr_t)&seed;
  const void *batch[100];
  size_t lens[100];
  uint8_t present[100];
  while (!atomic_load(&r->stop)) {
    /* base items are in every generation: any "absent" is a false negative */
    size_t i = (size_t)rand_r(&seed) % BASE_ITEMS;
    long mark = window_mark(r);
    int p = 0, st = bg_filter_contains(r->f, r->db[i], r->db_len[i], &p);
    atomic_fetch_add(&r->queries, 1);
    if (in_window(r, mark)) atomic_fetch_add(&r->queries_in_window, 1);
    if (st != BG_OK) {
      if (atomic_fetch_add(&r->errors, 1) == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s: %s", bg_strerror(st), bg_filter_errmsg(r->f));
    } else if (!p) {
      atomic_fetch_add(&r->false_negatives, 1);
    }
    for (int j = 0; j < 100; j++) {
      size_t k = (size_t)rand_r(&seed) % BASE_ITEMS;
      batch[j] = r->db[k];
      lens[j] = r->db_len[k];
    }
    st = bg_filter_contains_many(r->f, batch, lens, 100, present);
    atomic_fetch_add(&r->queries, 1);
    if (st != BG_OK) {
      if (atomic_fetch_add(&r->errors, 1) == 0)
        snprintf(r->first_error, sizeof r->first_error, "%s: %s", bg_strerror(st), bg_filter_errmsg(r->f));
    } else {
      for (int j = 0; j < 100; j++)
        if (!present[j]) atomic_fetch_add(&r->false_negatives, 1);
    }
  }
  return NULL;
}

static void *adder(void *arg) {
  race *r = arg;
  for (size_t seq = 0; !atomic_load(&r->stop); seq++) {
    char buf[64];
    int len = snprintf(buf, sizeof buf, "added-%zu", seq);
    pthread_mutex_lock(&r->db_mu);
    if (r->db_n == MAX_DB) {
      pthread_mutex_unlock(&r->db_mu);
      usleep(1000);
      continue;
    }
    r->db[r->db_n] = strdup(buf);
    r->db_len[r->db_n] = (size_t)len;
    r->db_n++;
    pthread_mutex_unlock(&r->db_mu);
    /* the database write happened first; now the filter */
    long mark = window_mark(r);
    int st = bg_filter_add(r->f, buf, (size_t)len, NULL);
    if (in_window(r, mark)) atomic_fetch_add(&r->adds_in_window, 1);
    if (st != BG_OK && atomic_fetch_add(&r->add_errors, 1) == 0)
      snprintf(r->first_add_error, sizeof r->first_add_error, "%s: %s", bg_strerror(st), bg_filter_errmsg(r->f));
    atomic_fetch_add(&r->adds, 1);
    usleep(1000);
  }
  return NULL;
}

static int rotate_once(race *r, bg_filter *rf, int i) {
  bg_rotation *rot = NULL;
  /* alternate the parameters: every other swap changes size and k under the readers */
  int64_t n = i % 2 ? 6000 : 5000;
  int st = bg_rotation_begin(&rot, rf, n, 0.01, r->strategy, NULL);
  if (st != BG_OK) {
    fprintf(stderr, "rotation %d: begin: %s\n", i, bg_filter_errmsg(rf));
    return st;
  }
  atomic_store(&r->rotating, 1);
  atomic_fetch_add(&r->rotation_edges, 1);
  pthread_mutex_lock(&r->db_mu);
  size_t n_items = r->db_n;
  pthread_mutex_unlock(&r->db_mu);
  /* entries below db_n never change once written, so they are read without the lock */
  for (size_t done = 0; done < n_items && st == BG_OK; done += 1000) {
    size_t m = n_items - done < 1000 ? n_items - done : 1000;
    st = bg_rotation_add_many(rot, (const void *const *)r->db + done, r->db_len + done, m);
  }
  usleep(2000); /* reading the database takes a while: queries and adds keep landing meanwhile */
  if (st == BG_OK) st = bg_rotation_commit(rot);
  atomic_store(&r->rotating, 0);
  atomic_fetch_add(&r->rotation_edges, 1);
  if (st != BG_OK) fprintf(stderr, "rotation %d: %s\n", i, bg_rotation_errmsg(rot));
  bg_rotation_free(rot);
  return st;
}

/* Runs the race; returns the number of rotations done. */
static int run_race(race *r, int rotations) {
  bg_client *readers = NULL, *rotator = NULL;
  bg_filter *rf = NULL;
  pthread_t q[QUERIERS], a;
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, QUERIERS + 2));
  /* no policy here: a LOCKED rebuild's readers must get their answers by waiting, never an error */
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 30000));
  /* a loaded machine under TSan can stall a reply past the default 1 s: timeouts are not what
   * this race is about (the policy fault tests are) */
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 20000));
  /* the rotator commits a rotation with other parameters every few ms: on a loaded machine an
   * add stalled for that long meets a new config on each of the default 5 retries (a CI rehearsal
   * saw it once, under a load of 10, with hiredis 0.14). Each retry uses the config the refusal
   * returned, so the budget bounds a livelock, not a slow path: the option's maximum here */
  CHECK_OK(bg_options_set_int(o, BG_OPT_CONFIG_RETRIES, 100));
  CHECK_OK(bg_client_open(&readers, srv.url, o));
  CHECK_OK(bg_client_open(&rotator, srv.url, o));
  bg_options_free(o);
  CHECK_OK(bg_filter_open(&r->f, readers, r->name));
  CHECK_OK(bg_filter_open(&rf, rotator, r->name));
  pthread_mutex_init(&r->db_mu, NULL);
  for (size_t i = 0; i < BASE_ITEMS; i++) {
    char buf[32];
    r->db_len[i] = (size_t)snprintf(buf, sizeof buf, "base-%zu", i);
    r->db[i] = strdup(buf);
  }
  r->db_n = BASE_ITEMS;
  CHECK_OK(bg_filter_init(rf, 5000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(rf, (const void *const *)r->db, r->db_len, BASE_ITEMS, NULL));

  for (int i = 0; i < QUERIERS; i++) pthread_create(&q[i], NULL, querier, r);
  pthread_create(&a, NULL, adder, r);
  int done = 0;
  for (int i = 0; i < rotations; i++) {
    if (rotate_once(r, rf, i) != BG_OK) break;
    done++;
  }
  usleep(20000);
  atomic_store(&r->stop, 1);
  for (int i = 0; i < QUERIERS; i++) pthread_join(q[i], NULL);
  pthread_join(a, NULL);

  /* every item the service wrote - base and added - must be in the final filter */
  uint8_t *present = calloc(r->db_n, 1);
  long lost = 0;
  if (bg_filter_contains_many(r->f, (const void *const *)r->db, r->db_len, r->db_n, present) == BG_OK)
    for (size_t i = 0; i < r->db_n; i++) lost += !present[i];
  else
    lost = -1;
  if (r->first_add_error[0]) printf("first add error: %s\n", r->first_add_error);
  /* with tracking (hiredis >= 1.0) most queries read the bits alone: the race covers that path */
  int64_t tracked = 0, stale = 0;
  CHECK_OK(bg_filter_stat(r->f, BG_STAT_TRACKED_READS, &tracked));
  CHECK_OK(bg_filter_stat(r->f, BG_STAT_TRACKED_STALE, &stale));
  printf("      tracked reads=%lld, dropped after an invalidation=%lld\n", (long long)tracked, (long long)stale);
  printf("%-5s rotations=%d queries=%ld (%ld overlapping a rotation) errors=%ld false_negatives=%ld adds=%ld (%ld "
         "overlapping) add_errors=%ld lost_adds=%ld%s%s\n",
         r->strategy == BG_ROTATE_SWAP ? "swap" : r->strategy == BG_ROTATE_LOCKED ? "locked" : "naive", done,
         atomic_load(&r->queries), atomic_load(&r->queries_in_window), atomic_load(&r->errors),
         atomic_load(&r->false_negatives), atomic_load(&r->adds), atomic_load(&r->adds_in_window),
         atomic_load(&r->add_errors), lost,
         r->first_error[0] ? " first error: " : "", r->first_error);
  atomic_store(&r->add_errors, atomic_load(&r->add_errors) + lost);
  free(present);
  for (size_t i = 0; i < r->db_n; i++) free(r->db[i]);
  pthread_mutex_destroy(&r->db_mu);
  bg_filter_close(rf);
  bg_filter_close(r->f);
  bg_client_close(rotator);
  bg_client_close(readers);
  return done;
}

static void test_swap_race_has_no_errors_and_loses_nothing(void) {
  static race r = {.name = "race-swap", .strategy = BG_ROTATE_SWAP};
  int done = run_race(&r, 200);
  CHECK_EQ_INT(done, 200);
  /* the window was hit: queries and adds ran while rotations were under way */
  CHECK_MSG(atomic_load(&r.queries_in_window) > 0, "no query overlapped a rotation: the race was not run");
  CHECK_MSG(atomic_load(&r.adds_in_window) > 0, "no add overlapped a rotation: the race was not run");
  CHECK_EQ_INT(atomic_load(&r.errors), 0);
  CHECK_EQ_INT(atomic_load(&r.false_negatives), 0);
  CHECK_EQ_INT(atomic_load(&r.add_errors), 0); /* includes adds missing at the end */
}

static void test_locked_race_has_no_errors_and_loses_nothing(void) {
  static race r = {.name = "race-locked", .strategy = BG_ROTATE_LOCKED};
  int done = run_race(&r, 200);
  CHECK_EQ_INT(done, 200);
  /* the window was hit: queries and adds ran while rotations were under way */
  CHECK_MSG(atomic_load(&r.queries_in_window) > 0, "no query overlapped a rotation: the race was not run");
  CHECK_MSG(atomic_load(&r.adds_in_window) > 0, "no add overlapped a rotation: the race was not run");
  CHECK_EQ_INT(atomic_load(&r.errors), 0);
  CHECK_EQ_INT(atomic_load(&r.false_negatives), 0);
  CHECK_EQ_INT(atomic_load(&r.add_errors), 0);
}

/* Negative control: the same harness must catch the naive rebuild, or it proves nothing. */
static void test_naive_race_is_caught(void) {
  static race r = {.name = "race-naive", .strategy = BG_ROTATE_NAIVE};
  int done = run_race(&r, 60);
  CHECK(done > 0);
  long failures = atomic_load(&r.errors) + atomic_load(&r.false_negatives);
  CHECK_MSG(failures > 0, "the naive rebuild went unnoticed over %d rotations: the race harness is broken", done);
}

static void setup(void) { bgt_redis_start(&srv, NULL); }
static void teardown(void) { bgt_redis_stop(&srv); }

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_swap_race_has_no_errors_and_loses_nothing),
        BGT_CASE(test_locked_race_has_no_errors_and_loses_nothing), BGT_CASE(test_naive_race_is_caught),
        BGT_CASE(teardown))
