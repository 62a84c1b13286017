#include "sentinel_fixture.h"

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

#define NDATA 2
#define NSENT 3
#define PORT_LO 20000
#define PORT_HI 32767
#define MASTER_NAME "bgmaster"
/*
 * Not the 1000 ms of scaleout.md Q4: with 1000, a *second* failover in one set (kill the promoted
 * master after the first) was followed here by a spurious third one: all 3 sentinels flagged the
 * just-promoted, healthy master +sdown exactly 1.0 s after +switch-master and -sdown 70 ms later,
 * enough for +odown and a new epoch. Sentinel reconnects a link at most once per second
 * (SENTINEL_PING_PERIOD in sentinelReconnectInstance), which equals a 1000 ms down-after: no
 * margin. 2000 costs ~1 s per failover (+switch-master ~3.3 s after kill -9).
 */
#define DOWN_AFTER_MS 2000

/* ---- small helpers ------------------------------------------------------------------------ */

static int tracing(void) {
  const char *t = getenv("BGT_SENTINEL_TRACE");
  return t && *t && *t != '0';
}

static int data_live(const bgt_sentinel_set *s, int i) { return i >= 0 && i < NDATA && s->data_pid[i] > 0; }
static int sent_live(const bgt_sentinel_set *s, int i) { return i >= 0 && i < NSENT && s->sentinel_pid[i] > 0; }

static int data_index(const bgt_sentinel_set *s, long long port) {
  for (int i = 0; i < NDATA; i++)
    if (s->data_port[i] == port) return i;
  return -1;
}

/* A raw connection to port, AUTHed with pw if not NULL; NULL with the reason in why (never the
 * password: only the server's answer). */
static redisContext *port_connect(int port, const char *pw, char *why, size_t whylen) {
  struct timeval tv = {5, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!ctx || ctx->err) {
    snprintf(why, whylen, "cannot connect to port %d%s%s", port, ctx ? ": " : "", ctx ? ctx->errstr : "");
    if (ctx) redisFree(ctx);
    return NULL;
  }
  redisSetTimeout(ctx, tv);
  if (pw) {
    redisReply *rep = redisCommand(ctx, "AUTH %s", pw);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (!ok) {
      char *r = bgt_redis_render(rep);
      snprintf(why, whylen, "AUTH on port %d: %s", port, r);
      free(r);
    }
    if (rep) freeReplyObject(rep);
    if (!ok) { redisFree(ctx); return NULL; }
  }
  return ctx;
}

static redisReply *port_vcmd(int port, const char *pw, const char *fmt, va_list ap) {
  char why[200];
  redisContext *ctx = port_connect(port, pw, why, sizeof why);
  redisReply *rep;
  if (!ctx) return NULL;
  rep = redisvCommand(ctx, fmt, ap);
  redisFree(ctx);
  return rep;
}

static redisReply *port_cmd(int port, const char *pw, const char *fmt, ...) {
  va_list ap;
  redisReply *rep;
  va_start(ap, fmt);
  rep = port_vcmd(port, pw, fmt, ap);
  va_end(ap);
  return rep;
}

static char *render_vcmd(int port, const char *pw, const char *fmt, va_list ap) {
  char why[200];
  redisContext *ctx = port_connect(port, pw, why, sizeof why);
  redisReply *rep;
  char *out;
  if (!ctx) {
    char buf[240];
    snprintf(buf, sizeof buf, "(io error) %s", why);
    return strdup(buf);
  }
  rep = redisvCommand(ctx, fmt, ap);
  out = bgt_redis_render(rep);
  if (rep) freeReplyObject(rep);
  redisFree(ctx);
  return out;
}

char *bgt_sentinel_data_cmd(const bgt_sentinel_set *s, int node, const char *fmt, ...) {
  va_list ap;
  char *out;
  if (node < 0 || node >= NDATA) return strdup("(io error) no such data node");
  va_start(ap, fmt);
  out = render_vcmd(s->data_port[node], s->opts.data_password, fmt, ap);
  va_end(ap);
  return out;
}

char *bgt_sentinel_sentinel_cmd(const bgt_sentinel_set *s, int sentinel, const char *fmt, ...) {
  va_list ap;
  char *out;
  if (sentinel < 0 || sentinel >= NSENT) return strdup("(io error) no such sentinel");
  va_start(ap, fmt);
  out = render_vcmd(s->sentinel_port[sentinel], s->opts.sentinel_password, fmt, ap);
  va_end(ap);
  return out;
}

static redisReply *data_cmd(const bgt_sentinel_set *s, int i, const char *fmt, ...) {
  va_list ap;
  redisReply *rep;
  va_start(ap, fmt);
  rep = port_vcmd(s->data_port[i], s->opts.data_password, fmt, ap);
  va_end(ap);
  return rep;
}

static redisReply *sent_cmd(const bgt_sentinel_set *s, int i, const char *fmt, ...) {
  va_list ap;
  redisReply *rep;
  va_start(ap, fmt);
  rep = port_vcmd(s->sentinel_port[i], s->opts.sentinel_password, fmt, ap);
  va_end(ap);
  return rep;
}

/* The value of key in a flat [k1, v1, k2, v2, ...] reply (SENTINEL MASTER / REPLICAS entries). */
static const char *field(const redisReply *flat, const char *key) {
  if (!flat || flat->type != REDIS_REPLY_ARRAY) return NULL;
  for (size_t k = 0; k + 1 < flat->elements; k += 2)
    if (flat->element[k]->type == REDIS_REPLY_STRING && !strcmp(flat->element[k]->str, key) &&
        flat->element[k + 1]->type == REDIS_REPLY_STRING)
      return flat->element[k + 1]->str;
  return NULL;
}

/* ---- processes ------------------------------------------------------------------------------ */

/*
 * Waits until the process *pid answers on port as itself: INFO server's process_id is its pid, so
 * a port that someone else took between the bind test and the server's bind is never mistaken
 * for ours. -1 if it exited or did not answer within timeout_ms.
 */
static int wait_own(pid_t *pid, int port, const char *pw, int timeout_ms) {
  long long end = bgt_now_ms() + timeout_ms;
  char want[32];
  snprintf(want, sizeof want, "process_id:%d\r", (int)*pid);
  while (bgt_now_ms() < end) {
    redisReply *rep;
    int ok;
    if (bgt_exited(pid)) return -1;
    rep = port_cmd(port, pw, "INFO server");
    ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, want);
    if (rep) freeReplyObject(rep);
    if (ok) return 0;
    bgt_sleep_ms(20);
  }
  return -1;
}

static void data_log(const bgt_sentinel_set *s, int i, char *buf, size_t n) {
  snprintf(buf, n, "%s/data%d/log", s->dir, i);
}

static void sent_conf(const bgt_sentinel_set *s, int i, char *buf, size_t n) {
  snprintf(buf, n, "%s/sentinel%d/sentinel.conf", s->dir, i);
}

/* Starts data node i; replica_of is the port of its master, or 0 for a master. */
static int data_spawn(bgt_sentinel_set *s, int i, int replica_of) {
  char dir[300], log[320], port[16], mport[16];
  char *argv[40];
  int n = 0;
  snprintf(dir, sizeof dir, "%s/data%d", s->dir, i);
  data_log(s, i, log, sizeof log);
  snprintf(port, sizeof port, "%d", s->data_port[i]);
  snprintf(mport, sizeof mport, "%d", replica_of);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "sentinel fixture: mkdir %s: %s\n", dir, strerror(errno));
    return -1;
  }
  argv[n++] = (char *)bgt_server_bin();
  argv[n++] = "--port"; argv[n++] = port;
  argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
  argv[n++] = "--save"; argv[n++] = "";
  argv[n++] = "--appendonly"; argv[n++] = "no";
  argv[n++] = "--repl-diskless-sync-delay"; argv[n++] = "0";
  argv[n++] = "--dir"; argv[n++] = dir;
  argv[n++] = "--logfile"; argv[n++] = log;
  argv[n++] = "--daemonize"; argv[n++] = "no";
  if (s->opts.data_password) {
    argv[n++] = "--requirepass"; argv[n++] = (char *)s->opts.data_password;
    argv[n++] = "--masterauth"; argv[n++] = (char *)s->opts.data_password;
  }
  if (replica_of) { argv[n++] = "--replicaof"; argv[n++] = "127.0.0.1"; argv[n++] = mport; }
  argv[n] = NULL;
  return bgt_spawn(argv, NULL, &s->data_pid[i]);
}

/* A config-file string in double quotes (sdssplitargs rules), so any password survives. */
static void put_quoted(FILE *f, const char *v) {
  fputc('"', f);
  for (; *v; v++) {
    if (*v == '"' || *v == '\\') fprintf(f, "\\%c", *v);
    else if ((unsigned char)*v < 32 || (unsigned char)*v == 127) fprintf(f, "\\x%02x", (unsigned char)*v);
    else fputc(*v, f);
  }
  fputc('"', f);
}

/* Writes sentinel i's own config file (Sentinel rewrites it: it must be writable, one each). */
static int sent_write_conf(const bgt_sentinel_set *s, int i) {
  char dir[300], conf[340];
  FILE *f;
  snprintf(dir, sizeof dir, "%s/sentinel%d", s->dir, i);
  sent_conf(s, i, conf, sizeof conf);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "sentinel fixture: mkdir %s: %s\n", dir, strerror(errno));
    return -1;
  }
  if (!(f = fopen(conf, "w"))) {
    fprintf(stderr, "sentinel fixture: cannot write %s: %s\n", conf, strerror(errno));
    return -1;
  }
  fchmod(fileno(f), 0600);  /* it holds the passwords */
  fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize no\n", s->sentinel_port[i]);
  fprintf(f, "dir ");
  put_quoted(f, dir);
  fprintf(f, "\nlogfile ");
  put_quoted(f, "log");  /* relative to dir */
  fprintf(f, "\nsentinel resolve-hostnames no\n");
  if (s->opts.sentinel_password) {
    fprintf(f, "requirepass ");
    put_quoted(f, s->opts.sentinel_password);
    fputc('\n', f);
  }
  fprintf(f, "sentinel monitor %s 127.0.0.1 %d 2\n", MASTER_NAME, s->data_port[0]);
  fprintf(f, "sentinel down-after-milliseconds %s %d\n", MASTER_NAME, DOWN_AFTER_MS);
  fprintf(f, "sentinel failover-timeout %s 5000\n", MASTER_NAME);
  if (s->opts.data_password) {
    fprintf(f, "sentinel auth-pass %s ", MASTER_NAME);
    put_quoted(f, s->opts.data_password);
    fputc('\n', f);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "sentinel fixture: cannot write %s: %s\n", conf, strerror(errno));
    return -1;
  }
  return 0;
}

static int sent_spawn(bgt_sentinel_set *s, int i) {
  char conf[340];
  sent_conf(s, i, conf, sizeof conf);
  char *argv[] = {(char *)bgt_server_bin(), conf, "--sentinel", NULL};
  return bgt_spawn(argv, NULL, &s->sentinel_pid[i]);
}

/* ---- ports ---------------------------------------------------------------------------------- */

static int pick_ports(bgt_sentinel_set *s, unsigned *seed) {
  int ports[NDATA + NSENT];
  if (bgt_pick_ports(ports, NDATA + NSENT, PORT_LO, PORT_HI, 0, seed, "sentinel fixture") != 0) return -1;
  for (int i = 0; i < NDATA; i++) s->data_port[i] = ports[i];
  for (int i = 0; i < NSENT; i++) s->sentinel_port[i] = ports[NDATA + i];
  return 0;
}

/* ---- what the deployment looks like ----------------------------------------------------------- */

/* ROLE of data node i: 1 master, 0 a replica of master_port whose link is up, -1 otherwise. */
static int data_role(const bgt_sentinel_set *s, int i, long long *master_port) {
  redisReply *rep = data_cmd(s, i, "ROLE");
  int r = -1;
  if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 && rep->element[0]->type == REDIS_REPLY_STRING) {
    if (!strcmp(rep->element[0]->str, "master")) r = 1;
    else if (!strcmp(rep->element[0]->str, "slave") && rep->elements >= 4 &&
             rep->element[3]->type == REDIS_REPLY_STRING && !strcmp(rep->element[3]->str, "connected")) {
      if (master_port) *master_port = rep->element[2]->integer;
      r = 0;
    }
  }
  if (rep) freeReplyObject(rep);
  return r;
}

/* Replica i's link to data node m is up (INFO replication, the field the spec names). */
static int link_up(const bgt_sentinel_set *s, int i, int m, char *why, size_t whylen) {
  redisReply *rep = data_cmd(s, i, "INFO replication");
  char want[48];
  int ok;
  snprintf(want, sizeof want, "master_port:%d\r", s->data_port[m]);
  ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "master_link_status:up") && strstr(rep->str, want);
  if (!ok) snprintf(why, whylen, "data node %d: no link up to data node %d yet", i, m);
  if (rep) freeReplyObject(rep);
  return ok;
}

/* The one live data node whose ROLE says master, or -1 (none, or two). */
static int master_by_role(const bgt_sentinel_set *s) {
  int m = -1;
  for (int i = 0; i < NDATA; i++)
    if (data_live(s, i) && data_role(s, i, NULL) == 1) {
      if (m >= 0) return -1;
      m = i;
    }
  return m;
}

/* The data node sentinel i names as master (get-master-addr-by-name), -1 if none or not ours. */
static int sentinel_names(const bgt_sentinel_set *s, int i) {
  redisReply *rep = sent_cmd(s, i, "SENTINEL get-master-addr-by-name %s", MASTER_NAME);
  int m = -1;
  if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->type == REDIS_REPLY_STRING)
    m = data_index(s, atoll(rep->element[1]->str));
  if (rep) freeReplyObject(rep);
  return m;
}

static int no_down_flag(const char *flags) {
  return flags && !strstr(flags, "s_down") && !strstr(flags, "o_down") && !strstr(flags, "disconnected");
}

/*
 * One look at sentinel i: 1 if it reports data node m as master (no down flag), every live other
 * data node as its replica without s_down, and the other 2 sentinels (those alive without
 * s_down); else 0 with the reason in why.
 */
static int sentinel_ready(const bgt_sentinel_set *s, int i, int m, char *why, size_t whylen) {
  redisReply *rep = sent_cmd(s, i, "SENTINEL master %s", MASTER_NAME);
  const char *port, *flags, *others;
  int ok = 0;
  if (!rep || rep->type != REDIS_REPLY_ARRAY) {
    char *r = bgt_redis_render(rep);
    snprintf(why, whylen, "sentinel %d: SENTINEL master answered %.200s", i, r);
    free(r);
    goto done;
  }
  port = field(rep, "port");
  flags = field(rep, "flags");
  others = field(rep, "num-other-sentinels");
  if (!port || atoi(port) != s->data_port[m] || !flags || strcmp(flags, "master") != 0) {
    snprintf(why, whylen, "sentinel %d: master is port %s (%s), not data node %d (port %d)", i,
             port ? port : "?", flags ? flags : "?", m, s->data_port[m]);
    goto done;
  }
  if (!others || atoi(others) != NSENT - 1) {
    snprintf(why, whylen, "sentinel %d: num-other-sentinels %s, not %d", i, others ? others : "?", NSENT - 1);
    goto done;
  }
  freeReplyObject(rep);

  rep = sent_cmd(s, i, "SENTINEL replicas %s", MASTER_NAME);
  if (!rep || rep->type != REDIS_REPLY_ARRAY) {
    snprintf(why, whylen, "sentinel %d: SENTINEL replicas failed", i);
    goto done;
  }
  for (int j = 0; j < NDATA; j++) {
    int seen = 0;
    if (j == m || !data_live(s, j)) continue;
    for (size_t k = 0; k < rep->elements; k++) {
      const char *p = field(rep->element[k], "port");
      if (p && atoi(p) == s->data_port[j] && no_down_flag(field(rep->element[k], "flags"))) seen = 1;
    }
    if (!seen) {
      snprintf(why, whylen, "sentinel %d: does not list data node %d (port %d) as a healthy replica", i, j, s->data_port[j]);
      goto done;
    }
  }
  freeReplyObject(rep);

  rep = sent_cmd(s, i, "SENTINEL sentinels %s", MASTER_NAME);
  if (!rep || rep->type != REDIS_REPLY_ARRAY) {
    snprintf(why, whylen, "sentinel %d: SENTINEL sentinels failed", i);
    goto done;
  }
  for (int j = 0; j < NSENT; j++) {
    int seen = 0;
    if (j == i || !sent_live(s, j)) continue;
    for (size_t k = 0; k < rep->elements; k++) {
      const char *p = field(rep->element[k], "port");
      if (p && atoi(p) == s->sentinel_port[j] && no_down_flag(field(rep->element[k], "flags"))) seen = 1;
    }
    if (!seen) {
      snprintf(why, whylen, "sentinel %d: does not see sentinel %d (port %d) up", i, j, s->sentinel_port[j]);
      goto done;
    }
  }
  ok = 1;
done:
  if (rep) freeReplyObject(rep);
  return ok;
}

/*
 * Waits until the deployment is settled around the master the data nodes agree on (ROLE): every
 * live replica's link to it is up, and every live sentinel (only sentinel `only` if >= 0) is
 * sentinel_ready for it.
 */
static int wait_settled(bgt_sentinel_set *s, int only, int timeout_ms, const char *what) {
  char why[400] = "no live data node says master";
  long long end = bgt_now_ms() + timeout_ms;
  for (;;) {
    int m, ok = 1;
    for (int i = 0; i < NDATA; i++) bgt_exited(&s->data_pid[i]);
    for (int i = 0; i < NSENT; i++) bgt_exited(&s->sentinel_pid[i]);
    m = master_by_role(s);
    if (m < 0) {
      snprintf(why, sizeof why, "no single live data node says ROLE master");
      ok = 0;
    }
    for (int j = 0; ok && j < NDATA; j++)
      if (j != m && data_live(s, j) && !link_up(s, j, m, why, sizeof why)) ok = 0;
    for (int i = 0; ok && i < NSENT; i++) {
      if (only >= 0 && i != only) continue;
      if (!sent_live(s, i)) {
        if (i == only) { snprintf(why, sizeof why, "sentinel %d exited", i); ok = 0; }
        continue;
      }
      if (!sentinel_ready(s, i, m, why, sizeof why)) ok = 0;
    }
    if (ok) return 0;
    if (bgt_now_ms() >= end) break;
    if (tracing()) fprintf(stderr, "sentinel fixture: waiting: %s\n", why);
    bgt_sleep_ms(50);
  }
  fprintf(stderr, "sentinel fixture: %s: not settled after %d ms: %s\n", what, timeout_ms, why);
  return -1;
}

int bgt_sentinel_master(const bgt_sentinel_set *s) {
  for (int i = 0; i < NSENT; i++) {
    int m;
    if (!sent_live(s, i)) continue;
    if ((m = sentinel_names(s, i)) >= 0) return m;
  }
  fprintf(stderr, "sentinel fixture: no live sentinel names one of our data nodes as master\n");
  return -1;
}

int bgt_sentinel_wait_master(bgt_sentinel_set *s, int node, int timeout_ms) {
  long long end = bgt_now_ms() + timeout_ms;
  char why[200] = "";
  if (node < 0 || node >= NDATA) {
    fprintf(stderr, "sentinel fixture: wait_master: no data node %d\n", node);
    return -1;
  }
  for (;;) {
    int ok = 1, any = 0;
    for (int i = 0; i < NSENT; i++) bgt_exited(&s->sentinel_pid[i]);
    for (int i = 0; ok && i < NSENT; i++) {
      int m;
      if (!sent_live(s, i)) continue;
      any = 1;
      if ((m = sentinel_names(s, i)) != node) {
        snprintf(why, sizeof why, "sentinel %d names data node %d", i, m);
        ok = 0;
      }
    }
    if (ok && !any) { snprintf(why, sizeof why, "no live sentinel"); ok = 0; }
    if (ok && (!data_live(s, node) || data_role(s, node, NULL) != 1)) {
      snprintf(why, sizeof why, "data node %d: ROLE is not master", node);
      ok = 0;
    }
    if (ok) return 0;
    if (bgt_now_ms() >= end) break;
    if (tracing()) fprintf(stderr, "sentinel fixture: waiting: %s\n", why);
    bgt_sleep_ms(20);
  }
  fprintf(stderr, "sentinel fixture: wait_master %d: not after %d ms: %s\n", node, timeout_ms, why);
  return -1;
}

/* ---- start / stop --------------------------------------------------------------------------- */

static void stop_all(bgt_sentinel_set *s) {
  /* signal all first: one wait, not five */
  for (int i = 0; i < NSENT; i++) if (s->sentinel_pid[i] > 0) kill(s->sentinel_pid[i], SIGTERM);
  for (int i = 0; i < NDATA; i++) if (s->data_pid[i] > 0) kill(s->data_pid[i], SIGTERM);
  for (int i = 0; i < NSENT; i++) bgt_stop_pid(&s->sentinel_pid[i], 0);
  for (int i = 0; i < NDATA; i++) bgt_stop_pid(&s->data_pid[i], 0);
}

static void trace(const char *what, long long t0) {
  if (tracing()) fprintf(stderr, "sentinel fixture: %s at %lld ms\n", what, bgt_now_ms() - t0);
}

/* Waits until data node i is a replica of data node m with its link up. */
static int wait_link(bgt_sentinel_set *s, int i, int m, int timeout_ms) {
  char why[200];
  long long end = bgt_now_ms() + timeout_ms;
  for (;;) {
    if (bgt_exited(&s->data_pid[i])) { snprintf(why, sizeof why, "data node %d exited", i); break; }
    if (link_up(s, i, m, why, sizeof why)) return 0;
    if (bgt_now_ms() >= end) break;
    bgt_sleep_ms(20);
  }
  fprintf(stderr, "sentinel fixture: %s (after %d ms)\n", why, timeout_ms);
  return -1;
}

static int try_start(bgt_sentinel_set *s, unsigned *seed) {
  long long t0 = bgt_now_ms();
  char path[340];
  if (pick_ports(s, seed) != 0) return -1;
  /* the data nodes first, the replica's link up before any sentinel looks: a sentinel learns the
   * replicas from the master's INFO, which it asks at connect and then only every 10 s */
  for (int i = 0; i < NDATA; i++)  /* the replica after the master answers: else its first
                                      * connect fails and it retries only a second later */
    if (data_spawn(s, i, i ? s->data_port[0] : 0) != 0 ||
        wait_own(&s->data_pid[i], s->data_port[i], s->opts.data_password, 10000) != 0) {
      data_log(s, i, path, sizeof path);
      fprintf(stderr, "sentinel fixture: data node %d (port %d) did not start (a port taken? retrying)\n", i,
              s->data_port[i]);
      bgt_print_file_tail(path);
      return -1;
    }
  trace("data nodes answer", t0);
  if (wait_link(s, 1, 0, 10000) != 0) return -1;
  trace("replica link up", t0);
  for (int i = 0; i < NSENT; i++)
    if (sent_write_conf(s, i) != 0 || sent_spawn(s, i) != 0) return -1;
  for (int i = 0; i < NSENT; i++)
    if (wait_own(&s->sentinel_pid[i], s->sentinel_port[i], s->opts.sentinel_password, 10000) != 0) {
      snprintf(path, sizeof path, "%s/sentinel%d/log", s->dir, i);
      fprintf(stderr, "sentinel fixture: sentinel %d (port %d) did not start (a port taken? retrying)\n", i,
              s->sentinel_port[i]);
      bgt_print_file_tail(path);
      return -1;
    }
  trace("sentinels answer", t0);
  if (wait_settled(s, -1, 15000, "start") != 0) return -1;
  trace("sentinels agree", t0);
  return 0;
}

/* "%XX" for everything but RFC 3986 unreserved characters: the password goes into a URL. */
static size_t url_escape(char *out, size_t n, const char *v) {
  size_t len = 0;
  for (; *v; v++) {
    unsigned char ch = (unsigned char)*v;
    int plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '-' || ch == '.' || ch == '_' || ch == '~';
    if (len + 4 >= n) break;
    len += (size_t)snprintf(out + len, n - len, plain ? "%c" : "%%%02X", ch);
  }
  return len;
}

/* A value Sentinel 7.0 can write unquoted into its config and read back as one token. */
static int rewrite_safe(const char *v) {
  if (!*v) return 0;
  for (; *v; v++)
    if ((unsigned char)*v <= ' ' || *v == '"' || *v == '\'' || *v == '\\' || (unsigned char)*v == 127) return 0;
  return 1;
}

static void make_url(bgt_sentinel_set *s) {
  size_t n = (size_t)snprintf(s->url, sizeof s->url, "redis-sentinel://");
  /* the userinfo is the data nodes' (the library's reading of Lettuce's form); the sentinels'
   * password goes to BG_OPT_SENTINEL_PASSWORD */
  if (s->opts.data_password) {
    n += (size_t)snprintf(s->url + n, sizeof s->url - n, ":");
    n += url_escape(s->url + n, sizeof s->url - n - 2, s->opts.data_password);
    n += (size_t)snprintf(s->url + n, sizeof s->url - n, "@");
  }
  for (int i = 0; i < NSENT; i++)
    n += (size_t)snprintf(s->url + n, sizeof s->url - n, "%s127.0.0.1:%d", i ? "," : "", s->sentinel_port[i]);
  snprintf(s->url + n, sizeof s->url - n, "#%s", MASTER_NAME);
}

static char *dup_opt(const char *v) {
  char *d;
  if (!v) return NULL;
  if (!(d = strdup(v))) { perror("sentinel fixture: strdup"); exit(2); }
  return d;
}

static void clean_dir(bgt_sentinel_set *s) {
  if (s->dir[0]) {
    bgt_rm_tree(s->dir);  /* the node directories, then the top one */
    s->dir[0] = 0;
  }
}

void bgt_sentinel_start(bgt_sentinel_set *s, const bgt_sentinel_opts *opts) {
  unsigned seed = (unsigned)getpid() ^ (unsigned)bgt_now_ms() ^ (unsigned)time(NULL);
  char dir[256];
  bgt_ignore_sigpipe();
  memset(s, 0, sizeof *s);
  if (opts && opts->data_password && !rewrite_safe(opts->data_password)) {
    /* measured: the restarted sentinel died with "Unrecognized sentinel configuration statement" */
    fprintf(stderr, "sentinel fixture: data_password must not contain spaces, quotes, backslashes or control "
                    "characters: Redis 7.0 Sentinel rewrites `sentinel auth-pass` unquoted into its config "
                    "file and then cannot read it back\n");
    exit(2);
  }
  snprintf(s->master_name, sizeof s->master_name, "%s", MASTER_NAME);
  if (opts) {
    s->opts.data_password = dup_opt(opts->data_password);
    s->opts.sentinel_password = dup_opt(opts->sentinel_password);
  }
  bgt_scratch_dir(s->dir, sizeof s->dir, "bgt-sentinel");
  for (int attempt = 0; attempt < 5; attempt++) {
    if (try_start(s, &seed) == 0) {
      make_url(s);
      return;
    }
    stop_all(s);
    snprintf(dir, sizeof dir, "%s", s->dir);
    clean_dir(s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    if (mkdir(s->dir, 0700) != 0) break;
  }
  fprintf(stderr, "sentinel fixture: could not start 2 data nodes + 3 sentinels (redis-server 7 needed)\n");
  bgt_sentinel_stop(s);
  exit(2);
}

void bgt_sentinel_stop(bgt_sentinel_set *s) {
  const char *keep = getenv("BGT_SENTINEL_KEEP");
  stop_all(s);
  if (keep && *keep && *keep != '0' && s->dir[0]) {
    fprintf(stderr, "sentinel fixture: BGT_SENTINEL_KEEP: leaving %s\n", s->dir);
    s->dir[0] = 0;
  }
  clean_dir(s);
  free((char *)s->opts.data_password);
  free((char *)s->opts.sentinel_password);
  s->opts.data_password = s->opts.sentinel_password = NULL;
}

/* ---- faults --------------------------------------------------------------------------------- */

void bgt_sentinel_kill_data(bgt_sentinel_set *s, int node) {
  if (!data_live(s, node)) return;
  bgt_stop_pid(&s->data_pid[node], SIGKILL);
}

void bgt_sentinel_kill_sentinel(bgt_sentinel_set *s, int i) {
  if (!sent_live(s, i)) return;
  bgt_stop_pid(&s->sentinel_pid[i], SIGKILL);
}

int bgt_sentinel_restart_data(bgt_sentinel_set *s, int node) {
  int m;
  if (node < 0 || node >= NDATA || data_live(s, node)) {
    fprintf(stderr, "sentinel fixture: restart_data: data node %d is not a killed node\n", node);
    return -1;
  }
  if ((m = bgt_sentinel_master(s)) < 0) return -1;
  /* the port may still be held for a moment after kill -9 */
  for (int attempt = 0;; attempt++) {
    if (data_spawn(s, node, m == node ? 0 : s->data_port[m]) != 0) return -1;
    if (wait_own(&s->data_pid[node], s->data_port[node], s->opts.data_password, 10000) == 0) break;
    bgt_stop_pid(&s->data_pid[node], SIGKILL);
    if (attempt == 4) {
      fprintf(stderr, "sentinel fixture: restart_data: data node %d (port %d) did not come back\n", node,
              s->data_port[node]);
      return -1;
    }
    bgt_sleep_ms(200);
  }
  if (m != node && wait_link(s, node, m, 15000) != 0) return -1;
  return wait_settled(s, -1, 15000, "restart_data");
}

int bgt_sentinel_restart_sentinel(bgt_sentinel_set *s, int i) {
  if (i < 0 || i >= NSENT || sent_live(s, i)) {
    fprintf(stderr, "sentinel fixture: restart_sentinel: sentinel %d is not a killed one\n", i);
    return -1;
  }
  for (int attempt = 0;; attempt++) {
    if (sent_spawn(s, i) != 0) return -1;
    if (wait_own(&s->sentinel_pid[i], s->sentinel_port[i], s->opts.sentinel_password, 10000) == 0) break;
    bgt_stop_pid(&s->sentinel_pid[i], SIGKILL);
    if (attempt == 4) {
      char log[340];
      snprintf(log, sizeof log, "%s/sentinel%d/log", s->dir, i);
      fprintf(stderr, "sentinel fixture: restart_sentinel: sentinel %d (port %d) did not come back\n", i,
              s->sentinel_port[i]);
      bgt_print_file_tail(log);
      return -1;
    }
    bgt_sleep_ms(200);
  }
  return wait_settled(s, i, 15000, "restart_sentinel");
}
