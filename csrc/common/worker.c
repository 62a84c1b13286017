/* The periodic worker (design in worker.h). */
#include "common/worker.h"

#include <errno.h>

#include "bloomguard/errors.h"
#include "common/clock.h"
#include "common/cond.h"
#include "common/fork.h"

/* Waits ms (BGI_WORKER_IDLE: no limit) unless woken or stopped; w->mu held. */
static void wait_round(bgi_worker *w, int64_t ms) {
  uint64_t until = ms >= 0 ? bgi_deadline_in_ms(ms) : 0;
  while (!atomic_load(&w->stop) && !w->woken) {
    if (ms < 0) pthread_cond_wait(&w->cv, &w->mu);
    else if (bgi_cond_wait_until(&w->cv, &w->mu, until) == ETIMEDOUT) break;
  }
}

static void *worker_main(void *arg) {
  bgi_worker *w = arg;
  int64_t wait = w->first_ms;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    if (wait != 0) wait_round(w, wait);
    if (atomic_load(&w->stop)) break;
    w->woken = 0;
    pthread_mutex_unlock(&w->mu);
    wait = w->round(w->ctx);
    pthread_mutex_lock(&w->mu);
    if (wait == BGI_WORKER_EXIT) break;
    if (wait < 0) wait = BGI_WORKER_IDLE;
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int bgi_worker_start(bgi_worker *w, int64_t first_ms, bgi_worker_fn round, void *ctx) {
  pthread_mutex_init(&w->mu, NULL);
  bgi_cond_init_monotonic(&w->cv);
  w->round = round;
  w->ctx = ctx;
  w->first_ms = first_ms;
  w->woken = 0;
  w->fork_gen = bgi_fork_gen_note();
  atomic_init(&w->stop, 0);
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->running = 0;
    return BG_ENOMEM;
  }
  w->running = 1;
  return BG_OK;
}

void bgi_worker_wake(bgi_worker *w) {
  if (!w->running || bgi_forked_since(w->fork_gen)) return;
  pthread_mutex_lock(&w->mu);
  w->woken = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void bgi_worker_stop(bgi_worker *w) {
  if (!w->running) return;
  if (bgi_forked_since(w->fork_gen)) {
    w->running = 0;   /* the parent's thread: nothing to join here */
    return;
  }
  pthread_mutex_lock(&w->mu);
  atomic_store(&w->stop, 1);
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  w->running = 0;
}
