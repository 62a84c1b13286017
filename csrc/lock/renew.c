/*
 * The renewal thread: one per handle, started with the handle's first hold. Every third of the
 * lease it renews each hold of the handle (the holds of all its threads), the way Redisson's
 * watchdog renews an RLock every lockWatchdogTimeout / 3; with no hold it sleeps until one comes.
 * A renewal that finds the hold gone (its lease ran out while this process stalled, or the key
 * was deleted) marks the hold lost; a failed round trip is retried at the next period (the lease
 * outlives two of them).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock/lock.h"

typedef struct snap {
  pid_t tid;
  int kind;
  uint64_t gen;
} snap;

static void deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

static void *renewer(void *arg) {
  bg_lock *l = arg;
  int64_t period_ms = l->lease_ms / 3 > 0 ? l->lease_ms / 3 : 1;
  snap *s = NULL;
  size_t scap = 0;
  pthread_mutex_lock(&l->mu);
  while (!l->renewer_stop) {
    if (l->nholds == 0) {
      pthread_cond_wait(&l->cv, &l->mu);
      continue;
    }
    struct timespec until;
    deadline_in(&until, period_ms);
    while (!l->renewer_stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT) {}
    if (l->renewer_stop) break;
    size_t n = l->nholds;
    if (n > scap) {
      snap *p = realloc(s, n * sizeof *p);
      if (!p) continue; /* try again next period */
      s = p, scap = n;
    }
    for (size_t i = 0; i < n; i++) s[i] = (snap){l->holds[i].tid, l->holds[i].kind, l->holds[i].gen};
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; i < n; i++) {
      bgi_err err = {0};
      int held = 1;
      int st = bgi_lock_step_renew(l, s[i].tid, s[i].kind, &held, &err);
      if (st != BG_OK || held) continue;
      pthread_mutex_lock(&l->mu);
      for (size_t j = 0; j < l->nholds; j++) {
        bgi_hold *h = &l->holds[j];
        if (h->tid == s[i].tid && h->gen == s[i].gen && !h->lost) {
          h->lost = 1;
          snprintf(h->lost_why, sizeof h->lost_why, "the %s hold of lock \"%.100s\" was lost: renewal found it "
                   "gone (its lease of %lld ms ran out, or the key was deleted)",
                   h->kind == BGI_KIND_X ? "exclusive" : "read", l->key.s, (long long)l->lease_ms);
        }
      }
      pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  free(s);
  return NULL;
}

int bgi_lock_renewer_start(bg_lock *l) {
  if (!l->renew || l->renewer_running) return BG_OK;
  l->renewer_stop = 0;
  if (pthread_create(&l->renewer, NULL, renewer, l) != 0) return BG_ENOMEM;
  l->renewer_running = 1;
  return BG_OK;
}

void bgi_lock_renewer_stop(bg_lock *l) {
  pthread_mutex_lock(&l->mu);
  int running = l->renewer_running;
  l->renewer_stop = 1;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  if (running) pthread_join(l->renewer, NULL);
  l->renewer_running = 0;
}
