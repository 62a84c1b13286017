/*
 * Internal: server-side Lua steps, called with EVALSHA and re-sent with EVAL on NOSCRIPT
 * (after SCRIPT FLUSH, a restart or a failover the server forgets cached scripts).
 */
#ifndef BG_INTERNAL_SCRIPT_H
#define BG_INTERNAL_SCRIPT_H

#include <stddef.h>

#include "redis/resp.h"

typedef struct bgi_script {
  const char *name;      /* for messages */
  const char *body;
  char sha[41];          /* filled once by bgi_script_sha */
  _Atomic int sha_ready;
} bgi_script;

/* The script's SHA-1 (computed on first use, thread-safe). */
const char *bgi_script_sha(bgi_script *s);

/*
 * Writes the command header: EVALSHA sha|EVAL body, numkeys, then the caller appends
 * numkeys + nargs bulks. The array length is 3 + numkeys + nargs. Reserves room for the
 * header itself; the caller reserves room for its arguments.
 */
int bgi_script_begin(bgi_buf *b, bgi_script *s, int use_body, size_t numkeys, size_t nargs);

/*
 * State of one scripted call across the NOSCRIPT fallback: parse sets noscript when the server
 * answered NOSCRIPT, and bgi_client_call_script (client.h) re-sends with use_body set.
 */
typedef struct bgi_script_run {
  int use_body;
  int noscript;
} bgi_script_run;

#endif
