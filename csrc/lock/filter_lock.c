/* bg_lock_open_filter: the lock whose WRITE holds make a filter's queries wait. */
#include <stdlib.h>
#include <string.h>

#include "filter/filter.h"
#include "lock/lock.h"

/*
 * bg_lock_open names the key NAME + ":lock"; a filter's lock must share the filter's cluster slot,
 * so it is opened as "{NAME}" (or NAME when it already has a hash tag), which gives exactly the
 * filter's suffix(NAME, "lock").
 */
BG_API int bg_lock_open_filter(bg_lock **out, bg_filter *f, const bg_options *opts) {
  if (!out) return BG_EINVAL;
  *out = NULL;
  if (!f) return BG_EINVAL;
  int tagged = memchr(f->name, '{', f->name_len) != NULL;
  char *name = malloc(f->name_len + 3);
  if (!name) return bgi_errslot_set(&f->err, BG_ENOMEM, "lock open: out of memory");
  if (tagged) {
    memcpy(name, f->name, f->name_len + 1);
  } else {
    name[0] = '{';
    memcpy(name + 1, f->name, f->name_len);
    memcpy(name + 1 + f->name_len, "}", 2);
  }
  int st = bg_lock_open(out, f->client, name, opts);
  free(name);
  if (st != BG_OK) {
    char msg[BGI_ERRMSG_MAX];
    bg_client_errmsg_copy(f->client, msg, sizeof msg);
    return bgi_errslot_set(&f->err, st, "%s", msg);
  }
  return BG_OK;
}
