/*
 * The one wait primitive: every wait of the library on behalf of a call (lock acquire, a rotation
 * waiting for another one, a query waiting out a write lock, policy backoff, cluster busy backoff)
 * sleeps through these, in slices of at most BGI_WAIT_SLICE_MS, and between slices looks at the
 * call's cancel flag and its interrupt callback (bg_call_cancel, bg_call_set_interrupt).
 *
 * Which call: the thread's current one. A deadline travels through ~40 internal functions as a
 * plain uint64_t; rather than add a cancel pointer beside it in each, the public entry points that
 * take a bg_call enter it as the thread's current call for their duration (bgi_call_enter /
 * bgi_call_leave). A NULL call enters nothing, so the inner calls the library makes itself with
 * NULL (a rotation's delete, a LOCKED commit's lock acquire) observe the outer call's flag. Waits
 * on background threads (renewals, snapshot refresh) have no current call and are not cancellable.
 */
#ifndef BG_INTERNAL_WAIT_H
#define BG_INTERNAL_WAIT_H

#include <pthread.h>
#include <stdint.h>

#include "common/call.h"
#include "common/err.h"

#define BGI_WAIT_SLICE_MS 50

/* Makes call (if not NULL) the thread's current call; returns the previous one for bgi_call_leave. */
const bg_call *bgi_call_enter(const bg_call *call);
void bgi_call_leave(const bg_call *prev);
/* Clears the thread's current call (for clean-up steps a cancel must not cut short, e.g. a
 * waiter withdrawing its intent); returns it for bgi_call_leave. */
const bg_call *bgi_call_detach(void);

/* Runs stmt with call as the thread's current call (the body of a public _ex entry point). */
#define BGI_WITH_CALL(call, ...)                        \
  do {                                                  \
    const bg_call *bgi_outer_ = bgi_call_enter(call);   \
    __VA_ARGS__;                                        \
    bgi_call_leave(bgi_outer_);                         \
  } while (0)

/* 1 when the thread's current call was cancelled (or its interrupt callback says so). */
int bgi_cancelled(void);
/* Records BG_ECANCELED ("WHAT: cancelled ...") on err; returns BG_ECANCELED. */
int bgi_cancel_err(bgi_err *err, const char *what);

/* Sleeps until the monotonic time until_ns (bgi_now_ns): BG_OK, or BG_ECANCELED as soon as (within
 * a slice) the current call is cancelled. */
int bgi_sleep_until(uint64_t until_ns);
static inline int bgi_sleep_ns(uint64_t ns) { return bgi_sleep_until(bgi_now_ns() + ns); }

/* poll(2) for fd up to ms, in slices: 1 ready (*revents), 0 timed out, -1 poll failed,
 * BG_ECANCELED cancelled. */
int bgi_poll_fd(int fd, short events, int64_t ms, short *revents);

/* poll(2) for fd until the monotonic until_ns, as bgi_poll_fd; cancellable 0 waits in one piece
 * and is never cancelled (a round trip already sent, which a cancel must not cut in half). */
int bgi_poll_until(int fd, short events, uint64_t until_ns, int cancellable, short *revents);

/* pthread_cond_timedwait on cv (made by bgi_cond_init_monotonic, mu held) until the monotonic
 * until_ns, in slices: 0 woken (maybe spuriously), ETIMEDOUT, or BG_ECANCELED once the current call
 * is cancelled (queueing for a connection another caller is making or using). */
int bgi_cond_wait_cancellable(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t until_ns);

#endif
