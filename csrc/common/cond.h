/* Internal: condition variables whose timed waits count on CLOCK_MONOTONIC (the clock of
 * bgi_now_ns and of every deadline, common/clock.h), so a change of the wall clock never
 * stretches or cuts a wait. */
#ifndef BG_INTERNAL_COND_H
#define BG_INTERNAL_COND_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "common/clock.h"

static inline void bgi_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

/* pthread_cond_timedwait until the monotonic time deadline_ns (cv made by bgi_cond_init_monotonic):
 * 0 when woken (maybe spuriously), ETIMEDOUT once the deadline has passed. */
static inline int bgi_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns) {
  struct timespec ts = bgi_timespec(deadline_ns);
  return pthread_cond_timedwait(cv, mu, &ts);
}

#endif
