/* bg_lock_open_filter: the lock whose WRITE holds make a filter's queries wait. */
#include <stdlib.h>
#include <string.h>

#include "filter/filter.h"
#include "lock/lock.h"

/*
 * bg_lock_open names the key NAME + ":lock"; a filter's lock must share the filter's cluster slot,
 * so it is opened as the tagged name, "{NAME}" (or NAME when it already has a hash tag), which
 * gives exactly the filter's suffix(NAME, "lock") (redis/names.h).
 */
BG_API int bg_lock_open_filter(bg_lock **out, bg_filter *f, const bg_options *opts) {
  if (!out) return BG_EINVAL;
  *out = NULL;
  if (!f) return BG_EINVAL;
  bgi_key name;
  if (bgi_key_tagged(&name, f->name.s, f->name.len) != BG_OK)
    return bgi_errslot_set(&f->err, BG_ENOMEM, "lock open: out of memory");
  int st = bg_lock_open(out, f->client, name.s, opts);
  bgi_key_free(&name);
  if (st != BG_OK) {
    char msg[BGI_ERRMSG_MAX];
    bg_client_errmsg_copy(f->client, msg, sizeof msg);
    return bgi_errslot_set(&f->err, st, "%s", msg);
  }
  return BG_OK;
}
