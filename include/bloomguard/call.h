/*
 * bloomguard/call.h - per-call settings and results.
 *
 * Every filter operation has an _ex form taking a bg_call (or NULL, which is what the plain form
 * passes). A bg_call carries what belongs to one call rather than to a shared handle:
 *  - settings: a timeout for this call (e.g. from a Go context deadline);
 *  - results: the exact message of this call's failure, and where the answer came from.
 * Handles (client, filter) are shared between threads; a bg_call is not: give each thread (or
 * each in-flight call) its own. It may be reused for any number of calls, on any filter.
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
 * connection, connecting, sending, every reply, retries after a config change) ends with
 * BG_ETIMEOUT once timeout_ms has passed since it started. 1..3600000 ms, or 0 for none (each
 * network wait is then bounded by the client's BG_OPT_COMMAND_TIMEOUT_MS).
 */
BG_API int  bg_call_set_timeout_ms(bg_call *call, int64_t timeout_ms);

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
