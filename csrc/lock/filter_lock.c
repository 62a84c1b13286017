/* bg_lock_open_filter: the lock whose WRITE holds make a filter's queries wait. */
#include <stdlib.h>
#include <string.h>

#include "common/call.h"
#include "filter/filter.h"
#include "lock/lock.h"

/*
 * bg_lock_open names the key NAME + ":lock"; a filter's lock must share the filter's cluster slot,
 * so it is opened as the tagged name, "{NAME}" (or NAME when it already has a hash tag), which
 * gives exactly the filter's suffix(NAME, "lock") (redis/names.h).
 */
BG_API int bg_lock_open_filter_ex(bg_lock **out, bg_call *call, bg_filter *f, const bg_options *opts) {
  bgi_err err = {0};
  if (!out) return bgi_call_null_handle(call, "out");
  *out = NULL;
  if (!f) return bgi_call_null_handle(call, "filter");
  bgi_key name;
  if (bgi_key_tagged(&name, f->name.s, f->name.len) != BG_OK) {
    bgi_err_set(&err, BG_ENOMEM, "lock open: out of memory");
    return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
  }
  /* a call of our own: the message must not go through the client's shared slot */
  bg_call inner = {0};
  err.status = bg_lock_open_ex(out, &inner, f->client, name.s, opts);
  bgi_key_free(&name);
  if (err.status != BG_OK) memcpy(err.msg, inner.msg, sizeof err.msg);
  return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_lock_open_filter(bg_lock **out, bg_filter *f, const bg_options *opts) {
  return bg_lock_open_filter_ex(out, NULL, f, opts);
}
