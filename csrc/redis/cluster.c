#include "redis/cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cond.h"
#include "common/fork.h"
#include "common/observe.h"

int bgi_cluster_init(bgi_cluster *cl, const bgi_endpoint *base, size_t pool_size, const bgi_hostport *seeds,
                     size_t nseeds) {
  memset(cl, 0, sizeof *cl);
  cl->base = base;
  cl->pool_size = pool_size;
  if (nseeds > BGI_URL_MAX_HOSTS) nseeds = BGI_URL_MAX_HOSTS;
  memcpy(cl->seeds, seeds, nseeds * sizeof *seeds);
  cl->nseeds = nseeds;
  pthread_mutex_init(&cl->mu, NULL);
  pthread_mutex_init(&cl->reload_mu, NULL);
  bgi_cond_init_monotonic(&cl->cv);
  return BG_OK;
}

void bgi_cluster_destroy(bgi_cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  int running = cl->running;
  cl->stop = 1;
  pthread_cond_broadcast(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
  if (running) pthread_join(cl->refresher, NULL);
  for (size_t i = 0; i < cl->nnodes; i++) {
    bgi_muxset_destroy(&cl->nodes[i]->mux);
    bgi_pool_destroy(&cl->nodes[i]->pool);
    free(cl->nodes[i]);
  }
  free(cl->nodes);
  cl->nodes = NULL;
  cl->nnodes = cl->cap = 0;
  pthread_cond_destroy(&cl->cv);
  pthread_mutex_destroy(&cl->reload_mu);
  pthread_mutex_destroy(&cl->mu);
}

void bgi_cluster_after_fork(bgi_cluster *cl) {
  bgi_fork_remake_mutex(&cl->mu);
  bgi_fork_remake_mutex(&cl->reload_mu);
  memset(&cl->cv, 0, sizeof cl->cv);
  bgi_cond_init_monotonic(&cl->cv);
  int had_refresher = cl->running && !cl->stop;
  cl->running = 0;
  for (size_t i = 0; i < cl->nnodes; i++) {
    bgi_pool_after_fork(&cl->nodes[i]->pool);
    bgi_muxset_after_fork(&cl->nodes[i]->mux);
  }
  /* (should no thread be made, calls still go by the map as it is; MOVED still patches it) */
  if (had_refresher) (void)bgi_cluster_start(cl);
}

/* cl->mu held. */
static long find_node(const bgi_cluster *cl, const char *host, int port) {
  for (size_t i = 0; i < cl->nnodes; i++)
    if (cl->nodes[i]->ep.url.port == port && strcmp(cl->nodes[i]->ep.url.host, host) == 0) return (long)i;
  return -1;
}

/* cl->mu held. url_what: how messages name a node the URL gave (a seed; redis/url.h), NULL for
 * one a server named. */
static long add_node(bgi_cluster *cl, const char *host, int port, const char *url_what) {
  long i = find_node(cl, host, port);
  if (i >= 0) return i;
  if (strlen(host) >= sizeof cl->nodes[0]->ep.url.host) return -1;
  if (cl->nnodes == cl->cap) {
    size_t cap = cl->cap ? cl->cap * 2 : 8;
    bgi_node **p = realloc(cl->nodes, cap * sizeof *p);
    if (!p) return -1;
    cl->nodes = p;
    cl->cap = cap;
  }
  bgi_node *n = calloc(1, sizeof *n);
  if (!n) return -1;
  n->ep = *cl->base;
  n->ep.url.is_unix = 0;
  snprintf(n->ep.url.host, sizeof n->ep.url.host, "%s", host);
  n->ep.url.port = port;
  n->ep.probe_slot = -1;
  n->ep.require_master = cl->sentinel;
  if (url_what) bgi_endpoint_label_url(&n->ep, url_what);
  else bgi_endpoint_label_named(&n->ep);
  if (bgi_pool_init(&n->pool, cl->pool_size, &n->ep) != BG_OK) {
    free(n);
    return -1;
  }
  if (bgi_muxset_init(&n->mux, cl->mux_conns, cl->mux_spin_ns, &n->ep) != BG_OK) {
    bgi_muxset_destroy(&n->mux);
    bgi_pool_destroy(&n->pool);
    free(n);
    return -1;
  }
  cl->nodes[cl->nnodes] = n;
  return (long)cl->nnodes++;
}

bgi_node *bgi_cluster_node(bgi_cluster *cl, const char *host, int port) {
  pthread_mutex_lock(&cl->mu);
  long i = add_node(cl, host, port, NULL);
  bgi_node *n = i >= 0 ? cl->nodes[i] : NULL;
  pthread_mutex_unlock(&cl->mu);
  return n;
}

bgi_node *bgi_cluster_route(bgi_cluster *cl, unsigned slot) {
  pthread_mutex_lock(&cl->mu);
  unsigned o = cl->owner[slot & (BGI_CLUSTER_SLOTS - 1)];
  bgi_node *n = o ? cl->nodes[o - 1] : NULL;
  if (!n) {
    cl->wanted = 1;
    pthread_cond_signal(&cl->cv);
  }
  pthread_mutex_unlock(&cl->mu);
  return n;
}

void bgi_cluster_want_reload(bgi_cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  cl->wanted = 1;
  pthread_cond_signal(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
}

void bgi_cluster_moved(bgi_cluster *cl, unsigned slot, bgi_node *n) {
  pthread_mutex_lock(&cl->mu);
  for (size_t i = 0; i < cl->nnodes; i++)
    if (cl->nodes[i] == n) cl->owner[slot & (BGI_CLUSTER_SLOTS - 1)] = (uint16_t)(i + 1);
  cl->wanted = 1;
  pthread_cond_signal(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
}

/* cl->mu held: the nodes that serve a slot now. */
static size_t count_masters(const bgi_cluster *cl) {
  size_t n = 0;
  unsigned char *seen = calloc(cl->nnodes + 1, 1);
  if (!seen) return 0;
  for (unsigned s = 0; s < BGI_CLUSTER_SLOTS; s++)
    if (cl->owner[s] && !seen[cl->owner[s]]) {
      seen[cl->owner[s]] = 1;
      n++;
    }
  free(seen);
  return n;
}

/* A reload found `moved` slots served by other masters than the last one found. */
static void map_event(bgi_cluster *cl, size_t moved, size_t masters, int first_load) {
  bgi_obs *o = cl->base->obs;
  if (!first_load) bgi_obs_add(o, BGI_OBS_MAP_CHANGES, 1);
  if (!bgi_obs_on(o)) return;
  int64_t v[BG_EVENT_NVALUES] = {0};
  v[BG_EV_COUNT] = (int64_t)moved;
  v[BG_EV_FIRST] = first_load;
  if (first_load)
    bgi_obs_emit(o, BG_EVENT_CLUSTER_MAP, "", v, "cluster slot map loaded: %zu slots on %zu masters", moved, masters);
  else
    bgi_obs_emit(o, BG_EVENT_CLUSTER_MAP, "", v, "cluster slot map changed: %zu slot%s now (%zu masters)", moved,
                 moved == 1 ? " is served by another master" : "s are served by other masters", masters);
}

/* [host, port, ...] of a CLUSTER SLOTS entry; an empty host means the node that answered. */
static int node_of(const bgi_reply *r, const char *from, const char **host, int *port) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_INTEGER || r->element[1]->integer < 1 || r->element[1]->integer > 65535)
    return -1;
  *host = r->element[0]->len && strcmp(r->element[0]->str, "?") != 0 ? r->element[0]->str : from;
  *port = (int)r->element[1]->integer;
  return 0;
}

int bgi_cluster_load(bgi_cluster *cl, const bgi_reply *slots, const char *from, size_t *uncovered,
                     unsigned *first_gap, bgi_err *err) {
  uint16_t *owner = calloc(BGI_CLUSTER_SLOTS, sizeof *owner);
  int st = BG_OK;
  if (!owner) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  if (slots->type != REDIS_REPLY_ARRAY) {
    free(owner);
    return bgi_err_set(err, BG_EPROTO, "CLUSTER SLOTS: unexpected reply");
  }
  pthread_mutex_lock(&cl->mu);
  for (size_t i = 0; i < slots->elements && st == BG_OK; i++) {
    const bgi_reply *e = slots->element[i];
    const char *host;
    int port;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER || e->element[0]->integer < 0 ||
        e->element[1]->integer >= BGI_CLUSTER_SLOTS || e->element[0]->integer > e->element[1]->integer ||
        node_of(e->element[2], from, &host, &port) != 0) {
      st = bgi_err_set(err, BG_EPROTO, "CLUSTER SLOTS: unexpected entry %zu", i);
      break;
    }
    long m = add_node(cl, host, port, NULL);
    if (m < 0) {
      st = bgi_err_set(err, BG_ENOMEM, "out of memory");
      break;
    }
    /* the tracking probe of a node's new connections must live in a slot it serves */
    bgi_node *mn = cl->nodes[m];
    int probe = __atomic_load_n(&mn->ep.probe_slot, __ATOMIC_RELAXED);
    if (probe < 0 || probe < e->element[0]->integer || probe > e->element[1]->integer)
      __atomic_store_n(&mn->ep.probe_slot, (int)e->element[0]->integer, __ATOMIC_RELAXED);
    for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++) owner[s] = (uint16_t)(m + 1);
    /* replicas: known, so a reload can ask them when the masters are gone */
    for (size_t j = 3; j < e->elements; j++)
      if (node_of(e->element[j], from, &host, &port) == 0) (void)add_node(cl, host, port, NULL);
  }
  size_t gaps = 0, moved = 0, masters = 0;
  unsigned first = 0;
  int first_load = 0;
  if (st == BG_OK) {
    for (unsigned s = 0; s < BGI_CLUSTER_SLOTS; s++)
      if (!owner[s] && !gaps++) first = s;
    first_load = !cl->loaded_once;
    cl->loaded_once = 1;
    /* keep serving the old routes for slots a reload found uncovered (a master failing over) */
    for (unsigned s = 0; s < BGI_CLUSTER_SLOTS; s++)
      if (owner[s]) {
        moved += cl->loaded[s] != owner[s];
        cl->owner[s] = cl->loaded[s] = owner[s];
      }
    masters = count_masters(cl);
    cl->last_reload_ns = bgi_now_ns();
  }
  pthread_mutex_unlock(&cl->mu);
  free(owner);
  if (moved) map_event(cl, moved, masters, first_load);
  if (uncovered) *uncovered = gaps;
  if (first_gap) *first_gap = first;
  return st;
}

/* One round trip of a single command (argv) on a pooled connection of n, by deadline_ns (0: the
 * connect and command timeouts); *out is the reply, valid until the connection is released. */
static int node_command(bgi_node *n, const char *const *argv, size_t argc, uint64_t deadline_ns, bgi_conn **c,
                        bgi_reply **out, bgi_err *err) {
  int st = bgi_pool_acquire(&n->pool, deadline_ns, c, err);
  if (st != BG_OK) return st;
  bgi_buf_reset(&(*c)->out);
  if (bgi_buf_reserve(&(*c)->out, 64) != BG_OK) {
    bgi_pool_release(&n->pool, *c);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  bgi_resp_array(&(*c)->out, argc);
  for (size_t i = 0; i < argc; i++) bgi_resp_cstr(&(*c)->out, argv[i]);
  st = bgi_conn_roundtrip(*c, out, 1, deadline_ns ? deadline_ns : bgi_deadline_in_ms(n->ep.command_timeout_ms), err);
  if (st != BG_OK) bgi_pool_release(&n->pool, *c);
  return st;
}

static int ask_one(bgi_cluster *cl, bgi_node *n, uint64_t deadline_ns, bgi_err *err) {
  static const char *const slots_cmd[] = {"CLUSTER", "SLOTS"};
  bgi_conn *c;
  bgi_reply *rep[1];
  int st = node_command(n, slots_cmd, 2, deadline_ns, &c, rep, err);
  if (st != BG_OK) return st;
  if (rep[0]->type == REDIS_REPLY_ERROR) st = bgi_reply_error(rep[0], "CLUSTER SLOTS", err);
  if (st == BG_OK) st = bgi_cluster_load(cl, rep[0], n->ep.url.host, NULL, NULL, err);
  bgi_pool_release(&n->pool, c);
  return st;
}

void bgi_cluster_use_sentinel(bgi_cluster *cl, const char *master_name, const char *sentinel_user,
                              const char *sentinel_password) {
  cl->sentinel = 1;
  snprintf(cl->master_name, sizeof cl->master_name, "%s", master_name);
  cl->sentinel_ep = *cl->base;
  cl->sentinel_ep.user = sentinel_user;
  cl->sentinel_ep.password = sentinel_password;
  cl->sentinel_ep.db = 0;
  cl->sentinel_ep.tracking = 0;
  cl->sentinel_ep.require_master = 0;
  cl->sentinel_ep.probe_slot = -1;
  cl->sentinel_ep.url.is_unix = 0;
}

/* One sentinel's answer to SENTINEL get-master-addr-by-name: 1 and host/port, 0 it knows no such
 * master, or a status. */
static int ask_sentinel(bgi_cluster *cl, const bgi_hostport *s, size_t pos, uint64_t deadline_ns, char *host,
                        size_t cap, int *port, bgi_err *err) {
  bgi_endpoint ep = cl->sentinel_ep;
  bgi_conn conn = {0};
  bgi_reply *rep[1];
  char what[48];
  snprintf(ep.url.host, sizeof ep.url.host, "%s", s->host);
  ep.url.port = s->port;
  snprintf(what, sizeof what, "sentinel %zu of the URL", pos + 1);
  bgi_endpoint_label_url(&ep, what);
  int st = bgi_conn_open(&conn, &ep, deadline_ns, BGI_CONN_NO_TRACKING, err);
  if (st == BG_OK) {
    bgi_buf_reset(&conn.out);
    if (bgi_buf_reserve(&conn.out, bgi_resp_bound(3, strlen(cl->master_name) + 32)) != BG_OK) {
      st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    } else {
      bgi_resp_array(&conn.out, 3);
      bgi_resp_cstr(&conn.out, "SENTINEL");
      bgi_resp_cstr(&conn.out, "get-master-addr-by-name");
      bgi_resp_cstr(&conn.out, cl->master_name);
      st = bgi_conn_roundtrip(&conn, rep, 1, deadline_ns ? deadline_ns : bgi_deadline_in_ms(ep.command_timeout_ms), err);
    }
  }
  if (st == BG_OK) {
    const bgi_reply *r = rep[0];
    if (r->type == REDIS_REPLY_NIL) st = 0;
    else if (r->type == REDIS_REPLY_ERROR) st = bgi_reply_error(r, "SENTINEL get-master-addr-by-name", err);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
             r->element[1]->type != REDIS_REPLY_STRING || atoi(r->element[1]->str) < 1 ||
             atoi(r->element[1]->str) > 65535)
      st = bgi_err_set(err, BG_EPROTO, "SENTINEL get-master-addr-by-name: unexpected reply");
    else {
      snprintf(host, cap, "%s", r->element[0]->str);
      *port = atoi(r->element[1]->str);
      st = 1;
    }
  }
  bgi_conn_free(&conn);
  return st;
}

/* The master a sentinel named says so itself (ROLE), on a connection of its pool (one connected
 * before may have been demoted since): BG_OK, or the failure. */
static int check_role(bgi_node *n, uint64_t deadline_ns, bgi_err *err) {
  static const char *const role_cmd[] = {"ROLE"};
  bgi_conn *c;
  bgi_reply *rep[1];
  int st = node_command(n, role_cmd, 1, deadline_ns, &c, rep, err);
  if (st != BG_OK) return st;
  const bgi_reply *r = rep[0];
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !r->element[0]->str || strcmp(r->element[0]->str, "master") != 0)
    st = bgi_err_set(err, BG_ESERVER, "%s is not the master (ROLE: %s)", n->ep.label,
                     r->type == REDIS_REPLY_ARRAY && r->elements && r->element[0]->str ? r->element[0]->str : "refused");
  bgi_pool_release(&n->pool, c);
  return st;
}

/* The sentinels named another master than the one calls went to. */
static void failover_event(bgi_cluster *cl, const char *was, const char *now) {
  bgi_obs *o = cl->base->obs;
  bgi_obs_add(o, BGI_OBS_FAILOVERS, 1);
  if (bgi_obs_on(o))
    bgi_obs_emit(o, BG_EVENT_FAILOVER, "", NULL, "Sentinel failover of master \"%s\": calls go to %s now (was %s)",
                 cl->master_name, now, was);
}

/*
 * Sentinel mode, as the Sentinel client guidelines say: the sentinels in turn until one names an
 * address whose server confirms it is the master (ROLE). A sentinel that fails (unreachable, a
 * refusal) or names an address that fails that check is skipped and the next one asked; the one
 * that answered right moves to the front of the list, so the next discovery asks it first.
 * cl->reload_mu held (the list's order is the reloads').
 */
static int reload_from_sentinels(bgi_cluster *cl, uint64_t deadline_ns, bgi_err *err) {
  char host[256];
  int port = 0, unknown = 0, refused = 0, not_master = 0;
  bgi_err last = {0}, last_named = {0};
  for (size_t i = 0; i < cl->nseeds; i++) {
    if (i && deadline_ns && bgi_now_ns() >= deadline_ns)
      return bgi_err_set(err, BG_ETIMEOUT, "the call's deadline passed while asking the sentinels (the last: %s)",
                         last.status ? last.msg : last_named.msg);
    int r = ask_sentinel(cl, &cl->seeds[i], i, deadline_ns, host, sizeof host, &port, &last);
    if (r == BG_ECANCELED) return bgi_err_set(err, r, "%s", last.msg);
    if (r == 0) unknown++;
    else if (r == BG_EAUTH) refused++;
    if (r != 1) continue;
    pthread_mutex_lock(&cl->mu);
    long m = add_node(cl, host, port, NULL);
    bgi_node *n = m >= 0 ? cl->nodes[m] : NULL;
    pthread_mutex_unlock(&cl->mu);
    if (!n) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    /* a sentinel's view can be behind (or wrong): the master must say so itself */
    int st = check_role(n, deadline_ns, &last_named);
    if (st != BG_OK && (st == BG_ECANCELED || (deadline_ns && bgi_now_ns() >= deadline_ns)))
      return bgi_err_set(err, st, "%s", last_named.msg);
    if (st != BG_OK) {
      not_master++;
      bgi_err_prefix(&last_named, "the master a sentinel named");
      continue;
    }
    if (i > 0) {
      bgi_hostport first = cl->seeds[i];
      memmove(&cl->seeds[1], &cl->seeds[0], i * sizeof cl->seeds[0]);
      cl->seeds[0] = first;
    }
    pthread_mutex_lock(&cl->mu);
    long before = (long)cl->loaded[0] - 1;
    char was[sizeof n->ep.label];
    snprintf(was, sizeof was, "%s", before >= 0 ? cl->nodes[before]->ep.label : "");
    for (unsigned s = 0; s < BGI_CLUSTER_SLOTS; s++) cl->owner[s] = cl->loaded[s] = (uint16_t)(m + 1);
    cl->last_reload_ns = bgi_now_ns();
    pthread_mutex_unlock(&cl->mu);
    if (before >= 0 && before != m) failover_event(cl, was, n->ep.label);
    return BG_OK;
  }
  if (not_master)
    return bgi_err_set(err, last_named.status, "%s (%d of %zu sentinels named a server that failed it; they are "
                       "asked again)", last_named.msg, not_master, cl->nseeds);
  if (unknown)
    return bgi_err_set(err, BG_EINVAL, "%d of %zu sentinels know no master named \"%s\" (check the name after "
                       "'#' in the URL: SENTINEL MASTERS lists theirs)", unknown, cl->nseeds, cl->master_name);
  if (refused) return bgi_err_set(err, BG_EAUTH, "%s (sentinels have credentials of their own: "
                                  "BG_OPT_SENTINEL_USERNAME / BG_OPT_SENTINEL_PASSWORD)", last.msg);
  return bgi_err_set(err, last.status == BG_ECANCELED ? BG_ECANCELED : BG_ECONN,
                     "no sentinel of the URL answered (%zu tried; the last: %s)", cl->nseeds, last.msg);
}

/* A seed of the URL as a node (named by its place in messages: redis/url.h). */
static bgi_node *seed_node(bgi_cluster *cl, size_t i) {
  char what[48];
  snprintf(what, sizeof what, cl->nseeds > 1 ? "seed %zu of the URL" : "the URL's host", i + 1);
  pthread_mutex_lock(&cl->mu);
  long k = add_node(cl, cl->seeds[i].host, cl->seeds[i].port, what);
  bgi_node *n = k >= 0 ? cl->nodes[k] : NULL;
  pthread_mutex_unlock(&cl->mu);
  return n;
}

static int reload_cluster(bgi_cluster *cl, uint64_t deadline_ns, bgi_err *err);

int bgi_cluster_reload(bgi_cluster *cl, uint64_t deadline_ns, bgi_err *err) {
  /* one at a time: the refresher's, and a call's first (bgi_client's discovery) */
  pthread_mutex_lock(&cl->reload_mu);
  int st = cl->sentinel ? reload_from_sentinels(cl, deadline_ns, err) : reload_cluster(cl, deadline_ns, err);
  pthread_mutex_unlock(&cl->reload_mu);
  atomic_fetch_add(st == BG_OK ? &cl->stats.reloads : &cl->stats.reload_failures, 1);
  return st;
}

static int reload_cluster(bgi_cluster *cl, uint64_t deadline_ns, bgi_err *err) {
  /* candidates: masters first (they are the most likely to be up), then every other known node,
   * then the seeds; a snapshot of the list, as nodes are only ever appended */
  pthread_mutex_lock(&cl->mu);
  size_t n = cl->nnodes;
  bgi_node **order = malloc((n + 1) * sizeof *order);
  unsigned char *is_master = calloc(n + 1, 1);
  size_t k = 0;
  if (order && is_master) {
    for (unsigned s = 0; s < BGI_CLUSTER_SLOTS; s++)
      if (cl->owner[s]) is_master[cl->owner[s] - 1] = 1;
    for (size_t i = 0; i < n; i++)
      if (is_master[i]) order[k++] = cl->nodes[i];
    for (size_t i = 0; i < n; i++)
      if (!is_master[i]) order[k++] = cl->nodes[i];
  }
  pthread_mutex_unlock(&cl->mu);
  int st = BG_ENOMEM;
  if (!order || !is_master) {
    free(order);
    free(is_master);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  /* the next candidate while the deadline (if any) allows, and the call was not cancelled */
#define NEXT_TRY (st != BG_OK && st != BG_ECANCELED && (!deadline_ns || bgi_now_ns() < deadline_ns))
  for (size_t i = 0; i < k && NEXT_TRY; i++) st = ask_one(cl, order[i], deadline_ns, err);
  for (size_t i = 0; i < cl->nseeds && NEXT_TRY; i++) {
    bgi_node *s = seed_node(cl, i);
    st = s ? ask_one(cl, s, deadline_ns, err) : bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
#undef NEXT_TRY
  free(order);
  free(is_master);
  return st;
}

static void *refresh_main(void *arg) {
  bgi_cluster *cl = arg;
  pthread_mutex_lock(&cl->mu);
  while (!cl->stop) {
    uint64_t now = bgi_now_ns(), since = now - cl->last_reload_ns;
    uint64_t due = bgi_ms_ns(cl->wanted ? BGI_CLUSTER_RELOAD_MIN_MS : BGI_CLUSTER_RELOAD_EVERY_MS);
    if (since < due) {
      bgi_cond_wait_until(&cl->cv, &cl->mu, cl->last_reload_ns + due);
      continue;
    }
    cl->wanted = 0;
    /* a failed reload is tried again after the minimum interval, not the long one */
    cl->last_reload_ns = now;
    pthread_mutex_unlock(&cl->mu);
    bgi_err ignored = {0};
    int st = bgi_cluster_reload(cl, 0, &ignored);
    pthread_mutex_lock(&cl->mu);
    if (st != BG_OK) cl->wanted = 1;
  }
  pthread_mutex_unlock(&cl->mu);
  return NULL;
}

int bgi_cluster_start(bgi_cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  int st = BG_OK;
  if (!cl->running) {
    if (pthread_create(&cl->refresher, NULL, refresh_main, cl) == 0) cl->running = 1;
    else st = BG_ENOMEM;
  }
  pthread_mutex_unlock(&cl->mu);
  return st;
}
