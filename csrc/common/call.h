/* Internal layout of bg_call. */
#ifndef BG_INTERNAL_CALL_H
#define BG_INTERNAL_CALL_H

#include <stdatomic.h>

#include "bloomguard/call.h"
#include "common/clock.h"
#include "common/err.h"

/* bg_call_cancel must be a plain lock-free store to be async-signal-safe */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "atomic int must be lock-free");

struct bg_call {
  int64_t timeout_ms;   /* 0: the client's command timeout */
  atomic_int cancelled; /* bg_call_cancel */
  bg_interrupt_fn interrupt;
  void *interrupt_data;
  int status;
  int source;
  int degraded;         /* the failure a degraded answer replaced, else BG_OK */
  char msg[BGI_ERRMSG_MAX];
};

/* The absolute deadline of an operation started now with this call's timeout; 0 when it has none. */
static inline uint64_t bgi_call_deadline(const bg_call *call) {
  return call && call->timeout_ms ? bgi_deadline_in_ms(call->timeout_ms) : 0;
}

/* Records BG_EINVAL for a NULL handle on the call (so its status is never the previous call's). */
int bgi_call_null_handle(bg_call *call, const char *what);

/*
 * Ends a public operation: records the outcome on the call when there is one, else a failure's
 * message on the handle's slot. Returns err->status.
 */
int bgi_call_finish(bg_call *call, bgi_errslot *slot, const bgi_err *err, int source);

#endif
