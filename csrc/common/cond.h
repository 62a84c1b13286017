/* Internal: condition variables whose timed waits count on CLOCK_MONOTONIC (the clock of
 * bgi_now_ns and of every deadline), so a change of the wall clock never stretches or cuts a wait. */
#ifndef BG_INTERNAL_COND_H
#define BG_INTERNAL_COND_H

#include <pthread.h>
#include <time.h>

static inline void bgi_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

#endif
