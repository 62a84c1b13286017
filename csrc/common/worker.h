/*
 * Internal: a periodic worker - one background thread that runs a round of work, waits, and runs
 * the next, until stopped. The rotation lease keeper and the snapshot refresher are each one (the
 * lock renewer is not: it is one thread for the whole process over a list of handles, lock/renew.c).
 *
 * The round decides the wait before the next one: a number of ms (0: at once), BGI_WORKER_IDLE
 * (until bgi_worker_wake), or BGI_WORKER_EXIT (the thread ends; bgi_worker_stop still joins it).
 * Waits count on CLOCK_MONOTONIC (common/clock.h). A round runs without the worker's mutex, so it
 * may take its own locks and block in I/O; bgi_worker_stop waits for the round in progress to
 * return, and a long round looks at *bgi_worker_stop_flag between its steps to return early.
 *
 * fork (common/fork.h): the thread is not in a child. There, wake does nothing and stop joins
 * nothing (the round the parent's thread may have been in never returns in the child; its mutex
 * may stay locked): the worker is only marked stopped, and may be started again.
 *
 * Thread safety: start and stop by one owner (not concurrently with each other); wake and the
 * stop flag from any thread while the worker runs. The round is never called after stop returns.
 */
#ifndef BG_INTERNAL_WORKER_H
#define BG_INTERNAL_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define BGI_WORKER_IDLE (-1)
#define BGI_WORKER_EXIT (-2)

/* One round; returns the wait before the next: ms >= 0, BGI_WORKER_IDLE or BGI_WORKER_EXIT. */
typedef int64_t (*bgi_worker_fn)(void *ctx);

typedef struct bgi_worker {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;    /* CLOCK_MONOTONIC */
  bgi_worker_fn round;
  void *ctx;
  int64_t first_ms;     /* the wait before the first round */
  int running;          /* started and not yet joined (the owner's view) */
  int woken;            /* under mu: bgi_worker_wake since the last round began */
  uint64_t fork_gen;    /* the process's fork generation the thread was started in */
  atomic_int stop;
} bgi_worker;

/* Starts the thread: the first round after first_ms (0: at once; BGI_WORKER_IDLE: at the first
 * wake). BG_OK, or BG_ENOMEM when no thread could be made. A zeroed or stopped worker may start. */
int bgi_worker_start(bgi_worker *w, int64_t first_ms, bgi_worker_fn round, void *ctx);

/* Ends any wait now: the next round starts at once (or as soon as the one running returns). */
void bgi_worker_wake(bgi_worker *w);

/* Asks the thread to end, wakes it and joins it. No-op on a zeroed or stopped worker. */
void bgi_worker_stop(bgi_worker *w);

/* Set once bgi_worker_stop began: a long round returns early when it reads 1. */
static inline atomic_int *bgi_worker_stop_flag(bgi_worker *w) { return &w->stop; }

#endif
