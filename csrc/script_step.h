/*
 * Internal: one call of a Lua step whose arguments are byte strings and whose reply is an array
 * of integers and strings - the shape of every rotation and lock step. EVALSHA first, the body on
 * NOSCRIPT (bgi_client_call_script).
 */
#ifndef BG_INTERNAL_SCRIPT_STEP_H
#define BG_INTERNAL_SCRIPT_STEP_H

#include "client.h"
#include "redis/script.h"

typedef struct bgi_step {
  bgi_script *script;
  size_t nkeys, nargs;
  const char *const *argv;   /* nkeys keys, then nargs arguments */
  const size_t *lens;
  bgi_script_run run;
  /* the reply: its integers and strings in order (the first 4 and 2; longer strings truncated) */
  size_t nints, nstrs;
  long long ints[4];
  char str[2][128];
} bgi_step;

/* BG_EPROTO when the reply is not an array starting with an integer. */
int bgi_step_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *s, bgi_err *err);

#endif
