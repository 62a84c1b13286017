/* Internal layout of bg_client and the call helper every operation goes through. */
#ifndef BG_INTERNAL_CLIENT_H
#define BG_INTERNAL_CLIENT_H

#include <stdatomic.h>

#include "bloomguard/client.h"
#include "common/err.h"
#include "common/fork.h"
#include "common/observe.h"
#include "common/options.h"
#include "common/wait.h"
#include "redis/cluster.h"
#include "redis/mux.h"
#include "redis/pool.h"
#include "redis/redirect.h"
#include "redis/script.h"
#include "client/transport.h"

/* Finding where calls go, by the first call that needs it (discover.c). */
typedef struct bgi_discovery {
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* the discovering call's end */
  int running;                 /* a call is discovering */
  uint64_t gen;                /* discoveries ended */
  bgi_err last;                /* the outcome of the last one (shared with the calls that waited for it) */
} bgi_discovery;

struct bg_client {
  atomic_long refs;            /* the caller's reference + one per open filter */
  /* the process's fork generation its connections were made in (common/fork.h): another one
   * means this is a child, which first lets go of them (bgi_client_fork_check) */
  _Atomic uint64_t fork_gen;
  struct bg_options opts;      /* owned copy */
  bgi_endpoint ep;
  bgi_pool pool;               /* standalone: the server's connections */
  bgi_muxset mux;              /* standalone: its multiplexed connections (BG_OPT_PIPELINE; off: n = 0) */
  /* 1 once calls know where to go (set once, release; bgi_client_ready): a standalone server
   * (cluster NULL), or a cluster's (or Sentinel's) map loaded (cluster set before it) */
  atomic_int ready;
  bgi_discovery disc;
  /* Redis Cluster or Sentinel: slot map and a pool per node, published when discovered; NULL
   * standalone (and before). Atomic: other layers read it without waiting for ready. */
  bgi_cluster *_Atomic cluster;
  bgi_cluster *own_cluster;    /* the table the client frees (a Sentinel's from open on, unpublished
                                  until its first reload succeeds) */
  bgi_tls *tls;                /* TLS settings of every connection (ep.tls), or NULL */
  bgi_errslot err;
  /* the observer, the client's counters (common/observe.h); ep.obs points here */
  bgi_obs obs;
  /* Calls built on a multiplexed workspace, then found to need a pooled connection (too big,
   * WATCH, WAIT) and built again there: the wasted build and copy BGI_CALL_BULK avoids. Read by
   * the tests (tests/c/test_bulk.c), nothing else. */
  atomic_ulong rebuilt_for_pool;
  /* The bulk tests' negative control, never set otherwise: BGI_CALL_BULK is ignored (every call
   * starts on a multiplexed workspace, as before callers declared it). */
  atomic_int fault_ignore_bulk;
};

/* The slot argument of a call that touches no key (PING): any master will do. */
#define BGI_SLOT_ANY (-1)

void bgi_client_ref(bg_client *c);
void bgi_client_unref(bg_client *c);

/* Finds where calls go (discover.c): BG_OK once known, else the failure of this try (the next call
 * tries again). Every wait by deadline_ns (0: the connect and command timeouts). */
int bgi_client_discover(bg_client *c, uint64_t deadline_ns, bgi_err *err);
/* In a child after fork, the first use of a client made before it lets go of everything the client
 * inherited (common/fork.h): the pooled and multiplexed connections of the server or of every
 * cluster node are closed without a write (the parent's go on: the same sockets), locks made
 * anew, a discovery the parent had under way forgotten, the cluster refresher started again; the
 * next calls connect. Threads of the child that find it meanwhile wait for it. */
void bgi_client_after_fork(bg_client *c);
/* Before any use of the client's connections: one relaxed atomic load and a compare. */
static inline void bgi_client_fork_check(bg_client *c) {
  if (bgi_forked_since(atomic_load_explicit(&c->fork_gen, memory_order_acquire))) bgi_client_after_fork(c);
}

/* The call loop's first step: free once the client knows where calls go (and in a child after
 * fork, once it let go of what it inherited). */
static inline int bgi_client_ready(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  bgi_client_fork_check(c);
  if (atomic_load_explicit(&c->ready, memory_order_acquire)) return BG_OK;
  return bgi_client_discover(c, deadline_ns, err);
}
/* Gives a cluster table the multiplexed connections per node a standalone client would have. */
void bgi_client_use_mux_options(const bg_client *c, bgi_cluster *cl);

/*
 * One round trip on a connection of the node that serves `slot` (every key the call
 * touches must hash to it; BGI_SLOT_ANY for none): build() writes commands into c->out (already reset)
 * and returns how many replies to read in *nreplies; parse() reads them. If a connection that
 * had served earlier calls turns out dead (the server restarted, or it was killed while idle),
 * the call is rebuilt and sent again on another connection (at most once per pooled connection,
 * then on a fresh one) - every step bloomguard sends is safe to repeat. The replies array passed to parse is valid only during parse. deadline_ns (see
 * bgi_call_deadline) bounds the whole operation: each wait gets what is left of it (BG_ETIMEOUT
 * once it has passed); 0 gives each request the client's command timeout from its first send (a
 * send after a lost connection gets what is left of it). A connection given up for silence
 * (bgi_conn_silent_at) is not a lost one: the call ends with BG_ETIMEOUT.
 *
 * In a cluster this is the one place redirects are handled, before parse() sees anything:
 * MOVED patches the slot map and sends the call again to the new owner, ASK sends exactly this
 * call again to the named node with ASKING before each unit (redis/redirect.h) and remembers
 * nothing; TRYAGAIN, CLUSTERDOWN and LOADING are waited out with a doubling backoff for as long
 * as the deadline (or the command timeout) allows, then fail with BG_ESERVER. A call sent again
 * after a redirect runs with c->no_verdict set: a query makes its full check there.
 *
 * With BG_OPT_PIPELINE (the default) `c` is a workspace of a multiplexed connection (redis/mux.h):
 * c->out, c->idx, c->track, the replies and the flags are the call's, but c->ctx is NULL, so
 * parse must not make round trips of its own. A call that does (one that begins with WATCH),
 * one followed by WAIT (c->durable with BG_OPT_WAIT_REPLICAS), and one whose commands exceed
 * BGI_MUX_MAX_CALL_BYTES (big batches) is built again on a pooled connection of its own: build()
 * must not assume it runs once (it never could: retries). A caller that knows it is such a call
 * says so before the build (BGI_CALL_BULK, bgi_client_call_ex: rotation upload chunks, the
 * snapshot download) and is built on a pooled connection at once.
 */
typedef int (*bgi_build_fn)(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err);
typedef int (*bgi_parse_fn)(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err);
int bgi_client_call(bg_client *cl, int slot, uint64_t deadline_ns, bgi_build_fn build, bgi_parse_fn parse, void *ctx,
                    bgi_err *err);

/*
 * Flags of bgi_client_call_ex. BGI_CALL_BULK: the caller knows, before building, that the call
 * needs a pooled connection of its own (its commands are big - a rotation upload chunk - or it
 * makes round trips in parse - the snapshot download): it is built there at once, not first on a
 * multiplexed workspace only to be found too big and built again. Calls that do not say so are
 * still caught by the size / WATCH / WAIT check after the build (the safety net), at the cost of
 * that second build (counted in bg_client.rebuilt_for_pool).
 */
#define BGI_CALL_BULK 1u
/* A payload (the bytes of the arguments) this big makes a call bulk: over half the multiplexed
 * limit, multiplexing saves little, and the framing of the commands around it stays below the
 * other half (so a call not declared bulk under this rule is rarely rebuilt). */
#define BGI_BULK_PAYLOAD_BYTES (BGI_MUX_MAX_CALL_BYTES / 2)
static inline unsigned bgi_call_flags_for_payload(size_t payload) {
  return payload >= BGI_BULK_PAYLOAD_BYTES ? BGI_CALL_BULK : 0u;
}
/* A call whose commands will be at least min_bytes long: bulk when that alone is too big to
 * multiplex (add and contains windows: below that they keep the multiplexed connection and its
 * tracking verdicts, as before; a window just under the estimate is still caught by the check). */
static inline unsigned bgi_call_flags_for_min_size(size_t min_bytes) {
  return min_bytes > BGI_MUX_MAX_CALL_BYTES ? BGI_CALL_BULK : 0u;
}
int bgi_client_call_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_build_fn build,
                       bgi_parse_fn parse, void *ctx, bgi_err *err);

/*
 * bgi_client_call for a Lua step: build writes EVALSHA or EVAL per run->use_body (see
 * bgi_script_begin), parse sets run->noscript on a NOSCRIPT reply; the call is then re-sent once
 * with the script's body (the server lost its script cache: restart, failover, SCRIPT FLUSH).
 */
int bgi_client_call_script(bg_client *cl, int slot, uint64_t deadline_ns, bgi_script_run *run, const char *what,
                           bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err);
/* ... with the flags of bgi_client_call_ex */
int bgi_client_call_script_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_script_run *run,
                              const char *what, bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err);

/*
 * One request to Redis as a task's CALL (common/task.h): the arguments of bgi_client_call_ex, and
 * for a Lua step its script run (sent again with the body after NOSCRIPT: bgi_client_call_script_ex).
 */
typedef struct bgi_req {
  bg_client *client;
  int slot;
  unsigned flags;
  uint64_t deadline_ns;
  bgi_build_fn build;
  bgi_parse_fn parse;
  void *ctx;
  bgi_script_run *run;   /* NULL: not a Lua step */
  const char *what;      /* a Lua step's name in messages */
} bgi_req;

/* Sends a bgi_req on this thread and waits for it: the bgi_exec_fn of bgi_task_run. */
int bgi_req_exec(const void *req, bgi_err *err);

/*
 * The call loop as a task (call_loop.c): one bgi_req to its end - routing, the transport's
 * connection, MOVED / ASK / busy backoff, WAIT, NOSCRIPT, stale connections - as bgi_client_call_ex
 * describes, through tr (client/transport.h). bgi_client_call_ex runs it with the blocking
 * transport; a submission queue with its own.
 */
typedef struct bgi_req_task {
  bgi_task t;
  const bgi_req *req;
  bgi_transport *tr;
  int state;
  /* the loop */
  struct bgi_node *ask;      /* the node of an ASK, for the next attempt only */
  int redirects, redirected, busy_tries, own;
  int64_t backoff_ms;
  uint64_t busy_end;         /* until when TRYAGAIN / CLUSTERDOWN / LOADING are waited out */
  size_t stale_tries;
  uint64_t end_ns;           /* without a deadline: when the request stops waiting - its wait from
                                its first send, kept by the sends after a lost connection (0: not
                                sent yet, or the server answered: a redirect, a busy reply) */
  /* the attempt */
  struct bgi_node *node;
  bgi_route route;
  bgi_xfer x;
  size_t n, added;
  int waits;
  int64_t wait_ms;
  bgi_redirect r;
} bgi_req_task;

void bgi_req_task_init(bgi_req_task *rt, const bgi_req *req, bgi_transport *tr);

/*
 * The blocking transport (blocking.c): pooled and multiplexed connections, waits on this thread.
 * Deferring (a fan-out's CALL, bgi_req_executor), a multiplexed round trip is only submitted and
 * answers BGI_PENDING; bgi_blocking_transport_wait then waits for it. A pooled one is waited for
 * at once either way (a fan-out holds no pooled connection while it waits: the pool stays free
 * for the next CALL).
 */
typedef struct bgi_blocking_transport {
  bgi_transport tr;
  bgi_mux_call *mc;
  bgi_reply **rep;       /* BGI_MAX_REPLIES: a pooled connection's replies (NULL: made when needed) */
  bgi_reply **own_rep;   /* what was made (freed by bgi_blocking_transport_free) */
  int defer;
  int hold;              /* deferring: submits are held until bgi_blocking_transport_flush */
  bgi_xfer *pending;     /* deferring: the transfer whose round trip was submitted */
} bgi_blocking_transport;

/* rep: room for a pooled connection's replies, or NULL (made at the first pooled round trip). */
void bgi_blocking_transport_init(bgi_blocking_transport *b, bgi_reply **rep, int defer);
void bgi_blocking_transport_free(bgi_blocking_transport *b);
/* Waits for the round trip a deferring transport submitted: the outcome roundtrip would have had. */
int bgi_blocking_transport_wait(bgi_blocking_transport *b, bgi_err *err);
/* Writes a held submit (and whatever else its connection queued) and holds no more. */
void bgi_blocking_transport_flush(bgi_blocking_transport *b);

/* The blocking runner's executor (run.c): CALLs through bgi_req_exec, a fan-out's started on the
 * deferring transport. What every blocking filter operation is run with (bgi_task_run_with). */
extern const bgi_executor bgi_req_executor;
/* Test only (the negative control of a fan-out's one write per server): 1 writes each CALL alone. */
void bgi_fanout_fault_send_each(int on);

/* The endpoint of the node serving slot (the server's own standalone), for connections of a
 * caller's own (lock waiters' subscriptions), once the client is ready (bgi_client_ready, with
 * deadline_ns). BG_ESERVER if no node serves it now. */
int bgi_client_endpoint(bg_client *cl, int slot, uint64_t deadline_ns, const bgi_endpoint **out, bgi_err *err);

/* "host:port" of the node serving slot now, for info (bg_filter_node), once the client is ready:
 * BG_OK, the discovery's failure, or BG_ESERVER when no node serves it now. */
int bgi_client_node_addr(bg_client *cl, int slot, uint64_t deadline_ns, char *buf, size_t cap, bgi_err *err);

#endif
