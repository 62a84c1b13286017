/*
 * Where a client's calls go, found when the first call needs it (bgi_client_ready): the one
 * server of the URL, a Redis Cluster (the first reachable seed's CLUSTER SLOTS, per
 * BG_OPT_CLUSTER), or the master the sentinels of a redis-sentinel:// URL name. Opening a client
 * connects nothing (unless BG_OPT_CONNECT_AT_OPEN), so a service that starts during an outage
 * gets a client whose calls fail like any call during an outage (the degrade policy answers them)
 * and then work once the server is back: each call that finds the client not discovered yet tries
 * again, under its own deadline. One call discovers at a time; the calls that come meanwhile wait
 * for its outcome (by their own deadlines, cancellable) and share its failure rather than each
 * paying the same connect timeout again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/wait.h"

static int cluster_slots(bgi_conn *conn, bgi_reply **out, uint64_t deadline_ns, int64_t command_ms, bgi_err *err) {
  bgi_buf_reset(&conn->out);
  if (bgi_buf_reserve(&conn->out, 64) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&conn->out, 2);
  bgi_resp_cstr(&conn->out, "CLUSTER");
  bgi_resp_cstr(&conn->out, "SLOTS");
  return bgi_conn_roundtrip(conn, out, 1, deadline_ns ? deadline_ns : bgi_deadline_in_ms(command_ms), err);
}

/* The cluster's map came from a seed's reply r: the client's own table, with its refresher. */
static int take_cluster(bg_client *c, const bgi_reply *r, const char *from, const char *where, bgi_err *err) {
  const bgi_url *u = &c->ep.url;
  bgi_cluster *cl = malloc(sizeof *cl);
  if (!cl) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_hostport seed0;
  const bgi_hostport *seeds = u->hosts;
  size_t nseeds = u->nhosts;
  if (u->is_unix) {
    /* the map names the nodes by address; a unix seed is only asked once */
    memset(&seed0, 0, sizeof seed0);
    seeds = &seed0, nseeds = 0;
  }
  bgi_cluster_init(cl, &c->ep, (size_t)c->opts.pool_size, seeds, nseeds);
  bgi_client_use_mux_options(c, cl);
  size_t gaps = 0;
  unsigned first_gap = 0;
  int st = bgi_cluster_load(cl, r, from, &gaps, &first_gap, err);
  if (st == BG_OK && gaps)
    st = bgi_err_set(err, BG_ESERVER, "the Redis Cluster at %s serves only %u of 16384 hash slots (slot %u has no "
                     "master): assign every slot (CLUSTER ADDSLOTS, or redis-cli --cluster fix) and retry", where,
                     16384u - (unsigned)gaps, first_gap);
  if (st == BG_OK && bgi_cluster_start(cl) != BG_OK)
    st = bgi_err_set(err, BG_ENOMEM, "cannot start the cluster map's refresher thread");
  if (st != BG_OK) {
    bgi_cluster_destroy(cl);
    free(cl);
    return st;
  }
  c->own_cluster = cl;
  atomic_store(&c->cluster, cl);
  return BG_OK;
}

/* BG_OPT_CLUSTER auto or on: the first reachable seed says whether this is a cluster and, if so,
 * where the slots are. */
static int discover_cluster(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  const bgi_url *u = &c->ep.url;
  size_t nseeds = u->is_unix ? 1 : u->nhosts;
  int mode = (int)c->opts.cluster, st = BG_ECONN;
  for (size_t i = 0; i < nseeds; i++) {
    bgi_endpoint ep = c->ep;
    bgi_conn conn = {0};
    bgi_reply *rep[1];
    if (i && deadline_ns && bgi_now_ns() >= deadline_ns) {
      err->status = BG_ETIMEOUT;   /* the call's deadline ends it: the last seed's failure says where it was */
      return BG_ETIMEOUT;
    }
    if (!u->is_unix) {
      char what[48];
      snprintf(ep.url.host, sizeof ep.url.host, "%s", u->hosts[i].host);
      ep.url.port = u->hosts[i].port;
      snprintf(what, sizeof what, nseeds > 1 ? "seed %zu of the URL" : "the URL's host", i + 1);
      bgi_endpoint_label_url(&ep, what);
    }
    st = bgi_conn_open(&conn, &ep, deadline_ns, BGI_CONN_NO_TRACKING, err);
    if (st == BG_OK) st = cluster_slots(&conn, rep, deadline_ns, c->ep.command_timeout_ms, err);
    if (st == BG_ECONN || st == BG_ETIMEOUT) {
      bgi_conn_free(&conn);
      if (nseeds > 1) bgi_err_prefix(err, "no seed of the URL could be reached; the last");
      continue;   /* the next seed */
    }
    if (st != BG_OK) {
      bgi_conn_free(&conn);
      return st;
    }
    const bgi_reply *r = rep[0];
    if (bgi_reply_is_error(r, "LOADING")) {
      /* not "not a cluster": not now. The call fails (the policy's server class), the next one
       * asks again */
      bgi_conn_free(&conn);
      return bgi_err_set(err, BG_ESERVER, "%s is loading its data (CLUSTER SLOTS: %s)", ep.label, r->str);
    }
    if (r->type == REDIS_REPLY_ERROR) {
      /* not a cluster node ("ERR This instance has cluster support disabled"), or a proxy or an
       * ACL that refuses CLUSTER: either way a server to talk to as it is */
      if (mode == BG_CLUSTER_ON)
        st = bgi_err_set(err, BG_ENOTSUP, "%s is not a Redis Cluster node (CLUSTER SLOTS: %s), but BG_OPT_CLUSTER is "
                         "on: point the URL at a cluster node, or set BG_OPT_CLUSTER to auto or off", ep.label, r->str);
      else if (nseeds > 1)
        st = bgi_err_set(err, BG_EBADURL, "the URL names %zu hosts (cluster seeds), but %s is a standalone server: "
                         "give one host", nseeds, ep.label);
      bgi_conn_free(&conn);
      return st;
    }
    if (c->ep.db != 0) st = bgi_err_set(err, BG_EINVAL, "database %d requested, but a Redis Cluster has only db 0 "
                                        "(remove it from the URL, or BG_OPT_DB)", c->ep.db);
    else st = take_cluster(c, r, u->is_unix ? "127.0.0.1" : ep.url.host, ep.label, err);
    bgi_conn_free(&conn);
    return st;
  }
  return st;
}

/* redis-sentinel://: the sentinels name the master, which confirms it (ROLE). */
static int discover_sentinel(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  int st = bgi_cluster_reload(c->own_cluster, deadline_ns, err);
  if (st == BG_OK && bgi_cluster_start(c->own_cluster) != BG_OK)
    st = bgi_err_set(err, BG_ENOMEM, "cannot start the refresher thread");
  if (st == BG_OK) atomic_store(&c->cluster, c->own_cluster);
  return st;
}

/* Standalone: ready, with nothing to find (cluster NULL). */
static int discover(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  if (c->ep.url.is_sentinel) return discover_sentinel(c, deadline_ns, err);
  return discover_cluster(c, deadline_ns, err);
}

int bgi_client_discover(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  bgi_discovery *d = &c->disc;
  /* a call with no deadline waits for another's discovery as long as one connect and its answer */
  uint64_t until = deadline_ns ? deadline_ns : bgi_deadline_in_ms(c->ep.connect_timeout_ms + c->ep.command_timeout_ms);
  pthread_mutex_lock(&d->mu);
  if (d->running) {
    uint64_t gen = d->gen;
    int r = 0;
    while (d->running && d->gen == gen && r != ETIMEDOUT && r != BG_ECANCELED)
      r = bgi_cond_wait_cancellable(&d->cv, &d->mu, until);
    if (d->gen == gen) {
      pthread_mutex_unlock(&d->mu);
      if (r == BG_ECANCELED) return bgi_cancel_err(err, "waiting for another call to find the server");
      return bgi_err_set(err, BG_ETIMEOUT, "the call's deadline passed while another call was finding the server");
    }
    /* it ended: its outcome is this call's too */
    int st = atomic_load(&c->ready) ? BG_OK : bgi_err_set(err, d->last.status, "%s", d->last.msg);
    pthread_mutex_unlock(&d->mu);
    return st;
  }
  if (atomic_load(&c->ready)) {
    pthread_mutex_unlock(&d->mu);
    return BG_OK;
  }
  d->running = 1;
  pthread_mutex_unlock(&d->mu);

  int st = discover(c, deadline_ns, err);

  pthread_mutex_lock(&d->mu);
  d->running = 0;
  d->gen++;
  d->last = *err;
  if (st == BG_OK) atomic_store_explicit(&c->ready, 1, memory_order_release);
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
  return st;
}
