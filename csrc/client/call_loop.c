/*
 * The one call loop every step goes through (client.h, bgi_client_call): routing to the node of a
 * slot, a multiplexed or a pooled connection, MOVED / ASK / TRYAGAIN, WAIT, stale connections.
 */
#include "client/client.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/call.h"
#include "redis/redirect.h"

/* Replies of one call: a batch sends a few commands per chunk of items. */
#define BGI_MAX_REPLIES 4096

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

/* Gives back what an attempt used: a pooled connection, or a multiplexed call's workspace. */
static void release(bgi_pool *pool, bgi_muxset *mset, bgi_conn *c, bgi_mux_call *mc) {
  if (mc) bgi_muxset_end(mset, mc);
  else bgi_pool_release(pool, c);
}

int bgi_client_call(bg_client *cl, int slot, uint64_t deadline_ns, bgi_build_fn build, bgi_parse_fn parse,
                    void *ctx, bgi_err *err) {
  return bgi_client_call_ex(cl, slot, deadline_ns, 0, build, parse, ctx, err);
}

int bgi_client_call_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_build_fn build,
                       bgi_parse_fn parse, void *ctx, bgi_err *err) {
  bgi_reply *rep[BGI_MAX_REPLIES];
  unsigned char is_asking[BGI_MAX_REPLIES];
  int st = bgi_client_ready(cl, deadline_ns, err);
  if (st != BG_OK) return st;
  bgi_cluster *cluster = atomic_load_explicit(&cl->cluster, memory_order_relaxed);   /* set before ready */
  unsigned route_slot = slot < 0 ? 0u : (unsigned)slot & (BGI_CLUSTER_SLOTS - 1);
  bgi_node *ask = NULL;            /* the node of an ASK, for the next attempt only */
  int redirects = 0, redirected = 0, busy_tries = 0;
  int64_t backoff_ms = 1;
  uint64_t busy_end = 0;           /* until when TRYAGAIN / CLUSTERDOWN / LOADING are waited out */
  /* a pooled connection of its own, not a multiplexed one: from the start for a declared bulk call */
  int own = (flags & BGI_CALL_BULK) && !atomic_load_explicit(&cl->fault_ignore_bulk, memory_order_relaxed);
  err->not_durable = 0;
  for (size_t stale_tries = 0;;) {
    bgi_conn *c;
    size_t n = 0, added = 0;
    /* without a deadline of its own: a multiplexed round trip gets the command timeout, a pooled
     * one that much for its write and for each of its replies (bgi_conn_roundtrip_paced) */
    int64_t wait_ms = cl->ep.command_timeout_ms;
    if (deadline_ns && bgi_now_ns() >= deadline_ns) return bgi_err_set(err, BG_ETIMEOUT, "the call's deadline passed");
    bgi_pool *pool = &cl->pool;
    bgi_muxset *mset = &cl->mux;
    bgi_mux_call *mc = NULL;
    bgi_node *node = NULL;
    bgi_redirect r = {.kind = BGI_REDIR_NONE};
    if (cluster) {
      node = ask ? ask : bgi_cluster_route(cluster, route_slot);
      if (!node) {
        r.kind = BGI_REDIR_BUSY;
        snprintf(r.what, sizeof r.what, "CLUSTERDOWN no master serves slot %u", route_slot);
        goto busy;
      }
      pool = &node->pool;
      mset = &node->mux;
    }
    /* queueing for a connection and connecting one: by the call's deadline (cancellable waits) */
    if (!own && bgi_muxset_on(mset)) {
      st = bgi_muxset_begin(mset, deadline_ns, &mc, err);
      c = mc ? &mc->ws : NULL;
    } else {
      st = bgi_pool_acquire(pool, deadline_ns, &c, err);
    }
    if (st != BG_OK) {
      if (cluster && (st == BG_ECONN || st == BG_ETIMEOUT)) bgi_cluster_want_reload(cluster);
      return st;
    }
    uint64_t earlier_calls = c->calls;
    bgi_buf_reset(&c->out);
    c->no_verdict = redirected;
    c->durable = 0;
    c->fault_bits_only = ask && cluster->fault_ask_bits_only;
    c->fault_no_guard = cluster && cluster->fault_no_migration_guard;
    st = build(c, ctx, &n, err);
    int waits = st == BG_OK && c->durable && cl->opts.wait_replicas > 0;
    if (mc && st == BG_OK && needs_own_conn(c, waits)) {
      /* built again there: what build read of this connection (tracking) is not the other's */
      bgi_muxset_end(mset, mc);
      atomic_fetch_add_explicit(&cl->rebuilt_for_pool, 1, memory_order_relaxed);
      own = 1;
      continue;
    }
    if (waits) st = append_wait(c, cl, err);
    if (st == BG_OK && ask) {
      /* the rewrite goes to the scratch buffer, which then becomes the one that is sent */
      st = bgi_asking_rewrite(&c->out, &c->alt, is_asking, BGI_MAX_REPLIES, &added);
      bgi_buf t = c->out;
      c->out = c->alt;
      c->alt = t;
      if (st == BG_ENOMEM) bgi_err_set(err, st, "out of memory");
      else if (st != BG_OK) bgi_err_set(err, st, "internal: a call's commands could not be read back for ASKING");
    }
    if (st == BG_OK && n + waits + added > BGI_MAX_REPLIES) st = bgi_err_set(err, BG_EINVAL, "internal: too many replies");
    /* WAIT blocks the connection for up to its own timeout: give the read that much more */
    if (waits && !deadline_ns) wait_ms += cl->opts.wait_timeout_ms;
    bgi_reply **reps = rep;
    if (st == BG_OK && mc) {
      st = bgi_mux_roundtrip(mc, n + waits + added, deadline_ns ? deadline_ns : bgi_deadline_in_ms(wait_ms), err);
      reps = mc->rep;
      if (st == BG_ETIMEOUT) {
        /* mc is the connection's now: it drops the late replies and frees it */
        if (cluster) bgi_cluster_want_reload(cluster);
        return st;
      }
    } else if (st == BG_OK && deadline_ns) {
      st = bgi_conn_roundtrip(c, rep, n + waits + added, deadline_ns, err);
    } else if (st == BG_OK) {
      st = bgi_conn_roundtrip_paced(c, rep, n + waits + added, wait_ms, err);
    }
    c->fault_bits_only = c->fault_no_guard = 0;
    /* one server that is loading its data (a restart): waited out as a cluster's node would be */
    if (st == BG_OK && !cluster && bgi_redirect_scan(reps, n + waits + added, 0, &r) == BGI_REDIR_BUSY) {
      release(pool, mset, c, mc);
      goto busy;
    }
    if (st == BG_OK && cluster && bgi_redirect_scan(reps, n + waits + added, cluster->sentinel, &r) != BGI_REDIR_NONE) {
      c->no_verdict = 0;
      /* whatever this connection vouched for may have moved with the slot */
      bgi_tracking_forget(c->track);
      release(pool, mset, c, mc);
      if (r.kind == BGI_REDIR_BUSY) goto busy;
      if (!r.host[0]) snprintf(r.host, sizeof r.host, "%s", node->ep.url.host);
      bgi_node *to = bgi_cluster_node(cluster, r.host, r.port);
      if (!to) return bgi_err_set(err, BG_ENOMEM, "out of memory");
      if (++redirects > BGI_MAX_REDIRECTS)
        return bgi_err_set(err, BG_ESERVER, "slot %u: still redirected after %d redirects (last: %s)", route_slot,
                           BGI_MAX_REDIRECTS, r.what);
      if (r.kind == BGI_REDIR_MOVED) {
        atomic_fetch_add(&cluster->stats.moved, 1);
        bgi_cluster_moved(cluster, r.slot, to);
        ask = NULL;
      } else {
        atomic_fetch_add(&cluster->stats.ask, 1);
        ask = to;
      }
      redirected = 1;
      continue;
    }
    if (st == BG_OK && added) drop_asking(reps, n + waits + added, is_asking);
    long long acked = waits && st == BG_OK && reps[n]->type == REDIS_REPLY_INTEGER ? reps[n]->integer : -1;
    /* a script the server did not have ran nothing: the call is sent again, WAIT and all */
    for (size_t i = 0; waits && st == BG_OK && i < n; i++)
      if (bgi_reply_is_error(reps[i], "NOSCRIPT")) waits = 0;
    if (st == BG_OK) st = parse(c, reps, n, ctx, err);
    if (st == BG_OK && waits && acked < cl->opts.wait_replicas) {
      err->not_durable = 1;
      st = acked < 0 ? bgi_reply_error(reps[n], "WAIT", err)
                     : bgi_err_set(err, BG_ETIMEOUT, "applied on the master, but only %lld of %lld replicas "
                                   "acknowledged it within %lld ms (BG_OPT_WAIT_REPLICAS): a failover may lose it",
                                   acked, (long long)cl->opts.wait_replicas, (long long)cl->opts.wait_timeout_ms);
      if (st != BG_ETIMEOUT) err->not_durable = 0;
    }
    c->no_verdict = 0;
    /* a multiplexed call fails with its connection, which had served others before it */
    int stale = st == BG_ECONN && (mc ? mc->earlier_calls > 0 : c->broken && earlier_calls > 0);
    release(pool, mset, c, mc);
    if (cluster && (st == BG_ECONN || st == BG_ETIMEOUT)) bgi_cluster_want_reload(cluster);
    /* what killed one idle connection (a restart, CLIENT KILL) likely killed the others too: try
     * each pooled one at most once, then a fresh one; a failure on a fresh connection is final.
     * Multiplexed: each once, plus one for a retry that met a dead connection its reader had
     * not yet noticed */
    if (stale && stale_tries++ < (mc ? mset->n + 1 : pool->size)) {
      /* the callers read err->status at the API's edge: a retry that succeeds must not leave the
       * dead connection's failure there */
      bgi_err_clear(err);
      continue;
    }
    return st;

  busy:
    /* the slot is half migrated (TRYAGAIN), the cluster is failing over (CLUSTERDOWN) or a node
     * (or the one server) is loading: the same route later, while the deadline (or the command
     * timeout) allows, then BG_ESERVER (the degrade policy's server class) */
    {
      uint64_t now = bgi_now_ns();
      if (!busy_end) busy_end = deadline_ns ? deadline_ns : bgi_after_ms(now, cl->ep.command_timeout_ms);
      if (cluster && (strncmp(r.what, "CLUSTERDOWN", 11) == 0 || strncmp(r.what, "READONLY", 8) == 0))
        bgi_cluster_want_reload(cluster);
      if (bgi_after_ms(now, backoff_ms) >= busy_end) {
        if (!cluster)
          return bgi_err_set(err, BG_ESERVER, "server error: %s (still after %d retries)", r.what, busy_tries);
        return bgi_err_set(err, BG_ESERVER, "slot %u: server error: %s (still after %d retries)", route_slot, r.what,
                           busy_tries);
      }
      busy_tries++;
      if (cluster) atomic_fetch_add(&cluster->stats.busy, 1);
      /* the one wait primitive: a cancel of the call (the thread's current one) ends it */
      if (bgi_sleep_ns(bgi_ms_ns(backoff_ms)) == BG_ECANCELED)
        return bgi_cancel_err(err, cluster ? "waiting for a busy cluster slot" : "waiting for a loading server");
      backoff_ms = backoff_ms * 2 > BGI_BUSY_BACKOFF_MAX_MS ? BGI_BUSY_BACKOFF_MAX_MS : backoff_ms * 2;
      /* from the owner again: during a migration the source answers ASK, the target TRYAGAIN,
       * until the keys are all across; the deadline bounds these rounds, the cap each one */
      ask = NULL;
      redirects = 0;
      redirected = 1;
    }
  }
}

int bgi_client_call_script(bg_client *cl, int slot, uint64_t deadline_ns, bgi_script_run *run, const char *what,
                           bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err) {
  return bgi_client_call_script_ex(cl, slot, deadline_ns, 0, run, what, build, parse, ctx, err);
}

int bgi_client_call_script_ex(bg_client *cl, int slot, uint64_t deadline_ns, unsigned flags, bgi_script_run *run,
                              const char *what, bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err) {
  run->use_body = 0;
  for (;;) {
    run->noscript = 0;
    int st = bgi_client_call_ex(cl, slot, deadline_ns, flags, build, parse, ctx, err);
    if (st != BG_OK || !run->noscript) return st;
    if (run->use_body) return bgi_err_set(err, BG_EPROTO, "%s: the server keeps answering NOSCRIPT to EVAL", what);
    run->use_body = 1;
  }
}
