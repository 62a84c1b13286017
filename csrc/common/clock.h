/*
 * Internal: the one clock and its deadline arithmetic. Every deadline, wait and age in the library
 * is a uint64_t of nanoseconds on CLOCK_MONOTONIC (bgi_now_ns), never the wall clock: a change of
 * the system time never stretches or cuts one. Condition variables that wait for such a deadline
 * are made with bgi_cond_init_monotonic (common/cond.h).
 */
#ifndef BG_INTERNAL_CLOCK_H
#define BG_INTERNAL_CLOCK_H

#include <stdint.h>
#include <time.h>

#define BGI_NS_PER_MS 1000000u
#define BGI_NS_PER_S 1000000000u

/* Nanoseconds since the monotonic epoch (CLOCK_MONOTONIC). */
uint64_t bgi_now_ns(void);

/* ms as nanoseconds; 0 for ms <= 0. */
static inline uint64_t bgi_ms_ns(int64_t ms) { return ms > 0 ? (uint64_t)ms * BGI_NS_PER_MS : 0; }

/* The deadline ms after now (now itself for ms <= 0), saturating instead of wrapping. */
static inline uint64_t bgi_after_ms(uint64_t now, int64_t ms) {
  uint64_t d = bgi_ms_ns(ms);
  return d > UINT64_MAX - now ? UINT64_MAX : now + d;
}

/* The deadline ms from now. */
static inline uint64_t bgi_deadline_in_ms(int64_t ms) { return bgi_after_ms(bgi_now_ns(), ms); }

/* A call's deadline (0: it has none) capped by ms from now: the earlier of the two. */
static inline uint64_t bgi_deadline_capped(uint64_t deadline_ns, int64_t ms) {
  uint64_t cap = bgi_deadline_in_ms(ms);
  return deadline_ns && deadline_ns < cap ? deadline_ns : cap;
}

/* ns as whole ms, rounded up. */
static inline int64_t bgi_ns_ms_ceil(uint64_t ns) { return (int64_t)((ns + BGI_NS_PER_MS - 1) / BGI_NS_PER_MS); }

/* Whole ms from now to deadline_ns, rounded up (a deadline 0.4 ms away still gets a 1 ms wait);
 * 0 once it has passed. */
static inline int64_t bgi_ms_until(uint64_t deadline_ns, uint64_t now) {
  return deadline_ns > now ? bgi_ns_ms_ceil(deadline_ns - now) : 0;
}

/* ns as a struct timespec: a monotonic time for pthread_cond_timedwait (bgi_cond_wait_until), or
 * a duration for nanosleep. */
static inline struct timespec bgi_timespec(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / BGI_NS_PER_S), (long)(ns % BGI_NS_PER_S)};
  return ts;
}

#endif
