/*
 * A real Redis Sentinel deployment for a test: 1 master + 1 replica (data nodes 0 and 1) and 3
 * sentinels monitoring them as "bgmaster", all on random free loopback ports, and the faults a
 * Sentinel client must survive: kill -9 of the master (Sentinel fails over in ~3.3 s), the old
 * master back as a replica, sentinels killed and restarted.
 *
 * Every process is a child of the test and is stopped by its pid; the scratch directory (each
 * node's log, each sentinel's own writable config file, which Sentinel rewrites) is removed by
 * bgt_sentinel_stop. A process gets SIGKILL when the *thread* that started it exits
 * (PR_SET_PDEATHSIG), so call start/restart from the main thread (or one that outlives the set).
 * A test that crashes leaves no process, but its directory stays in /tmp/bgt-sentinel-*: data0/log,
 * data1/log, sentinel<i>/{sentinel.conf,log}; BGT_SENTINEL_KEEP=1 makes stop leave it too.
 * bgt_sentinel_start ignores SIGPIPE if it was at its default (a raw hiredis write to a process
 * killed a moment ago would end the test).
 * Binary: $BG_REDIS_SERVER or redis-server from PATH (sentinels run as `redis-server FILE --sentinel`).
 * Ports: random in 20000..(the kernel's ephemeral range - 1), bind-tested; a port taken before
 * the server binds it makes the start retry with new ports.
 * Roles change on failover: ask bgt_sentinel_master, never assume node 0 is the master.
 * BGT_SENTINEL_TRACE=1 prints the start's phases and what each wait is waiting for.
 * Facts behind this: /work/shared/notes/scaleout.md Q4.
 */
#ifndef BG_TEST_SENTINEL_FIXTURE_H
#define BG_TEST_SENTINEL_FIXTURE_H

#include <sys/types.h>

typedef struct bgt_sentinel_opts {
  const char *data_password;      /* NULL: none; else requirepass + masterauth on the data nodes, and sentinel auth-pass */
  const char *sentinel_password;  /* NULL: none; else requirepass on the sentinels (Sentinel's own credentials) */
} bgt_sentinel_opts;

typedef struct bgt_sentinel_set {
  int data_port[2];               /* data nodes 0 and 1 (node 0 is the first master; roles change on failover) */
  pid_t data_pid[2];              /* 0 while killed */
  int sentinel_port[3];
  pid_t sentinel_pid[3];          /* 0 while killed */
  char master_name[32];           /* "bgmaster" */
  char url[512];                  /* redis-sentinel://[:data_password@]127.0.0.1:S0,127.0.0.1:S1,127.0.0.1:S2#bgmaster
                                     (Lettuce's form, read as the library does: the userinfo is the data nodes';
                                     the sentinels' password goes to BG_OPT_SENTINEL_PASSWORD) */
  char dir[256];
  bgt_sentinel_opts opts;         /* copied strings owned by the set */
} bgt_sentinel_set;

/* Starts the 5 processes and waits until all 3 sentinels report the master, its replica (SENTINEL
 * replicas: flags without s_down) and the other 2 sentinels (num-other-sentinels 2), and the
 * replica's master_link_status is up (~2-3 s: sentinels find each other by hello messages every
 * 2 s). Exits the test binary with status 2 and a message if it cannot. opts may be NULL. */
void bgt_sentinel_start(bgt_sentinel_set *s, const bgt_sentinel_opts *opts);
/* Stops every process by its pid (SIGTERM, then SIGKILL after 5 s), removes the directory and
 * frees the copied passwords. Idempotent. */
void bgt_sentinel_stop(bgt_sentinel_set *s);

/* Index (0/1) of the data node the sentinels call master now (SENTINEL get-master-addr-by-name
 * on the first live sentinel that answers), -1 on failure. */
int bgt_sentinel_master(const bgt_sentinel_set *s);

/* One command on a fresh raw hiredis connection (AUTH first if that side has a password), the
 * reply rendered like bgt_redis_cmd; "(io error) ..." if it cannot be reached. Malloc'd; caller
 * frees. */
char *bgt_sentinel_data_cmd(const bgt_sentinel_set *s, int node, const char *fmt, ...);
char *bgt_sentinel_sentinel_cmd(const bgt_sentinel_set *s, int sentinel, const char *fmt, ...);

/* kill -9 and reap; the node keeps its port for bgt_sentinel_restart_data. */
void bgt_sentinel_kill_data(bgt_sentinel_set *s, int node);
/* Starts the node again on its port. It comes back as what Sentinel made of it: a replica of the
 * master the sentinels name now (started with --replicaof it, as Sentinel's CONFIG REWRITE would
 * have left a node with a config file; Sentinel alone would take 8+ s to convert a stale master),
 * or a master if the sentinels still name it. Waits until its link is up and every live sentinel
 * lists it without s_down. */
int bgt_sentinel_restart_data(bgt_sentinel_set *s, int node);
/* Waits until every live sentinel names data node `node` as master and its ROLE says master. */
int bgt_sentinel_wait_master(bgt_sentinel_set *s, int node, int timeout_ms);
/* kill -9 and reap; the sentinel keeps its port and its (rewritten) config file. */
void bgt_sentinel_kill_sentinel(bgt_sentinel_set *s, int i);
/* Starts sentinel i again with its config file; waits until it reports the current master, its
 * replica and the other 2 sentinels, as at start. */
int bgt_sentinel_restart_sentinel(bgt_sentinel_set *s, int i);

/* all int returns: 0 ok, -1 failure with a message on stderr */

#endif
