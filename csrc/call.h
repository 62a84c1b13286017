/* Internal layout of bg_call. */
#ifndef BG_INTERNAL_CALL_H
#define BG_INTERNAL_CALL_H

#include "bloomguard/call.h"
#include "common/err.h"

struct bg_call {
  int64_t timeout_ms;   /* 0: the client's command timeout */
  int status;
  int source;
  char msg[BGI_ERRMSG_MAX];
};

static inline int64_t bgi_call_timeout(const bg_call *call) { return call ? call->timeout_ms : 0; }

/*
 * Ends a public operation: records the outcome on the call when there is one, else a failure's
 * message on the handle's slot. Returns err->status.
 */
int bgi_call_finish(bg_call *call, bgi_errslot *slot, const bgi_err *err, int source);

#endif
