/*
 * bloomguard/call.h - per-call settings and results.
 *
 * The _ex rule (one rule for the whole ABI): every fallible function X that acts on a handle, or
 * opens one, has a form X_ex taking a bg_call * as its SECOND parameter - right after the handle
 * (bg_filter_count_ex(f, call, &n)), or for a constructor right after the out-pointer
 * (bg_filter_open_ex(&f, call, client, name), bg_client_open_ex(&c, call, url, opts)); a function
 * with neither takes it first (bg_optimal_params_ex(call, n, fpp, &size, &k)). The other
 * parameters are X's, in X's order. call may be NULL: X is exactly X_ex with NULL, a thin
 * wrapper. The rule has no other meaning of _ex (0.2.0 changed the three that had one: docs/changelog.md,
 * "Changelog"). It exempts only functions whose failures the status tells completely and that
 * have no handle message to replace: destructors and accessors returning no status, the settings
 * objects' own functions (bg_call_*, bg_options_*, bg_policy_* but bg_filter_set_policy), the
 * pure hash functions bg_hash128 and bg_indexes (BG_EINVAL for a NULL pointer, k 0 or a size
 * outside 1..BG_MAX_SIZE), the in-memory readers bg_filter_stat, bg_client_stat,
 * bg_filter_histogram and bg_rotation_stats and the callback setters bg_rotation_set_progress and
 * bg_client_set_observer (BG_EINVAL / BG_ENOTSUP for a NULL handle or an unknown counter, BG_ENOMEM), and
 * a submission queue's own calls (queue.h): the accessors of a completion, bg_queue_fd,
 * bg_queue_running (an in-memory read),
 * bg_queue_poll (its one driving thread's; BG_EINVAL for bad arguments only) and bg_queue_cancel
 * (async-signal-safe, as bg_call_cancel). The submit functions follow the rule.
 * tests/python/test_ex_rule.py checks the headers against the rule.
 *
 * A bg_call carries what belongs to one call rather than to a shared handle:
 *  - settings: a timeout for this call (e.g. from a Go context deadline);
 *  - results: the exact message of this call's failure, and where the answer came from.
 * Handles (client, filter) are shared between threads; a bg_call is not: give each thread (or
 * each in-flight call) its own. It may be reused for any number of calls, on any filter.
 * The one exception is bg_call_cancel, which any thread (or a signal handler) may call while
 * another thread runs a call with the object.
 *
 * Cancelling a call. Every wait inside the library - a lock acquire waiting for the holder, a
 * rotation waiting for another one (BG_OPT_ROTATE_WAIT_MS), a query waiting out a filter's write
 * lock, the degrade policy's retry backoff, a Redis Cluster busy-slot or a loading server's backoff,
 * a wait for a free pooled connection or for another call's connect, a connect and a TLS
 * handshake - sleeps in slices
 * of at most 50 ms and looks at the call's cancel flag between them, so a wait of a call made with
 * a cancelled bg_call ends within about 50 ms with BG_ECANCELED, leaving nothing behind (a
 * cancelled lock waiter holds nothing and has withdrawn its writer intent, a cancelled rotation
 * wait took no lease). A round trip already sent is not cut short: it ends by its own timeout.
 * A call that does not wait runs to its end. Inner calls the library makes on behalf of a call
 * (a rotation deleting a filter, a LOCKED commit taking the write lock) observe the same flag.
 */
#ifndef BLOOMGUARD_CALL_H
#define BLOOMGUARD_CALL_H

#include "common.h"

BG_BEGIN_DECLS

typedef struct bg_call bg_call;

/* Where an answer came from (bg_call_source). Values are pinned. */
#define BG_SOURCE_NONE             0  /* no answer: the call failed, or has not run */
#define BG_SOURCE_REDIS            1  /* the server answered */
#define BG_SOURCE_SNAPSHOT         2  /* the local snapshot of the bitmap (policy engine) */
#define BG_SOURCE_CALLBACK         3  /* the user's fallback callback (policy engine) */
#define BG_SOURCE_ASSUMED_PRESENT  4  /* fail-open default of the policy engine */
#define BG_SOURCE_ASSUMED_ABSENT   5  /* fail-closed default of the policy engine */

BG_API int  bg_call_new(bg_call **out);
BG_API void bg_call_free(bg_call *call);

/*
 * A deadline for each operation made with this object: the whole operation (waiting for a pooled
 * connection or another call's connect, connecting, the TLS and RESP handshakes, sending, every
 * reply however slowly it trickles in, retries after a config change) ends with BG_ETIMEOUT once
 * timeout_ms has passed since it started. 1..3600000 ms, or 0 for none (a connection is then made
 * within the client's BG_OPT_CONNECT_TIMEOUT_MS, and BG_OPT_COMMAND_TIMEOUT_MS bounds each reply:
 * one that trickles in ends after it, not with each byte).
 */
BG_API int  bg_call_set_timeout_ms(bg_call *call, int64_t timeout_ms);

/*
 * Asks the call running with this object (or the next one, if none runs) to stop waiting: a
 * lock-free atomic store, nothing else - thread-safe and async-signal-safe (a SIGINT handler may
 * call it). The flag stays set: every wait of every later call with the object ends at once
 * with BG_ECANCELED until bg_call_clear_cancel. BG_EINVAL for NULL.
 */
BG_API int  bg_call_cancel(bg_call *call);
/* 1 when bg_call_cancel was called and not cleared since (also async-signal-safe). */
BG_API int  bg_call_cancelled(const bg_call *call);
/* Clears the cancel flag (before the object is reused for a call that should run normally). */
BG_API int  bg_call_clear_cancel(bg_call *call);

/*
 * An interrupt callback polled during the call's waits (each slice, at most every 50 ms), on the
 * waiting thread: a non-zero return cancels the call (BG_ECANCELED) as bg_call_cancel would
 * (without setting the flag). For runtimes that must run code of their own to learn about an
 * interrupt, e.g. a Python binding running pending signal handlers. fn NULL removes it. Never
 * called outside a wait, nor after the call returns.
 */
typedef int (*bg_interrupt_fn)(void *userdata);
BG_API int  bg_call_set_interrupt(bg_call *call, bg_interrupt_fn fn, void *userdata);

/* Status and message of the last call made with this object: "" after a success, except that a
 * degraded answer (policy.h) keeps the message of the failure it degraded. */
BG_API int  bg_call_status(const bg_call *call);
BG_API const char *bg_call_errmsg(const bg_call *call);
/* BG_SOURCE_* of the last call's answer. */
BG_API int  bg_call_source(const bg_call *call);
/* When the last call's answer came from the degrade policy (source past BG_SOURCE_REDIS): the
 * status of the failure it answered for (BG_ENOTINIT, BG_ETIMEOUT, BG_ELOCKED, ...; its message
 * is bg_call_errmsg). BG_OK otherwise. */
BG_API int  bg_call_degraded_status(const bg_call *call);

BG_END_DECLS

#endif
