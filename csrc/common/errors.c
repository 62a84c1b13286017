/*
 * errors.c - the text and the macro name of each status code (bloomguard/errors.h), from one
 * table so that a new code gets both or neither (tests/c/test_status.c reads errors.h and checks
 * every code it defines has its name here).
 */
#include "bloomguard/errors.h"

#include <stddef.h>

#define STATUS(code, text) {code, #code, text}

static const struct {
  int code;
  const char *name;
  const char *text;
} statuses[] = {
  STATUS(BG_OK, "success"),
  STATUS(BG_EINVAL, "invalid argument"),
  STATUS(BG_ENOMEM, "out of memory"),
  STATUS(BG_EBADURL, "malformed or unsupported server URL"),
  STATUS(BG_EBADNAME, "unusable filter name"),
  STATUS(BG_EBADPARAMS, "invalid expected insertions or false probability"),
  STATUS(BG_ENOTSUP, "unknown option or unsupported feature"),
  STATUS(BG_ECONN, "connection failed"),
  STATUS(BG_ETIMEOUT, "timed out"),
  STATUS(BG_EAUTH, "authentication refused"),
  STATUS(BG_ESERVER, "server error"),
  STATUS(BG_EPROTO, "unexpected reply from server"),
  STATUS(BG_ENOTINIT, "Bloom filter is not initialized"),
  STATUS(BG_ECONFIG, "Bloom filter config kept changing"),
  STATUS(BG_ECORRUPT, "Bloom filter config is corrupt"),
  STATUS(BG_EWRONGTYPE, "key holds the wrong Redis type"),
  STATUS(BG_ELOCKED, "locked: the wait for the lock was exceeded"),
  STATUS(BG_EROTATING, "rotation in progress"),
  STATUS(BG_EABORTED, "aborted by callback"),
  STATUS(BG_ECLOSED, "handle closed"),
  STATUS(BG_ECANCELED, "cancelled"),
  STATUS(BG_ETLS, "TLS failure"),
  STATUS(BG_EFULL, "native filter full"),
};

static int find(int status) {
  for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
    if (statuses[i].code == status) return (int)i;
  return -1;
}

BG_API const char *bg_strerror(int status) {
  int i = find(status);
  return i < 0 ? "unknown status" : statuses[i].text;
}

BG_API const char *bg_status_name(int status) {
  int i = find(status);
  return i < 0 ? NULL : statuses[i].name;
}
