/*
 * bloomguard/errors.h - status codes.
 *
 * The numeric values are part of the ABI: they never change and are never reused.
 * The detailed message of a failure lives on the handle that failed
 * (bg_client_errmsg, bg_filter_errmsg); bg_strerror gives the static text of a code.
 */
#ifndef BLOOMGUARD_ERRORS_H
#define BLOOMGUARD_ERRORS_H

#include "common.h"

BG_BEGIN_DECLS

#define BG_OK            0   /* success */
#define BG_EINVAL       -1   /* invalid argument: NULL handle or pointer, bad option value */
#define BG_ENOMEM       -2   /* out of memory */
#define BG_EBADURL      -3   /* malformed or unsupported server URL */
#define BG_EBADNAME     -4   /* filter name unusable (its keys would not share one cluster slot) */
#define BG_EBADPARAMS   -5   /* expected insertions / false probability rejected (Redisson's rules) */
#define BG_ENOTSUP      -6   /* unknown option or unsupported feature */
#define BG_ECONN        -7   /* cannot connect, or the connection was lost */
#define BG_ETIMEOUT     -8   /* the server did not answer within the command timeout */
#define BG_EAUTH        -9   /* authentication refused by the server, or credentials that cannot authenticate */
#define BG_ESERVER     -10   /* the server answered an error (OOM, READONLY, LOADING, BUSY, ...) */
#define BG_EPROTO      -11   /* the server's reply had an unexpected shape */
#define BG_ENOTINIT    -12   /* the filter has no config hash: it was never initialized, or was deleted */
#define BG_ECONFIG     -13   /* the filter's config kept changing during the call (retries exhausted) */
#define BG_ECORRUPT    -14   /* the config hash holds values that cannot be parsed */
#define BG_EWRONGTYPE  -15   /* a key of the filter holds the wrong Redis type */
#define BG_ELOCKED     -16   /* a lock (or the filter's write lock) is held by another owner: the wait was exceeded */
#define BG_EROTATING   -17   /* another rotation of this filter is in progress */
#define BG_EABORTED    -18   /* a user callback asked to abort */
#define BG_ECLOSED     -19   /* the handle was closed or its client is gone */
#define BG_ECANCELED   -20   /* the call was cancelled (bg_call_cancel, or its interrupt callback) while it waited */
#define BG_ETLS        -21   /* TLS itself failed (certificate refused: unknown CA, expired, another name; an alert
                                of the server's, e.g. a client certificate required), or a certificate / key file
                                cannot be used; a TLS connection closed or reset is BG_ECONN */
#define BG_EFULL       -22   /* a native NONSCALING filter is full: the items from the first refused one on were
                                not added (the message says which) */

/* Static description of a status code ("unknown status" for values not listed above). */
BG_API const char *bg_strerror(int status);

/*
 * The macro name of a status code, as written above ("BG_OK", "BG_ETIMEOUT", ...): static, for
 * messages and for bindings that name codes the way the header does. NULL for a value not listed
 * above (not "BG_UNKNOWN": a caller tells a code it does not know from a known one, and a binding
 * built against an older header can then print the number, e.g. "BG_STATUS(-42)").
 */
BG_API const char *bg_status_name(int status);

BG_END_DECLS

#endif
