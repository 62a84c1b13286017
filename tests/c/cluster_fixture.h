/*
 * A real 6-node Redis Cluster (3 masters + 3 replicas) for a test, on random free loopback ports,
 * and the topology changes a cluster client must survive: one slot migrated step by step (ASK,
 * TRYAGAIN, MOVED), a reshard, a graceful failover, kill -9 and restart of a node.
 *
 * Every node is a child of the test and is stopped by its pid; its scratch directory (nodes.conf,
 * log) is removed by bgt_cluster_stop. A node gets SIGKILL when the *thread* that started it exits
 * (PR_SET_PDEATHSIG), so call bgt_cluster_start and bgt_cluster_restart from the main thread (or
 * one that outlives the cluster), not from a short-lived worker. A test that crashes leaves no
 * process, but its directory stays in /tmp/bgt-cluster-*. bgt_cluster_start ignores SIGPIPE if it
 * was at its default (raw hiredis writes to a node killed a moment ago would end the test).
 * Binaries: $BG_REDIS_SERVER / $BG_REDIS_CLI, or redis-server / redis-cli from PATH.
 * Ports: each node port P in 20000..22767 (so that its bus port P+10000 stays below the kernel's
 * ephemeral range, where other tests' free ports come from), bind-tested with P+10000; a port
 * taken before the server binds it makes the start retry with new ports.
 * Replica assignment is shuffled by redis-cli --cluster create: read node[i].is_master / .master
 * (bgt_cluster_refresh after any topology change), never assume.
 * BGT_CLUSTER_TRACE=1 prints the start's phases and what each wait is waiting for.
 * Facts behind this: /work/shared/notes/scaleout.md Q2 and Q5.
 */
#ifndef BG_TEST_CLUSTER_FIXTURE_H
#define BG_TEST_CLUSTER_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

#define BGT_CLUSTER_NODES 6

typedef struct bgt_cluster_node {
  pid_t pid;      /* 0 while the node is killed or stopped */
  int port;
  char id[41];
  int is_master;
  int master;     /* index of its master, -1 for a master */
} bgt_cluster_node;

typedef struct bgt_cluster {
  int n;                                /* 6 */
  bgt_cluster_node node[BGT_CLUSTER_NODES];
  char url[128];                        /* redis://127.0.0.1:P of node 0 */
  char seeds[512];                      /* redis://127.0.0.1:P0,127.0.0.1:P1,... all nodes */
  char dir[256];
  /* NOREPLICAS answers the fixture got and coped with: Valkey >= 8 replicates CLUSTER SETSLOT to
   * the shard's replicas first, and answers NOREPLICAS (having done nothing) when one has not
   * acknowledged it within 2 s; SETSLOT is sent again, a reshard that stopped on it goes on */
  int noreplicas;
  int node_timeout_ms;                  /* cluster-node-timeout: 2000 (failover tests), or as started */
} bgt_cluster;

/* Starts the nodes, creates the cluster and waits until it is ok and agreed (~2.5 s).
 * Exits the test binary with status 2 and a message if it cannot. */
void bgt_cluster_start(bgt_cluster *c);
/* The same with another cluster-node-timeout: a test that kills no node takes a long one, so a
 * node starved of CPU for a few seconds on a loaded machine is not failed over (which loses the
 * writes its replica had not received yet, as Redis Cluster does). */
void bgt_cluster_start_with(bgt_cluster *c, int node_timeout_ms);
/* Stops every node by its pid (SIGTERM, then SIGKILL) and removes the directory. Idempotent. */
void bgt_cluster_stop(bgt_cluster *c);
/* Re-reads ids, roles and masters from CLUSTER NODES of a live node. */
void bgt_cluster_refresh(bgt_cluster *c);

/* Runs one command on a fresh raw hiredis connection to node i; the reply rendered like
 * bgt_redis_cmd ("(error) MOVED 866 127.0.0.1:20001", ...). "(io error) ..." if the node cannot be
 * reached. Malloc'd; caller frees. */
char *bgt_cluster_cmd(const bgt_cluster *c, int node, const char *fmt, ...);

/* CRC16 (XMODEM) of the key, or of its first non-empty {tag}, mod 16384: the test's own copy. */
unsigned bgt_cluster_slot(const char *key);
unsigned bgt_cluster_slot_len(const char *key, size_t len);
/* Index of the node that owns slot, by CLUSTER SLOTS of a live node; -1 if none. */
int bgt_cluster_owner(const bgt_cluster *c, unsigned slot);
/* A live master other than node; -1 if none. */
int bgt_cluster_other_master(const bgt_cluster *c, int node);
/* A live replica of that master; -1 if none. */
int bgt_cluster_replica_of(const bgt_cluster *c, int master);

/* One slot's migration in steps, so a test can act between them (scaleout.md Q5 "one slot by
 * hand"). The source is the slot's owner in CLUSTER SLOTS, which stays the source until _end. */
int bgt_cluster_migrate_begin(bgt_cluster *c, unsigned slot, int to);      /* IMPORTING on to, MIGRATING on the owner */
int bgt_cluster_migrate_key(bgt_cluster *c, unsigned slot, int to, const char *key, size_t keylen); /* MIGRATE one key (NOKEY is ok) */
int bgt_cluster_migrate_all_keys(bgt_cluster *c, unsigned slot, int to);   /* GETKEYSINSLOT + MIGRATE the rest */
int bgt_cluster_migrate_end(bgt_cluster *c, unsigned slot, int to);        /* SETSLOT NODE on to, the source, the other masters; waits for one map */
int bgt_cluster_move_slot(bgt_cluster *c, unsigned slot, int to);          /* begin + all keys + end */
/* redis-cli --cluster reshard ... --cluster-yes, then waits for one map and refreshes. A run that
 * stops on NOREPLICAS is followed by --cluster fix and another run for the slots still to move. */
int bgt_cluster_reshard(bgt_cluster *c, int from, int to, int nslots);
/* Slots the map (CLUSTER SLOTS of a live node) gives node. */
int bgt_cluster_slot_count(const bgt_cluster *c, int node);
/* CLUSTER FAILOVER on the replica; waits until it is master and the map agrees; refreshes. */
int bgt_cluster_failover(bgt_cluster *c, int replica);
/* kill -9 and reap; the node keeps its port and directory for bgt_cluster_restart. */
void bgt_cluster_kill(bgt_cluster *c, int node);
/* Starts the node again on its port with its nodes.conf; waits until the cluster is ok with it
 * back (a replica with its link up); refreshes. */
int bgt_cluster_restart(bgt_cluster *c, int node);
/* Waits until every live node says cluster_state:ok; all live nodes agree on who is master and
 * who is a replica of whom (CLUSTER NODES, no live node flagged fail) and give the same slot ->
 * master map in CLUSTER SLOTS, covering all 16384 slots with live masters and listing no dead
 * node (not even as a replica); and every live replica's link is up (ROLE "connected").
 * The replica lists inside CLUSTER SLOTS are not compared: 7.0 leaves out a replica whose
 * gossiped replication offset is still 0, i.e. for up to 10 s (repl-ping-replica-period) after
 * --cluster create on an idle cluster (measured here). */
int bgt_cluster_wait_ok(bgt_cluster *c, int timeout_ms);

/* all int returns: 0 ok, -1 failure with a message on stderr */

#endif
