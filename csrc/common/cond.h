/* Internal: condition variables whose timed waits count on CLOCK_MONOTONIC (the clock of
 * bgi_now_ns and of every deadline, common/clock.h), so a change of the wall clock never
 * stretches or cuts a wait. macOS has no pthread_condattr_setclock: there the wait is relative
 * (pthread_cond_timedwait_relative_np, which counts on a clock the wall clock does not move),
 * computed from the monotonic deadline at each wait. */
#ifndef BG_INTERNAL_COND_H
#define BG_INTERNAL_COND_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "common/clock.h"
#include "common/platform.h"

static inline void bgi_cond_init_monotonic(pthread_cond_t *cv) {
#if defined(__APPLE__)
  pthread_cond_init(cv, NULL);
#else
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
#endif
}

/* pthread_cond_timedwait until the monotonic time deadline_ns (cv made by bgi_cond_init_monotonic):
 * 0 when woken (maybe spuriously), ETIMEDOUT once the deadline has passed. */
static inline int bgi_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns) {
#if defined(__APPLE__)
  uint64_t now = bgi_now_ns();
  if (now >= deadline_ns) return ETIMEDOUT;
  uint64_t in = deadline_ns - now;
  struct timespec rel = {.tv_sec = (time_t)(in / 1000000000u), .tv_nsec = (long)(in % 1000000000u)};
  int r = pthread_cond_timedwait_relative_np(cv, mu, &rel);
  /* a relative wait that ended early by rounding is a wake: the caller looks at its deadline */
  return r == ETIMEDOUT && bgi_now_ns() < deadline_ns ? 0 : r;
#else
  struct timespec ts = bgi_timespec(deadline_ns);
  return pthread_cond_timedwait(cv, mu, &ts);
#endif
}

#endif
