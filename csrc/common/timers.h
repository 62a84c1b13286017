/*
 * Internal: a timer heap - the waits of operations in flight on a submission queue (deadlines,
 * a write lock's naps, the policy's retry backoff, a busy cluster slot's backoff) as entries
 * ordered by when they are due, so one timer of the host (the queue's timerfd or EVFILT_TIMER,
 * client/poller.h) serves them all.
 *
 * A bgi_timer lives inside the object that waits (no allocation per wait); the heap holds
 * pointers to them and keeps each one's index, so a timer is removed in O(log n) when its wait
 * ends early. Not thread-safe: the queue's driving thread owns it.
 */
#ifndef BG_INTERNAL_TIMERS_H
#define BG_INTERNAL_TIMERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bgi_timer {
  uint64_t due_ns;   /* monotonic (common/clock.h) */
  size_t slot;       /* its place in the heap + 1; 0 when not armed */
  int kind;          /* the owner's: which of its timers this is */
} bgi_timer;

typedef struct bgi_timers {
  bgi_timer **heap;
  size_t n, cap;
} bgi_timers;

void bgi_timers_init(bgi_timers *h);
void bgi_timers_free(bgi_timers *h);
static inline int bgi_timer_armed(const bgi_timer *t) { return t->slot != 0; }
/* Arms t for due_ns (re-arms it if armed). BG_OK or BG_ENOMEM. */
int bgi_timers_arm(bgi_timers *h, bgi_timer *t, uint64_t due_ns);
/* Disarms t (no-op when not armed). */
void bgi_timers_cancel(bgi_timers *h, bgi_timer *t);
/* The earliest due time, or UINT64_MAX when none is armed. */
static inline uint64_t bgi_timers_next(const bgi_timers *h) { return h->n ? h->heap[0]->due_ns : UINT64_MAX; }
/* Disarms and returns the earliest timer due at or before now_ns, or NULL. */
bgi_timer *bgi_timers_pop_due(bgi_timers *h, uint64_t now_ns);

#endif
