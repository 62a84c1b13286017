/*
 * Internal: one call of a Lua step whose arguments are byte strings and whose reply is an array
 * of integers and strings - the shape of every rotation and lock step. EVALSHA first, the body on
 * NOSCRIPT (bgi_client_call_script).
 *
 * Every step declares one key more than its own, last (so KEYS[1..nkeys] are unchanged): a key
 * of the step's slot that never exists, BGI_KEY_MIGRATION_GUARD "{N}" (redis/layout.h). While a
 * Redis Cluster migrates that slot, Redis checks each command a running script sends and fails the one that
 * touches a key missing there (as it would answer ASK) - after the commands before it took
 * effect: a step that deletes a key and touches it again (a delta consumed, a hash recreated, a
 * RENAME onto a key renamed away) would stop half-done. With a declared key missing, Redis
 * refuses to start the step at all during a migration (TRYAGAIN, before anything runs), and
 * bgi_client_call waits the migration out.
 */
#ifndef BG_INTERNAL_REDIS_STEP_H
#define BG_INTERNAL_REDIS_STEP_H

#include "client/client.h"
#include "redis/script.h"

typedef struct bgi_step {
  bgi_script *script;
  size_t nkeys, nargs;
  const char *const *argv;   /* nkeys keys, then nargs arguments */
  const size_t *lens;
  bgi_script_run run;
  /* the reply: its integers and strings in order (the first 4 and 2; longer strings truncated) */
  size_t nints, nstrs;
  int slot;                  /* set by bgi_step_run: the slot of the migration guard key */
  int durable;               /* what it writes is acknowledged to a caller: BG_OPT_WAIT_REPLICAS applies */
  unsigned flags;            /* of bgi_client_call_ex (BGI_CALL_BULK: a step carrying a bitmap chunk) */
  long long ints[4];
  char str[2][128];
  /* a reply element that is itself an array (a list the step returns) goes here, if set */
  int (*take_list)(void *ctx, const bgi_reply *list, bgi_err *err);
  void *take_ctx;
  int status;                /* bgi_steps_run: this step's own outcome */
} bgi_step;

/* BG_EPROTO when the reply is not an array starting with an integer. */
int bgi_step_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *s, bgi_err *err);

/* Steps that need not be atomic together in one round trip (a pipeline; the lock renewals of a
 * server): each must have its slot set (its keys' slot: the guard key is in it), the call goes to
 * the node of `slot`. The return is the round trip's (a redirect or NOSCRIPT applies to the whole
 * call: keys of several slots are safe only on a node that serves them all); each step's own
 * outcome, BG_OK or an error status, is in its status. At most BGI_STEPS_MAX steps. */
#define BGI_STEPS_MAX 1024
int bgi_steps_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *const *steps, size_t n, bgi_err *err);

#endif
