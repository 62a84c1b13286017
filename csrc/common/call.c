/* bg_call: one call's timeout, cancel flag and outcome (include/bloomguard/call.h). */
#include "common/call.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int bgi_call_null_handle(bg_call *call, const char *what) {
  if (call) {
    call->status = BG_EINVAL;
    call->source = BG_SOURCE_NONE;
    call->degraded = BG_OK;
    snprintf(call->msg, sizeof call->msg, "%s handle is NULL", what);
  }
  return BG_EINVAL;
}

BG_API int bg_call_new(bg_call **out) {
  if (!out) return BG_EINVAL;
  *out = calloc(1, sizeof **out);
  return *out ? BG_OK : BG_ENOMEM;
}

BG_API void bg_call_free(bg_call *call) { free(call); }

BG_API int bg_call_set_timeout_ms(bg_call *call, int64_t timeout_ms) {
  if (!call || timeout_ms < 0 || timeout_ms > 3600000) return BG_EINVAL;
  call->timeout_ms = timeout_ms;
  return BG_OK;
}

BG_API int bg_call_cancel(bg_call *call) {
  if (!call) return BG_EINVAL;
  atomic_store(&call->cancelled, 1);
  return BG_OK;
}

BG_API int bg_call_cancelled(const bg_call *call) { return call ? atomic_load(&call->cancelled) : 0; }

BG_API int bg_call_clear_cancel(bg_call *call) {
  if (!call) return BG_EINVAL;
  atomic_store(&call->cancelled, 0);
  return BG_OK;
}

BG_API int bg_call_set_interrupt(bg_call *call, bg_interrupt_fn fn, void *userdata) {
  if (!call) return BG_EINVAL;
  call->interrupt = fn;
  call->interrupt_data = fn ? userdata : NULL;
  return BG_OK;
}

BG_API int bg_call_status(const bg_call *call) { return call ? call->status : BG_EINVAL; }
BG_API const char *bg_call_errmsg(const bg_call *call) { return call ? call->msg : "call handle is NULL"; }
BG_API int bg_call_source(const bg_call *call) { return call ? call->source : BG_SOURCE_NONE; }
BG_API int bg_call_degraded_status(const bg_call *call) { return call ? call->degraded : BG_OK; }

int bgi_call_finish(bg_call *call, bgi_errslot *slot, const bgi_err *err, int source) {
  if (call) {
    call->status = err->status;
    call->source = err->status == BG_OK ? source : BG_SOURCE_NONE;
    call->degraded = BG_OK;
    if (err->status == BG_OK) call->msg[0] = 0;
    else snprintf(call->msg, sizeof call->msg, "%s", bgi_err_text(err));
    return err->status;
  }
  return bgi_errslot_store(slot, err);
}
