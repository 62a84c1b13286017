#include "cluster_fixture.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_fixture.h"
#include "server_proc.h"

#define PORT_LO 20000
#define PORT_HI 29999
#define BUS_OFFSET 10000
#define NSLOTS 16384

/* ---- small helpers ------------------------------------------------------------------------ */

static int live(const bgt_cluster *c, int i) { return i >= 0 && i < c->n && c->node[i].pid > 0; }

static int index_of_port(const bgt_cluster *c, long long port) {
  for (int i = 0; i < c->n; i++)
    if (c->node[i].port == port) return i;
  return -1;
}

/* A raw connection to node i, or NULL (with no message: callers decide whether that is an error). */
static redisContext *node_connect(const bgt_cluster *c, int i) {
  struct timeval tv = {5, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", c->node[i].port, tv);
  if (ctx && ctx->err) { redisFree(ctx); return NULL; }
  if (ctx) redisSetTimeout(ctx, tv);
  return ctx;
}

static redisReply *node_vcmd(const bgt_cluster *c, int i, const char *fmt, va_list ap) {
  redisContext *ctx = node_connect(c, i);
  redisReply *rep;
  if (!ctx) return NULL;
  rep = redisvCommand(ctx, fmt, ap);
  redisFree(ctx);
  return rep;
}

static redisReply *node_cmd(const bgt_cluster *c, int i, const char *fmt, ...) {
  va_list ap;
  redisReply *rep;
  va_start(ap, fmt);
  rep = node_vcmd(c, i, fmt, ap);
  va_end(ap);
  return rep;
}

/* A CLUSTER SETSLOT answered NOREPLICAS is sent again this many times: Valkey >= 8 replicates it
 * to the shard's replicas first and answers NOREPLICAS when one has not acknowledged it within
 * 2 s (a replica stalled, busy, or re-syncing after a restart); it took effect nowhere then. */
#define NOREPLICAS_TRIES 8

static int is_noreplicas(const redisReply *rep) {
  return rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOREPLICAS", 10);
}

/* Runs a command that must answer +OK on node i; says what went wrong otherwise. */
static int node_ok(bgt_cluster *c, int i, const char *what, const char *fmt, ...) {
  va_list ap;
  redisReply *rep = NULL;
  int ok;
  for (int tries = 0; tries < NOREPLICAS_TRIES; tries++) {
    if (rep) freeReplyObject(rep);
    va_start(ap, fmt);
    rep = node_vcmd(c, i, fmt, ap);
    va_end(ap);
    if (!is_noreplicas(rep)) break;
    c->noreplicas++;
  }
  ok = rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "OK");
  if (!ok) {
    char *s = bgt_redis_render(rep);
    fprintf(stderr, "cluster fixture: %s on node %d (port %d): %s\n", what, i, c->node[i].port, s);
    free(s);
  }
  if (rep) freeReplyObject(rep);
  return ok ? 0 : -1;
}

char *bgt_cluster_cmd(const bgt_cluster *c, int node, const char *fmt, ...) {
  va_list ap;
  redisContext *ctx;
  redisReply *rep;
  char *out;
  if (node < 0 || node >= c->n) return strdup("(io error) no such node");
  ctx = node_connect(c, node);
  if (!ctx) {
    char buf[64];
    snprintf(buf, sizeof buf, "(io error) cannot connect to port %d", c->node[node].port);
    return strdup(buf);
  }
  va_start(ap, fmt);
  rep = redisvCommand(ctx, fmt, ap);
  va_end(ap);
  out = bgt_redis_render(rep);
  if (rep) freeReplyObject(rep);
  redisFree(ctx);
  return out;
}

/* ---- slots ---------------------------------------------------------------------------------- */

/* CRC16-CCITT (XMODEM), the cluster's key hash (Redis cluster spec, appendix A). */
static unsigned crc16(const char *buf, size_t len) {
  unsigned crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)(unsigned char)buf[i] << 8;
    for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

unsigned bgt_cluster_slot_len(const char *key, size_t len) {
  size_t s, e;
  for (s = 0; s < len && key[s] != '{'; s++) {}
  if (s < len) {
    for (e = s + 1; e < len && key[e] != '}'; e++) {}
    if (e < len && e > s + 1) return crc16(key + s + 1, e - s - 1) & (NSLOTS - 1);
  }
  return crc16(key, len) & (NSLOTS - 1);
}

unsigned bgt_cluster_slot(const char *key) { return bgt_cluster_slot_len(key, strlen(key)); }

/* CLUSTER SLOTS of a live node (the first one that answers with an array), or NULL. */
static redisReply *slots_reply(const bgt_cluster *c, int *from) {
  for (int i = 0; i < c->n; i++) {
    if (!live(c, i)) continue;
    redisReply *rep = node_cmd(c, i, "CLUSTER SLOTS");
    if (rep && rep->type == REDIS_REPLY_ARRAY) {
      if (from) *from = i;
      return rep;
    }
    if (rep) freeReplyObject(rep);
  }
  return NULL;
}

static int range_owner(const bgt_cluster *c, const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[2]->type != REDIS_REPLY_ARRAY ||
      r->element[2]->elements < 2)
    return -1;
  return index_of_port(c, r->element[2]->element[1]->integer);
}

int bgt_cluster_owner(const bgt_cluster *c, unsigned slot) {
  redisReply *rep = slots_reply(c, NULL);
  int owner = -1;
  if (!rep) return -1;
  for (size_t k = 0; k < rep->elements; k++) {
    const redisReply *r = rep->element[k];
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && (long long)slot >= r->element[0]->integer &&
        (long long)slot <= r->element[1]->integer) {
      owner = range_owner(c, r);
      break;
    }
  }
  freeReplyObject(rep);
  return owner;
}

int bgt_cluster_other_master(const bgt_cluster *c, int node) {
  for (int i = 0; i < c->n; i++)
    if (i != node && live(c, i) && c->node[i].is_master) return i;
  return -1;
}

int bgt_cluster_replica_of(const bgt_cluster *c, int master) {
  for (int i = 0; i < c->n; i++)
    if (live(c, i) && !c->node[i].is_master && c->node[i].master == master) return i;
  return -1;
}

/* ---- processes ------------------------------------------------------------------------------ */

static void node_dir(const bgt_cluster *c, int i, char *buf, size_t n) {
  snprintf(buf, n, "%s/%d", c->dir, c->node[i].port);
}

static int node_spawn(bgt_cluster *c, int i) {
  char dir[300], conf[320], log[320], port[16];
  node_dir(c, i, dir, sizeof dir);
  snprintf(conf, sizeof conf, "%s/nodes.conf", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  snprintf(port, sizeof port, "%d", c->node[i].port);
  char timeout[16];
  snprintf(timeout, sizeof timeout, "%d", c->node_timeout_ms ? c->node_timeout_ms : 2000);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "cluster fixture: mkdir %s: %s\n", dir, strerror(errno));
    return -1;
  }
  char *argv[] = {(char *)bgt_server_bin(), "--port", port, "--bind", "127.0.0.1",
                  "--cluster-enabled", "yes", "--cluster-config-file", conf,
                  "--cluster-node-timeout", timeout, "--repl-diskless-sync-delay", "0",
                  "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log,
                  "--daemonize", "no", NULL};
  return bgt_spawn(argv, "/dev/null", &c->node[i].pid);
}

/* Reaps node i if it exited; returns 1 if it is gone. */
static int node_exited(bgt_cluster *c, int i) { return bgt_exited(&c->node[i].pid); }

/* Signals node i (unless sig is 0: already signalled) and reaps it; SIGKILL after 5 s. */
static void node_stop(bgt_cluster *c, int i, int sig) { bgt_stop_pid(&c->node[i].pid, sig); }

/* Waits until node i answers PING; -1 if it exited or did not within timeout_ms. */
static int wait_ping(bgt_cluster *c, int i, int timeout_ms) {
  return bgt_wait_ping(&c->node[i].pid, c->node[i].port, timeout_ms);
}

/* Runs redis-cli with argv (argv[0] is replaced by the binary), bounded by timeout_ms. */
/* Runs redis-cli with argv[1..] (argv[0] is set here); 0, or -1 with its output's tail on stderr
 * and, if out is not NULL, in out. */
static int run_cli(const bgt_cluster *c, char **argv, int timeout_ms, char *out, size_t cap) {
  char log[300];
  int st = 0, rc = 0;
  long long end = bgt_now_ms() + timeout_ms;
  pid_t pid, w = 0;
  snprintf(log, sizeof log, "%s/cli.log", c->dir);
  argv[0] = (char *)bgt_cli_bin();
  if (out && cap) out[0] = 0;
  if (bgt_spawn(argv, log, &pid) != 0) return -1;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && bgt_now_ms() < end) bgt_sleep_ms(20);
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    fprintf(stderr, "cluster fixture: redis-cli %s did not finish within %d ms\n", argv[1], timeout_ms);
    rc = -1;
  } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "cluster fixture: redis-cli %s %s failed (status %d)\n", argv[1], argv[2], st);
    rc = -1;
  }
  if (rc != 0) {
    bgt_print_file_tail(log);
    FILE *f = out && cap > 1 ? fopen(log, "r") : NULL;
    if (f) {
      /* the tail: where the error is */
      fseek(f, 0, SEEK_END);
      long size = ftell(f);
      fseek(f, size > (long)cap - 1 ? size - ((long)cap - 1) : 0, SEEK_SET);
      size_t n = fread(out, 1, cap - 1, f);
      out[n] = 0;
      fclose(f);
    }
  }
  unlink(log);
  return rc;
}

/* ---- ports ---------------------------------------------------------------------------------- */

static int pick_ports(bgt_cluster *c, unsigned *seed) {
  int ports[BGT_CLUSTER_NODES];
  if (bgt_pick_ports(ports, c->n, PORT_LO, PORT_HI, BUS_OFFSET, seed, "cluster fixture") != 0) return -1;
  for (int i = 0; i < c->n; i++) c->node[i].port = ports[i];
  return 0;
}

/* ---- topology ------------------------------------------------------------------------------- */

/*
 * Takes ids, roles and masters from one CLUSTER NODES text: every line (mine = 0) or only the
 * "myself" line (mine = 1). Lines are
 * <id> <ip:port@cport[,hostname]> <flags> <master-id|-> <ping> <pong> <epoch> <link> <slots...>
 */
static void parse_nodes(const bgt_cluster *c, char *text, int mine, char (*ids)[41], char (*masters)[41],
                        int *is_master) {
  for (char *line = text, *next; line && *line; line = next) {
    char id[64], addr[128], flags[128], master[64];
    const char *colon;
    int i;
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (sscanf(line, "%63s %127s %127s %63s", id, addr, flags, master) != 4 || strlen(id) != 40) continue;
    if (mine && !strstr(flags, "myself")) continue;
    colon = strrchr(addr, ':');
    if (!colon || (i = index_of_port(c, atoi(colon + 1))) < 0) continue;
    strcpy(ids[i], id);
    is_master[i] = strstr(flags, "master") != NULL;
    snprintf(masters[i], sizeof masters[i], "%.40s", is_master[i] ? "" : master);
  }
}

void bgt_cluster_refresh(bgt_cluster *c) {
  char ids[BGT_CLUSTER_NODES][41], masters[BGT_CLUSTER_NODES][41];
  int is_master[BGT_CLUSTER_NODES], have_view = 0;
  for (int i = 0; i < c->n; i++) {
    strcpy(ids[i], c->node[i].id);
    masters[i][0] = 0;
    is_master[i] = c->node[i].is_master;
    if (!c->node[i].is_master && c->node[i].master >= 0) strcpy(masters[i], c->node[c->node[i].master].id);
  }
  /* first one live node's view of everyone (for the dead nodes), then each live node's word on
   * itself: a node's own role is current, another node's view of it may lag by a gossip round */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < c->n; i++) {
      redisReply *rep;
      if (!live(c, i) || (pass == 0 && have_view)) continue;
      rep = node_cmd(c, i, "CLUSTER NODES");
      if (rep && rep->type == REDIS_REPLY_STRING) {
        parse_nodes(c, rep->str, pass, ids, masters, is_master);
        have_view = 1;
      }
      if (rep) freeReplyObject(rep);
    }
  if (!have_view) fprintf(stderr, "cluster fixture: refresh: no live node answered CLUSTER NODES\n");
  for (int i = 0; i < c->n; i++) {
    strcpy(c->node[i].id, ids[i]);
    c->node[i].is_master = is_master[i];
  }
  for (int i = 0; i < c->n; i++) {
    c->node[i].master = -1;
    for (int j = 0; j < c->n && !c->node[i].is_master; j++)
      if (!strcmp(masters[i], c->node[j].id)) c->node[i].master = j;
  }
}

/* ROLE of node i: 1 master, 0 a replica whose link is up (its master's port in *mport), -1 otherwise. */
static int node_role(const bgt_cluster *c, int i, long long *mport) {
  redisReply *rep = node_cmd(c, i, "ROLE");
  int r = -1;
  if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 && rep->element[0]->type == REDIS_REPLY_STRING) {
    if (!strcmp(rep->element[0]->str, "master")) r = 1;
    else if (!strcmp(rep->element[0]->str, "slave") && rep->elements >= 4 &&
             rep->element[3]->type == REDIS_REPLY_STRING && !strcmp(rep->element[3]->str, "connected")) {
      *mport = rep->element[2]->integer;
      r = 0;
    }
  }
  if (rep) freeReplyObject(rep);
  return r;
}

/*
 * One node's CLUSTER SLOTS as a canonical string of its slot -> master map ("start-end port;"), or
 * NULL with the reason in why. Checks what any map must satisfy: all slots covered, owners live,
 * no dead node listed, not even as a replica. The replica lists are not compared: 7.0 leaves out a
 * replica whose gossiped replication offset is still 0 (up to repl-ping-replica-period, 10 s, on
 * an idle new cluster: measured); roles_view and ROLE check the replicas instead.
 */
static char *canonical_map(const bgt_cluster *c, int i, char *why, size_t whylen) {
  redisReply *rep = node_cmd(c, i, "CLUSTER SLOTS");
  size_t cap = 64, len = 0;
  long long covered = 0;
  char *out = NULL;
  if (!rep || rep->type != REDIS_REPLY_ARRAY) {
    char *s = bgt_redis_render(rep);
    snprintf(why, whylen, "node %d: CLUSTER SLOTS answered %s", i, s);
    free(s);
    goto fail;
  }
  out = malloc(cap);
  out[0] = 0;
  for (size_t k = 0; k < rep->elements; k++) {
    const redisReply *r = rep->element[k];
    char item[64];
    int n;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) continue;
    for (size_t m = 2; m < r->elements; m++) {
      long long port = r->element[m]->elements >= 2 ? r->element[m]->element[1]->integer : -1;
      if (!live(c, index_of_port(c, port))) {
        snprintf(why, whylen, "node %d lists a dead or unknown node (port %lld) for slots %lld-%lld", i, port,
                 r->element[0]->integer, r->element[1]->integer);
        goto fail;
      }
    }
    n = snprintf(item, sizeof item, "%lld-%lld %lld;", r->element[0]->integer, r->element[1]->integer,
                 r->element[2]->element[1]->integer);
    covered += r->element[1]->integer - r->element[0]->integer + 1;
    while (len + (size_t)n + 1 > cap) out = realloc(out, cap *= 2);
    memcpy(out + len, item, (size_t)n + 1);
    len += (size_t)n;
  }
  if (covered != NSLOTS) {
    snprintf(why, whylen, "node %d: CLUSTER SLOTS covers %lld of %d slots", i, covered, NSLOTS);
    goto fail;
  }
  freeReplyObject(rep);
  return out;
fail:
  if (rep) freeReplyObject(rep);
  free(out);
  return NULL;
}

/*
 * Node i's view of who is who, as "index=M;" or "index=S<master index>;" for every live node, or
 * NULL with the reason in why (a live node missing, or flagged fail / fail?). Nodes learn a
 * replica's role by gossip, ~1 s after --cluster create: until a master knows its replica it
 * ignores that replica's CLUSTER FAILOVER, and a master that does not know the replica's master
 * refuses it its vote, so a map agreed on masters alone is not enough.
 */
static char *roles_view(const bgt_cluster *c, int i, char *why, size_t whylen) {
  redisReply *rep = node_cmd(c, i, "CLUSTER NODES");
  char ids[BGT_CLUSTER_NODES][41], masters[BGT_CLUSTER_NODES][41], *out = NULL;
  int role[BGT_CLUSTER_NODES], seen[BGT_CLUSTER_NODES] = {0};
  size_t len = 0;
  if (!rep || rep->type != REDIS_REPLY_STRING) {
    snprintf(why, whylen, "node %d: CLUSTER NODES failed", i);
    goto done;
  }
  for (char *line = rep->str, *next; line && *line; line = next) {
    char id[64], addr[128], flags[128], master[64];
    const char *colon;
    int j;
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (sscanf(line, "%63s %127s %127s %63s", id, addr, flags, master) != 4) continue;
    colon = strrchr(addr, ':');
    if (!colon || (j = index_of_port(c, atoi(colon + 1))) < 0 || !live(c, j)) continue;
    if (strstr(flags, "fail")) {
      snprintf(why, whylen, "node %d flags live node %d (port %d) %s", i, j, c->node[j].port, flags);
      goto done;
    }
    seen[j] = 1;
    snprintf(ids[j], sizeof ids[j], "%.40s", id);
    snprintf(masters[j], sizeof masters[j], "%.40s", master);
    role[j] = strstr(flags, "slave") ? 1 : 0;
  }
  out = malloc((size_t)c->n * 16 + 1);
  out[0] = 0;
  for (int j = 0; j < c->n; j++) {
    int m = -1;
    if (!live(c, j)) continue;
    if (!seen[j]) {
      snprintf(why, whylen, "node %d does not list live node %d (port %d)", i, j, c->node[j].port);
      free(out);
      out = NULL;
      goto done;
    }
    for (int k = 0; k < c->n && role[j]; k++)
      if (seen[k] && !strcmp(ids[k], masters[j])) m = k;
    len += (size_t)snprintf(out + len, 16, role[j] ? "%d=S%d;" : "%d=M;", j, m);
  }
done:
  if (rep) freeReplyObject(rep);
  return out;
}

/* One look at the whole cluster: 0 if it is ok and agreed, else -1 with the reason in why. */
static int cluster_agreed(bgt_cluster *c, char *why, size_t whylen) {
  char *first = NULL, *first_roles = NULL;
  int rc = -1, any = 0;
  for (int i = 0; i < c->n; i++) {
    redisReply *rep;
    char *m;
    if (!live(c, i)) continue;
    any = 1;
    rep = node_cmd(c, i, "CLUSTER INFO");
    if (!rep || rep->type != REDIS_REPLY_STRING || !strstr(rep->str, "cluster_state:ok")) {
      snprintf(why, whylen, "node %d (port %d) is not cluster_state:ok", i, c->node[i].port);
      if (rep) freeReplyObject(rep);
      goto done;
    }
    freeReplyObject(rep);
    if (!(m = roles_view(c, i, why, whylen))) goto done;
    if (!first_roles) first_roles = m;
    else {
      int same = !strcmp(first_roles, m);
      if (!same) snprintf(why, whylen, "nodes disagree on roles: \"%s\" vs node %d \"%s\"", first_roles, i, m);
      free(m);
      if (!same) goto done;
    }
    if (!(m = canonical_map(c, i, why, whylen))) goto done;
    if (!first) first = m;
    else {
      int same = !strcmp(first, m);
      if (!same) snprintf(why, whylen, "nodes disagree on CLUSTER SLOTS: \"%.200s\" vs node %d \"%.200s\"", first, i, m);
      free(m);
      if (!same) goto done;
    }
  }
  if (!any) { snprintf(why, whylen, "no live node"); goto done; }
  for (int i = 0; i < c->n; i++) {
    long long mport = -1;
    if (live(c, i) && node_role(c, i, &mport) < 0) {
      snprintf(why, whylen, "node %d (port %d): ROLE is neither master nor a connected replica", i, c->node[i].port);
      goto done;
    }
  }
  rc = 0;
done:
  free(first);
  free(first_roles);
  return rc;
}

int bgt_cluster_wait_ok(bgt_cluster *c, int timeout_ms) {
  char why[600] = "";
  long long end = bgt_now_ms() + timeout_ms;
  for (;;) {
    for (int i = 0; i < c->n; i++) node_exited(c, i);
    if (cluster_agreed(c, why, sizeof why) == 0) return 0;
    if (bgt_now_ms() >= end) break;
    if (getenv("BGT_CLUSTER_TRACE")) fprintf(stderr, "cluster fixture: waiting: %s\n", why);
    bgt_sleep_ms(50);
  }
  fprintf(stderr, "cluster fixture: not ok after %d ms: %s\n", timeout_ms, why);
  return -1;
}

/* ---- start / stop --------------------------------------------------------------------------- */

static void stop_all(bgt_cluster *c) {
  for (int i = 0; i < c->n; i++)
    if (c->node[i].pid > 0) kill(c->node[i].pid, SIGTERM);  /* all at once: one wait, not six */
  for (int i = 0; i < c->n; i++) node_stop(c, i, 0);
}

/* BGT_CLUSTER_TRACE=1: print how long each phase of a start took. */
static void trace(const char *what, long long t0) {
  const char *t = getenv("BGT_CLUSTER_TRACE");
  if (t && *t && *t != '0') fprintf(stderr, "cluster fixture: %s at %lld ms\n", what, bgt_now_ms() - t0);
}

static int try_start(bgt_cluster *c, unsigned *seed) {
  char *argv[4 + BGT_CLUSTER_NODES + 8];
  char addrs[BGT_CLUSTER_NODES][32];
  int n = 0;
  long long t0 = bgt_now_ms();
  if (pick_ports(c, seed) != 0) return -1;
  for (int i = 0; i < c->n; i++)
    if (node_spawn(c, i) != 0) return -1;
  for (int i = 0; i < c->n; i++)
    if (wait_ping(c, i, 10000) != 0) {
      char log[320];
      snprintf(log, sizeof log, "%s/%d/log", c->dir, c->node[i].port);
      fprintf(stderr, "cluster fixture: node on port %d did not start (a port taken? retrying)\n", c->node[i].port);
      bgt_print_file_tail(log);
      return -1;
    }
  trace("all nodes answer PING", t0);
  argv[n++] = NULL;
  argv[n++] = "--cluster";
  argv[n++] = "create";
  for (int i = 0; i < c->n; i++) {
    snprintf(addrs[i], sizeof addrs[i], "127.0.0.1:%d", c->node[i].port);
    argv[n++] = addrs[i];
  }
  argv[n++] = "--cluster-replicas";
  argv[n++] = "1";
  argv[n++] = "--cluster-yes";
  argv[n] = NULL;
  if (run_cli(c, argv, 30000, NULL, 0) != 0) return -1;
  trace("redis-cli --cluster create done", t0);
  if (bgt_cluster_wait_ok(c, 20000) != 0) return -1;
  trace("cluster ok and agreed", t0);
  bgt_cluster_refresh(c);
  return 0;
}

void bgt_cluster_start(bgt_cluster *c) { bgt_cluster_start_with(c, 2000); }

void bgt_cluster_start_with(bgt_cluster *c, int node_timeout_ms) {
  unsigned seed = (unsigned)getpid() ^ (unsigned)bgt_now_ms() ^ (unsigned)time(NULL);
  bgt_ignore_sigpipe();
  memset(c, 0, sizeof *c);
  c->n = BGT_CLUSTER_NODES;
  c->node_timeout_ms = node_timeout_ms;
  bgt_scratch_dir(c->dir, sizeof c->dir, "bgt-cluster");
  for (int attempt = 0; attempt < 5; attempt++) {
    if (try_start(c, &seed) == 0) {
      int n = snprintf(c->seeds, sizeof c->seeds, "redis://");
      snprintf(c->url, sizeof c->url, "redis://127.0.0.1:%d", c->node[0].port);
      for (int i = 0; i < c->n; i++)
        n += snprintf(c->seeds + n, sizeof c->seeds - (size_t)n, "%s127.0.0.1:%d", i ? "," : "", c->node[i].port);
      return;
    }
    stop_all(c);
    bgt_rm_tree(c->dir);  /* the node directories, then the top one */
    if (mkdir(c->dir, 0700) != 0) break;
  }
  fprintf(stderr, "cluster fixture: could not start a 6-node cluster (redis-server and redis-cli 7 needed)\n");
  bgt_cluster_stop(c);
  exit(2);
}

void bgt_cluster_stop(bgt_cluster *c) {
  stop_all(c);
  if (c->dir[0]) {
    bgt_rm_tree(c->dir);
    c->dir[0] = 0;
  }
}

/* ---- topology changes ----------------------------------------------------------------------- */

static int check_node(const bgt_cluster *c, int i, const char *what) {
  if (live(c, i)) return 0;
  fprintf(stderr, "cluster fixture: %s: node %d is not a live node\n", what, i);
  return -1;
}

int bgt_cluster_migrate_begin(bgt_cluster *c, unsigned slot, int to) {
  int from = bgt_cluster_owner(c, slot);
  if (check_node(c, to, "migrate_begin") != 0 || check_node(c, from, "migrate_begin (owner)") != 0) return -1;
  if (from == to) {
    fprintf(stderr, "cluster fixture: migrate_begin: node %d already owns slot %u\n", to, slot);
    return -1;
  }
  /* importing first, so that an ASK from the source never names a node that would answer MOVED */
  if (node_ok(c, to, "SETSLOT IMPORTING", "CLUSTER SETSLOT %u IMPORTING %s", slot, c->node[from].id) != 0) return -1;
  return node_ok(c, from, "SETSLOT MIGRATING", "CLUSTER SETSLOT %u MIGRATING %s", slot, c->node[to].id);
}

/* MIGRATE of keys[0..n) from the slot's owner to node to; NOKEY (none of them there) is fine. */
static int migrate_keys(bgt_cluster *c, int from, int to, int n, const char **keys, const size_t *lens) {
  const char *argv[8 + 100];
  size_t argl[8 + 100];
  char port[16];
  int k = 0, ok;
  redisContext *ctx;
  redisReply *rep;
  snprintf(port, sizeof port, "%d", c->node[to].port);
  argv[k] = "MIGRATE"; argl[k++] = 7;
  argv[k] = "127.0.0.1"; argl[k++] = 9;
  argv[k] = port; argl[k++] = strlen(port);
  argv[k] = ""; argl[k++] = 0;
  argv[k] = "0"; argl[k++] = 1;
  argv[k] = "5000"; argl[k++] = 4;
  argv[k] = "KEYS"; argl[k++] = 4;
  for (int i = 0; i < n && i < 100; i++) { argv[k] = keys[i]; argl[k++] = lens[i]; }
  if (!(ctx = node_connect(c, from))) {
    fprintf(stderr, "cluster fixture: MIGRATE: cannot connect to node %d\n", from);
    return -1;
  }
  rep = redisCommandArgv(ctx, k, argv, argl);
  ok = rep && rep->type == REDIS_REPLY_STATUS && (!strcmp(rep->str, "OK") || !strcmp(rep->str, "NOKEY"));
  if (!ok) {
    char *s = bgt_redis_render(rep);
    fprintf(stderr, "cluster fixture: MIGRATE from node %d to node %d: %s\n", from, to, s);
    free(s);
  }
  if (rep) freeReplyObject(rep);
  redisFree(ctx);
  return ok ? 0 : -1;
}

int bgt_cluster_migrate_key(bgt_cluster *c, unsigned slot, int to, const char *key, size_t keylen) {
  int from = bgt_cluster_owner(c, slot);
  if (check_node(c, to, "migrate_key") != 0 || check_node(c, from, "migrate_key (owner)") != 0) return -1;
  return migrate_keys(c, from, to, 1, &key, &keylen);
}

int bgt_cluster_migrate_all_keys(bgt_cluster *c, unsigned slot, int to) {
  int from = bgt_cluster_owner(c, slot);
  if (check_node(c, to, "migrate_all_keys") != 0 || check_node(c, from, "migrate_all_keys (owner)") != 0) return -1;
  for (int round = 0; round < 100000; round++) {  /* 100 keys a round: bounded by the slot's size */
    const char *keys[100];
    size_t lens[100];
    int rc;
    redisReply *rep = node_cmd(c, from, "CLUSTER GETKEYSINSLOT %u 100", slot);
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
      char *s = bgt_redis_render(rep);
      fprintf(stderr, "cluster fixture: GETKEYSINSLOT %u on node %d: %s\n", slot, from, s);
      free(s);
      if (rep) freeReplyObject(rep);
      return -1;
    }
    if (rep->elements == 0) { freeReplyObject(rep); return 0; }
    for (size_t i = 0; i < rep->elements && i < 100; i++) {
      keys[i] = rep->element[i]->str;
      lens[i] = rep->element[i]->len;
    }
    rc = migrate_keys(c, from, to, (int)rep->elements, keys, lens);
    freeReplyObject(rep);
    if (rc != 0) return -1;
  }
  fprintf(stderr, "cluster fixture: slot %u never emptied\n", slot);
  return -1;
}

int bgt_cluster_migrate_end(bgt_cluster *c, unsigned slot, int to) {
  int from = bgt_cluster_owner(c, slot);
  if (check_node(c, to, "migrate_end") != 0) return -1;
  /* the target first: it bumps its epoch and owns the slot before the source points there */
  if (node_ok(c, to, "SETSLOT NODE", "CLUSTER SETSLOT %u NODE %s", slot, c->node[to].id) != 0) return -1;
  if (live(c, from) && from != to &&
      node_ok(c, from, "SETSLOT NODE", "CLUSTER SETSLOT %u NODE %s", slot, c->node[to].id) != 0)
    return -1;
  for (int i = 0; i < c->n; i++)  /* replicas refuse SETSLOT; they follow their masters */
    if (i != to && i != from && live(c, i) && c->node[i].is_master &&
        node_ok(c, i, "SETSLOT NODE", "CLUSTER SETSLOT %u NODE %s", slot, c->node[to].id) != 0)
      return -1;
  return bgt_cluster_wait_ok(c, 10000);
}

int bgt_cluster_move_slot(bgt_cluster *c, unsigned slot, int to) {
  if (bgt_cluster_migrate_begin(c, slot, to) != 0) return -1;
  if (bgt_cluster_migrate_all_keys(c, slot, to) != 0) return -1;
  return bgt_cluster_migrate_end(c, slot, to);
}

int bgt_cluster_slot_count(const bgt_cluster *c, int node) {
  redisReply *rep = slots_reply(c, NULL);
  int n = 0;
  for (size_t k = 0; rep && k < rep->elements; k++) {
    const redisReply *r = rep->element[k];
    if (range_owner(c, r) == node) n += (int)(r->element[1]->integer - r->element[0]->integer + 1);
  }
  if (rep) freeReplyObject(rep);
  return n;
}

/* Valkey >= 8 replicates a slot's IMPORTING / MIGRATING state to the shard's replicas, which
 * redis-cli 7's --cluster fix does not look at: a replica still showing an open slot (CLUSTER
 * NODES, its own line: "[slot->-id]" or "[slot-<-id]") gets it closed by SETSLOT NODE <owner> on
 * its master, which replicates that to it. */
static int close_replicas_open_slots(bgt_cluster *c) {
  for (int i = 0; i < c->n; i++) {
    if (!live(c, i) || c->node[i].is_master || c->node[i].master < 0) continue;
    char *text = bgt_cluster_cmd(c, i, "CLUSTER NODES");
    char *mine = strstr(text, "myself");
    char *end = mine ? strchr(mine, '\n') : NULL;
    if (end) *end = 0;
    for (char *b = mine ? strchr(mine, '[') : NULL; b; b = strchr(b + 1, '[')) {
      unsigned slot = (unsigned)strtoul(b + 1, NULL, 10);
      int owner = bgt_cluster_owner(c, slot);
      if (owner < 0 || node_ok(c, c->node[i].master, "SETSLOT NODE (a replica's open slot)", "CLUSTER SETSLOT %u NODE %s",
                               slot, c->node[owner].id) != 0) {
        free(text);
        return -1;
      }
    }
    free(text);
  }
  return 0;
}

/* A reshard that met NOREPLICAS (Valkey >= 8, NOREPLICAS_TRIES) stopped with one slot open
 * (IMPORTING / MIGRATING): redis-cli --cluster fix closes it on the masters, then on the replicas;
 * bounded, as NOREPLICAS may come again. */
static int fix_open_slots(bgt_cluster *c, int node) {
  char addr[32], out[2048];
  char *argv[] = {NULL, "--cluster", "fix", addr, "--cluster-yes", NULL};
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c->node[node].port);
  for (int tries = 0; tries < NOREPLICAS_TRIES; tries++) {
    if (run_cli(c, argv, 60000, out, sizeof out) == 0)
      return close_replicas_open_slots(c) == 0 ? bgt_cluster_wait_ok(c, 10000) : -1;
    if (!strstr(out, "NOREPLICAS")) return -1;
    c->noreplicas++;
  }
  return -1;
}

int bgt_cluster_reshard(bgt_cluster *c, int from, int to, int nslots) {
  char addr[32], n[16], out[2048];
  char *argv[14];
  int k = 0;
  if (check_node(c, from, "reshard") != 0 || check_node(c, to, "reshard") != 0) return -1;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c->node[from].port);
  argv[k++] = NULL;
  argv[k++] = "--cluster"; argv[k++] = "reshard"; argv[k++] = addr;
  argv[k++] = "--cluster-from"; argv[k++] = c->node[from].id;
  argv[k++] = "--cluster-to"; argv[k++] = c->node[to].id;
  argv[k++] = "--cluster-slots"; argv[k++] = n;
  argv[k++] = "--cluster-yes";
  argv[k] = NULL;
  int had = bgt_cluster_slot_count(c, to);
  for (int tries = 0;; tries++) {
    int left = nslots - (bgt_cluster_slot_count(c, to) - had);
    if (left <= 0) break;
    snprintf(n, sizeof n, "%d", left);
    if (run_cli(c, argv, 60000, out, sizeof out) == 0) break;
    /* redis-cli 7 gives up on NOREPLICAS (valkey-cli 8 ignores it for the last SETSLOT): the
     * slot it was moving is closed, and the slots still to move are moved by another run */
    if (!strstr(out, "NOREPLICAS") || tries == NOREPLICAS_TRIES - 1) return -1;
    c->noreplicas++;
    fprintf(stderr, "cluster fixture: reshard: NOREPLICAS (a replica did not acknowledge CLUSTER SETSLOT within "
            "2 s): the open slot is closed (--cluster fix), the rest moved by another reshard\n");
    if (fix_open_slots(c, from) != 0) return -1;
  }
  if (bgt_cluster_wait_ok(c, 10000) != 0) return -1;
  bgt_cluster_refresh(c);
  return 0;
}

int bgt_cluster_failover(bgt_cluster *c, int replica) {
  long long end = bgt_now_ms() + 15000, mport;
  if (check_node(c, replica, "failover") != 0) return -1;
  if (node_role(c, replica, &mport) != 0) {
    fprintf(stderr, "cluster fixture: failover: node %d is not a connected replica\n", replica);
    return -1;
  }
  if (node_ok(c, replica, "CLUSTER FAILOVER", "CLUSTER FAILOVER") != 0) return -1;
  while (node_role(c, replica, &mport) != 1) {
    if (bgt_now_ms() >= end) {
      fprintf(stderr, "cluster fixture: failover: node %d did not become master within 15 s\n", replica);
      return -1;
    }
    bgt_sleep_ms(10);
  }
  if (bgt_cluster_wait_ok(c, (int)(end - bgt_now_ms()) + 5000) != 0) return -1;
  bgt_cluster_refresh(c);
  return 0;
}

void bgt_cluster_kill(bgt_cluster *c, int node) {
  if (!live(c, node)) return;
  bgt_stop_pid(&c->node[node].pid, SIGKILL);
}

int bgt_cluster_restart(bgt_cluster *c, int node) {
  if (node < 0 || node >= c->n || live(c, node)) {
    fprintf(stderr, "cluster fixture: restart: node %d is not a stopped node\n", node);
    return -1;
  }
  /* the port may still be held for a moment after kill -9 */
  for (int attempt = 0;; attempt++) {
    if (node_spawn(c, node) != 0) return -1;
    if (wait_ping(c, node, 10000) == 0) break;
    node_stop(c, node, SIGKILL);
    if (attempt == 4) {
      fprintf(stderr, "cluster fixture: restart: node %d (port %d) did not come back\n", node, c->node[node].port);
      return -1;
    }
    bgt_sleep_ms(200);
  }
  if (bgt_cluster_wait_ok(c, 20000) != 0) return -1;
  bgt_cluster_refresh(c);
  return 0;
}
