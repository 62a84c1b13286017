/*
 * The blocking transport (client/transport.h): the caller's thread waits - for a pooled
 * connection of its own (redis/pool.h) or a workspace on a multiplexed one (redis/mux.h), then
 * for the replies. It never answers BGI_PENDING.
 */
#include "client/client.h"

#include <stdlib.h>

#include "common/clock.h"

static int ready(bgi_transport *tr, bgi_task *waiter, bg_client *cl, uint64_t deadline_ns, bgi_err *err) {
  (void)tr, (void)waiter;
  return bgi_client_ready(cl, deadline_ns, err);
}

static int acquire(bgi_transport *tr, bgi_task *waiter, const bgi_route *route, int own, uint64_t deadline_ns,
                   bgi_xfer *x, bgi_err *err) {
  bgi_blocking_transport *b = (bgi_blocking_transport *)tr;
  int st;
  (void)waiter;
  b->mc = NULL;
  x->shared = !own && bgi_muxset_on(route->mux);
  x->kept = 0;
  x->h = x->shared ? (void *)route->mux : (void *)route->pool;
  x->stale_tries = x->shared ? route->mux->n + 1 : route->pool->size;
  x->progressed = 0;
  x->silent = 0;
  if (x->shared) {
    st = bgi_muxset_begin(route->mux, deadline_ns, &b->mc, err);
    x->ws = b->mc ? &b->mc->ws : NULL;
  } else {
    st = bgi_pool_acquire(route->pool, deadline_ns, &x->ws, err);
  }
  if (st == BG_OK) x->earlier_calls = x->ws->calls;
  return st;
}

/* The replies of a round trip (either kind) into x, as the call loop reads them. */
static int mux_done(bgi_blocking_transport *b, bgi_xfer *x, int st) {
  x->rep = b->mc->rep;
  /* a multiplexed call fails with its connection, which had served others before it */
  x->earlier_calls = b->mc->earlier_calls;
  x->silent = st == BG_ECONN && b->mc->silent;   /* BG_ECONN: it is the caller's (not kept) */
  x->kept = st == BG_ETIMEOUT;   /* the connection drops the late replies and frees it */
  return st;
}

static int roundtrip(bgi_transport *tr, bgi_task *waiter, bgi_xfer *x, size_t n, uint64_t deadline_ns, int64_t wait_ms,
                     bgi_err *err) {
  bgi_blocking_transport *b = (bgi_blocking_transport *)tr;
  (void)waiter;
  if (x->shared) {
    uint64_t until = deadline_ns ? deadline_ns : bgi_deadline_in_ms(wait_ms);
    if (!b->defer) return mux_done(b, x, bgi_mux_roundtrip(b->mc, n, until, err));
    int st = b->hold ? bgi_mux_submit_held(b->mc, n, until, err) : bgi_mux_submit(b->mc, n, until, err);
    if (st != BG_OK) return mux_done(b, x, st);
    b->pending = x;
    return BGI_PENDING;
  }
  if (!b->rep && !(b->rep = b->own_rep = malloc(BGI_MAX_REPLIES * sizeof *b->rep)))
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  x->rep = b->rep;
  int st = deadline_ns ? bgi_conn_roundtrip(x->ws, b->rep, n, deadline_ns, err)
                       : bgi_conn_roundtrip_paced(x->ws, b->rep, n, wait_ms, err);
  /* a pooled connection is stale when it broke after serving earlier calls */
  if (!x->ws->broken) x->earlier_calls = 0;
  return st;
}

int bgi_blocking_transport_wait(bgi_blocking_transport *b, bgi_err *err) {
  bgi_xfer *x = b->pending;
  b->pending = NULL;
  return mux_done(b, x, bgi_mux_wait(b->mc, err));
}

void bgi_blocking_transport_flush(bgi_blocking_transport *b) {
  if (!b->hold) return;
  b->hold = 0;
  if (b->pending) bgi_mux_flush(b->mc->mux);   /* only a multiplexed round trip is pending */
}

static void release(bgi_transport *tr, bgi_xfer *x) {
  bgi_blocking_transport *b = (bgi_blocking_transport *)tr;
  if (x->shared) bgi_muxset_end(x->h, b->mc);
  else bgi_pool_release(x->h, x->ws);
  b->mc = NULL;
}

void bgi_blocking_transport_init(bgi_blocking_transport *b, bgi_reply **rep, int defer) {
  b->tr.ready = ready;
  b->tr.acquire = acquire;
  b->tr.roundtrip = roundtrip;
  b->tr.release = release;
  b->mc = NULL;
  b->rep = rep;
  b->own_rep = NULL;
  b->defer = defer;
  b->hold = 0;
  b->pending = NULL;
}

void bgi_blocking_transport_free(bgi_blocking_transport *b) {
  if (b->rep == b->own_rep) b->rep = NULL;
  free(b->own_rep);
  b->own_rep = NULL;
}
