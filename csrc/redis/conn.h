/*
 * Internal: one connection to Redis, owned by one thread at a time (see pool.h), or shared by a
 * multiplexed set's callers under its locks (mux.h).
 *
 * A call builds its commands into `out` (bgi_buf_reset first), then bgi_conn_roundtrip writes
 * them and reads the replies into the arena. Any transport failure marks the connection broken;
 * the pool replaces broken connections.
 *
 * The socket is non-blocking from the connect on, and every wait is a poll against what is left
 * of one absolute deadline: a connect, a TLS and a RESP handshake share the open's, the write and
 * every read of a round trip share the round trip's, so a server that trickles its reply (or
 * stalls half-way) costs no more than the deadline, where a socket timeout would restart with each
 * byte. Every byte bloomguard writes goes through bgi_conn_send_some (plain: send(2) with
 * MSG_NOSIGNAL, or on a socket with SO_NOSIGPIPE on macOS: common/sock.h; TLS: the SSL object's
 * own such socket, redis/tls.h): a write to a connection the server has closed is BG_ECONN, never
 * SIGPIPE, and the process's signal dispositions and the threads' masks are left alone. hiredis parses replies (its reader) and makes the connect; it
 * writes nothing.
 */
#ifndef BG_INTERNAL_CONN_H
#define BG_INTERNAL_CONN_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "redis/reply.h"
#include "redis/resp.h"
#include "redis/tls.h"
#include "redis/tracking.h"
#include "redis/url.h"

/* Where and how to connect: the URL plus option overrides, resolved once by the client. */
typedef struct bgi_endpoint {
  bgi_url url;
  const char *user;        /* effective ACL user or NULL */
  const char *password;    /* effective password or NULL */
  int db;
  int64_t connect_timeout_ms;
  int64_t command_timeout_ms;
  const char *client_name;
  int tracking;            /* ask for RESP3 + CLIENT TRACKING OPTIN (BG_OPT_TRACKING) */
  /* the slot of the tracking handshake's probe key: -1 standalone (a fixed key); a cluster node's
   * is one it serves (updated by map reloads, so read and written with __atomic builtins) */
  int probe_slot;
  int require_master;      /* the handshake checks ROLE: a replica is refused (Sentinel mode) */
  const struct bgi_tls *tls;   /* TLS on every connection (redis/tls.h), or NULL */
  struct bgi_obs *obs;     /* the client's observer hub (common/observe.h): connections counted, a lost
                              one told; NULL: none */
  char label[300];         /* how messages name it (bgi_url_host_label for a host the URL gave) */
} bgi_endpoint;

/* Names a server a URL gave in ep->label (redis/url.h: no URL text a password could hide in). */
void bgi_endpoint_label_url(bgi_endpoint *ep, const char *what);
/* Names a server that a server named (a cluster map, a sentinel) as it is: host:port. */
void bgi_endpoint_label_named(bgi_endpoint *ep);

/* bgi_conn_open flags */
#define BGI_CONN_NO_TRACKING 1   /* stay in RESP2 without tracking (subscribers: messages are replies) */

typedef struct bgi_conn {
  redisContext *ctx;       /* NULL when not connected */
  bgi_arena arena;         /* replies of the current call */
  bgi_buf out;             /* commands of the current call */
  bgi_buf alt;             /* scratch: the commands rewritten for an ASK redirect */
  unsigned char *is_asking;   /* scratch of an ASK's rewrite: which replies are its ASKINGs' (made
                                 at the first ASK: a workspace of many in flight stays small) */
  uint64_t *idx;           /* scratch: bit indexes of the current call */
  size_t idx_cap;
  uint64_t calls;          /* round trips completed since connecting */
  int tls;                 /* writes go through the SSL object (redis/tls.h) */
  bgi_tracking *track;     /* filters whose config the server tracks for the connection the call is
                              sent on: own_track, or a multiplexed connection's (redis/mux.h) */
  bgi_tracking own_track;
  int durable;             /* set by a build function whose commands write what a caller is told is
                              done (adds, lock holds, commits): BG_OPT_WAIT_REPLICAS applies */
  int no_verdict;          /* set by the call loop for an attempt after a redirect: queries neither
                              use nor record tracking verdicts in it (full check) */
  int fault_bits_only;     /* tests only (bgi_cluster.fault_ask_bits_only): a query sends BITFIELD_RO alone */
  int fault_no_guard;      /* tests only (bgi_cluster.fault_no_migration_guard): Lua steps lose their guard */
  int broken;
  int lost_status;         /* how it broke (the status of the failure that marked it), 0: unknown */
  /* up: the handshake is done; it is counted open in up_obs (when not NULL) and named by up_ep
   * (which outlives the connection) until it is dropped */
  int up;
  struct bgi_obs *up_obs;
  const bgi_endpoint *up_ep;
  int connecting;          /* bgi_conn_start's connect under way: its step (conn.c) */
  struct bgi_resolve *resolving;   /* its host name being resolved (redis/resolve.h), or NULL */
  int hs_tracking;         /* the handshake being made asked for tracking ... */
  uint64_t hs_epoch;       /* ... with the tracking epoch this was when it was built */
} bgi_conn;

/*
 * Connects, authenticates, selects the db, names the connection and, when the endpoint asks and
 * both hiredis and the server can, switches it to RESP3 with CLIENT TRACKING OPTIN (c->track->on),
 * all of it (TCP connect, TLS handshake, the handshake's round trip) by one absolute deadline: the
 * call's deadline_ns, capped by the endpoint's connect timeout from now. A call with no deadline
 * (0) connects within the connect timeout, then makes the handshakes within the command timeout,
 * as it would any round trip. The waits
 * before the handshake's commands are sent end with BG_ECANCELED when the current call is
 * cancelled (common/wait.h). A connect the connect timeout ended is BG_ECONN, one the call's
 * deadline ended BG_ETIMEOUT. flags: BGI_CONN_*. A db other than 0 on a cluster node is BG_EINVAL
 * (cluster mode has only db 0).
 */
int bgi_conn_open(bgi_conn *c, const bgi_endpoint *ep, uint64_t deadline_ns, int flags, bgi_err *err);
/* Closes the socket (buffers are kept for the next connection). A connection that was up and is
 * broken counts as lost (BG_EVENT_CONNECTION_LOST, told on this thread: the observer may run with
 * the caller's locks held). */
void bgi_conn_drop(bgi_conn *c);
/* A child process after fork (common/fork.h) lets go of the connection it inherited: its copy of
 * the socket is closed, nothing is written (no QUIT, no TLS close_notify: SSL_free alone), so the
 * parent's connection, the same open file description, goes on as it was; not counted lost. */
void bgi_conn_abandon(bgi_conn *c);
/* Marks it broken by a failure seen above it (a multiplexed or queue connection given up): st, the
 * status (the first one given is kept). */
void bgi_conn_mark_lost(bgi_conn *c, int st);
/* Closes and frees everything. */
void bgi_conn_free(bgi_conn *c);

/* Sends c->out and reads n replies into rep[0..n), the whole of it by the absolute deadline_ns
 * (> 0): BG_ETIMEOUT once it passes (the connection broken: a reply may be half-read). Not
 * cancellable: what was sent is answered. Error replies are returned as replies. */
int bgi_conn_roundtrip(bgi_conn *c, bgi_reply **rep, size_t n, uint64_t deadline_ns, bgi_err *err);
/* The same for a call with no deadline of its own: the write within reply_ms, then each reply
 * within reply_ms of the one before (a big batch answered reply by reply goes on as long as it
 * makes progress; one reply that trickles in ends after reply_ms, not with each byte). */
int bgi_conn_roundtrip_paced(bgi_conn *c, bgi_reply **rep, size_t n, int64_t reply_ms, bgi_err *err);

/* The non-blocking pieces, for callers that poll the socket themselves (redis/mux.c, lock/wait.c). */
/* Writes what the socket takes now of p[0..n), never raising SIGPIPE: the bytes taken (0: none,
 * wait for POLLOUT and call again with the same bytes at least), or -1 with the connection broken
 * and the failure on err (BG_ECONN; BG_ETLS for a TLS alert). */
ssize_t bgi_conn_send_some(bgi_conn *c, const char *p, size_t n, bgi_err *err);
/* Reads what the socket holds now into the reader: BG_OK (maybe nothing), or the failure on err
 * (BG_ECONN when the server closed it, BG_EPROTO, BG_ETLS, BG_ENOMEM), the connection broken. */
int bgi_conn_recv_some(bgi_conn *c, bgi_err *err);
/* 1 when bytes are already received but not parsed where poll cannot see them (TLS). */
int bgi_conn_buffered(const bgi_conn *c);

/*
 * The same connect and handshake in non-blocking pieces, for callers that poll the socket
 * themselves (a submission queue's connections, client/pipes.c):
 *  - bgi_conn_start begins the connect: a host name is first resolved on a thread of its own
 *    (redis/resolve.h), which writes to notify_fd when it is done; until then the connection has
 *    no socket (bgi_conn_resolving);
 *  - bgi_conn_connect_step moves it (and TLS) on when the socket is ready, or when notify_fd fired
 *    while resolving: BG_OK once connected, 1 with *want (POLLIN / POLLOUT; 0 while the name is
 *    still being resolved: wait for notify_fd) to wait for, or the failure;
 *  - bgi_conn_handshake_build appends the handshake's commands to out (*nreplies replies), and
 *    bgi_conn_handshake_take checks their replies (authentication, db, ROLE, tracking);
 *  - then bgi_conn_send_some, bgi_conn_recv_some and bgi_conn_buffered (above) carry the traffic.
 * Dropping the connection (bgi_conn_drop) at any point frees what a connect under way holds.
 */
int bgi_conn_start(bgi_conn *c, const bgi_endpoint *ep, int notify_fd, bgi_err *err);
/* 1 while bgi_conn_start's name resolution runs (no socket to watch yet). */
int bgi_conn_resolving(const bgi_conn *c);
int bgi_conn_connect_step(bgi_conn *c, const bgi_endpoint *ep, short *want, bgi_err *err);
int bgi_conn_handshake_build(bgi_conn *c, const bgi_endpoint *ep, int flags, bgi_buf *out, size_t *nreplies,
                             bgi_err *err);
int bgi_conn_handshake_take(bgi_conn *c, const bgi_endpoint *ep, bgi_reply **rep, size_t n, bgi_err *err);

/*
 * When a connection that multiplexes requests in order (redis/mux.c, client/pipes.c) is given up
 * for silence: its oldest request, linked at linked_ns to wait wait_ns, has had no reply for
 * max(wait_ns, the command timeout) since it was linked or since the connection's last reply
 * (progress_ns), whichever is later. What is on it then fails with the connection "silent": a
 * timeout, never a lost connection to send again on another (client/call_loop.c).
 */
static inline uint64_t bgi_conn_silent_at(uint64_t linked_ns, uint64_t progress_ns, uint64_t wait_ns, uint64_t cmd_ns) {
  return (linked_ns > progress_ns ? linked_ns : progress_ns) + (wait_ns > cmd_ns ? wait_ns : cmd_ns);
}

/* A RESP3 push (an invalidation) arrived on c: the tracking epoch moves, the client counts it. */
void bgi_conn_pushed(bgi_conn *c);

/* Makes sure the index scratch holds n values. */
int bgi_conn_idx_reserve(bgi_conn *c, size_t n);

/*
 * Status for an error reply: WRONGTYPE -> BG_EWRONGTYPE, NOAUTH/WRONGPASS/NOPERM -> BG_EAUTH,
 * anything else (OOM, READONLY, LOADING, BUSY, ...) -> BG_ESERVER; message "<what>: <server text>".
 */
int bgi_reply_error(const bgi_reply *r, const char *what, bgi_err *err);
/* 1 if r is an error reply starting with the given code ("NOSCRIPT"). */
int bgi_reply_is_error(const bgi_reply *r, const char *code);

#endif
