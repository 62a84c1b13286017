/*
 * The one call loop every step goes through (client.h, bgi_client_call): routing to the node of a
 * slot, a multiplexed or a pooled connection, MOVED / ASK / TRYAGAIN, WAIT, stale connections.
 */
#include "client/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/call.h"
#include "redis/redirect.h"

/* MOVED and ASK followed by one call before it gives up (a map that keeps pointing elsewhere). */
#define BGI_MAX_REDIRECTS 5
/* Longest sleep between two tries of a slot the cluster cannot serve right now. */
#define BGI_BUSY_BACKOFF_MAX_MS 100

/* Appends WAIT <replicas> <timeout> after a durable call's commands (BG_OPT_WAIT_REPLICAS). */
static int append_wait(bgi_conn *c, const bg_client *cl, bgi_err *err) {
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(3, 2 * BGI_RESP_U64_MAX)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 3);
  bgi_resp_bulk(&c->out, "WAIT", 4);
  bgi_resp_u64(&c->out, (uint64_t)cl->opts.wait_replicas);
  bgi_resp_u64(&c->out, (uint64_t)cl->opts.wait_timeout_ms);
  return BG_OK;
}

/* Drops the replies of the ASKINGs an ASK redirect inserted (the call's own stay in order). */
static void drop_asking(bgi_reply **rep, size_t n, const unsigned char *is_asking) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!is_asking[i]) rep[k++] = rep[i];
}

/* 1 if the commands begin with WATCH: the call keeps state on its connection across round trips. */
static int begins_with_watch(const bgi_buf *out) {
  const char *p = out->data, *end = out->data + out->len;
  if (out->len < 16 || *p != '*') return 0;
  while (p < end && *p != '\n') p++;
  return end - p > 11 && strncasecmp(p + 1, "$5\r\nWATCH\r\n", 11) == 0;
}

/* A call built on a multiplexed connection that must have a pooled one of its own (client.h). */
static int needs_own_conn(const bgi_conn *c, int waits) {
  return waits || c->out.len > BGI_MUX_MAX_CALL_BYTES || begins_with_watch(&c->out);
}

/* Where a request task is (bgi_req_task.state). */
enum {
  R_START,        /* a new request (or the same again with the script's body) */
  R_READY,        /* the client knows where calls go, or failed to find out */
  R_ACQUIRED,     /* the transport gave a workspace, or failed to */
  R_SENT,         /* the replies are in, or the round trip failed */
  R_BUSY_SLEPT    /* a busy slot's backoff ended */
};

/* Set before the client is ready, which every attempt follows. */
static bgi_cluster *cluster_of(const bgi_req_task *rt) {
  return atomic_load_explicit(&rt->req->client->cluster, memory_order_relaxed);
}

static unsigned route_slot(const bgi_req_task *rt) {
  return rt->req->slot < 0 ? 0u : (unsigned)rt->req->slot & (BGI_CLUSTER_SLOTS - 1);
}

static int attempt(bgi_req_task *rt, bgi_err *err);
static int sent(bgi_req_task *rt, int st, bgi_err *err);

/* The end: a Lua step whose script the server did not have is sent again with its body. */
static int finished(bgi_req_task *rt, int st, bgi_err *err) {
  bgi_script_run *run = rt->req->run;
  if (st != BG_OK || !run || !run->noscript) return bgi_task_done(&rt->t, st);
  if (run->use_body)
    return bgi_task_done(&rt->t, bgi_err_set(err, BG_EPROTO, "%s: the server keeps answering NOSCRIPT to EVAL",
                                             rt->req->what));
  run->use_body = 1;
  rt->state = R_START;
  return rt->t.resume(&rt->t, BG_OK, err);
}

/* The end of waiting out a busy server: BG_ESERVER with what it last said. */
static int still_busy(bgi_req_task *rt, bgi_err *err) {
  if (!cluster_of(rt))
    return bgi_task_done(&rt->t, bgi_err_set(err, BG_ESERVER, "server error: %s (still after %d retries)", rt->r.what,
                                             rt->busy_tries));
  return bgi_task_done(&rt->t, bgi_err_set(err, BG_ESERVER, "slot %u: server error: %s (still after %d retries)",
                                           route_slot(rt), rt->r.what, rt->busy_tries));
}

/* A retry of a busy server that the deadline cut short says what the server last said (a busy
 * server under load answers late; BG_ETIMEOUT would hide why): the policy's server class. */
static int timed_out(bgi_req_task *rt, int st, bgi_err *err) {
  if (st == BG_ETIMEOUT && rt->busy_tries > 0) return still_busy(rt, err);
  return bgi_task_done(&rt->t, st);
}

/* The slot is half migrated (TRYAGAIN), the cluster is failing over (CLUSTERDOWN) or a node (or
 * the one server) is loading: the same route later, while the deadline (or the command timeout)
 * allows, then BG_ESERVER (the degrade policy's server class). */
static int busy(bgi_req_task *rt, bgi_err *err) {
  bgi_cluster *cluster = cluster_of(rt);
  uint64_t now = bgi_now_ns();
  if (!rt->busy_end)
    rt->busy_end = rt->req->deadline_ns ? rt->req->deadline_ns : bgi_after_ms(now, rt->req->client->ep.command_timeout_ms);
  if (cluster && (strncmp(rt->r.what, "CLUSTERDOWN", 11) == 0 || strncmp(rt->r.what, "READONLY", 8) == 0))
    bgi_cluster_want_reload(cluster);
  if (bgi_after_ms(now, rt->backoff_ms) >= rt->busy_end) return still_busy(rt, err);
  rt->busy_tries++;
  rt->end_ns = 0;   /* the server answered: the next try waits afresh (busy_end bounds the rounds) */
  if (cluster) atomic_fetch_add(&cluster->stats.busy, 1);
  rt->state = R_BUSY_SLEPT;
  return bgi_task_sleep(&rt->t, bgi_after_ms(now, rt->backoff_ms));
}

/* One attempt: route, and ask the transport for a workspace. */
static int attempt(bgi_req_task *rt, bgi_err *err) {
  const bgi_req *q = rt->req;
  bg_client *cl = q->client;
  bgi_cluster *cluster = cluster_of(rt);
  /* without a deadline of its own: a multiplexed round trip gets the command timeout, a pooled
   * one that much for its write and for each of its replies (bgi_conn_roundtrip_paced); sent
   * again after a lost connection, what is left of the first send's */
  rt->wait_ms = cl->ep.command_timeout_ms;
  if (q->deadline_ns && bgi_now_ns() >= q->deadline_ns)
    return timed_out(rt, bgi_err_set(err, BG_ETIMEOUT, "the call's deadline passed"), err);
  if (!q->deadline_ns && rt->end_ns) {
    uint64_t now = bgi_now_ns();
    if (now >= rt->end_ns)
      return timed_out(rt, bgi_err_set(err, BG_ETIMEOUT, "the server did not answer within the command timeout "
                                       "(%lld ms; a lost connection's retries included)",
                                       (long long)cl->ep.command_timeout_ms), err);
    rt->wait_ms = (int64_t)bgi_ns_ms_ceil(rt->end_ns - now);
  }
  rt->route = (bgi_route){&cl->ep, &cl->pool, &cl->mux};
  rt->node = NULL;
  rt->r.kind = BGI_REDIR_NONE;
  if (cluster) {
    rt->node = rt->ask ? rt->ask : bgi_cluster_route(cluster, route_slot(rt));
    if (!rt->node) {
      rt->r.kind = BGI_REDIR_BUSY;
      snprintf(rt->r.what, sizeof rt->r.what, "CLUSTERDOWN no master serves slot %u", route_slot(rt));
      return busy(rt, err);
    }
    rt->route = (bgi_route){&rt->node->ep, &rt->node->pool, &rt->node->mux};
  }
  /* queueing for a connection and connecting one: by the call's deadline (cancellable waits) */
  rt->state = R_ACQUIRED;
  int st = rt->tr->acquire(rt->tr, &rt->t, &rt->route, rt->own, q->deadline_ns, &rt->x, err);
  return st == BGI_PENDING ? BGI_NEXT_WAIT : rt->t.resume(&rt->t, st, err);
}

/* A workspace: build, and send. */
static int acquired(bgi_req_task *rt, int st, bgi_err *err) {
  const bgi_req *q = rt->req;
  bg_client *cl = q->client;
  bgi_cluster *cluster = cluster_of(rt);
  if (st != BG_OK) {
    if (cluster && (st == BG_ECONN || st == BG_ETIMEOUT)) bgi_cluster_want_reload(cluster);
    return timed_out(rt, st, err);
  }
  bgi_conn *c = rt->x.ws;
  rt->n = rt->added = 0;
  bgi_buf_reset(&c->out);
  c->no_verdict = rt->redirected;
  c->durable = 0;
  c->fault_bits_only = rt->ask && cluster->fault_ask_bits_only;
  c->fault_no_guard = cluster && cluster->fault_no_migration_guard;
  st = q->build(c, q->ctx, &rt->n, err);
  rt->waits = st == BG_OK && c->durable && cl->opts.wait_replicas > 0;
  if (rt->x.shared && st == BG_OK && needs_own_conn(c, rt->waits)) {
    /* built again there: what build read of this connection (tracking) is not the other's */
    rt->tr->release(rt->tr, &rt->x);
    atomic_fetch_add_explicit(&cl->rebuilt_for_pool, 1, memory_order_relaxed);
    rt->own = 1;
    return attempt(rt, err);
  }
  if (rt->waits) st = append_wait(c, cl, err);
  if (st == BG_OK && rt->ask) {
    /* the rewrite goes to the scratch buffer, which then becomes the one that is sent */
    if (!c->is_asking && !(c->is_asking = malloc(BGI_MAX_REPLIES))) st = BG_ENOMEM;
    else st = bgi_asking_rewrite(&c->out, &c->alt, c->is_asking, BGI_MAX_REPLIES, &rt->added);
    bgi_buf t = c->out;
    c->out = c->alt;
    c->alt = t;
    if (st == BG_ENOMEM) bgi_err_set(err, st, "out of memory");
    else if (st != BG_OK) bgi_err_set(err, st, "internal: a call's commands could not be read back for ASKING");
  }
  size_t total = rt->n + (size_t)rt->waits + rt->added;
  if (st == BG_OK && total > BGI_MAX_REPLIES) st = bgi_err_set(err, BG_EINVAL, "internal: too many replies");
  if (st != BG_OK) return sent(rt, st, err);
  /* WAIT blocks the connection for up to its own timeout: give the read that much more */
  if (rt->waits && !q->deadline_ns && !rt->end_ns) rt->wait_ms += cl->opts.wait_timeout_ms;
  if (!q->deadline_ns && !rt->end_ns) rt->end_ns = bgi_after_ms(bgi_now_ns(), rt->wait_ms);
  rt->state = R_SENT;
  st = rt->tr->roundtrip(rt->tr, &rt->t, &rt->x, total, q->deadline_ns, rt->wait_ms, err);
  return st == BGI_PENDING ? BGI_NEXT_WAIT : rt->t.resume(&rt->t, st, err);
}

/* The replies (or the failure): redirects, WAIT, parse, stale connections. */
static int sent(bgi_req_task *rt, int st, bgi_err *err) {
  const bgi_req *q = rt->req;
  bg_client *cl = q->client;
  bgi_cluster *cluster = cluster_of(rt);
  bgi_conn *c = rt->x.ws;
  size_t total = rt->n + (size_t)rt->waits + rt->added;
  if (st == BG_ETIMEOUT && rt->x.kept) {
    /* the workspace is the connection's now: it drops the late replies and frees it */
    if (cluster) bgi_cluster_want_reload(cluster);
    return timed_out(rt, st, err);
  }
  bgi_reply **reps = rt->x.rep;
  c->fault_bits_only = c->fault_no_guard = 0;
  /* one server that is loading its data (a restart): waited out as a cluster's node would be */
  if (st == BG_OK && !cluster && bgi_redirect_scan(reps, total, 0, &rt->r) == BGI_REDIR_BUSY) {
    rt->tr->release(rt->tr, &rt->x);
    return busy(rt, err);
  }
  if (st == BG_OK && cluster && bgi_redirect_scan(reps, total, cluster->sentinel, &rt->r) != BGI_REDIR_NONE) {
    c->no_verdict = 0;
    /* whatever this connection vouched for may have moved with the slot */
    bgi_tracking_forget(c->track);
    rt->tr->release(rt->tr, &rt->x);
    if (rt->r.kind == BGI_REDIR_BUSY) return busy(rt, err);
    if (!rt->r.host[0]) snprintf(rt->r.host, sizeof rt->r.host, "%s", rt->node->ep.url.host);
    bgi_node *to = bgi_cluster_node(cluster, rt->r.host, rt->r.port);
    if (!to) return bgi_task_done(&rt->t, bgi_err_set(err, BG_ENOMEM, "out of memory"));
    if (++rt->redirects > BGI_MAX_REDIRECTS)
      return bgi_task_done(&rt->t, bgi_err_set(err, BG_ESERVER, "slot %u: still redirected after %d redirects "
                                               "(last: %s)", route_slot(rt), BGI_MAX_REDIRECTS, rt->r.what));
    if (rt->r.kind == BGI_REDIR_MOVED) {
      atomic_fetch_add(&cluster->stats.moved, 1);
      bgi_cluster_moved(cluster, rt->r.slot, to);
      rt->ask = NULL;
    } else {
      atomic_fetch_add(&cluster->stats.ask, 1);
      rt->ask = to;
    }
    rt->redirected = 1;
    rt->end_ns = 0;   /* the server answered: the new owner gets a wait of its own */
    return attempt(rt, err);
  }
  if (st == BG_OK && rt->added) drop_asking(reps, total, c->is_asking);
  int waits = rt->waits;
  size_t n = rt->n;
  long long acked = waits && st == BG_OK && reps[n]->type == REDIS_REPLY_INTEGER ? reps[n]->integer : -1;
  /* a script the server did not have ran nothing: the call is sent again, WAIT and all */
  for (size_t i = 0; waits && st == BG_OK && i < n; i++)
    if (bgi_reply_is_error(reps[i], "NOSCRIPT")) waits = 0;
  if (st == BG_OK) st = q->parse(c, reps, n, q->ctx, err);
  if (st == BG_OK && waits && acked < cl->opts.wait_replicas) {
    err->not_durable = 1;
    st = acked < 0 ? bgi_reply_error(reps[n], "WAIT", err)
                   : bgi_err_set(err, BG_ETIMEOUT, "applied on the master, but only %lld of %lld replicas "
                                 "acknowledged it within %lld ms (BG_OPT_WAIT_REPLICAS): a failover may lose it",
                                 acked, (long long)cl->opts.wait_replicas, (long long)cl->opts.wait_timeout_ms);
    if (st != BG_ETIMEOUT) err->not_durable = 0;
  }
  c->no_verdict = 0;
  /* a connection given up for silence (bgi_conn_silent_at): the request timed out - its own wait
   * is over, or it was behind one whose wait is, which the server answers first. Not a lost
   * connection: not sent again with a fresh wait, never reported as a failure to connect */
  if (st == BG_ECONN && rt->x.silent) err->status = st = BG_ETIMEOUT;
  int stale = st == BG_ECONN && rt->x.earlier_calls > 0;
  size_t tries = rt->x.stale_tries;
  /* a connection that answered others after this request was sent died of something that hit it
   * (a kill, a restart), not of a server that refuses everything: count this loss afresh */
  if (stale && rt->x.progressed) rt->stale_tries = 0;
  rt->tr->release(rt->tr, &rt->x);
  if (cluster && (st == BG_ECONN || st == BG_ETIMEOUT)) bgi_cluster_want_reload(cluster);
  /* what killed one idle connection (a restart, CLIENT KILL) likely killed the others too: try
   * each pooled one at most once, then a fresh one; a failure on a fresh connection is final.
   * Multiplexed: each once, plus one for a retry that met a dead connection its reader had
   * not yet noticed */
  if (stale && rt->stale_tries++ < tries) {
    /* the callers read err->status at the API's edge: a retry that succeeds must not leave the
     * dead connection's failure there */
    bgi_err_clear(err);
    return attempt(rt, err);
  }
  return st == BG_ETIMEOUT ? timed_out(rt, st, err) : finished(rt, st, err);
}

static int resume_req(bgi_task *t, int st, bgi_err *err) {
  bgi_req_task *rt = (bgi_req_task *)t;
  switch (rt->state) {
    case R_START: {
      rt->ask = rt->node = NULL;
      rt->redirects = rt->redirected = rt->busy_tries = 0;
      rt->backoff_ms = 1;
      rt->busy_end = 0;
      rt->stale_tries = 0;
      rt->end_ns = 0;
      if (rt->req->run) rt->req->run->noscript = 0;
      err->not_durable = 0;
      rt->state = R_READY;
      st = rt->tr->ready(rt->tr, t, rt->req->client, rt->req->deadline_ns, err);
      return st == BGI_PENDING ? BGI_NEXT_WAIT : t->resume(t, st, err);
    }
    case R_READY:
      if (st != BG_OK) return bgi_task_done(t, st);
      return attempt(rt, err);
    case R_ACQUIRED:
      return acquired(rt, st, err);
    case R_SENT:
      return sent(rt, st, err);
    case R_BUSY_SLEPT:
    default:
      /* the one wait primitive (or the queue's timer): a cancel of the call ends it */
      if (st == BG_ECANCELED)
        return bgi_task_done(t, bgi_cancel_err(err, cluster_of(rt) ? "waiting for a busy cluster slot"
                                                                   : "waiting for a loading server"));
      if (st != BG_OK) return bgi_task_done(t, st);
      rt->backoff_ms = rt->backoff_ms * 2 > BGI_BUSY_BACKOFF_MAX_MS ? BGI_BUSY_BACKOFF_MAX_MS : rt->backoff_ms * 2;
      /* from the owner again: during a migration the source answers ASK, the target TRYAGAIN,
       * until the keys are all across; the deadline bounds these rounds, the cap each one */
      rt->ask = NULL;
      rt->redirects = 0;
      rt->redirected = 1;
      return attempt(rt, err);
  }
}

void bgi_req_task_init(bgi_req_task *rt, const bgi_req *req, bgi_transport *tr) {
  bgi_task_init(&rt->t, resume_req);
  rt->req = req;
  rt->tr = tr;
  rt->state = R_START;
  /* a pooled connection of its own, not a multiplexed one: from the start for a declared bulk call */
  rt->own = (req->flags & BGI_CALL_BULK) && !atomic_load_explicit(&req->client->fault_ignore_bulk, memory_order_relaxed);
  if (req->run) req->run->use_body = 0;
}

/* The request task on this thread with the blocking transport (waits through the one wait
 * primitive: the thread's current call may cancel a busy backoff). */
static int run_blocking(const bgi_req *req, bgi_err *err) {
  bgi_blocking_transport b;
  bgi_req_task rt;
  bgi_reply *rep[BGI_MAX_REPLIES];
  bgi_blocking_transport_init(&b, rep, 0);
  bgi_req_task_init(&rt, req, &b.tr);
  return bgi_task_run(&rt.t, NULL, err);
}

int bgi_client_call(bg_client *cl, int slot, uint64_t deadline_ns, bgi_build_fn build, bgi_parse_fn parse,
                    void *ctx, bgi_err *err) {
  return bgi_client_call_ex(cl, slot, deadline_ns, 0, build, parse, ctx, err);
}

int bgi_client_call_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_build_fn build,
                       bgi_parse_fn parse, void *ctx, bgi_err *err) {
  bgi_req req = {.client = cl, .slot = slot, .flags = flags, .deadline_ns = deadline_ns, .build = build,
                 .parse = parse, .ctx = ctx};
  return run_blocking(&req, err);
}

int bgi_client_call_script(bg_client *cl, int slot, uint64_t deadline_ns, bgi_script_run *run, const char *what,
                           bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err) {
  return bgi_client_call_script_ex(cl, slot, deadline_ns, 0, run, what, build, parse, ctx, err);
}

int bgi_client_call_script_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_script_run *run,
                              const char *what, bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err) {
  bgi_req req = {.client = cl, .slot = slot, .flags = flags, .deadline_ns = deadline_ns, .build = build,
                 .parse = parse, .ctx = ctx, .run = run, .what = what};
  return run_blocking(&req, err);
}
