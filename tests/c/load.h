/*
 * Load for topology tests (header-only, like filters.h): reader threads query a filter's known
 * items (a false negative is any of them absent; with policy, connection, timeout and server
 * failures degrade to assume-present) and an adder thread adds "<name>-ack-N" items, remembering
 * which were acknowledged, while a test changes the topology under them (cluster migrations and
 * failovers, Sentinel failovers). load_stop then checks every acknowledged add is present. Also a
 * lock waiter thread (bgt_waiter), for wake-up tests.
 */
#ifndef BG_TEST_LOAD_H
#define BG_TEST_LOAD_H

#include <bloomguard.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "items.h"

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}


#define READERS 3
#define MAX_ADDS 200000

typedef struct load {
  bg_client *c;
  const char *name;
  const items *present;     /* added before the load starts: every query must find them */
  int policy;               /* readers degrade to assume-present on connection/timeout/server */
  atomic_int stop;
  atomic_long queries, errors, false_negatives, degraded, redis_answers;
  atomic_long adds, add_errors;
  char first_error[512];
  pthread_mutex_t mu;
  /* the adder's items ("<name>-ack-N"): ok[N] once acknowledged; checked after the load from
   * check_from on (a rotation drops what was added before it began: the caller's items are the truth) */
  unsigned char *ok;
  long tried, acked, check_from;
  pthread_t readers[READERS], adder;
} load;

static inline void note_error(load *l, const char *who, int st, const char *msg) {
  pthread_mutex_lock(&l->mu);
  if (!l->first_error[0]) snprintf(l->first_error, sizeof l->first_error, "%s: %s: %s", who, bg_strerror(st), msg);
  pthread_mutex_unlock(&l->mu);
}

static inline bg_policy *assume_present_policy(void) {
  bg_policy *p = NULL;
  int chain[] = {BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CONNECTION, chain, 1));
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, chain, 1));
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_SERVER, chain, 1));
  return p;
}

static inline void *bgt_load_reader(void *arg) {
  load *l = arg;
  bg_filter *f = NULL;
  bg_call *call = NULL;
  uint8_t present[64];
  unsigned seed = (unsigned)(uintptr_t)&f;
  if (bg_filter_open(&f, l->c, l->name) != BG_OK || bg_call_new(&call) != BG_OK) {
    atomic_fetch_add(&l->errors, 1);
    return NULL;
  }
  bg_call_set_timeout_ms(call, 3000);
  if (l->policy) {
    bg_policy *p = assume_present_policy();
    bg_filter_set_policy(f, p);
    bg_policy_free(p);
  }
  while (!atomic_load(&l->stop)) {
    size_t n = 1 + rand_r(&seed) % 64, from = rand_r(&seed) % (l->present->n - n);
    int st = bg_filter_contains_many_ex(f, call, (const void *const *)l->present->p + from, l->present->len + from,
                                        n, present);
    atomic_fetch_add(&l->queries, 1);
    if (st != BG_OK) {
      atomic_fetch_add(&l->errors, 1);
      note_error(l, "query", st, bg_call_errmsg(call));
      continue;
    }
    if (bg_call_source(call) != BG_SOURCE_REDIS) {
      atomic_fetch_add(&l->degraded, 1);
      sleep_ms(1);   /* the policy answers at once: don't spin */
      continue;
    }
    atomic_fetch_add(&l->redis_answers, 1);
    for (size_t i = 0; i < n; i++)
      if (!present[i]) atomic_fetch_add(&l->false_negatives, 1);
  }
  bg_call_free(call);
  bg_filter_close(f);
  return NULL;
}

static inline void *bgt_load_adder(void *arg) {
  load *l = arg;
  bg_filter *f = NULL;
  bg_call *call = NULL;
  char item[128];
  if (bg_filter_open(&f, l->c, l->name) != BG_OK || bg_call_new(&call) != BG_OK) {
    atomic_fetch_add(&l->add_errors, 1);
    return NULL;
  }
  bg_call_set_timeout_ms(call, 3000);
  for (long i = 0; !atomic_load(&l->stop) && i < MAX_ADDS; i++) {
    int n = snprintf(item, sizeof item, "%s-ack-%ld", l->name, i);
    const void *p = item;
    size_t len = (size_t)n;
    int st = bg_filter_add_many_ex(f, call, &p, &len, 1, NULL);
    atomic_fetch_add(&l->adds, 1);
    pthread_mutex_lock(&l->mu);
    l->tried = i + 1;
    if (st == BG_OK) l->ok[i] = 1, l->acked++;
    pthread_mutex_unlock(&l->mu);
    if (st != BG_OK) {
      atomic_fetch_add(&l->add_errors, 1);
      note_error(l, "add", st, bg_call_errmsg(call));
    }
    sleep_ms(2);
  }
  bg_call_free(call);
  bg_filter_close(f);
  return NULL;
}

static inline void load_start(load *l, bg_client *c, const char *name, const items *present, int policy) {
  memset(l, 0, sizeof *l);
  l->c = c, l->name = name, l->present = present, l->policy = policy;
  l->ok = calloc(MAX_ADDS, 1);
  pthread_mutex_init(&l->mu, NULL);
  for (int i = 0; i < READERS; i++) pthread_create(&l->readers[i], NULL, bgt_load_reader, l);
  pthread_create(&l->adder, NULL, bgt_load_adder, l);
  sleep_ms(200);
}

/* Stops the threads; returns the acknowledged adds found absent afterwards. */
static inline long load_stop(load *l, bg_filter *f) {
  atomic_store(&l->stop, 1);
  for (int i = 0; i < READERS; i++) pthread_join(l->readers[i], NULL);
  pthread_join(l->adder, NULL);
  long lost = 0;
  char item[128];
  for (long i = l->check_from; i < l->tried; i++) {
    if (!l->ok[i]) continue;
    int present = 0, n = snprintf(item, sizeof item, "%s-ack-%ld", l->name, i);
    if (bg_filter_contains(f, item, (size_t)n, &present) != BG_OK || !present) lost++;
  }
  printf("    load on %s: %ld queries (%ld from redis, %ld degraded), %ld errors, %ld false negatives; %ld adds "
         "(%ld acknowledged, %ld errors, %ld lost)%s%s\n",
         l->name, atomic_load(&l->queries), atomic_load(&l->redis_answers), atomic_load(&l->degraded),
         atomic_load(&l->errors), atomic_load(&l->false_negatives), atomic_load(&l->adds), l->acked,
         atomic_load(&l->add_errors), lost, l->first_error[0] ? "; first error: " : "", l->first_error);
  pthread_mutex_destroy(&l->mu);
  free(l->ok);
  return lost;
}

static inline void check_clean(load *l, long lost) {
  CHECK_EQ_INT(atomic_load(&l->errors), 0);
  CHECK_EQ_INT(atomic_load(&l->false_negatives), 0);
  CHECK_EQ_INT(atomic_load(&l->add_errors), 0);
  CHECK_EQ_INT(lost, 0);
  CHECK(atomic_load(&l->redis_answers) > 0);
  CHECK(l->acked > 0);
}

/* A thread that waits for an exclusive lock (up to wait_ms), notes when it got it, releases it. */
typedef struct bgt_waiter {
  bg_lock *l;
  int64_t wait_ms;
  int st;
  uint64_t got_ns;
} bgt_waiter;

static inline void *bgt_waiter_main(void *arg) {
  bgt_waiter *w = arg;
  w->st = bg_lock_acquire(w->l, BG_LOCK_EXCLUSIVE, w->wait_ms, NULL);
  w->got_ns = bgt_now_ns();
  if (w->st == BG_OK) bg_lock_release(w->l);
  return NULL;
}

#endif
