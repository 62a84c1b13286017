/*
 * library.c - the glue between the command line and the library's option handling: integer
 * option values checked against the library's own ranges (bg_options_bounds, so the CLI keeps no
 * copy of them), and opening a client with its message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_option_value(int option, const char *s, int64_t *out, char *why, size_t cap) {
  int64_t lo = 0, hi = 0;
  char *end;
  if (bg_options_bounds(option, &lo, &hi) != BG_OK) {
    snprintf(why, cap, "option %d has no integer range in this library", option);
    return -1;
  }
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    snprintf(why, cap, "%s is not a whole number in %lld..%lld", cli_shown(s), (long long)lo, (long long)hi);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_client_open(bg_client **out, const char *url, const bg_options *opts, char *err, size_t cap) {
  bg_call *call = NULL;
  int st = bg_call_new(&call);
  if (st != BG_OK) {
    snprintf(err, cap, "cannot allocate a call");
    return st;
  }
  st = bg_client_open_ex(out, call, url, opts);
  snprintf(err, cap, "%s", st == BG_OK ? "" : bg_call_errmsg(call));
  bg_call_free(call);
  return st;
}
