/*
 * Internal: the answers by which a Redis Cluster node says "not here" or "not now".
 *
 *   MOVED <slot> <host:port>   the slot lives elsewhere for good: remember it, retry there
 *   ASK <slot> <host:port>     the slot is being migrated and this key is already there: resend
 *                              exactly this block there, after ASKING, and remember nothing
 *   TRYAGAIN / CLUSTERDOWN / LOADING   try the same node again a little later
 *
 * A redirect may be the reply to any command of a block: a queued command inside MULTI gets it
 * at queue time (EXEC then answers EXECABORT), or EXEC itself gets it for the transaction's keys.
 * Behind Sentinel, READONLY (a write reached a master that was demoted) is one of the busy kinds
 * too: the sentinels are asked again and the call waits for the new master.
 */
#ifndef BG_INTERNAL_REDIRECT_H
#define BG_INTERNAL_REDIRECT_H

#include <stddef.h>

#include "redis/reply.h"
#include "redis/resp.h"

enum {
  BGI_REDIR_NONE = 0,
  BGI_REDIR_MOVED,
  BGI_REDIR_ASK,
  BGI_REDIR_BUSY   /* TRYAGAIN, CLUSTERDOWN or LOADING: back off, then the same route again */
};

typedef struct bgi_redirect {
  int kind;           /* BGI_REDIR_* */
  unsigned slot;      /* MOVED / ASK */
  char host[256];     /* MOVED / ASK; "" when the node left it out (the replying node's host) */
  int port;
  char what[64];      /* the reply's first words, for messages */
} bgi_redirect;

/* Parses one reply; BGI_REDIR_NONE for anything that is not a well-formed redirect. */
int bgi_redirect_parse(const bgi_reply *r, bgi_redirect *out);

/*
 * The first redirect among a round trip's replies (MOVED and ASK win over the busy kinds, which
 * a block may also answer on other commands); readonly_busy counts READONLY among the busy kinds.
 * Returns out->kind.
 */
int bgi_redirect_scan(bgi_reply *const *rep, size_t n, int readonly_busy, bgi_redirect *out);

/*
 * Rewrites the commands in `in` into `out` with ASKING before each command that starts a unit
 * of work: before MULTI (ASKING inside a transaction would be queued, and the queued commands
 * get MOVED), and before every command outside a transaction (ASKING holds for one command
 * only). is_asking[i] is set to 1 for the replies that belong to an inserted ASKING (up to cap
 * replies). Returns BG_OK, BG_ENOMEM, or BG_EPROTO if `in` is not a sequence of RESP arrays of
 * bulk strings; *added is the number of ASKINGs inserted.
 */
int bgi_asking_rewrite(const bgi_buf *in, bgi_buf *out, unsigned char *is_asking, size_t cap, size_t *added);

#endif
