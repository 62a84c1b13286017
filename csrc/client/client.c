/* The client: open (one server, a Redis Cluster, a Sentinel-managed master), close, ping, and where
 * a slot is served. The one call loop every step goes through is call_loop.c. */
#include "client/client.h"

#include "common/call.h"
#include "common/cond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bgi_client_ref(bg_client *c) { atomic_fetch_add(&c->refs, 1); }

static void client_free(bg_client *c) {
  /* a child closing a client made before the fork: the parent's threads (refresher, readers) and
   * locks are not its to join or take */
  bgi_client_fork_check(c);
  if (c->own_cluster) {
    bgi_cluster_destroy(c->own_cluster);
    free(c->own_cluster);
  }
  bgi_muxset_destroy(&c->mux);
  bgi_pool_destroy(&c->pool);
  bgi_tls_free(c->tls);
  bgi_url_free(&c->ep.url);
  bgi_options_clear(&c->opts);
  bgi_errslot_destroy(&c->err);
  bgi_obs_destroy(&c->obs);
  pthread_mutex_destroy(&c->disc.mu);
  pthread_cond_destroy(&c->disc.cv);
  free(c);
}

void bgi_client_unref(bg_client *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) client_free(c);
}

void bgi_client_after_fork(bg_client *c) {
  bgi_fork_lock();
  uint64_t now = bgi_fork_gen_note();
  if (atomic_load(&c->fork_gen) != now) {
    /* a discovery under way was a parent's thread's: the next call finds the server again (or,
     * when it had ended, calls go where it found) */
    bgi_fork_remake_mutex(&c->disc.mu);
    memset(&c->disc.cv, 0, sizeof c->disc.cv);
    bgi_cond_init_monotonic(&c->disc.cv);
    c->disc.running = 0;
    bgi_pool_after_fork(&c->pool);
    bgi_muxset_after_fork(&c->mux);
    /* the cluster's or the Sentinel's table, published or not yet */
    if (c->own_cluster) bgi_cluster_after_fork(c->own_cluster);
    atomic_store_explicit(&c->fork_gen, now, memory_order_release);
  }
  bgi_fork_unlock();
}

/* The multiplexed connections per server (0: off) and their calls' spin, from the options. */
static size_t mux_conns(const bg_client *c) { return c->opts.pipeline ? (size_t)c->opts.pipeline_conns : 0; }
static uint64_t mux_spin_ns(const bg_client *c) { return (uint64_t)c->opts.pipeline_spin_us * 1000u; }

void bgi_client_use_mux_options(const bg_client *c, bgi_cluster *cl) {
  cl->mux_conns = mux_conns(c);
  cl->mux_spin_ns = mux_spin_ns(c);
}

/* What can be known without a server: how many hosts the mode takes, whether a cluster is asked
 * for a db, credentials that cannot authenticate. A client that needs no discovery (one server,
 * BG_OPT_CLUSTER off) is ready at once; a Sentinel URL gets its (empty) table now. */
static int plan(bg_client *c, bgi_err *err) {
  const bgi_url *u = &c->ep.url;
  int mode = (int)c->opts.cluster;
  if (c->ep.user && !c->ep.password)
    /* the user is not named: a URL whose ':' went missing holds the password in the user part */
    return bgi_err_set(err, BG_EAUTH, "a user name is given (in the URL or BG_OPT_USERNAME) but no password: AUTH "
                       "takes both (redis://user:password@host, or BG_OPT_PASSWORD)");
  if (c->opts.sentinel_username && !c->opts.sentinel_password)
    return bgi_err_set(err, BG_EAUTH, "BG_OPT_SENTINEL_USERNAME is given but no BG_OPT_SENTINEL_PASSWORD: AUTH takes "
                       "both");
  if (u->is_sentinel) {
    if (mode == BG_CLUSTER_ON)
      return bgi_err_set(err, BG_EINVAL, "a redis-sentinel:// URL names a Sentinel-managed master, not a Redis "
                         "Cluster: set BG_OPT_CLUSTER to auto or off");
    if (!(c->own_cluster = malloc(sizeof *c->own_cluster))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    c->ep.require_master = 1;
    bgi_cluster_init(c->own_cluster, &c->ep, (size_t)c->opts.pool_size, u->hosts, u->nhosts);
    bgi_client_use_mux_options(c, c->own_cluster);
    bgi_cluster_use_sentinel(c->own_cluster, u->master_name, c->opts.sentinel_username, c->opts.sentinel_password);
    return BG_OK;
  }
  size_t nseeds = u->is_unix ? 1 : u->nhosts;
  if (mode == BG_CLUSTER_OFF && nseeds > 1)
    return bgi_err_set(err, BG_EBADURL, "the URL names %zu hosts, which only a Redis Cluster takes (as seeds), "
                       "but BG_OPT_CLUSTER is off: give one host, or turn cluster mode on", nseeds);
  if (mode == BG_CLUSTER_ON && c->ep.db != 0)
    return bgi_err_set(err, BG_EINVAL, "database %d requested, but a Redis Cluster has only db 0 (remove it from "
                       "the URL, or BG_OPT_DB)", c->ep.db);
  if (mode == BG_CLUSTER_OFF) atomic_store(&c->ready, 1);
  return BG_OK;
}

/* BG_OPT_CONNECT_AT_OPEN: the server (or the cluster, or the sentinels and their master) answers
 * now, by the open call's deadline, or open fails as the first call would. */
static int check_server(bg_client *c, uint64_t deadline_ns, bgi_err *err) {
  int st = bgi_client_ready(c, deadline_ns, err);
  if (st != BG_OK || atomic_load(&c->cluster)) return st;
  bgi_conn *conn;
  if ((st = bgi_pool_acquire(&c->pool, deadline_ns, &conn, err)) != BG_OK) return st;
  bgi_pool_release(&c->pool, conn);
  return BG_OK;
}

static int open_client(bg_client **out, const char *url, const bg_options *opts, uint64_t deadline_ns, bgi_err *err) {
  bg_client *c;
  int st;
  if (!out) return bgi_err_set(err, BG_EINVAL, "bg_client_open: out must not be NULL");
  *out = NULL;
  if (!url) return bgi_err_set(err, BG_EINVAL, "bg_client_open: url must not be NULL");
  if ((st = bgi_options_check(opts, BGI_OPT_CLIENT, err)) != BG_OK) return st;
  if (!(c = calloc(1, sizeof *c))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  atomic_init(&c->refs, 1);
  atomic_init(&c->fork_gen, bgi_fork_gen_note());
  bgi_errslot_init(&c->err);
  bgi_obs_init(&c->obs, 0);
  pthread_mutex_init(&c->disc.mu, NULL);
  bgi_cond_init_monotonic(&c->disc.cv);
  /* c is zeroed: client_free undoes whatever was done when a step fails */
  if (bgi_options_copy(&c->opts, opts) != BG_OK) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = bgi_url_parse(url, &c->ep.url, err)) != BG_OK) goto fail;
  for (size_t i = 0; i < c->ep.url.nparams; i++) {
    const struct bgi_url_param *p = &c->ep.url.params[i];
    if ((st = bgi_options_take_from_url(&c->opts, p->name, p->option, p->value, p->text, err)) != BG_OK) goto fail;
  }
  c->ep.user = c->opts.username ? c->opts.username : c->ep.url.user;
  c->ep.password = c->opts.password ? c->opts.password : c->ep.url.password;
  c->ep.db = c->opts.db >= 0 ? (int)c->opts.db : c->ep.url.db;
  c->ep.connect_timeout_ms = c->opts.connect_timeout_ms;
  c->ep.command_timeout_ms = c->opts.command_timeout_ms;
  c->ep.client_name = c->opts.client_name;
  c->ep.tracking = c->opts.tracking != 0;
  c->ep.probe_slot = -1;
  c->ep.obs = &c->obs;
  c->obs.degraded_per_s = c->opts.degraded_events_per_s;
  bgi_endpoint_label_url(&c->ep, c->ep.url.nhosts > 1 ? "seed 1 of the URL" : "the URL's host");
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
  if ((st = plan(c, err)) != BG_OK) goto fail;
  if (c->opts.connect_at_open && (st = check_server(c, deadline_ns, err)) != BG_OK) goto fail;
  *out = c;
  return BG_OK;
fail:
  client_free(c);
  return st;
}

BG_API int bg_client_open_ex(bg_client **out, bg_call *call, const char *url, const bg_options *opts) {
  bgi_err err = {0};
  /* no handle yet to carry a message: the call is the only place for it */
  BGI_WITH_CALL(call, err.status = open_client(out, url, opts, bgi_call_deadline(call), &err));
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

int bgi_client_endpoint(bg_client *cl, int slot, uint64_t deadline_ns, const bgi_endpoint **out, bgi_err *err) {
  int st = bgi_client_ready(cl, deadline_ns, err);
  if (st != BG_OK) return st;
  bgi_cluster *cluster = atomic_load(&cl->cluster);
  if (!cluster) {
    *out = &cl->ep;
    return BG_OK;
  }
  bgi_node *n = bgi_cluster_route(cluster, slot < 0 ? 0u : (unsigned)slot);
  if (!n) return bgi_err_set(err, BG_ESERVER, "no master of the cluster serves slot %d now", slot);
  *out = &n->ep;
  return BG_OK;
}

int bgi_client_node_addr(bg_client *cl, int slot, uint64_t deadline_ns, char *buf, size_t cap, bgi_err *err) {
  const bgi_endpoint *ep = NULL;
  int st = bgi_client_endpoint(cl, slot, deadline_ns, &ep, err);
  if (st != BG_OK) snprintf(buf, cap, "%s", "");
  else if (ep->url.is_unix) snprintf(buf, cap, "unix:%s", ep->url.path);
  else snprintf(buf, cap, strchr(ep->url.host, ':') ? "[%s]:%d" : "%s:%d", ep->url.host, ep->url.port);
  return st;
}

/* ---- the observer and the client's counters (observe.h) --------------------------------------- */

BG_API int bg_client_set_observer(bg_client *c, bg_observer_fn fn, void *userdata) {
  if (!c) return BG_EINVAL;
  return bgi_obs_set(&c->obs, fn, userdata);
}

BG_API int bg_client_stat(const bg_client *c, int stat, int64_t *value) {
  if (!c || !value) return BG_EINVAL;
  const bgi_cluster *cl = atomic_load(&((bg_client *)c)->cluster);
  const bgi_cluster_stats *s = cl ? &cl->stats : NULL;
  switch (stat) {
    case BG_CLIENT_STAT_CONNECTIONS: *value = bgi_obs_get(&c->obs, BGI_OBS_CONNS); break;
    case BG_CLIENT_STAT_CONNECTIONS_LOST: *value = bgi_obs_get(&c->obs, BGI_OBS_CONNS_LOST); break;
    case BG_CLIENT_STAT_TRACKING_INVALIDATIONS: *value = bgi_obs_get(&c->obs, BGI_OBS_INVALIDATIONS); break;
    case BG_CLIENT_STAT_CLUSTER_MOVED: *value = s ? atomic_load(&((bgi_cluster_stats *)s)->moved) : 0; break;
    case BG_CLIENT_STAT_CLUSTER_ASK: *value = s ? atomic_load(&((bgi_cluster_stats *)s)->ask) : 0; break;
    case BG_CLIENT_STAT_CLUSTER_BUSY_RETRIES: *value = s ? atomic_load(&((bgi_cluster_stats *)s)->busy) : 0; break;
    case BG_CLIENT_STAT_CLUSTER_MAP_RELOADS: *value = s ? atomic_load(&((bgi_cluster_stats *)s)->reloads) : 0; break;
    case BG_CLIENT_STAT_CLUSTER_MAP_CHANGES: *value = bgi_obs_get(&c->obs, BGI_OBS_MAP_CHANGES); break;
    case BG_CLIENT_STAT_FAILOVERS: *value = bgi_obs_get(&c->obs, BGI_OBS_FAILOVERS); break;
    case BG_CLIENT_STAT_EVENTS: *value = bgi_obs_get(&c->obs, BGI_OBS_EVENTS); break;
    default: return BG_ENOTSUP;
  }
  return BG_OK;
}
