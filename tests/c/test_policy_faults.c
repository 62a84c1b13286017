/*
 * The policy engine under real faults of a real redis-server:
 *  - CLIENT PAUSE and DEBUG SLEEP longer than the command timeout: every call returns within the
 *    timeout plus a margin, answered by the chain (assumed, or the snapshot); the breaker stops
 *    paying the timeout; negative controls: with the breaker off every call pays it, and without a
 *    policy the calls fail with BG_ETIMEOUT;
 *  - CLIENT KILL of the library's connections in a loop: queries never fail (retried, or assumed
 *    present); negative control: without a policy some calls do fail;
 *  - the server stopped and restarted (and frozen with SIGSTOP): the breaker opens, answers come
 *    without trying Redis, the breaker closes after the restart (the server answers LOADING for a
 *    while first: the server class, retried, then assumed); negative control with it off;
 *  - a 10,000-query burst with Redis down and the fallback limited to 100 calls/s: called at most
 *    as the bucket allows; negative control: unlimited, it is called for every query.
 * Every item whose add returned BG_OK is checked present afterwards (nothing committed is lost).
 */
#include <bloomguard.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "items.h"
#include "redis_fixture.h"
#include "server_proc.h"

#define TIMEOUT_MS 200
/* "within the timeout plus a margin": what it stands against is a call that waits for the fault
 * to end (the pause, the sleep: 1.2 s and more; a frozen server: for ever); the margin is for a
 * loaded machine (two test suites at once, sanitizers). Whether a call paid the timeout or was
 * answered at once is read from the filter's counters, not from its duration. */
#define MARGIN_MS 1000

static bgt_redis srv;    /* with AOF (fsync always): survives a restart */
static const char *const AOF_ARGS[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};

static double ms_since(uint64_t t0) { return (double)(bgt_now_ns() - t0) / 1e6; }

static bg_client *open_client(const bgt_redis *r, int64_t timeout_ms, int64_t pool) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, timeout_ms));
  CHECK_OK(bg_options_set_int(o, BG_OPT_POOL_SIZE, pool));
  CHECK_OK(bg_client_open(&c, r->url, o));
  bg_options_free(o);
  return c;
}

static int64_t counter(const bg_filter *f, int id) {
  int64_t v = -12345;
  CHECK_OK(bg_filter_stat(f, id, &v));
  return v;
}

static bg_policy *breaker_policy(int64_t threshold, int64_t cooldown_ms) {
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_BASE_MS, 2));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BACKOFF_MAX_MS, 5));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_THRESHOLD, threshold));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_BREAKER_COOLDOWN_MS, cooldown_ms));
  return p;
}

/* Every item of `it` is answered present by Redis itself. */
static void check_all_present(bg_filter *f, const items *it, const char *when) {
  bg_call *call = NULL;
  uint8_t *present = calloc(it->n + 1, 1);
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_contains_many_ex(f, call, PTRS(*it), it->len, it->n, present));
  CHECK_MSG(bg_call_source(call) == BG_SOURCE_REDIS, "%s: source %d, not Redis", when, bg_call_source(call));
  size_t missing = 0;
  for (size_t i = 0; i < it->n; i++) missing += !present[i];
  CHECK_MSG(missing == 0, "%s: %zu of %zu committed items missing", when, missing, it->n);
  free(present);
  bg_call_free(call);
}

/* ---- restarting a server on the same port (the fixture only starts and stops) ------------------- */

static int ping_ok(int port) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = 0;
  if (c && !c->err) {
    redisReply *rep = redisCommand(c, "PING");
    ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
  }
  if (c) redisFree(c);
  return ok;
}

/* Stops the server (SIGTERM: with fsync always the AOF is complete) and keeps its directory. */
static void server_down(bgt_redis *r) {
  kill(r->pid, SIGTERM);
  for (int i = 0; i < 500; i++) {
    if (waitpid(r->pid, NULL, WNOHANG) == r->pid) { r->pid = 0; return; }
    usleep(10000);
  }
  kill(r->pid, SIGKILL);
  waitpid(r->pid, NULL, 0);
  r->pid = 0;
}

/* Any reply to PING, LOADING included: the server is up, not necessarily loaded. */
static int answers(int port) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = 0;
  if (c && !c->err) {
    redisReply *rep = redisCommand(c, "PING");
    ok = rep && (rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_ERROR);
    if (rep) freeReplyObject(rep);
  }
  if (c) redisFree(c);
  return ok;
}

/*
 * Starts redis-server again on r's port and directory, with the fixture's arguments plus AOF.
 * load_delay_us (NULL: none) slows the loading of each key (--key-load-delay): the server then
 * answers LOADING for a while, and this returns as soon as it answers at all.
 */
static void server_up(bgt_redis *r, const char *load_delay_us) {
  const char *bin = bgt_server_bin();  /* the launcher's choice (tools/server_proc) */
  char port[16];
  snprintf(port, sizeof port, "%d", r->port);
  const char *argv[] = {bin, "--port", port, "--bind", "127.0.0.1", "--unixsocket", r->sock, "--unixsocketperm", "700",
                        "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", r->dir,
                        "--logfile", "redis.log", "--enable-debug-command", "local", NULL, NULL, NULL, NULL, NULL};
  if (load_delay_us) {
    /* slow loading, and clients answered (LOADING) every 1 KiB loaded rather than every 2 MiB */
    size_t n = sizeof argv / sizeof *argv;
    argv[n - 5] = "--key-load-delay", argv[n - 4] = load_delay_us;
    argv[n - 3] = "--loading-process-events-interval-bytes", argv[n - 2] = "1024";
  }
  for (int attempt = 0; attempt < 3 && r->pid == 0; attempt++) {
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_RDWR);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO), dup2(devnull, STDOUT_FILENO);
      execvp(bin, (char *const *)argv);
      _exit(127);
    }
    r->pid = pid;
    for (int i = 0; i < 500; i++) {  /* up to 10 s: it loads the AOF */
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) { r->pid = 0; break; }
      if (load_delay_us ? answers(r->port) : ping_ok(r->port)) return;
      usleep(20000);
    }
    if (r->pid) { kill(r->pid, SIGKILL); waitpid(r->pid, NULL, 0); r->pid = 0; }
    usleep(200000);   /* the port may still be held for a moment */
  }
  fprintf(stderr, "could not restart redis-server on port %d (see %s/redis.log)\n", r->port, r->dir);
  exit(2);
}

/* Removes what AOF left in the directory, so the fixture's stop can remove the directory. */
static void remove_aof(const bgt_redis *r) {
  char path[512];
  snprintf(path, sizeof path, "%s/appendonlydir", r->dir);
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        char f[1024];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        unlink(f);
      }
    closedir(d);
    rmdir(path);
  }
  snprintf(path, sizeof path, "%s/appendonly.aof", r->dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/dump.rdb", r->dir);
  unlink(path);
}

/* ---- CLIENT PAUSE -------------------------------------------------------------------------------- */

typedef struct timed {
  int status, source;
  double ms;
  int paid;       /* it paid the timeout (BG_STAT_FAIL_TIMEOUT grew) */
  int at_once;    /* the open breaker answered it without trying Redis (BG_STAT_BREAKER_REJECTED grew) */
} timed;

static timed timed_query(bg_filter *f, bg_call *call, const items *it, size_t n, uint8_t *present) {
  timed t;
  int64_t timeouts = counter(f, BG_STAT_FAIL_TIMEOUT), rejected = counter(f, BG_STAT_BREAKER_REJECTED);
  uint64_t t0 = bgt_now_ns();
  t.status = bg_filter_contains_many_ex(f, call, PTRS(*it), it->len, n, present);
  t.ms = ms_since(t0);
  t.source = bg_call_source(call);
  t.paid = counter(f, BG_STAT_FAIL_TIMEOUT) > timeouts;
  t.at_once = counter(f, BG_STAT_BREAKER_REJECTED) > rejected;
  return t;
}

/* Waits until the server answers again (the pause is over); bounded. */
static void wait_pause_over(void) {
  CHECK_MSG(bgt_redis_wait_pong(&srv, 20000) == 0, "the server still does not answer PING after 20 s");
}

static void pause_clients(int ms) {
  char *r = bgt_redis_cmd(&srv, "CLIENT PAUSE %d ALL", ms);
  CHECK_EQ_STR(r, "OK");
  free(r);
}

static void test_client_pause(void) {
  bg_client *c = open_client(&srv, TIMEOUT_MS, 2);
  bg_filter *f = NULL;
  bg_call *call = NULL;
  items it = make_items("pause", 500);
  uint8_t present[500];
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&f, c, "pause"));
  CHECK_OK(bg_filter_init(f, 10000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(it), it.len, it.n, NULL));
  bg_policy *p = breaker_policy(3, 1000);
  CHECK_OK(bg_filter_set_policy(f, p));

  /* paused for 1.5 s: 3 timeouts open the breaker; answered at once until the probe after 1 s,
   * which comes after the pause and closes it */
  pause_clients(1500);
  uint64_t t0 = bgt_now_ns();
  int slow = 0, fast = 0, calls = 0, late = 0;
  timed t = {0};
  while (ms_since(t0) < 6000) {
    t = timed_query(f, call, &it, 10, present);
    calls++;
    CHECK_MSG(t.status == BG_OK, "call %d: %s", calls, bg_call_errmsg(call));
    CHECK_MSG(t.ms <= TIMEOUT_MS + MARGIN_MS, "call %d took %.0f ms (timeout %d ms)", calls, t.ms, TIMEOUT_MS);
    for (int i = 0; i < 10; i++) CHECK(present[i] == 1);
    if (t.source == BG_SOURCE_REDIS) break;
    CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
    if (t.paid) slow++;
    else if (t.at_once) fast++;
    else late++;
    usleep(10000);
  }
  printf("    paused 1500 ms: %d calls (%d paid the timeout, %d answered at once, %d other) before Redis answered "
         "again after %.0f ms\n", calls, slow, fast, late, ms_since(t0));
  CHECK_EQ_INT(t.source, BG_SOURCE_REDIS);
  CHECK_EQ_INT(slow, 3);
  CHECK(fast >= 10);
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_TRIPS), 1);
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  CHECK_EQ_INT(counter(f, BG_STAT_FAIL_TIMEOUT), 3);
  CHECK(counter(f, BG_STAT_BREAKER_REJECTED) >= 10);
  /* an add while paused: the timeout, never an assumed success */
  pause_clients(600);
  t0 = bgt_now_ns();
  CHECK_STATUS(bg_filter_add(f, "during-pause", 12, NULL), BG_ETIMEOUT);
  CHECK(ms_since(t0) <= TIMEOUT_MS + MARGIN_MS);
  wait_pause_over();

  /* negative control 1: the breaker off - every call pays the timeout */
  bg_policy *off = breaker_policy(0, 1000);
  CHECK_OK(bg_filter_set_policy(f, off));
  pause_clients(1200);
  for (int i = 0; i < 4; i++) {
    t = timed_query(f, call, &it, 10, present);
    CHECK_OK(t.status);
    CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
    CHECK_MSG(t.paid && t.ms <= TIMEOUT_MS + MARGIN_MS, "breaker off, call %d: %.0f ms, %s", i, t.ms,
              t.paid ? "wanted the 200 ms timeout" : "did not pay the timeout");
  }
  wait_pause_over();
  /* negative control 2: no policy - the plain timeout */
  CHECK_OK(bg_filter_set_policy(f, NULL));
  pause_clients(500);
  t = timed_query(f, call, &it, 10, present);
  CHECK_STATUS(t.status, BG_ETIMEOUT);
  CHECK_EQ_INT(t.source, BG_SOURCE_NONE);
  wait_pause_over();
  check_all_present(f, &it, "after CLIENT PAUSE");
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_policy_free(p);
  bg_policy_free(off);
  items_free(&it);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
}

/* ---- DEBUG SLEEP --------------------------------------------------------------------------------- */

static void *server_sleep(void *arg) {
  free(bgt_redis_cmd(&srv, "DEBUG SLEEP %s", (const char *)arg));
  return NULL;
}

/* Starts DEBUG SLEEP in a thread and returns once the server has stopped answering (a PING from
 * another connection goes unanswered for 50 ms): on a loaded machine the thread may be late. */
static void sleep_server(pthread_t *th, const char *seconds) {
  pthread_create(th, NULL, server_sleep, (void *)seconds);
  for (int i = 0; i < 200; i++) {
    struct timeval tv = {1, 0}, quick = {0, 50000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    redisReply *r = NULL;
    if (c && !c->err) {
      redisSetTimeout(c, quick);
      r = redisCommand(c, "PING");
    }
    int answered = r != NULL;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    if (!answered) return;
    usleep(10000);
  }
  fprintf(stderr, "DEBUG SLEEP never began\n");
  exit(2);
}

static void test_debug_sleep_snapshot_answers(void) {
  bg_client *c = open_client(&srv, TIMEOUT_MS, 2);
  bg_filter *f = NULL, *plain = NULL;
  bg_call *call = NULL;
  items in = make_items("sleep-in", 300), mixed = make_items("sleep-q", 400);
  uint8_t want[400], got[400];
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&f, c, "sleepy"));
  CHECK_OK(bg_filter_open(&plain, c, "sleepy"));
  CHECK_OK(bg_filter_init(f, 2000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(in), in.len, in.n, NULL));
  /* queries: half of them added, half not */
  for (size_t i = 0; i < 200; i++) {
    free(mixed.p[i]);
    mixed.p[i] = strdup(in.p[i]);
    mixed.len[i] = in.len[i];
  }
  CHECK_OK(bg_filter_contains_many(f, PTRS(mixed), mixed.len, mixed.n, want));
  bg_policy *p = breaker_policy(3, 1000);
  int chain[] = {BG_ACT_SNAPSHOT, BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_TIMEOUT, chain, 2));
  CHECK_OK(bg_filter_set_policy(f, p));
  CHECK_OK(bg_filter_snapshot_refresh(f));

  pthread_t th;
  sleep_server(&th, "1.5");
  uint64_t t0 = bgt_now_ns();
  int calls = 0, slow = 0, fast = 0;
  timed t = {0};
  while (ms_since(t0) < 6000) {
    t = timed_query(f, call, &mixed, mixed.n, got);
    calls++;
    CHECK_MSG(t.status == BG_OK, "call %d: %s", calls, bg_call_errmsg(call));
    CHECK_MSG(t.ms <= TIMEOUT_MS + MARGIN_MS, "call %d took %.0f ms", calls, t.ms);
    /* from the snapshot or from Redis: the very same answers */
    CHECK_MSG(memcmp(want, got, sizeof want) == 0, "call %d (source %d): answers differ from Redis's", calls,
              t.source);
    if (t.source == BG_SOURCE_REDIS) break;
    CHECK_EQ_INT(t.source, BG_SOURCE_SNAPSHOT);
    if (t.paid) slow++;
    else if (t.at_once) fast++;
    if (calls == 5) {
      /* negative control, same sleep: a handle without a policy times out */
      uint64_t t1 = bgt_now_ns();
      CHECK_STATUS(bg_filter_contains_many(plain, PTRS(mixed), mixed.len, mixed.n, got), BG_ETIMEOUT);
      CHECK(ms_since(t1) >= TIMEOUT_MS * 0.9);
    }
    usleep(10000);
  }
  pthread_join(th, NULL);
  printf("    DEBUG SLEEP 1.5 s: %d calls (%d paid the timeout, %d answered at once from the snapshot)\n", calls, slow,
         fast);
  CHECK_EQ_INT(t.source, BG_SOURCE_REDIS);
  CHECK_EQ_INT(slow, 3);
  CHECK(fast >= 10);
  CHECK(counter(f, BG_STAT_ANSWERS_SNAPSHOT) >= 13);
  /* negative control: without the snapshot the same chain can only assume: absent items answer 1 */
  CHECK_OK(bg_filter_set_policy(plain, p));
  sleep_server(&th, "0.5");
  t = timed_query(plain, call, &mixed, mixed.n, got);
  CHECK_OK(t.status);
  CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
  CHECK(memcmp(want, got, sizeof want) != 0);
  pthread_join(th, NULL);
  check_all_present(f, &in, "after DEBUG SLEEP");
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_policy_free(p);
  items_free(&in);
  items_free(&mixed);
  bg_call_free(call);
  bg_filter_close(plain);
  bg_filter_close(f);
  bg_client_close(c);
}

/* ---- CLIENT KILL ---------------------------------------------------------------------------------- */

typedef struct killrun {
  bg_filter *f;
  items *known;           /* committed before: always present */
  atomic_int stop;
  atomic_llong queries, errors, wrong, from_redis, assumed, other_source;
  atomic_llong kills;
  /* adds during the kills: which returned BG_OK */
  items *fresh;
  uint8_t *committed;
  atomic_llong add_ok, add_err;
} killrun;

static void *kill_loop(void *arg) {
  killrun *k = arg;
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
  for (int i = 0; i < 100000 && !atomic_load(&k->stop); i++) {
    redisReply *r = redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes");
    if (r) freeReplyObject(r);
    atomic_fetch_add(&k->kills, 1);
    usleep(200);
  }
  redisFree(c);
  return NULL;
}

static void *kill_queries(void *arg) {
  killrun *k = arg;
  bg_call *call = NULL;
  uint8_t present[20];
  bg_call_new(&call);
  for (int i = 0; i < 1000000 && !atomic_load(&k->stop); i++) {
    size_t from = (size_t)(i * 20) % (k->known->n - 20);
    int st = bg_filter_contains_many_ex(k->f, call, PTRS(*k->known) + from, k->known->len + from, 20, present);
    atomic_fetch_add(&k->queries, 1);
    if (st != BG_OK) {
      atomic_fetch_add(&k->errors, 1);
      continue;
    }
    int src = bg_call_source(call);
    atomic_fetch_add(src == BG_SOURCE_REDIS ? &k->from_redis : src == BG_SOURCE_ASSUMED_PRESENT ? &k->assumed
                                                                                                : &k->other_source, 1);
    for (int j = 0; j < 20; j++)
      if (!present[j]) atomic_fetch_add(&k->wrong, 1);
  }
  bg_call_free(call);
  return NULL;
}

static void *kill_adds(void *arg) {
  killrun *k = arg;
  for (size_t i = 0; i < k->fresh->n && !atomic_load(&k->stop); i++) {
    int st = bg_filter_add(k->f, k->fresh->p[i], k->fresh->len[i], NULL);
    k->committed[i] = st == BG_OK;
    atomic_fetch_add(st == BG_OK ? &k->add_ok : &k->add_err, 1);
  }
  return NULL;
}

static void kill_run(bg_filter *f, items *known, items *fresh, uint8_t *committed, double seconds, killrun *k) {
  pthread_t th[4];
  memset(k, 0, sizeof *k);
  k->f = f, k->known = known, k->fresh = fresh, k->committed = committed;
  memset(committed, 0, fresh->n);
  pthread_create(&th[0], NULL, kill_queries, k);
  pthread_create(&th[1], NULL, kill_queries, k);
  pthread_create(&th[2], NULL, kill_adds, k);
  pthread_create(&th[3], NULL, kill_loop, k);
  usleep((useconds_t)(seconds * 1e6));
  atomic_store(&k->stop, 1);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
}

/* Every item whose add returned BG_OK is present (asked in one batch). */
static void check_committed(bg_filter *f, const items *fresh, const uint8_t *committed, const char *when) {
  items c = {malloc(fresh->n * sizeof(char *)), malloc(fresh->n * sizeof(size_t)), 0};
  for (size_t i = 0; i < fresh->n; i++)
    if (committed[i]) c.p[c.n] = fresh->p[i], c.len[c.n++] = fresh->len[i];
  CHECK_MSG(c.n > 0, "%s: no add succeeded", when);
  check_all_present(f, &c, when);
  free(c.p);
  free(c.len);
}

static void test_client_kill(void) {
  bg_client *c = open_client(&srv, 1000, 3);
  bg_filter *f = NULL;
  items known = make_items("kill-known", 2000), fresh = make_items("kill-fresh", 200000);
  uint8_t *committed = calloc(fresh.n, 1);
  CHECK_OK(bg_filter_open(&f, c, "killed"));
  CHECK_OK(bg_filter_init(f, 500000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(known), known.len, known.n, NULL));
  bg_policy *p = breaker_policy(0, 1000);   /* kills are not an outage: no breaker */
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_RETRY_COUNT, 5));
  CHECK_OK(bg_filter_set_policy(f, p));
  killrun k;
  kill_run(f, &known, &fresh, committed, 1.5, &k);
  printf("    with policy: %lld kills; %lld queries: %lld from Redis, %lld assumed present, %lld errors; "
         "%lld retries, %lld connection failures; adds %lld ok, %lld failed\n",
         (long long)k.kills, (long long)k.queries, (long long)k.from_redis, (long long)k.assumed, (long long)k.errors,
         (long long)counter(f, BG_STAT_RETRIES), (long long)counter(f, BG_STAT_FAIL_CONNECTION), (long long)k.add_ok,
         (long long)k.add_err);
  CHECK_EQ_INT(k.errors, 0);
  CHECK_EQ_INT(k.wrong, 0);
  CHECK_EQ_INT(k.other_source, 0);
  CHECK_MSG(counter(f, BG_STAT_FAIL_CONNECTION) > 0, "the kills never reached the library's connections");
  CHECK_EQ_INT(counter(f, BG_STAT_QUERY_ERRORS), 0);
  CHECK(k.add_ok > 0);
  /* reconnected: Redis answers again, and every add that said BG_OK is there */
  check_all_present(f, &known, "after CLIENT KILL");
  check_committed(f, &fresh, committed, "adds during CLIENT KILL");

  /* negative control: the same kills without a policy do surface as errors */
  CHECK_OK(bg_filter_set_policy(f, NULL));
  /* (a failure needs a kill to land on a connection opened moments before - the library already
   * replaces a connection found dead once - so allow up to three runs to see one) */
  for (int run = 0; run < 3; run++) {
    kill_run(f, &known, &fresh, committed, 1.5, &k);
    printf("    without policy: %lld kills; %lld queries, %lld errors; adds %lld ok, %lld failed\n", (long long)k.kills,
           (long long)k.queries, (long long)k.errors, (long long)k.add_ok, (long long)k.add_err);
    if (k.errors + k.add_err > 0) break;
  }
  CHECK_MSG(k.errors + k.add_err > 0, "negative control: no call failed under CLIENT KILL without a policy: "
                                      "the harness proves nothing");
  CHECK_EQ_INT(k.wrong, 0);
  check_committed(f, &fresh, committed, "adds during CLIENT KILL, no policy");
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_policy_free(p);
  free(committed);
  items_free(&known);
  items_free(&fresh);
  bg_filter_close(f);
  bg_client_close(c);
}

/* ---- the server stopped and restarted ---------------------------------------------------------------- */

static void test_server_stop_and_restart(void) {
  bg_client *c = open_client(&srv, 300, 2);
  bg_filter *f = NULL;
  bg_call *call = NULL;
  items it = make_items("restart", 1000);
  uint8_t present[1000];
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&f, c, "restart"));
  CHECK_OK(bg_filter_init(f, 10000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(it), it.len, it.n, NULL));
  bg_policy *p = breaker_policy(3, 300);
  CHECK_OK(bg_filter_set_policy(f, p));
  /* 10000 more keys in the AOF's base, so that the restart spends a while LOADING them */
  free(bgt_redis_cmd(&srv, "DEBUG POPULATE 10000 bgload"));
  free(bgt_redis_cmd(&srv, "BGREWRITEAOF"));
  int rewriting = 1;
  for (int i = 0; i < 500 && rewriting; i++) {
    char *info = bgt_redis_cmd(&srv, "INFO persistence");
    rewriting = !strstr(info, "aof_rewrite_in_progress:0") || !strstr(info, "aof_rewrite_scheduled:0");
    free(info);
    if (rewriting) usleep(10000);
  }
  CHECK(!rewriting);
  server_down(&srv);

  /* down for ~1 s: the breaker opens after 3 failures; then only a probe every 300 ms tries */
  uint64_t t0 = bgt_now_ns();
  int calls = 0;
  double worst = 0;
  while (ms_since(t0) < 1000) {
    timed t = timed_query(f, call, &it, 10, present);
    calls++;
    CHECK_OK(t.status);
    CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
    if (t.ms > worst) worst = t.ms;
    usleep(2000);
  }
  int64_t tried = counter(f, BG_STAT_FAIL_CONNECTION), rejected = counter(f, BG_STAT_BREAKER_REJECTED);
  printf("    down 1 s: %d calls, %lld reached for Redis (connection refused), %lld answered by the open breaker, "
         "slowest %.1f ms\n", calls, (long long)tried, (long long)rejected, worst);
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_TRIPS), 1);
  CHECK(counter(f, BG_STAT_BREAKER_STATE) != BG_BREAKER_CLOSED);
  CHECK_MSG(tried <= 3 + 6, "%lld attempts at Redis while the breaker was open (3 + a probe per 300 ms)",
            (long long)tried);
  CHECK(rejected >= calls - 10);
  CHECK(worst <= 300 + MARGIN_MS);
  /* an add while down: refused at once (by the open breaker, without trying Redis), never assumed */
  int64_t attempts = counter(f, BG_STAT_FAIL_CONNECTION);
  CHECK_STATUS(bg_filter_add(f, "while-down", 10, NULL), BG_ECONN);
  if (counter(f, BG_STAT_BREAKER_STATE) == BG_BREAKER_OPEN) CHECK_EQ_INT(counter(f, BG_STAT_FAIL_CONNECTION), attempts);
  rejected = counter(f, BG_STAT_BREAKER_REJECTED);

  /* negative control: with the breaker off every call reaches for Redis */
  bg_policy *off = breaker_policy(0, 300);
  CHECK_OK(bg_filter_set_policy(f, off));
  int64_t before = counter(f, BG_STAT_FAIL_CONNECTION);
  for (int i = 0; i < 20; i++) CHECK_OK(bg_filter_contains_many_ex(f, call, PTRS(it), it.len, 10, present));
  CHECK_EQ_INT(counter(f, BG_STAT_FAIL_CONNECTION) - before, 20 * 3);   /* each: the attempt and 2 retries */
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_REJECTED), rejected);
  CHECK_OK(bg_filter_set_policy(f, p));
  for (int i = 0; i < 5; i++) CHECK_OK(bg_filter_contains_many_ex(f, call, PTRS(it), it.len, 10, present));
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_STATE), BG_BREAKER_OPEN);

  /* back, LOADING its data for a while: the probe gets LOADING - the server answered, so the
   * breaker closes - and the LOADING replies (server class) are retried, then assumed present */
  server_up(&srv, "100");
  t0 = bgt_now_ns();
  timed t = {0};
  int loading = 0;
  int64_t server_failures = counter(f, BG_STAT_FAIL_SERVER);
  while (ms_since(t0) < 10000) {
    t = timed_query(f, call, &it, 10, present);
    CHECK_OK(t.status);
    if (t.source == BG_SOURCE_REDIS) break;
    CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
    if (strstr(bg_call_errmsg(call), "LOADING")) {
      loading++;
      CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
    }
    usleep(5000);
  }
  printf("    restarted: %d answers assumed while the server was LOADING; Redis answered again after %.0f ms\n",
         loading, ms_since(t0));
  CHECK_EQ_INT(t.source, BG_SOURCE_REDIS);
  CHECK(loading > 0);
  CHECK(counter(f, BG_STAT_FAIL_SERVER) >= server_failures + 3 * loading);
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_STATE), BG_BREAKER_CLOSED);
  check_all_present(f, &it, "after the restart");
  CHECK_OK(bg_filter_add(f, "after-restart", 13, NULL));
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_policy_free(p);
  bg_policy_free(off);
  items_free(&it);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
}

/* Frozen (SIGSTOP): connections hang instead of being refused - the breaker is what saves the timeout. */
static void test_server_frozen(void) {
  bg_client *c = open_client(&srv, TIMEOUT_MS, 2);
  bg_filter *f = NULL;
  bg_call *call = NULL;
  items it = make_items("frozen", 300);
  uint8_t present[300];
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_filter_open(&f, c, "frozen"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  CHECK_OK(bg_filter_add_many(f, PTRS(it), it.len, it.n, NULL));
  bg_policy *p = breaker_policy(3, 10000), *off = breaker_policy(0, 10000);
  CHECK_OK(bg_filter_set_policy(f, p));
  kill(srv.pid, SIGSTOP);
  int slow = 0, fast = 0;
  for (int i = 0; i < 20; i++) {
    timed t = timed_query(f, call, &it, 10, present);
    CHECK_OK(t.status);
    CHECK_EQ_INT(t.source, BG_SOURCE_ASSUMED_PRESENT);
    CHECK_MSG(t.ms <= TIMEOUT_MS + MARGIN_MS, "call %d took %.0f ms", i, t.ms);
    if (t.paid) slow++;
    else if (t.at_once) fast++;
  }
  CHECK_EQ_INT(slow, 3);
  CHECK_MSG(fast == 17, "only %d of 17 calls answered at once by the open breaker", fast);
  /* negative control: the breaker off, every call pays the timeout */
  CHECK_OK(bg_filter_set_policy(f, off));
  for (int i = 0; i < 4; i++) {
    timed t = timed_query(f, call, &it, 10, present);
    CHECK_OK(t.status);
    CHECK_MSG(t.paid && t.ms <= TIMEOUT_MS + MARGIN_MS, "breaker off, call %d: %.0f ms%s", i, t.ms,
              t.paid ? "" : ", did not pay the timeout");
  }
  kill(srv.pid, SIGCONT);
  CHECK_OK(bg_filter_set_policy(f, p));
  timed t = timed_query(f, call, &it, 10, present);
  CHECK_OK(t.status);
  CHECK_EQ_INT(t.source, BG_SOURCE_REDIS);
  check_all_present(f, &it, "after SIGSTOP/SIGCONT");
  CHECK_OK(bg_filter_delete(f, NULL));
  bg_policy_free(p);
  bg_policy_free(off);
  items_free(&it);
  bg_call_free(call);
  bg_filter_close(f);
  bg_client_close(c);
}

/* ---- a burst with Redis down and a rate-limited fallback ---------------------------------------------- */

typedef struct burst {
  bg_filter *f;
  int per_thread;
  double seconds;            /* > 0: query for this long instead of per_thread times */
  atomic_llong db_calls;
  atomic_llong by_source[6];
  atomic_llong errors, wrong;
} burst;

/* The database behind the filter: it knows the items that start with 'k'. */
static int database(void *userdata, const void *const *items, const size_t *lens, size_t n, uint8_t *present) {
  burst *b = userdata;
  atomic_fetch_add(&b->db_calls, 1);
  for (size_t i = 0; i < n; i++) present[i] = lens[i] && ((const char *)items[i])[0] == 'k';
  return 0;
}

static void *burst_thread(void *arg) {
  burst *b = arg;
  bg_call *call = NULL;
  bg_call_new(&call);
  uint64_t t0 = bgt_now_ns();
  for (int i = 0; b->seconds > 0 ? ms_since(t0) < b->seconds * 1000 : i < b->per_thread; i++) {
    const void *item = i % 2 ? "known" : "unknown";
    size_t len = i % 2 ? 5 : 7;
    uint8_t present = 9;
    if (bg_filter_contains_many_ex(b->f, call, &item, &len, 1, &present) != BG_OK) {
      atomic_fetch_add(&b->errors, 1);
      continue;
    }
    int src = bg_call_source(call);
    atomic_fetch_add(&b->by_source[src], 1);
    /* the database answers exactly; an assumed answer is "present" */
    uint8_t want = src == BG_SOURCE_CALLBACK ? i % 2 : 1;
    if (present != want) atomic_fetch_add(&b->wrong, 1);
  }
  bg_call_free(call);
  return NULL;
}

static void run_burst(burst *b, int threads) {
  pthread_t th[8];
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, burst_thread, b);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
}

static void test_burst_with_rate_limited_callback(void) {
  bgt_redis gone;
  bgt_redis_start(&gone, NULL);
  bg_client *c = open_client(&gone, TIMEOUT_MS, 4);
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, "burst"));
  bgt_redis_stop(&gone);   /* Redis is down for the whole test */
  burst b;
  memset(&b, 0, sizeof b);
  b.f = f;
  b.per_thread = 2500;
  bg_policy *p = breaker_policy(3, 1000);
  int chain[] = {BG_ACT_CALLBACK, BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_CONNECTION, chain, 2));
  CHECK_OK(bg_policy_set_fallback(p, database, &b));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_CALLBACK_RATE, 100));
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_CALLBACK_BURST, 100));
  CHECK_OK(bg_filter_set_policy(f, p));

  uint64_t t0 = bgt_now_ns();
  run_burst(&b, 4);
  uint64_t burst_end = bgt_now_ns();
  double secs = ms_since(t0) / 1000;
  long long calls = (long long)atomic_load(&b.db_calls), allowed = 100 + (long long)(100 * secs) + 1;
  printf("    10000 queries in %.3f s with Redis down: fallback called %lld times (bucket allows %lld), "
         "%lld assumed present\n", secs, calls, allowed, (long long)atomic_load(&b.by_source[BG_SOURCE_ASSUMED_PRESENT]));
  CHECK_EQ_INT(atomic_load(&b.errors), 0);
  CHECK_EQ_INT(atomic_load(&b.wrong), 0);
  CHECK_MSG(calls <= allowed, "fallback called %lld times in %.3f s: more than the bucket allows (%lld)", calls, secs,
            allowed);
  CHECK(calls >= 100);   /* the burst was there to take */
  CHECK_EQ_INT(counter(f, BG_STAT_CALLBACK_CALLS), calls);
  CHECK_EQ_INT(counter(f, BG_STAT_CALLBACK_REFUSED), 10000 - calls);
  CHECK_EQ_INT(counter(f, BG_STAT_ANSWERS_CALLBACK), calls);
  CHECK_EQ_INT(atomic_load(&b.by_source[BG_SOURCE_CALLBACK]), calls);
  CHECK_EQ_INT(counter(f, BG_STAT_ANSWERS_ASSUMED_PRESENT), 10000 - calls);
  CHECK_EQ_INT(counter(f, BG_STAT_QUERIES), 10000);
  CHECK_EQ_INT(counter(f, BG_STAT_BREAKER_TRIPS), 1);

  /* steady demand for a second: the refill rate, not more */
  int64_t before = atomic_load(&b.db_calls);
  b.seconds = 1.0;
  t0 = bgt_now_ns();
  run_burst(&b, 2);
  secs = ms_since(t0) / 1000;
  /* the bound counts from the end of the burst: tokens refill during the checks in between too */
  double refill_secs = ms_since(burst_end) / 1000;
  calls = (long long)(atomic_load(&b.db_calls) - before);
  printf("    then %.3f s of steady queries: fallback called %lld times at 100/s\n", secs, calls);
  CHECK_MSG(calls <= 100 * refill_secs + 2, "%lld calls in %.3f s (%.3f s since the burst) at 100/s", calls, secs,
            refill_secs);
  CHECK_MSG(calls >= 100 * secs * 0.5, "%lld calls in %.3f s at 100/s: the bucket does not refill", calls, secs);

  /* negative control: no limit - the database gets every one of the 10,000 */
  CHECK_OK(bg_policy_set_int(p, BG_POLICY_CALLBACK_RATE, 0));
  CHECK_OK(bg_filter_set_policy(f, p));
  before = atomic_load(&b.db_calls);
  b.seconds = 0;
  run_burst(&b, 4);
  CHECK_EQ_INT(atomic_load(&b.db_calls) - before, 10000);
  CHECK_EQ_INT(atomic_load(&b.errors), 0);
  CHECK_EQ_INT(atomic_load(&b.wrong), 0);
  bg_policy_free(p);
  bg_filter_close(f);
  bg_client_close(c);
}

static void setup(void) { bgt_redis_start(&srv, AOF_ARGS); }

static void teardown(void) {
  if (srv.pid) server_down(&srv);
  remove_aof(&srv);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_client_pause), BGT_CASE(test_debug_sleep_snapshot_answers),
        BGT_CASE(test_client_kill), BGT_CASE(test_server_frozen), BGT_CASE(test_server_stop_and_restart),
        BGT_CASE(test_burst_with_rate_limited_callback), BGT_CASE(teardown))
