/* The client: open (one server, a Redis Cluster, a Sentinel-managed master), close, ping, and where
 * a slot is served. The one call loop every step goes through is call_loop.c. */
#include "client/client.h"

#include "common/call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bgi_client_ref(bg_client *c) { atomic_fetch_add(&c->refs, 1); }

static void client_free(bg_client *c) {
  if (c->cluster) {
    bgi_cluster_destroy(c->cluster);
    free(c->cluster);
  }
  bgi_muxset_destroy(&c->mux);
  bgi_pool_destroy(&c->pool);
  bgi_tls_free(c->tls);
  bgi_url_free(&c->ep.url);
  bgi_options_clear(&c->opts);
  bgi_errslot_destroy(&c->err);
  free(c);
}

void bgi_client_unref(bg_client *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) client_free(c);
}

static int cluster_slots(bgi_conn *conn, bgi_reply **out, int64_t timeout_ms, bgi_err *err) {
  bgi_buf_reset(&conn->out);
  if (bgi_buf_reserve(&conn->out, 64) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&conn->out, 2);
  bgi_resp_cstr(&conn->out, "CLUSTER");
  bgi_resp_cstr(&conn->out, "SLOTS");
  return bgi_conn_roundtrip(conn, out, 1, timeout_ms, err);
}

/* The multiplexed connections per server (0: off) and their calls' spin, from the options. */
static size_t mux_conns(const bg_client *c) { return c->opts.pipeline ? (size_t)c->opts.pipeline_conns : 0; }
static uint64_t mux_spin_ns(const bg_client *c) { return (uint64_t)c->opts.pipeline_spin_us * 1000u; }

/* The cluster's nodes get the multiplexed connections a standalone client would (set before the
 * first load makes them). */
static void use_mux_options(bg_client *c) {
  c->cluster->mux_conns = mux_conns(c);
  c->cluster->mux_spin_ns = mux_spin_ns(c);
}

/* redis-sentinel://: the sentinels name the master, which then confirms it (ROLE). */
static int discover_sentinel(bg_client *c, bgi_err *err) {
  const bgi_url *u = &c->ep.url;
  if (c->opts.cluster == BG_CLUSTER_ON)
    return bgi_err_set(err, BG_EINVAL, "a redis-sentinel:// URL names a Sentinel-managed master, not a Redis Cluster: "
                       "set BG_OPT_CLUSTER to auto or off");
  if (!(c->cluster = malloc(sizeof *c->cluster))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  c->ep.require_master = 1;
  bgi_cluster_init(c->cluster, &c->ep, (size_t)c->opts.pool_size, u->hosts, u->nhosts);
  use_mux_options(c);
  bgi_cluster_use_sentinel(c->cluster, u->master_name, c->opts.sentinel_username, c->opts.sentinel_password);
  int st = bgi_cluster_reload(c->cluster, 0, err);
  if (st == BG_OK && bgi_cluster_start(c->cluster) != BG_OK)
    st = bgi_err_set(err, BG_ENOMEM, "cannot start the refresher thread");
  return st;
}

/* The first reachable seed says whether this is a cluster and, if so, where the slots are. */
static int discover(bg_client *c, bgi_err *err) {
  const bgi_url *u = &c->ep.url;
  if (u->is_sentinel) return discover_sentinel(c, err);
  size_t nseeds = u->is_unix ? 1 : u->nhosts;
  int mode = (int)c->opts.cluster, st = BG_ECONN;
  char where[300] = "";
  if (mode == BG_CLUSTER_OFF) {
    if (nseeds > 1)
      return bgi_err_set(err, BG_EBADURL, "the URL names %zu hosts, which only a Redis Cluster takes (as seeds), "
                         "but BG_OPT_CLUSTER is off: give one host, or turn cluster mode on", nseeds);
    return BG_OK;
  }
  for (size_t i = 0; i < nseeds; i++) {
    bgi_endpoint ep = c->ep;
    bgi_conn conn = {0};
    bgi_reply *rep[1];
    if (!u->is_unix) {
      snprintf(ep.url.host, sizeof ep.url.host, "%s", u->hosts[i].host);
      ep.url.port = u->hosts[i].port;
      snprintf(where, sizeof where, strchr(ep.url.host, ':') ? "[%s]:%d" : "%s:%d", ep.url.host, ep.url.port);
    } else {
      snprintf(where, sizeof where, "unix:%s", u->path);
    }
    st = bgi_conn_open(&conn, &ep, 0, BGI_CONN_NO_TRACKING, err);
    if (st == BG_OK) st = cluster_slots(&conn, rep, c->ep.command_timeout_ms, err);
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
    if (r->type == REDIS_REPLY_ERROR) {
      /* "ERR This instance has cluster support disabled"; a proxy or an ACL may refuse CLUSTER too */
      int standalone = r->str && strstr(r->str, "cluster support disabled");
      if (mode == BG_CLUSTER_ON)
        st = bgi_err_set(err, BG_ENOTSUP, "%s is not a Redis Cluster node (%s), but BG_OPT_CLUSTER is on: point "
                         "the URL at a cluster node, or set BG_OPT_CLUSTER to auto or off", where,
                         standalone ? "its cluster support is disabled" : r->str);
      else if (nseeds > 1)
        st = bgi_err_set(err, BG_EBADURL, "the URL names %zu hosts (cluster seeds), but %s is a standalone server: "
                         "give one host", nseeds, where);
      bgi_conn_free(&conn);
      return st;
    }
    if (c->ep.db != 0) {
      bgi_conn_free(&conn);
      return bgi_err_set(err, BG_EINVAL, "database %d requested, but a Redis Cluster has only db 0 (remove it from "
                         "the URL, or BG_OPT_DB)", c->ep.db);
    }
    if (!(c->cluster = malloc(sizeof *c->cluster))) {
      bgi_conn_free(&conn);
      return bgi_err_set(err, BG_ENOMEM, "out of memory");
    }
    bgi_hostport seed0;
    const bgi_hostport *seeds = u->hosts;
    if (u->is_unix) {
      /* the map names the nodes by address; a unix seed is only asked once */
      memset(&seed0, 0, sizeof seed0);
      seeds = &seed0, nseeds = 0;
    }
    bgi_cluster_init(c->cluster, &c->ep, (size_t)c->opts.pool_size, seeds, nseeds);
    use_mux_options(c);
    size_t gaps = 0;
    unsigned first_gap = 0;
    st = bgi_cluster_load(c->cluster, r, u->is_unix ? "127.0.0.1" : ep.url.host, &gaps, &first_gap, err);
    bgi_conn_free(&conn);
    if (st == BG_OK && gaps)
      st = bgi_err_set(err, BG_ESERVER, "the Redis Cluster at %s serves only %u of 16384 hash slots (slot %u has no "
                       "master): assign every slot (CLUSTER ADDSLOTS, or redis-cli --cluster fix) and retry", where,
                       16384u - (unsigned)gaps, first_gap);
    if (st == BG_OK && bgi_cluster_start(c->cluster) != BG_OK)
      st = bgi_err_set(err, BG_ENOMEM, "cannot start the cluster map's refresher thread");
    return st;
  }
  return st;
}

static int open_client(bg_client **out, const char *url, const bg_options *opts, bgi_err *err) {
  bg_client *c;
  int st;
  if (!out) return bgi_err_set(err, BG_EINVAL, "bg_client_open: out must not be NULL");
  *out = NULL;
  if (!url) return bgi_err_set(err, BG_EINVAL, "bg_client_open: url must not be NULL");
  if ((st = bgi_options_check(opts, BGI_OPT_CLIENT, err)) != BG_OK) return st;
  if (!(c = calloc(1, sizeof *c))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  atomic_init(&c->refs, 1);
  bgi_errslot_init(&c->err);
  /* c is zeroed: client_free undoes whatever was done when a step fails */
  if (bgi_options_copy(&c->opts, opts) != BG_OK) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = bgi_url_parse(url, &c->ep.url, err)) != BG_OK) goto fail;
  c->ep.user = c->opts.username ? c->opts.username : c->ep.url.user;
  c->ep.password = c->opts.password ? c->opts.password : c->ep.url.password;
  c->ep.db = c->opts.db >= 0 ? (int)c->opts.db : c->ep.url.db;
  c->ep.connect_timeout_ms = c->opts.connect_timeout_ms;
  c->ep.command_timeout_ms = c->opts.command_timeout_ms;
  c->ep.client_name = c->opts.client_name;
  c->ep.tracking = c->opts.tracking != 0;
  c->ep.probe_slot = -1;
  const struct bg_options *o = &c->opts;
  if (c->ep.url.tls || o->tls_ca_file || o->tls_ca_dir || o->tls_cert_file || o->tls_key_file || o->tls_server_name) {
    bgi_tls_config tc = {o->tls_ca_file, o->tls_ca_dir, o->tls_cert_file, o->tls_key_file, o->tls_server_name,
                         o->tls_verify != 0};
    if ((st = bgi_tls_new(&c->tls, &tc, err)) != BG_OK) goto fail;
    c->ep.tls = c->tls;
  }
  if (bgi_pool_init(&c->pool, (size_t)c->opts.pool_size, &c->ep) != BG_OK) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto fail;
  }
  if (bgi_muxset_init(&c->mux, mux_conns(c), mux_spin_ns(c), &c->ep) != BG_OK) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = discover(c, err)) != BG_OK) goto fail;
  if (!c->cluster) {
    /* connect one now so a wrong address or password is reported by open, not by the first query */
    bgi_conn *conn;
    if ((st = bgi_pool_acquire(&c->pool, 0, &conn, err)) != BG_OK) goto fail;
    bgi_pool_release(&c->pool, conn);
  }
  *out = c;
  return BG_OK;
fail:
  client_free(c);
  return st;
}

BG_API int bg_client_open_ex(bg_client **out, bg_call *call, const char *url, const bg_options *opts) {
  bgi_err err = {0};
  /* no handle yet to carry a message: the call is the only place for it */
  BGI_WITH_CALL(call, err.status = open_client(out, url, opts, &err));
  return call ? bgi_call_finish(call, NULL, &err, BG_SOURCE_NONE) : err.status;
}

BG_API int bg_client_open(bg_client **out, const char *url, const bg_options *opts) {
  return bg_client_open_ex(out, NULL, url, opts);
}

BG_API void bg_client_close(bg_client *c) { bgi_client_unref(c); }

BG_API const char *bg_client_errmsg(const bg_client *c) { return c ? bgi_errslot_view((bgi_errslot *)&c->err) : "client handle is NULL"; }

BG_API size_t bg_client_errmsg_copy(const bg_client *c, char *buf, size_t cap) {
  if (!c) return 0;
  return bgi_errslot_copy((bgi_errslot *)&c->err, buf, cap);
}

static int build_ping(bgi_conn *c, void *ctx, size_t *n, bgi_err *err) {
  (void)ctx;
  if (bgi_buf_reserve(&c->out, 32) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 1);
  bgi_resp_cstr(&c->out, "PING");
  *n = 1;
  return BG_OK;
}

static int parse_ping(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  (void)c, (void)n, (void)ctx;
  if (rep[0]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[0], "PING", err);
  return BG_OK;
}

BG_API int bg_client_ping_ex(bg_client *c, bg_call *call) {
  bgi_err err = {0};
  if (!c) return bgi_call_null_handle(call, "client");
  BGI_WITH_CALL(call, err.status = bgi_client_call(c, BGI_SLOT_ANY, bgi_call_deadline(call), build_ping, parse_ping,
                                                   NULL, &err));
  return bgi_call_finish(call, &c->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_client_ping(bg_client *c) { return bg_client_ping_ex(c, NULL); }

int bgi_client_endpoint(bg_client *cl, int slot, const bgi_endpoint **out, bgi_err *err) {
  if (!cl->cluster) {
    *out = &cl->ep;
    return BG_OK;
  }
  bgi_node *n = bgi_cluster_route(cl->cluster, slot < 0 ? 0u : (unsigned)slot);
  if (!n) return bgi_err_set(err, BG_ESERVER, "no master of the cluster serves slot %d now", slot);
  *out = &n->ep;
  return BG_OK;
}

void bgi_client_node_addr(bg_client *cl, int slot, char *buf, size_t cap) {
  const bgi_endpoint *ep = NULL;
  bgi_err ignored = {0};
  if (bgi_client_endpoint(cl, slot, &ep, &ignored) != BG_OK) snprintf(buf, cap, "%s", "");
  else if (ep->url.is_unix) snprintf(buf, cap, "unix:%s", ep->url.path);
  else snprintf(buf, cap, strchr(ep->url.host, ':') ? "[%s]:%d" : "%s:%d", ep->url.host, ep->url.port);
}
