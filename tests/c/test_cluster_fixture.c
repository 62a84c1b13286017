/*
 * The cluster fixture's own tests, with raw hiredis only (no library code): every function of
 * cluster_fixture.h, and on the way the raw replies a cluster client has to handle at each step of
 * a slot migration (ASK, TRYAGAIN, MOVED), a failover and a node's death (CLUSTERDOWN). The replies
 * are printed, so the log documents the server's behaviour. Negative controls: wait_ok reports a
 * cluster whose master just died, migrate_begin refuses the slot's own owner, failover refuses a
 * master.
 */
#include <errno.h>
#include <pthread.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "harness.h"
#include "redis_fixture.h"
#include "server_proc.h"

static bgt_cluster C;

#define TAG "{bgt-fixture}"
static const char KEY_A[] = TAG "a";
static const char KEY_B[] = TAG "b";

/* A raw connection to node i, for sequences that must share one connection (ASKING + command). */
static redisContext *conn(int i) {
  struct timeval tv = {5, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", C.node[i].port, tv);
  if (!ctx || ctx->err) {
    bgt_fail(__FILE__, __LINE__, "cannot connect to node %d", i);
    if (ctx) redisFree(ctx);
    return NULL;
  }
  return ctx;
}

static char *on(redisContext *ctx, const char *fmt, const char *arg) {
  redisReply *rep = redisCommand(ctx, fmt, arg);
  char *s = bgt_redis_render(rep);
  if (rep) freeReplyObject(rep);
  return s;
}

/* Checks that node i answers fmt(arg) with a reply starting with want; prints the reply. */
#define EXPECT(i, want, fmt, arg) expect(__LINE__, i, want, fmt, arg)
static void expect(int line, int i, const char *want, const char *fmt, const char *arg) {
  char *s = bgt_cluster_cmd(&C, i, fmt, arg);
  printf("  node %d (port %d): %-24s -> %s\n", i, C.node[i].port, arg, s);
  if (strncmp(s, want, strlen(want)) != 0) bgt_fail(__FILE__, line, "node %d: \"%s\" does not start with \"%s\"", i, s, want);
  free(s);
}

static void want_redirect(char *buf, size_t n, const char *kind, unsigned slot, int to) {
  snprintf(buf, n, "(error) %s %u 127.0.0.1:%d", kind, slot, C.node[to].port);
}

/* How many slots node owns, from its own CLUSTER NODES line (fields 9.. are slots and ranges). */
static int count_slots(int node) {
  char *s;
  int total = 0;
  s = bgt_cluster_cmd(&C, node, "CLUSTER NODES");
  for (char *line = s; line && *line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (strncmp(line, C.node[node].id, 40) == 0) {
      int field = 0;
      for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " "), field++) {
        int a, b;
        if (field < 8 || tok[0] == '[') continue;
        if (sscanf(tok, "%d-%d", &a, &b) == 2) total += b - a + 1;
        else if (sscanf(tok, "%d", &a) == 1) total += 1;
      }
    }
    line = next;
  }
  free(s);
  return total;
}

/* Each case writes the keys it reads, so any one case can run alone (argv[1]); WAIT, so that a
 * kill -9 right after cannot lose them (replication is asynchronous: scaleout.md Q2). */
static void seed_keys(void) {
  int owner = bgt_cluster_owner(&C, bgt_cluster_slot(KEY_A));
  redisContext *t;
  char *s;
  CHECK(owner >= 0);
  if (owner < 0 || !(t = conn(owner))) return;
  s = on(t, "SET %s va", KEY_A);
  CHECK_EQ_STR(s, "OK");
  free(s);
  s = on(t, "SET %s vb", KEY_B);
  CHECK_EQ_STR(s, "OK");
  free(s);
  s = on(t, "WAIT 1 %s", "5000");
  CHECK_EQ_STR(s, "1");
  free(s);
  redisFree(t);
}

static void setup(void) {
  uint64_t t0 = bgt_now_ns();
  bgt_cluster_start(&C);
  printf("  cluster up in %.2f s: %s (dir %s)\n", (double)(bgt_now_ns() - t0) / 1e9, C.seeds, C.dir);
}

static void test_slot_hash(void) {
  /* the cluster spec's vector, the {tag} rule, and the server's own answers */
  CHECK_EQ_INT(bgt_cluster_slot("123456789"), 0x31C3 & 16383);
  CHECK_EQ_INT(bgt_cluster_slot("{user1000}.following"), bgt_cluster_slot("{user1000}.followers"));
  CHECK_EQ_INT(bgt_cluster_slot("foo{}{bar}"), bgt_cluster_slot_len("foo{}{bar}", 10));
  CHECK_EQ_INT(bgt_cluster_slot_len("a\0b", 3) == bgt_cluster_slot("a"), 0);
  const char *keys[] = {"", "foo", "{bf}:config", "bf", "{bf}:lock", "foo{}{bar}", "foo{{bar}}zap",
                        "foo{bar}{zap}", "{", "}{", "{}", "a{b", "bloomguard:tracking-probe", KEY_A};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    char *s = bgt_cluster_cmd(&C, 0, "CLUSTER KEYSLOT %s", keys[k]);
    CHECK_EQ_INT(atoi(s), bgt_cluster_slot(keys[k]));
    free(s);
  }
  for (int k = 0; k < 300; k++) {
    char key[32];
    snprintf(key, sizeof key, "k%d{t%d}x", k * 7919, k % 13);
    char *s = bgt_cluster_cmd(&C, k % C.n, "CLUSTER KEYSLOT %s", key);
    CHECK_EQ_INT(atoi(s), bgt_cluster_slot(key));
    free(s);
  }
}

static void test_topology(void) {
  int masters = 0;
  CHECK_EQ_INT(C.n, 6);
  CHECK_EQ_INT(strncmp(C.url, "redis://127.0.0.1:", 18), 0);
  CHECK_EQ_INT(atoi(C.url + 18), C.node[0].port);
  CHECK_EQ_INT(strncmp(C.seeds, "redis://", 8), 0);
  for (int i = 0; i < C.n; i++) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", C.node[i].port);
    CHECK_CONTAINS(C.seeds, addr);
    CHECK(C.node[i].pid > 0);
    CHECK_EQ_INT(strlen(C.node[i].id), 40);
    CHECK(C.node[i].port >= 20000 && C.node[i].port <= 29999);
    if (C.node[i].is_master) {
      masters++;
      CHECK_EQ_INT(C.node[i].master, -1);
      CHECK(bgt_cluster_replica_of(&C, i) >= 0);
      CHECK(bgt_cluster_other_master(&C, i) >= 0 && bgt_cluster_other_master(&C, i) != i);
      /* the id is the node's own */
      char *s = bgt_cluster_cmd(&C, i, "CLUSTER MYID");
      CHECK_EQ_STR(s, C.node[i].id);
      free(s);
    } else {
      CHECK(C.node[i].master >= 0 && C.node[C.node[i].master].is_master);
      char *s = bgt_cluster_cmd(&C, i, "ROLE");
      char want[32];
      snprintf(want, sizeof want, "slave 127.0.0.1 %d connected", C.node[C.node[i].master].port);
      CHECK_EQ_INT(strncmp(s, want, strlen(want)), 0);
      free(s);
    }
  }
  CHECK_EQ_INT(masters, 3);
  for (unsigned slot = 0; slot < 16384; slot += 1021) {
    int o = bgt_cluster_owner(&C, slot);
    CHECK(o >= 0 && C.node[o].is_master);
  }
  CHECK_OK(bgt_cluster_wait_ok(&C, 1000));
}

static void test_routing(void) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int owner = bgt_cluster_owner(&C, slot), other = bgt_cluster_other_master(&C, owner);
  int replica = bgt_cluster_replica_of(&C, owner);
  char moved[64];
  CHECK(owner >= 0 && other >= 0 && replica >= 0);
  want_redirect(moved, sizeof moved, "MOVED", slot, owner);
  EXPECT(owner, "OK", "SET %s va", KEY_A);
  EXPECT(owner, "OK", "SET %s vb", KEY_B);
  EXPECT(other, moved, "GET %s", KEY_A);
  EXPECT(replica, moved, "GET %s", KEY_A);  /* no READONLY: a replica redirects to its master */
  EXPECT(owner, "(error) CROSSSLOT", "MGET %s other-slot-key", KEY_A);
}

static void test_migrate_steps(void) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int src = bgt_cluster_owner(&C, slot), dst = bgt_cluster_other_master(&C, src);
  char ask[64], moved_src[64], moved_dst[64], *s;
  redisContext *t;
  CHECK(src >= 0 && dst >= 0);
  seed_keys();
  want_redirect(ask, sizeof ask, "ASK", slot, dst);
  want_redirect(moved_src, sizeof moved_src, "MOVED", slot, src);
  want_redirect(moved_dst, sizeof moved_dst, "MOVED", slot, dst);
  printf("  slot %u: node %d -> node %d\n", slot, src, dst);

  /* negative control: the owner cannot import its own slot */
  CHECK_STATUS(bgt_cluster_migrate_begin(&C, slot, src), -1);

  CHECK_OK(bgt_cluster_migrate_begin(&C, slot, dst));
  EXPECT(src, "va", "GET %s", KEY_A);          /* the source serves the keys it still holds */
  EXPECT(dst, moved_src, "GET %s", KEY_A);     /* the target without ASKING sends us back */
  EXPECT(src, ask, "GET %s", TAG "missing");   /* a key it does not have: ASK */

  CHECK_OK(bgt_cluster_migrate_key(&C, slot, dst, KEY_A, strlen(KEY_A)));
  CHECK_OK(bgt_cluster_migrate_key(&C, slot, dst, KEY_A, strlen(KEY_A)));  /* gone already: NOKEY is ok */
  EXPECT(src, ask, "GET %s", KEY_A);
  EXPECT(src, "vb", "GET %s", KEY_B);
  EXPECT(src, "(error) TRYAGAIN", "MGET %s " TAG "b", KEY_A);  /* one key moved, one not */
  if ((t = conn(dst))) {
    s = on(t, "ASKING", "");
    CHECK_EQ_STR(s, "OK");
    free(s);
    s = on(t, "GET %s", KEY_A);
    printf("  node %d: ASKING; GET %s -> %s\n", dst, KEY_A, s);
    CHECK_EQ_STR(s, "va");
    free(s);
    s = on(t, "GET %s", KEY_A);  /* ASKING is one-shot */
    printf("  node %d: GET %s (no ASKING again) -> %s\n", dst, KEY_A, s);
    CHECK_EQ_INT(strncmp(s, moved_src, strlen(moved_src)), 0);
    free(s);
    /* ASKING must come before MULTI */
    free(on(t, "ASKING", ""));
    free(on(t, "MULTI", ""));
    s = on(t, "GET %s", KEY_A);
    free(s);
    s = on(t, "EXEC", "");
    printf("  node %d: ASKING; MULTI; GET %s; EXEC -> %s\n", dst, KEY_A, s);
    CHECK_EQ_STR(s, "va");
    free(s);
    free(on(t, "ASKING", ""));
    s = on(t, "MGET %s " TAG "b", KEY_A);  /* the target has a, not b */
    printf("  node %d: ASKING; MGET a b -> %s\n", dst, s);
    CHECK_EQ_INT(strncmp(s, "(error) TRYAGAIN", 16), 0);
    free(s);
    redisFree(t);
  }

  CHECK_OK(bgt_cluster_migrate_all_keys(&C, slot, dst));
  EXPECT(src, ask, "GET %s", KEY_B);
  s = bgt_cluster_cmd(&C, src, "CLUSTER COUNTKEYSINSLOT %u", slot);
  CHECK_EQ_STR(s, "0");
  free(s);

  CHECK_OK(bgt_cluster_migrate_end(&C, slot, dst));
  CHECK_EQ_INT(bgt_cluster_owner(&C, slot), dst);
  for (int i = 0; i < C.n; i++) {
    if (i == dst) continue;
    EXPECT(i, moved_dst, "GET %s", KEY_B);
  }
  EXPECT(dst, "va", "GET %s", KEY_A);
  EXPECT(dst, "vb", "GET %s", KEY_B);

  /* and back in one call */
  CHECK_OK(bgt_cluster_move_slot(&C, slot, src));
  CHECK_EQ_INT(bgt_cluster_owner(&C, slot), src);
  EXPECT(src, "va", "GET %s", KEY_A);
  EXPECT(dst, moved_src, "GET %s", KEY_A);
}

static void test_reshard(void) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int from = bgt_cluster_owner(&C, slot), to = bgt_cluster_other_master(&C, from);
  int before_from = count_slots(from), before_to = count_slots(to);
  seed_keys();
  CHECK(before_from > 0 && before_to > 0);
  CHECK_OK(bgt_cluster_reshard(&C, from, to, 100));
  printf("  reshard 100 slots node %d -> node %d: %d/%d slots -> %d/%d\n", from, to, before_from, before_to,
         count_slots(from), count_slots(to));
  CHECK_EQ_INT(count_slots(from), before_from - 100);
  CHECK_EQ_INT(count_slots(to), before_to + 100);
  /* the key went with its slot, if its slot was among them */
  int owner = bgt_cluster_owner(&C, slot);
  CHECK(owner == from || owner == to);
  EXPECT(owner, "va", "GET %s", KEY_A);
  CHECK_OK(bgt_cluster_reshard(&C, to, from, 100));  /* put the balance back (not the same slots) */
  CHECK_EQ_INT(count_slots(from), before_from);
}

/* A replica frozen (SIGSTOP) for 3 s while its master's slots move: Valkey >= 8 waits for the
 * shard's replicas in CLUSTER SETSLOT and answers NOREPLICAS after 2 s; the fixture sends SETSLOT
 * again, and a reshard that stopped on it is fixed and finished. The reshard's replica freezes once
 * the first slot has moved: redis-cli's check at its start would otherwise wait for the frozen node.
 * On Valkey the freeze must really have caused NOREPLICAS (else this proves nothing); Redis 7.0's
 * SETSLOT waits for no replica. */
typedef struct freezer {
  pid_t pid;
  int watch, slots;   /* freeze once node watch has more than slots (-1: at once) */
} freezer;

static void *freeze_3s(void *arg) {
  freezer *z = arg;
  for (long long end = bgt_now_ms() + 20000; z->watch >= 0 && bgt_now_ms() < end;) {
    if (bgt_cluster_slot_count(&C, z->watch) > z->slots) break;
    bgt_sleep_ms(2);
  }
  kill(z->pid, SIGSTOP);
  bgt_sleep_ms(3000);
  kill(z->pid, SIGCONT);
  return NULL;
}

static void frozen_replica_during(int reshard) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int from = bgt_cluster_owner(&C, slot), to = bgt_cluster_other_master(&C, from);
  int rep = bgt_cluster_replica_of(&C, from), before = count_slots(to), n = reshard ? 300 : 1;
  CHECK_MSG(rep >= 0, "node %d has no live replica", from);
  if (rep < 0) return;
  freezer z = {C.node[rep].pid, reshard ? to : -1, bgt_cluster_slot_count(&C, to)};
  pthread_t t;
  pthread_create(&t, NULL, freeze_3s, &z);
  if (reshard) CHECK_OK(bgt_cluster_reshard(&C, from, to, n));
  else {
    bgt_sleep_ms(50);   /* frozen first: the move's SETSLOT is what must wait */
    CHECK_OK(bgt_cluster_move_slot(&C, slot, to));
  }
  pthread_join(t, NULL);
  CHECK_EQ_INT(count_slots(to), before + n);
  /* and back, the replica thawed */
  if (reshard) CHECK_OK(bgt_cluster_reshard(&C, to, from, n));
  else CHECK_OK(bgt_cluster_move_slot(&C, slot, from));
  CHECK_EQ_INT(count_slots(to), before);
}

static void test_a_frozen_replica_delays_slot_moves_but_fails_none(void) {
  int seen = C.noreplicas;
  frozen_replica_during(0);
  int moves = C.noreplicas - seen;
  frozen_replica_during(1);
  printf("  NOREPLICAS answers coped with: %d in a slot's move, %d in a reshard (%s %d)\n", moves,
         C.noreplicas - seen - moves, bgt_server_name(), bgt_server_major());
  if (bgt_server_is_valkey() && bgt_server_major() >= 8) {
    CHECK(moves > 0);
    CHECK(C.noreplicas - seen - moves > 0);
  } else {
    CHECK_EQ_INT(C.noreplicas, seen);
  }
}

static void test_failover(void) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int m = bgt_cluster_owner(&C, slot), r = bgt_cluster_replica_of(&C, m);
  char moved[64];
  CHECK(m >= 0 && r >= 0);
  if (m < 0 || r < 0) return;
  seed_keys();
  CHECK_STATUS(bgt_cluster_failover(&C, m), -1);  /* negative control: a master cannot fail over */
  CHECK_OK(bgt_cluster_failover(&C, r));
  CHECK(C.node[r].is_master);
  CHECK(!C.node[m].is_master);
  CHECK_EQ_INT(C.node[m].master, r);
  CHECK_EQ_INT(bgt_cluster_owner(&C, slot), r);
  want_redirect(moved, sizeof moved, "MOVED", slot, r);
  EXPECT(m, moved, "GET %s", KEY_A);   /* the demoted master redirects */
  EXPECT(r, "va", "GET %s", KEY_A);    /* a manual failover waits for the replica to catch up */
}

static void test_kill_restart(void) {
  unsigned slot = bgt_cluster_slot(KEY_A);
  int m = bgt_cluster_owner(&C, slot), r = bgt_cluster_replica_of(&C, m);
  int watch = bgt_cluster_other_master(&C, m), down = 0, polls = 0;
  char moved[64];
  uint64_t t0;
  CHECK(m >= 0 && r >= 0 && watch >= 0);
  if (m < 0 || r < 0 || watch < 0) return;

  seed_keys();
  CHECK_OK(bgt_cluster_wait_ok(&C, 1000));
  bgt_cluster_kill(&C, m);
  t0 = bgt_now_ns();
  CHECK_EQ_INT(C.node[m].pid, 0);
  {
    char *s = bgt_cluster_cmd(&C, m, "PING");
    CHECK_EQ_INT(strncmp(s, "(io error)", 10), 0);
    free(s);
  }
  /* negative control: the map still names the dead master, so the cluster is not ok yet */
  CHECK_STATUS(bgt_cluster_wait_ok(&C, 200), -1);

  /* watch another master until the replica has taken over: the whole cluster refuses meanwhile */
  for (polls = 0; polls < 1500; polls++) {  /* <= 30 s */
    char *s = bgt_cluster_cmd(&C, watch, "CLUSTER INFO");
    int ok = strstr(s, "cluster_state:ok") != NULL;
    free(s);
    s = bgt_cluster_cmd(&C, watch, "GET %s", "{other}x");
    if (!down && strncmp(s, "(error) CLUSTERDOWN", 19) == 0) {
      printf("  %.2f s after kill -9: node %d answers %s\n", (double)(bgt_now_ns() - t0) / 1e9, watch, s);
      down = 1;
    }
    free(s);
    if (down && ok) break;
    usleep(20000);
  }
  CHECK_MSG(down, "no node answered CLUSTERDOWN while master %d was dead", m);
  CHECK_OK(bgt_cluster_wait_ok(&C, 20000));
  printf("  %.2f s after kill -9: the cluster is ok again\n", (double)(bgt_now_ns() - t0) / 1e9);
  bgt_cluster_refresh(&C);
  CHECK(C.node[r].is_master);
  CHECK_EQ_INT(bgt_cluster_owner(&C, slot), r);
  want_redirect(moved, sizeof moved, "MOVED", slot, r);
  EXPECT(watch, moved, "GET %s", KEY_A);
  EXPECT(r, "va", "GET %s", KEY_A);

  t0 = bgt_now_ns();
  CHECK_OK(bgt_cluster_restart(&C, m));
  printf("  restarted node %d: back as a replica of node %d in %.2f s\n", m, C.node[m].master,
         (double)(bgt_now_ns() - t0) / 1e9);
  CHECK(C.node[m].pid > 0);
  CHECK(!C.node[m].is_master);
  CHECK_EQ_INT(C.node[m].master, r);
  CHECK_EQ_INT(bgt_cluster_replica_of(&C, r), m);
  EXPECT(m, moved, "GET %s", KEY_A);
  CHECK_STATUS(bgt_cluster_restart(&C, m), -1);  /* it is running */
}

static void teardown(void) {
  pid_t pids[BGT_CLUSTER_NODES];
  int ports[BGT_CLUSTER_NODES];
  char dir[256];
  struct stat st;
  snprintf(dir, sizeof dir, "%s", C.dir);
  for (int i = 0; i < C.n; i++) { pids[i] = C.node[i].pid; ports[i] = C.node[i].port; }
  bgt_cluster_stop(&C);
  bgt_cluster_stop(&C);  /* idempotent */
  for (int i = 0; i < C.n; i++) {
    CHECK(pids[i] > 0);
    CHECK_MSG(kill(pids[i], 0) != 0 && errno == ESRCH, "pid %d still exists", (int)pids[i]);
    CHECK_EQ_INT(C.node[i].pid, 0);
    char *s = bgt_cluster_cmd(&C, i, "PING");
    CHECK_MSG(strncmp(s, "(io error)", 10) == 0, "port %d still answers: %s", ports[i], s);
    free(s);
  }
  CHECK_MSG(stat(dir, &st) != 0, "%s is still there", dir);
}

/* test_failover first: right after the start is when a master may not know its replica yet (a
 * wait_ok that compared only the slot map let CLUSTER FAILOVER time out there) */
BGT_RUN(BGT_CASE(setup), BGT_CASE(test_failover), BGT_CASE(test_slot_hash), BGT_CASE(test_topology),
        BGT_CASE(test_routing), BGT_CASE(test_migrate_steps), BGT_CASE(test_reshard),
        BGT_CASE(test_a_frozen_replica_delays_slot_moves_but_fails_none),
        BGT_CASE(test_kill_restart), BGT_CASE(teardown))
