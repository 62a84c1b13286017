/* Internal layout of bg_client and the call helper every operation goes through. */
#ifndef BG_INTERNAL_CLIENT_H
#define BG_INTERNAL_CLIENT_H

#include <stdatomic.h>

#include "bloomguard/client.h"
#include "common/err.h"
#include "common/options.h"
#include "redis/pool.h"
#include "redis/script.h"

struct bg_client {
  atomic_long refs;            /* the caller's reference + one per open filter */
  struct bg_options opts;      /* owned copy */
  bgi_endpoint ep;
  bgi_pool pool;
  bgi_errslot err;
};

void bgi_client_ref(bg_client *c);
void bgi_client_unref(bg_client *c);

/*
 * One round trip on a pooled connection: build() writes commands into c->out (already reset)
 * and returns how many replies to read in *nreplies; parse() reads them. If a connection that
 * had served earlier calls turns out dead (the server restarted, or it was killed while idle),
 * the call is rebuilt and sent again on another connection (at most once per pooled connection,
 * then on a fresh one) - every step bloomguard sends is safe to repeat. The replies array passed to parse is valid only during parse. deadline_ns (see
 * bgi_call_deadline) bounds the whole operation: each wait gets what is left of it (BG_ETIMEOUT
 * once it has passed); 0 gives each wait the client's command timeout.
 */
typedef int (*bgi_build_fn)(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err);
typedef int (*bgi_parse_fn)(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err);
int bgi_client_call(bg_client *cl, uint64_t deadline_ns, bgi_build_fn build, bgi_parse_fn parse, void *ctx,
                    bgi_err *err);

/*
 * bgi_client_call for a Lua step: build writes EVALSHA or EVAL per run->use_body (see
 * bgi_script_begin), parse sets run->noscript on a NOSCRIPT reply; the call is then re-sent once
 * with the script's body (the server lost its script cache: restart, failover, SCRIPT FLUSH).
 */
int bgi_client_call_script(bg_client *cl, uint64_t deadline_ns, bgi_script_run *run, const char *what,
                           bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err);

#endif
