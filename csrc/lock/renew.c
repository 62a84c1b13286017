/*
 * The renewal thread: a periodic worker (common/worker.h) per handle, started with the handle's
 * first hold. Every third of the lease it renews each hold of the handle (the holds of all its
 * threads), the way Redisson's watchdog renews an RLock every lockWatchdogTimeout / 3; with no
 * hold it sleeps until one comes, and renews that one a third of the lease after.
 * A renewal that finds the hold gone (its lease ran out while this process stalled, or the key
 * was deleted) marks the hold lost; a failed round trip is retried at the next period (the lease
 * outlives two of them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock.h"

typedef struct snap {
  pid_t tid;
  int kind;
  uint64_t gen;
} snap;

static int64_t period_ms(const bg_lock *l) { return l->lease_ms / 3 > 0 ? l->lease_ms / 3 : 1; }

/* Marks the hold of s lost, if it is still the one renewed (not released and taken again). */
static void mark_lost(bg_lock *l, const snap *s) {
  pthread_mutex_lock(&l->mu);
  for (size_t j = 0; j < l->nholds; j++) {
    bgi_hold *h = &l->holds[j];
    if (h->tid == s->tid && h->gen == s->gen && !h->lost) {
      h->lost = 1;
      snprintf(h->lost_why, sizeof h->lost_why, "the %s hold of lock \"%.100s\" was lost: renewal found it "
               "gone (its lease of %lld ms ran out, or the key was deleted)",
               h->kind == BGI_KIND_X ? "exclusive" : "read", l->key.s, (long long)l->lease_ms);
    }
  }
  pthread_mutex_unlock(&l->mu);
}

/* One round: renews every hold the handle has now; returns the wait before the next. */
static int64_t renew_round(void *arg) {
  bg_lock *l = arg;
  pthread_mutex_lock(&l->mu);
  if (l->nholds == 0) {
    l->renewer_idle = 1;
    pthread_mutex_unlock(&l->mu);
    return BGI_WORKER_IDLE;
  }
  if (l->renewer_idle) {
    /* woken by a new hold, just taken with a full lease: its first renewal is a period away */
    l->renewer_idle = 0;
    pthread_mutex_unlock(&l->mu);
    return period_ms(l);
  }
  size_t n = l->nholds;
  snap *s = malloc(n * sizeof *s);
  if (!s) {
    pthread_mutex_unlock(&l->mu);
    return period_ms(l);   /* try again next period */
  }
  for (size_t i = 0; i < n; i++) s[i] = (snap){l->holds[i].tid, l->holds[i].kind, l->holds[i].gen};
  pthread_mutex_unlock(&l->mu);
  for (size_t i = 0; i < n; i++) {
    bgi_err err = {0};
    int held = 1;
    /* a failed round trip is tried again next period (the lease outlives two of them) */
    if (bgi_lock_step_renew(l, s[i].tid, s[i].kind, &held, &err) == BG_OK && !held) mark_lost(l, &s[i]);
  }
  free(s);
  return period_ms(l);
}

int bgi_lock_renewer_start(bg_lock *l) {
  if (!l->renew || l->renewer.running) return BG_OK;
  l->renewer_idle = 0;
  return bgi_worker_start(&l->renewer, period_ms(l), renew_round, l);
}

void bgi_lock_renewer_stop(bg_lock *l) { bgi_worker_stop(&l->renewer); }
