/*
 * Internal: how the call loop (client.h, the request task) gets a connection to a server, sends
 * a request's commands on it and reads the replies - the part of a request that waits.
 *
 * Two transports implement it: the blocking one (client/blocking.c: pooled and multiplexed
 * connections, the caller's thread waits), and a submission queue's (client/queue.c: the queue's
 * own non-blocking connections, driven by the host's event loop). The request task decides
 * everything else - routing, redirects, busy backoff, WAIT, NOSCRIPT, stale connections - once,
 * for both.
 *
 * acquire and roundtrip either finish at once (BG_OK or a failure, err set) or return
 * BGI_PENDING: the transport then resumes the waiting task later, with the outcome as its st
 * (common/task.h), and the task meanwhile answers BGI_NEXT_WAIT to whoever runs it.
 */
#ifndef BG_INTERNAL_TRANSPORT_H
#define BG_INTERNAL_TRANSPORT_H

#include <stdint.h>

#include "common/task.h"
#include "redis/conn.h"
#include "redis/mux.h"
#include "redis/pool.h"

/* Not a status: the outcome comes later (see above). */
#define BGI_PENDING 1

/* Replies one request may wait for (a batch sends a few commands per chunk of items). */
#define BGI_MAX_REPLIES 4096

/* A server a request goes to: its endpoint (one per server: the client's own standalone, a
 * node's in a cluster) and the blocking transport's connections to it. */
typedef struct bgi_route {
  const bgi_endpoint *ep;
  bgi_pool *pool;
  bgi_muxset *mux;
} bgi_route;

/* One attempt's hold on a connection. */
typedef struct bgi_xfer {
  bgi_conn *ws;             /* build into ws->out; ws->track is the connection's tracking state */
  bgi_reply **rep;          /* after roundtrip: the replies */
  int shared;               /* a connection other requests share (multiplexed): a big request, a WATCH
                               or a WAIT needs one of its own (own) */
  uint64_t earlier_calls;   /* requests the connection had served when this one was sent: a failure
                               on one that had is a stale connection (retried on another) */
  int kept;                 /* after BG_ETIMEOUT on a shared connection: the connection keeps the
                               workspace until the late replies are read (no release) */
  size_t stale_tries;       /* how many times a request that met a stale connection is sent again:
                               each connection of the kind once, plus one for a connection whose
                               loss had not been noticed yet */
  int progressed;           /* after BG_ECONN: the connection had answered other requests after
                               this one was sent (its loss is counted afresh) */
  int silent;               /* after BG_ECONN: the connection was given up for silence
                               (bgi_conn_silent_at): the request timed out, it was not lost */
  void *h;                  /* the transport's own */
} bgi_xfer;

typedef struct bgi_transport bgi_transport;
typedef struct bg_client bg_client;
struct bgi_transport {
  /* The client knows where calls go (bgi_client_ready: the first call discovers the server, the
   * cluster or the Sentinel-managed master), by deadline_ns (0: the connect and command timeouts). */
  int (*ready)(bgi_transport *tr, bgi_task *waiter, bg_client *cl, uint64_t deadline_ns, bgi_err *err);
  /* A workspace on a connection to route (one of its own when own), waiting for one and
   * connecting it by deadline_ns (absolute; 0: the client's timeouts); ws->out reset, the flags
   * cleared. */
  int (*acquire)(bgi_transport *tr, bgi_task *waiter, const bgi_route *route, int own, uint64_t deadline_ns,
                 bgi_xfer *x, bgi_err *err);
  /* Sends ws->out and reads n replies into x->rep, all of it by deadline_ns (absolute); with no
   * deadline (0), within wait_ms (a pooled connection: the write, then each reply, within wait_ms
   * of the one before). */
  int (*roundtrip)(bgi_transport *tr, bgi_task *waiter, bgi_xfer *x, size_t n, uint64_t deadline_ns, int64_t wait_ms,
                   bgi_err *err);
  /* Gives the workspace back (not after kept). */
  void (*release)(bgi_transport *tr, bgi_xfer *x);
};

#endif
