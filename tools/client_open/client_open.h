/*
 * client_open.h - bg_client_open_ex with a call of its own, for the C tests and the benchmarks: a
 * failed open has no handle to carry its message, so the message is copied out of the call.
 */
#ifndef BG_TOOLS_CLIENT_OPEN_H
#define BG_TOOLS_CLIENT_OPEN_H

#include <stdio.h>

#include <bloomguard/call.h>
#include <bloomguard/client.h>
#include <bloomguard/errors.h>

/* The failure's message is copied to msg ("" on success); msg may be NULL. */
static inline int bgt_client_open(bg_client **out, const char *url, const bg_options *opts, char *msg, size_t cap) {
  bg_call *call = NULL;
  int st = bg_call_new(&call);
  if (st != BG_OK) return st;
  st = bg_client_open_ex(out, call, url, opts);
  if (msg && cap) snprintf(msg, cap, "%s", st == BG_OK ? "" : bg_call_errmsg(call));
  bg_call_free(call);
  return st;
}

#endif
