/*
 * The Sentinel fixture's own tests, with raw hiredis only (no library code): every function of
 * sentinel_fixture.h, and on the way what a Sentinel client sees: the roles, get-master-addr-by-name,
 * the events of a kill -9 failover (printed with their times), the old master back as a replica,
 * NOAUTH from a sentinel with requirepass, all sentinels killed and restarted.
 * Negative controls: wait_master reports a node that is not master (a replica; a killed master),
 * master() fails with no sentinel alive, restarts refuse a running process, an unauthenticated or
 * wrongly authenticated command is refused.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "redis_fixture.h"
#include "sentinel_fixture.h"
#include "server_proc.h"

static bgt_sentinel_set S;

/* Checks that the reply starts with want; prints it. */
#define EXPECT_DATA(set, i, want, ...) expect_reply(__LINE__, "data node", i, bgt_sentinel_data_cmd(set, i, __VA_ARGS__), want)
#define EXPECT_SENT(set, i, want, ...) expect_reply(__LINE__, "sentinel", i, bgt_sentinel_sentinel_cmd(set, i, __VA_ARGS__), want)
static void expect_reply(int line, const char *what, int i, char *got, const char *want) {
  printf("  %s %d: %.160s\n", what, i, got);
  if (strncmp(got, want, strlen(want)) != 0) bgt_fail(__FILE__, line, "%s %d: \"%s\" does not start with \"%s\"", what, i, got, want);
  free(got);
}

/* A raw connection with no AUTH, to show what the servers refuse. */
static redisContext *raw(int port) {
  struct timeval tv = {5, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!ctx || ctx->err) {
    bgt_fail(__FILE__, __LINE__, "cannot connect to port %d", port);
    if (ctx) redisFree(ctx);
    return NULL;
  }
  redisSetTimeout(ctx, tv);
  return ctx;
}

static char *on(redisContext *ctx, const char *fmt, ...) {
  va_list ap;
  redisReply *rep;
  char *s;
  va_start(ap, fmt);
  rep = redisvCommand(ctx, fmt, ap);
  va_end(ap);
  s = bgt_redis_render(rep);
  if (rep) freeReplyObject(rep);
  return s;
}

/* On a failed check: the tail of every log of the set (layout in sentinel_fixture.h). */
static void dump_logs(const bgt_sentinel_set *s) {
  static const char *const names[] = {"data0", "data1", "sentinel0", "sentinel1", "sentinel2"};
  for (int i = 0; i < 5; i++) {
    char path[320];
    snprintf(path, sizeof path, "%s/%s/log", s->dir, names[i]);
    bgt_print_file_tail(path);  /* the launcher's (server_proc.h); nothing for a missing file */
  }
}

static void setup(void) {
  uint64_t t0 = bgt_now_ns();
  bgt_sentinel_start(&S, NULL);
  printf("  sentinel set up in %.2f s: %s (dir %s)\n", (double)(bgt_now_ns() - t0) / 1e9, S.url, S.dir);
}

/* The replica of master m (the other data node). */
static int other(int m) { return 1 - m; }

/* Writes key=val on master m and waits for the replica: a kill -9 right after cannot lose it.
 * One connection: WAIT counts the replicas that acknowledged *this connection's* writes (on a
 * fresh one it returns at once; a run that did so lost the key in the next failover). */
static void seed(bgt_sentinel_set *s, int m, const char *key, const char *val) {
  redisContext *ctx = raw(s->data_port[m]);
  char *r;
  if (!ctx) return;
  if (s->opts.data_password) {
    r = on(ctx, "AUTH %s", s->opts.data_password);
    CHECK_EQ_STR(r, "OK");
    free(r);
  }
  r = on(ctx, "SET %s %s", key, val);
  CHECK_EQ_STR(r, "OK");
  free(r);
  r = on(ctx, "WAIT 1 5000");
  CHECK_EQ_STR(r, "1");
  free(r);
  redisFree(ctx);
}

static void test_topology(void) {
  char want[64], url[512];
  int n;
  CHECK_EQ_STR(S.master_name, "bgmaster");
  for (int i = 0; i < 2; i++) CHECK(S.data_pid[i] > 0 && S.data_port[i] >= 20000);
  for (int i = 0; i < 3; i++) CHECK(S.sentinel_pid[i] > 0 && S.sentinel_port[i] >= 20000);
  n = snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#bgmaster", S.sentinel_port[0],
               S.sentinel_port[1], S.sentinel_port[2]);
  CHECK(n > 0);
  CHECK_EQ_STR(S.url, url);
  CHECK(S.opts.data_password == NULL && S.opts.sentinel_password == NULL);

  CHECK_EQ_INT(bgt_sentinel_master(&S), 0);
  EXPECT_DATA(&S, 0, "master", "ROLE");
  snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", S.data_port[0]);
  EXPECT_DATA(&S, 1, want, "ROLE");
  EXPECT_DATA(&S, 1, "(error) READONLY", "SET %s %s", "bgt-sent:k", "v");
  seed(&S, 0, "bgt-sent:k", "v0");
  EXPECT_DATA(&S, 1, "v0", "GET %s", "bgt-sent:k");

  snprintf(want, sizeof want, "127.0.0.1 %d", S.data_port[0]);
  for (int i = 0; i < 3; i++) {
    EXPECT_SENT(&S, i, want, "SENTINEL get-master-addr-by-name %s", S.master_name);
    EXPECT_SENT(&S, i, "(nil)", "SENTINEL get-master-addr-by-name %s", "no-such-master");
    char *r = bgt_sentinel_sentinel_cmd(&S, i, "SENTINEL master %s", S.master_name);
    CHECK_CONTAINS(r, "num-other-sentinels 2");
    CHECK_CONTAINS(r, "num-slaves 1");
    CHECK_CONTAINS(r, "flags master ");
    free(r);
  }
  /* a sentinel only speaks Sentinel: no data commands */
  EXPECT_SENT(&S, 0, "(error) ERR unknown command", "GET %s", "bgt-sent:k");

  /* negative controls */
  CHECK_STATUS(bgt_sentinel_wait_master(&S, 1, 300), -1);  /* a replica is not master */
  CHECK_STATUS(bgt_sentinel_wait_master(&S, 2, 300), -1);  /* no such node */
  CHECK_OK(bgt_sentinel_wait_master(&S, 0, 5000));
  CHECK_STATUS(bgt_sentinel_restart_data(&S, 0), -1);      /* running */
  CHECK_STATUS(bgt_sentinel_restart_sentinel(&S, 0), -1);  /* running */
  {
    char *r = bgt_sentinel_data_cmd(&S, 5, "PING");
    CHECK_EQ_INT(strncmp(r, "(io error)", 10), 0);
    free(r);
  }
}

/*
 * kill -9 of the master, watched from sentinel 0's event channels: prints every event with its
 * time, up to +switch-master. Returns the seconds to +switch-master, or -1.
 */
static double kill_and_watch(bgt_sentinel_set *s, int m) {
  redisContext *sub = raw(s->sentinel_port[0]);
  redisReply *rep = NULL;
  uint64_t t0;
  double switched = -1;
  int events = 0;
  if (!sub) return -1;
  if (s->opts.sentinel_password) {
    char *r = on(sub, "AUTH %s", s->opts.sentinel_password);
    CHECK_EQ_STR(r, "OK");
    free(r);
  }
  /* a sentinel publishes each event on a channel named after it: "+sdown", "+switch-master", ... */
  if ((rep = redisCommand(sub, "PSUBSCRIBE *")) == NULL) {
    bgt_fail(__FILE__, __LINE__, "PSUBSCRIBE failed");
    redisFree(sub);
    return -1;
  }
  freeReplyObject(rep);
  /* A sentinel's own channels carry events only, and a failover whose first try found no replica
   * to promote yet (one restarted a second ago, not yet seen connected) is tried again after
   * twice the failover-timeout (5 s): 10 s without a message. Wait that out (a CI run met it). */
  struct timeval retry = {25, 0};
  redisSetTimeout(sub, retry);
  bgt_sentinel_kill_data(s, m);
  t0 = bgt_now_ns();
  CHECK_EQ_INT(s->data_pid[m], 0);
  /* right after the kill every sentinel still names the dead master (down-after is 1 s) */
  CHECK_STATUS(bgt_sentinel_wait_master(s, m, 100), -1);  /* its ROLE cannot say master */
  for (int k = 0; k < 200 && switched < 0; k++) {  /* each read waits <= 25 s; ~15 events */
    double t;
    rep = NULL;
    if (redisGetReply(sub, (void **)&rep) != REDIS_OK || !rep) {
      bgt_fail(__FILE__, __LINE__, "no +switch-master event (read: %s)", sub->errstr);
      break;
    }
    t = (double)(bgt_now_ns() - t0) / 1e9;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 4) {
      const char *ch = rep->element[2]->str, *msg = rep->element[3]->str;
      events++;
      if (strcmp(ch, "__sentinel__:hello") != 0) printf("  %5.2f s  %s %s\n", t, ch, msg);
      if (!strcmp(ch, "+switch-master")) switched = t;
    }
    freeReplyObject(rep);
  }
  redisFree(sub);
  if (switched >= 0) printf("  +switch-master %.2f s after kill -9 (%d messages)\n", switched, events);
  return switched;
}

/* The failover as a client sees it, then the old master back as a replica, then a failback. */
static void test_failover_and_restart(void) {
  int m = bgt_sentinel_master(&S), r = other(m);
  char want[64];
  uint64_t t0;
  double sw;
  CHECK(m >= 0);
  if (m < 0) return;
  seed(&S, m, "bgt-sent:a", "before");

  sw = kill_and_watch(&S, m);
  CHECK(sw >= 0);
  t0 = bgt_now_ns();
  CHECK_OK(bgt_sentinel_wait_master(&S, r, 20000));
  printf("  all sentinels name data node %d, its ROLE master, %.2f s after +switch-master\n", r,
         (double)(bgt_now_ns() - t0) / 1e9);
  CHECK_EQ_INT(bgt_sentinel_master(&S), r);
  snprintf(want, sizeof want, "127.0.0.1 %d", S.data_port[r]);
  for (int i = 0; i < 3; i++) EXPECT_SENT(&S, i, want, "SENTINEL get-master-addr-by-name %s", S.master_name);
  EXPECT_DATA(&S, r, "master", "ROLE");
  EXPECT_DATA(&S, r, "before", "GET %s", "bgt-sent:a");  /* WAITed before the kill: not lost */
  EXPECT_DATA(&S, r, "OK", "SET %s %s", "bgt-sent:a", "after");
  {
    char *s = bgt_sentinel_data_cmd(&S, m, "PING");
    CHECK_EQ_INT(strncmp(s, "(io error)", 10), 0);
    free(s);
  }

  /* the old master comes back as a replica of the new one */
  t0 = bgt_now_ns();
  CHECK_OK(bgt_sentinel_restart_data(&S, m));
  printf("  data node %d back in %.2f s\n", m, (double)(bgt_now_ns() - t0) / 1e9);
  CHECK(S.data_pid[m] > 0);
  snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", S.data_port[r]);
  EXPECT_DATA(&S, m, want, "ROLE");
  EXPECT_DATA(&S, m, "after", "GET %s", "bgt-sent:a");
  EXPECT_DATA(&S, m, "(error) READONLY", "SET %s %s", "bgt-sent:a", "x");
  CHECK_EQ_INT(bgt_sentinel_master(&S), r);
  for (int i = 0; i < 3; i++) {
    char port[16], *s = bgt_sentinel_sentinel_cmd(&S, i, "SENTINEL replicas %s", S.master_name);
    snprintf(port, sizeof port, " %d ", S.data_port[m]);
    CHECK_CONTAINS(s, port);
    CHECK(!strstr(s, "s_down"));
    free(s);
  }
  CHECK_STATUS(bgt_sentinel_restart_data(&S, m), -1);  /* running */

  /* and it can take over again: the restarted replica is one Sentinel promotes */
  seed(&S, r, "bgt-sent:b", "back");
  CHECK(kill_and_watch(&S, r) >= 0);
  CHECK_OK(bgt_sentinel_wait_master(&S, m, 20000));
  {
    int before = bgt_failures;
    EXPECT_DATA(&S, m, "back", "GET %s", "bgt-sent:b");  /* WAITed for: an acknowledged write */
    if (bgt_failures != before) dump_logs(&S);
  }
  CHECK_OK(bgt_sentinel_restart_data(&S, r));
  snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", S.data_port[m]);
  EXPECT_DATA(&S, r, want, "ROLE");
}

static void test_sentinels_restart(void) {
  int m = bgt_sentinel_master(&S);
  char want[64], conf[300];
  FILE *f;
  CHECK(m >= 0);
  if (m < 0) return;
  for (int i = 0; i < 3; i++) bgt_sentinel_kill_sentinel(&S, i);
  bgt_sentinel_kill_sentinel(&S, 0);  /* already killed: nothing */
  for (int i = 0; i < 3; i++) {
    char *s = bgt_sentinel_sentinel_cmd(&S, i, "PING");
    CHECK_EQ_INT(S.sentinel_pid[i], 0);
    CHECK_EQ_INT(strncmp(s, "(io error)", 10), 0);
    free(s);
  }
  CHECK_EQ_INT(bgt_sentinel_master(&S), -1);  /* negative control: nobody to ask */
  CHECK_STATUS(bgt_sentinel_wait_master(&S, m, 200), -1);
  /* the data nodes do not care */
  EXPECT_DATA(&S, m, "OK", "SET %s %s", "bgt-sent:c", "no sentinels");

  /* each sentinel's config was rewritten by Sentinel: its id and what it learned */
  snprintf(conf, sizeof conf, "%s/sentinel0/sentinel.conf", S.dir);
  if ((f = fopen(conf, "r"))) {
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK_CONTAINS(buf, "sentinel myid ");
    CHECK_CONTAINS(buf, "sentinel known-sentinel bgmaster");
    CHECK_CONTAINS(buf, "sentinel known-replica bgmaster");
  } else {
    bgt_fail(__FILE__, __LINE__, "cannot read %s", conf);
  }

  for (int i = 0; i < 3; i++) {
    uint64_t t0 = bgt_now_ns();
    CHECK_OK(bgt_sentinel_restart_sentinel(&S, i));
    printf("  sentinel %d back in %.2f s\n", i, (double)(bgt_now_ns() - t0) / 1e9);
    CHECK(S.sentinel_pid[i] > 0);
  }
  CHECK_EQ_INT(bgt_sentinel_master(&S), m);
  CHECK_OK(bgt_sentinel_wait_master(&S, m, 5000));
  snprintf(want, sizeof want, "127.0.0.1 %d", S.data_port[m]);
  for (int i = 0; i < 3; i++) {
    EXPECT_SENT(&S, i, want, "SENTINEL get-master-addr-by-name %s", S.master_name);
    char *s = bgt_sentinel_sentinel_cmd(&S, i, "SENTINEL master %s", S.master_name);
    CHECK_CONTAINS(s, "num-other-sentinels 2");
    free(s);
  }
  CHECK_STATUS(bgt_sentinel_restart_sentinel(&S, 1), -1);  /* running */
  CHECK_STATUS(bgt_sentinel_restart_sentinel(&S, 3), -1);  /* no such sentinel */
}

/* Both passwords, with characters that need escaping in the URL (and quoting in the config file:
 * the sentinel's; the data password must survive Sentinel's unquoted rewrite of auth-pass). */
static void test_passwords(void) {
  static const char data_pw[] = "data-pw#1:x@y";
  static const char sent_pw[] = "sent:pw@/\\2";
  bgt_sentinel_opts o = {data_pw, sent_pw};
  bgt_sentinel_set P;
  redisContext *ctx;
  uint64_t t0 = bgt_now_ns();
  char want[600], *s;
  int m;

  bgt_sentinel_start(&P, &o);
  printf("  sentinel set with passwords up in %.2f s\n", (double)(bgt_now_ns() - t0) / 1e9);
  CHECK(P.opts.data_password != data_pw && !strcmp(P.opts.data_password, data_pw));  /* copied */
  CHECK(P.opts.sentinel_password != sent_pw && !strcmp(P.opts.sentinel_password, sent_pw));
  snprintf(want, sizeof want, "redis-sentinel://:data-pw%%231%%3Ax%%40y@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#bgmaster",
           P.sentinel_port[0], P.sentinel_port[1], P.sentinel_port[2]);
  CHECK_EQ_STR(P.url, want);

  /* the sentinel refuses a client that has not authenticated, and a wrong password */
  if ((ctx = raw(P.sentinel_port[0]))) {
    s = on(ctx, "SENTINEL get-master-addr-by-name %s", P.master_name);
    printf("  sentinel 0 without AUTH: %s\n", s);
    CHECK_EQ_INT(strncmp(s, "(error) NOAUTH", 14), 0);
    free(s);
    s = on(ctx, "AUTH %s", "wrong");
    printf("  sentinel 0 AUTH wrong: %s\n", s);
    CHECK_EQ_INT(strncmp(s, "(error) WRONGPASS", 17), 0);
    free(s);
    s = on(ctx, "AUTH %s", sent_pw);
    CHECK_EQ_STR(s, "OK");
    free(s);
    s = on(ctx, "SENTINEL get-master-addr-by-name %s", P.master_name);
    snprintf(want, sizeof want, "127.0.0.1 %d", P.data_port[0]);
    CHECK_EQ_STR(s, want);
    free(s);
    redisFree(ctx);
  }
  /* the data password is not the sentinels' one, and the other way round */
  if ((ctx = raw(P.data_port[0]))) {
    s = on(ctx, "GET %s", "k");
    printf("  data node 0 without AUTH: %s\n", s);
    CHECK_EQ_INT(strncmp(s, "(error) NOAUTH", 14), 0);
    free(s);
    s = on(ctx, "AUTH %s", sent_pw);
    CHECK_EQ_INT(strncmp(s, "(error) WRONGPASS", 17), 0);
    free(s);
    redisFree(ctx);
  }
  EXPECT_SENT(&P, 1, want, "SENTINEL get-master-addr-by-name %s", P.master_name);
  EXPECT_DATA(&P, 0, "master", "ROLE");
  snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", P.data_port[0]);  /* masterauth worked */
  EXPECT_DATA(&P, 1, want, "ROLE");

  /* a failover needs auth-pass (Sentinel sends REPLICAOF to the nodes) */
  m = bgt_sentinel_master(&P);
  CHECK_EQ_INT(m, 0);
  seed(&P, 0, "bgt-sent:p", "pw");
  CHECK(kill_and_watch(&P, 0) >= 0);
  CHECK_OK(bgt_sentinel_wait_master(&P, 1, 20000));
  EXPECT_DATA(&P, 1, "pw", "GET %s", "bgt-sent:p");
  CHECK_OK(bgt_sentinel_restart_data(&P, 0));
  snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", P.data_port[1]);
  EXPECT_DATA(&P, 0, want, "ROLE");

  /* a sentinel restarted from its rewritten config still requires its password */
  bgt_sentinel_kill_sentinel(&P, 2);
  CHECK_OK(bgt_sentinel_restart_sentinel(&P, 2));
  if ((ctx = raw(P.sentinel_port[2]))) {
    s = on(ctx, "SENTINEL get-master-addr-by-name %s", P.master_name);
    CHECK_EQ_INT(strncmp(s, "(error) NOAUTH", 14), 0);
    free(s);
    redisFree(ctx);
  }
  snprintf(want, sizeof want, "127.0.0.1 %d", P.data_port[1]);
  EXPECT_SENT(&P, 2, want, "SENTINEL get-master-addr-by-name %s", P.master_name);

  bgt_sentinel_stop(&P);
  CHECK(P.opts.data_password == NULL && P.opts.sentinel_password == NULL && P.dir[0] == 0);
  bgt_sentinel_stop(&P);  /* idempotent */
}

static void teardown(void) {
  pid_t pids[5];
  int ports[5];
  char dir[256];
  struct stat st;
  snprintf(dir, sizeof dir, "%s", S.dir);
  for (int i = 0; i < 2; i++) { pids[i] = S.data_pid[i]; ports[i] = S.data_port[i]; }
  for (int i = 0; i < 3; i++) { pids[2 + i] = S.sentinel_pid[i]; ports[2 + i] = S.sentinel_port[i]; }
  bgt_sentinel_stop(&S);
  bgt_sentinel_stop(&S);  /* idempotent */
  for (int i = 0; i < 5; i++) {
    char *s = i < 2 ? bgt_sentinel_data_cmd(&S, i, "PING") : bgt_sentinel_sentinel_cmd(&S, i - 2, "PING");
    CHECK(pids[i] > 0);
    CHECK_MSG(kill(pids[i], 0) != 0 && errno == ESRCH, "pid %d still exists", (int)pids[i]);
    CHECK_MSG(strncmp(s, "(io error)", 10) == 0, "port %d still answers: %s", ports[i], s);
    free(s);
  }
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(S.data_pid[i], 0);
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(S.sentinel_pid[i], 0);
  CHECK_MSG(stat(dir, &st) != 0, "%s is still there", dir);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_topology), BGT_CASE(test_failover_and_restart),
        BGT_CASE(test_sentinels_restart), BGT_CASE(test_passwords), BGT_CASE(teardown))
