/*
 * Internal: where each of a Redis Cluster's 16384 hash slots lives, and one connection pool per
 * node that serves them.
 *
 * Every bloomguard step touches the keys of one filter or one lock, which share one slot by
 * construction, so routing a step is a table lookup. The table comes from CLUSTER SLOTS (not
 * CLUSTER SHARDS, which misreports shards around failovers before Redis 8). A MOVED patches its
 * slot at once; a background thread reloads the whole table when asked (MOVED, a connection
 * error, CLUSTERDOWN), at most once per BGI_CLUSTER_RELOAD_MIN_MS, and every
 * BGI_CLUSTER_RELOAD_EVERY_MS as a safety net. Nodes are never freed before the cluster is: a
 * route handed out stays valid, and a node that left the map only stops being routed to.
 * Steps go to masters only (a replica can miss a just-acknowledged add).
 *
 * The same table serves a Sentinel-managed primary (`sentinel` set): every slot maps to the
 * master the sentinels name (SENTINEL get-master-addr-by-name, asked in turn), its connections
 * check ROLE when they connect (a demoted master is never used), and a reload is asked for after
 * a connection error or a READONLY answer, as for a cluster.
 */
#ifndef BG_INTERNAL_CLUSTER_H
#define BG_INTERNAL_CLUSTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "redis/mux.h"
#include "redis/pool.h"
#include "redis/url.h"

#define BGI_CLUSTER_SLOTS 16384
#define BGI_CLUSTER_RELOAD_MIN_MS 100
#define BGI_CLUSTER_RELOAD_EVERY_MS 5000

typedef struct bgi_node {
  bgi_endpoint ep;         /* the client's endpoint, with this node's host, port and label */
  bgi_pool pool;           /* connects lazily */
  bgi_muxset mux;          /* multiplexed connections (BG_OPT_PIPELINE), connected lazily; off when
                              the cluster's mux_conns is 0 */
} bgi_node;

typedef struct bgi_cluster_stats {
  atomic_llong moved, ask, busy, reloads, reload_failures;
} bgi_cluster_stats;

typedef struct bgi_cluster {
  pthread_mutex_t mu;      /* nodes, owner, the refresher's state */
  pthread_mutex_t reload_mu;   /* one reload at a time (and the order of the sentinels) */
  bgi_node **nodes;
  size_t nnodes, cap;
  uint16_t owner[BGI_CLUSTER_SLOTS];   /* index into nodes + 1; 0: no master serves it */
  uint16_t loaded[BGI_CLUSTER_SLOTS];  /* owner as the last reload found it (MOVED patches owner only):
                                          what the next reload compares with (BG_EVENT_CLUSTER_MAP) */
  const bgi_endpoint *base;
  size_t pool_size;
  size_t mux_conns;        /* multiplexed connections per node; 0: none (set before the first load) */
  uint64_t mux_spin_ns;    /* their calls' spin before sleeping (BG_OPT_PIPELINE_SPIN_US) */
  bgi_hostport seeds[BGI_URL_MAX_HOSTS];   /* cluster: seed nodes; Sentinel: the sentinels */
  size_t nseeds;
  int sentinel;                /* 1: a Sentinel-managed master (see the top) */
  char master_name[128];
  bgi_endpoint sentinel_ep;    /* how to talk to a sentinel: its own credentials, RESP2, no db */

  int loaded_once;             /* a reload has succeeded (under mu) */

  pthread_t refresher;
  pthread_cond_t cv;
  int running, stop, wanted;
  uint64_t last_reload_ns;

  bgi_cluster_stats stats;
  /* The cluster tests' negative control, never set otherwise: an ASK is followed by a bits-only
   * read with ASKING, without MULTI (so the ASK trap bites on every server: Valkey checks a
   * MULTI's keys at EXEC), which answers from the importing node's missing bitmap (false negatives). */
  int fault_ask_bits_only;
  /* The other negative control: Lua steps declare no migration guard key (client/step.h). */
  int fault_no_migration_guard;
} bgi_cluster;

/* base outlives the cluster; seeds are copied. BG_OK or BG_ENOMEM. */
int bgi_cluster_init(bgi_cluster *cl, const bgi_endpoint *base, size_t pool_size, const bgi_hostport *seeds,
                     size_t nseeds);
/* Makes it a Sentinel-managed master's table (before the first reload): the sentinels are the
 * seeds, reached with sentinel_user / sentinel_password (NULL: none; kept by the caller). */
void bgi_cluster_use_sentinel(bgi_cluster *cl, const char *master_name, const char *sentinel_user,
                              const char *sentinel_password);
/* Stops the refresher, closes every connection, frees every node. */
void bgi_cluster_destroy(bgi_cluster *cl);
/* In a child after fork (common/fork.h; no thread of the child uses the table meanwhile): every
 * node's connections are let go without a write (bgi_pool_after_fork, bgi_muxset_after_fork),
 * the locks made anew, and the refresher (the parent's thread, not in the child) started again
 * when the parent had one. The slot map is kept. */
void bgi_cluster_after_fork(bgi_cluster *cl);

/*
 * Events (common/observe.h, through base->obs): a reload that finds slots served by other masters
 * than the last one found (the first load too) is BG_EVENT_CLUSTER_MAP; a Sentinel-managed master
 * that changed, BG_EVENT_FAILOVER. Told on the reloading thread, with reload_mu held.
 *
 * Replaces the slot table with a CLUSTER SLOTS reply that `from` (a host, for entries that leave
 * theirs out) answered. BG_EPROTO if the reply has another shape. *uncovered (may be NULL) is
 * the number of slots no master serves; first_gap their first.
 */
int bgi_cluster_load(bgi_cluster *cl, const bgi_reply *slots, const char *from, size_t *uncovered,
                     unsigned *first_gap, bgi_err *err);

/* Asks the known nodes (masters first, then the others, then the seeds) for the table; in
 * Sentinel mode, the sentinels in turn for the master and that master for its ROLE, skipping a
 * sentinel that fails or names a server that is not the master (BG_ECONN if none answers,
 * BG_EINVAL if none knows the name, BG_ESERVER if those named are not masters). Every wait by the
 * call's absolute deadline_ns (0: each connect by the connect timeout, each round trip by the
 * command timeout). One reload at a time. */
int bgi_cluster_reload(bgi_cluster *cl, uint64_t deadline_ns, bgi_err *err);

/* Starts the background refresher (after the first load). */
int bgi_cluster_start(bgi_cluster *cl);

/* The master serving slot, or NULL (and a reload is asked for). */
bgi_node *bgi_cluster_route(bgi_cluster *cl, unsigned slot);
/* The node at host:port, added if it is new; NULL when out of memory. */
bgi_node *bgi_cluster_node(bgi_cluster *cl, const char *host, int port);
/* MOVED: slot now lives on n (until the next reload says otherwise); asks for a reload. */
void bgi_cluster_moved(bgi_cluster *cl, unsigned slot, bgi_node *n);
/* Something changed (a connection error, CLUSTERDOWN): reload soon. */
void bgi_cluster_want_reload(bgi_cluster *cl);

#endif
