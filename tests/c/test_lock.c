/*
 * The distributed lock (bg_lock_*) against a real redis-server: the guarantees of lock.h one by
 * one, the wire layout Redisson's RLock reads, and Redisson 3.45.1's own lock scripts (copied
 * verbatim from RedissonLock.class of the 3.45.1 jar) run beside it.
 */
#include <bloomguard.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;
/* Waits are checked by the event they wait for (the release, the expiry the server reports), not
 * by how long they took; an upper bound only tells a wake-up by that event from the one it stands
 * against (a lease of 20-30 s, a 60 s poll, a wait running out), however loaded the machine. */
#define SOON_MS 5000

/* Redisson 3.45.1, RedissonLock.tryLockInnerAsync: KEYS[1] lock, ARGV lease ms, holder. nil = acquired. */
static const char redisson_try_lock[] =
  "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
  "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
  "return redis.call('pttl', KEYS[1]);";
/* Redisson 3.45.1, RedissonLock.unlockInnerAsync: KEYS lock, channel, latch; ARGV message 0, lease,
 * holder, publish command, latch timeout. */
static const char redisson_unlock[] =
  "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; "
  "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
  "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
  "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
  "return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
  "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

static int64_t ms_since(uint64_t t0) { return (int64_t)((bgt_now_ns() - t0) / 1000000u); }

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static char *cmd1(const char *fmt, const char *a) { return bgt_redis_cmd(&srv, fmt, a); }

static void expect_reply(const char *fmt, const char *arg, const char *want) {
  char *got = cmd1(fmt, arg);
  CHECK_MSG(!strcmp(got, want), "%s %s: got \"%s\", want \"%s\"", fmt, arg, got, want);
  free(got);
}

static long long reply_ll(const char *fmt, const char *arg) {
  char *got = cmd1(fmt, arg);
  long long v = atoll(got);
  free(got);
  return v;
}

/* Polls until the reply to fmt/arg is want (bounded: 20 s), e.g. a waiter's intent recorded. */
static void wait_reply(const char *fmt, const char *arg, const char *want) {
  uint64_t t0 = bgt_now_ns();
  for (;;) {
    char *got = cmd1(fmt, arg);
    int same = !strcmp(got, want);
    if (!same && ms_since(t0) > 20000) CHECK_MSG(0, "%s %s: still \"%s\" after 20 s, want \"%s\"", fmt, arg, got, want);
    free(got);
    if (same || ms_since(t0) > 20000) return;
    sleep_ms(2);
  }
}

/* Polls until the lock NAME's unlock channel has n subscribers (bounded): n waiters wait on it. */
static void wait_waiters(const char *name, long long n) {
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s:lock}", name);
  uint64_t t0 = bgt_now_ns();
  for (;;) {
    char *got = cmd1("PUBSUB NUMSUB %s", channel);   /* "CHANNEL N" */
    const char *sp = strrchr(got, ' ');
    long long have = sp ? atoll(sp + 1) : 0;
    free(got);
    if (have >= n) return;
    if (ms_since(t0) > 20000) {
      CHECK_MSG(0, "%s: %lld waiter(s) subscribed after 20 s, want %lld", channel, have, n);
      return;
    }
    sleep_ms(2);
  }
}

/* Lua steps the server has run (EVALSHA and EVAL calls, INFO commandstats): a polling waiter's tries. */
static long long script_calls(void) {
  char *info = cmd1("INFO %s", "commandstats");
  long long n = 0;
  for (const char *k = info; (k = strstr(k, "cmdstat_eval")); k++) {
    const char *c = strstr(k, "calls=");
    if (c) n += atoll(c + 6);
  }
  free(info);
  return n;
}

static bg_lock *open_lock(const char *name, int64_t lease_ms, int renew) {
  bg_options *o = NULL;
  bg_lock *l = NULL;
  CHECK_OK(bg_options_new(&o));
  if (lease_ms) CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, lease_ms));
  CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_RENEW, renew));
  CHECK_OK(bg_lock_open(&l, cl, name, o));
  bg_options_free(o);
  return l;
}

static void clean(const char *name) {
  char k[256];
  snprintf(k, sizeof k, "%s:lock", name);
  free(bgt_redis_cmd(&srv, "DEL %s {%s}:readers {%s}:writers {%s}:fence", k, k, k, k));
}

/* A raw connection subscribed to a channel (hiredis, not the library). */
static redisContext *subscribe(const char *channel) {
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
  CHECK(c && !c->err);
  redisSetTimeout(c, tv);
  redisReply *r = redisCommand(c, "SUBSCRIBE %s", channel);
  CHECK(r && r->type == REDIS_REPLY_ARRAY);
  if (r) freeReplyObject(r);
  return c;
}

/* The next message's payload within ms, or NULL (the context is unusable after a timeout). */
static char *next_message(redisContext *c, int64_t ms) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
  redisSetTimeout(c, tv);
  void *obj = NULL;
  if (redisGetReply(c, &obj) != REDIS_OK || !obj) return NULL;
  redisReply *r = obj;
  char *out = NULL;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && !strcmp(r->element[0]->str, "message"))
    out = strdup(r->element[2]->str);
  freeReplyObject(r);
  return out;
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

/* ---- API edges ---------------------------------------------------------------------------- */

static void test_open_and_options(void) {
  bg_lock *l = NULL;
  bg_options *o = NULL;
  CHECK_STATUS(bg_lock_open(NULL, cl, "x", NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_open(&l, NULL, "x", NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_open(&l, cl, NULL, NULL), BG_EINVAL);
  CHECK(l == NULL);
  CHECK_STATUS(bg_lock_open(&l, cl, "a{}b", NULL), BG_EBADNAME);
  CHECK_CONTAINS(bg_client_errmsg(cl), "cluster slot");
  CHECK(l == NULL);
  CHECK_OK(bg_options_new(&o));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, 29), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, 30));
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_LOCK_RENEW, 2), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_LOCK_SUBSCRIBE, -1), BG_EINVAL);
  CHECK_STATUS(bg_options_set_int(o, BG_OPT_LOCK_POLL_MAX_MS, 0), BG_EINVAL);
  CHECK_OK(bg_options_set_int(o, BG_OPT_LOCK_POLL_MAX_MS, 60000));
  bg_options_free(o);

  CHECK_OK(bg_lock_open(&l, cl, "edges", NULL));
  CHECK_EQ_STR(bg_lock_key(l), "edges:lock");
  CHECK_STATUS(bg_lock_acquire(l, 0, 0, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_acquire(l, 4, 0, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, -1, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 3600001, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_release(l), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(l), "does not hold it");
  CHECK_STATUS(bg_lock_acquire(NULL, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_release(NULL), BG_EINVAL);
  int mode = -1;
  uint32_t count = 9;
  CHECK_OK(bg_lock_held(l, &mode, &count, NULL));
  CHECK_EQ_INT(mode, 0);
  CHECK_EQ_INT(count, 0);
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_STATUS(bg_lock_release_ex(l, call), BG_EINVAL);
  CHECK_EQ_INT(bg_call_status(call), BG_EINVAL);
  CHECK_CONTAINS(bg_call_errmsg(call), "does not hold it");
  CHECK_OK(bg_lock_acquire_ex(l, call, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_EQ_STR(bg_call_errmsg(call), "");
  CHECK_OK(bg_lock_release_ex(l, call));
  bg_call_free(call);
  bg_lock_close(l);
  bg_lock_close(NULL);
}

/* ---- the RLock layout on the wire ------------------------------------------------------------ */

static void test_wire_layout_is_rlock(void) {
  clean("wire");
  bg_lock *l = open_lock("wire", 0, 1);
  char holder[128], want[160];
  bg_lock_holder_id(l, holder, sizeof holder);
  /* "<uuid>:<seq>": Java's UUID text form, then the number of the thread's default owner (where
   * Redisson puts a thread id: the same layout) */
  CHECK_EQ_INT(strlen(holder) > 37 ? holder[36] : 0, ':');
  CHECK_EQ_INT(holder[8], '-');
  CHECK_EQ_INT(holder[14], '4');
  CHECK_EQ_U64(strtoull(holder + 37, NULL, 10), bg_lock_owner_seq(NULL));
  CHECK(bg_lock_owner_seq(NULL) > 0);
  redisContext *sub = subscribe("redisson_lock__channel:{wire:lock}");

  uint64_t t1 = 0, t2 = 0;
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, &t1));
  snprintf(want, sizeof want, "%s 1", holder);
  expect_reply("HGETALL %s", "wire:lock", want);
  expect_reply("TYPE %s", "wire:lock", "hash");
  long long pttl = reply_ll("PTTL %s", "wire:lock");
  CHECK_MSG(pttl > 29000 && pttl <= 30000, "PTTL %lld: want Redisson's default lease of 30000 ms", pttl);
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, &t2)); /* reentrant: Redisson's count */
  CHECK_EQ_U64(t2, t1);
  snprintf(want, sizeof want, "%s 2", holder);
  expect_reply("HGETALL %s", "wire:lock", want);
  int mode = 0;
  uint32_t count = 0;
  uint64_t tok = 0;
  CHECK_OK(bg_lock_held(l, &mode, &count, &tok));
  CHECK_EQ_INT(mode, BG_LOCK_EXCLUSIVE);
  CHECK_EQ_INT(count, 2);
  CHECK_EQ_U64(tok, t1);
  char fence[32];
  snprintf(fence, sizeof fence, "%llu", (unsigned long long)t1);
  expect_reply("GET %s", "{wire:lock}:fence", fence);
  CHECK_OK(bg_lock_release(l));
  snprintf(want, sizeof want, "%s 1", holder);
  expect_reply("HGETALL %s", "wire:lock", want);
  CHECK_OK(bg_lock_release(l));
  expect_reply("EXISTS %s", "wire:lock", "0");
  /* one message, "0" (LockPubSub.UNLOCK_MESSAGE), for the final release only */
  char *m = next_message(sub, 2000);
  CHECK_MSG(m && !strcmp(m, "0"), "unlock message: got %s, want \"0\"", m ? m : "(none)");
  free(m);
  m = next_message(sub, 300);
  CHECK_MSG(!m, "a second message \"%s\": the non-final release published too", m);
  free(m);
  redisFree(sub);
  /* nothing else was written: no readers / writers keys */
  expect_reply("EXISTS %s", "{wire:lock}:readers", "0");
  expect_reply("EXISTS %s", "{wire:lock}:writers", "0");
  bg_lock_close(l);

  /* a name with a hash tag: Redisson's prefixName keeps it as it is */
  clean("a{t}b");
  l = open_lock("a{t}b", 0, 1);
  CHECK_EQ_STR(bg_lock_key(l), "a{t}b:lock");
  sub = subscribe("redisson_lock__channel:a{t}b:lock");
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, &t1));
  expect_reply("EXISTS %s", "a{t}b:lock:fence", "1");
  CHECK_OK(bg_lock_release(l));
  m = next_message(sub, 2000);
  CHECK_MSG(m && !strcmp(m, "0"), "unlock message on the tagged channel: got %s", m ? m : "(none)");
  free(m);
  redisFree(sub);
  bg_lock_close(l);
}

/* ---- a thread that acquires, holds a while, releases ---------------------------------------- */

typedef struct async_acq {
  bg_lock *l;
  int mode;
  int64_t wait_ms;
  int64_t hold_ms;            /* after acquiring: hold this long, then release */
  atomic_int *inside;         /* optional: incremented while holding */
  pthread_t th;
  int st;
  int release_st;
  int64_t waited_ms;
  uint64_t token;
  uint64_t started, acquired_at;
  uint64_t release_begun;     /* when its release was called (after hold_ms) */
  char msg[512];
} async_acq;

static void *async_fn(void *p) {
  async_acq *a = p;
  bg_call *call = NULL;
  bg_call_new(&call);
  a->st = bg_lock_acquire_ex(a->l, call, a->mode, a->wait_ms, &a->token);
  a->acquired_at = bgt_now_ns();
  a->waited_ms = ms_since(a->started); /* from async_start: thread start-up counts (slow under sanitizers) */
  snprintf(a->msg, sizeof a->msg, "%s", bg_call_errmsg(call));
  if (a->st == BG_OK) {
    if (a->inside) atomic_fetch_add(a->inside, 1);
    sleep_ms(a->hold_ms);
    if (a->inside) atomic_fetch_sub(a->inside, 1);
    a->release_begun = bgt_now_ns();
    a->release_st = bg_lock_release_ex(a->l, call);
  }
  bg_call_free(call);
  return NULL;
}

static void async_start(async_acq *a, bg_lock *l, int mode, int64_t wait_ms, int64_t hold_ms) {
  memset(a, 0, sizeof *a);
  a->l = l, a->mode = mode, a->wait_ms = wait_ms, a->hold_ms = hold_ms;
  a->st = -100;
  a->started = bgt_now_ns();
  pthread_create(&a->th, NULL, async_fn, a);
}

static void async_join(async_acq *a) { pthread_join(a->th, NULL); }

/* Redisson 3.45.1's own lock scripts, run raw, against bloomguard's holds - both ways. */
static void test_redisson_scripts_and_bloomguard_exclude_each_other(void) {
  clean("rs");
  const char *java = "2b5f0f4c-9d7e-4a43-8a61-3f6d0c1e2a77:1";
  bg_lock *l = open_lock("rs", 0, 1);

  /* Java holds (lease 20 s): bloomguard is refused, the message names the Java holder */
  char *r = bgt_redis_cmd(&srv, "EVAL %s 1 rs:lock 20000 %s", redisson_try_lock, java);
  CHECK_EQ_STR(r, "(nil)");
  free(r);
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(l), java);
  CHECK_CONTAINS(bg_lock_errmsg(l), "exclusive");
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_READ, 0, NULL), BG_ELOCKED);
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_WRITE, 0, NULL), BG_ELOCKED);
  CHECK_STATUS(bg_lock_release(l), BG_EINVAL);

  /* a bloomguard waiter wakes on Redisson's unlock message, long before the 20 s lease */
  async_acq w;
  async_start(&w, l, BG_LOCK_EXCLUSIVE, 30000, 0);
  wait_waiters("rs", 1);   /* it waits on the unlock channel */
  uint64_t unlocked = bgt_now_ns();
  r = bgt_redis_cmd(&srv, "EVAL %s 3 rs:lock redisson_lock__channel:{rs:lock} redisson_unlock_latch:{rs:lock}:r1 "
                    "0 20000 %s publish 10000", redisson_unlock, java);
  CHECK_EQ_STR(r, "1");
  free(r);
  async_join(&w);
  CHECK_OK(w.st);
  CHECK_OK(w.release_st);
  CHECK_MSG(w.acquired_at >= unlocked && w.acquired_at - unlocked < SOON_MS * 1000000ull,
            "the waiter got the lock %lld ms after Redisson's unlock (its lease was 20000)",
            (long long)((int64_t)(w.acquired_at - unlocked) / 1000000));

  /* bloomguard holds: Redisson's tryLock gets the PTTL (it waits), its unlock is refused (nil) */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  r = bgt_redis_cmd(&srv, "EVAL %s 1 rs:lock 20000 %s", redisson_try_lock, java);
  CHECK_MSG(atoll(r) > 29000, "Redisson's tryLock answered %s, want the PTTL of bloomguard's 30 s lease", r);
  free(r);
  r = bgt_redis_cmd(&srv, "EVAL %s 3 rs:lock redisson_lock__channel:{rs:lock} redisson_unlock_latch:{rs:lock}:r2 "
                    "0 20000 %s publish 10000", redisson_unlock, java);
  CHECK_EQ_STR(r, "(nil)");
  free(r);
  expect_reply("EXISTS %s", "rs:lock", "1");
  CHECK_OK(bg_lock_release(l));
  r = bgt_redis_cmd(&srv, "EVAL %s 1 rs:lock 20000 %s", redisson_try_lock, java);
  CHECK_EQ_STR(r, "(nil)");
  free(r);

  /* a Redisson holder that died (lease 300 ms, nobody renews): bloomguard gets it when it expires */
  free(bgt_redis_cmd(&srv, "DEL rs:lock"));
  free(bgt_redis_cmd(&srv, "EVAL %s 1 rs:lock 300 %s", redisson_try_lock, java));
  uint64_t t0 = bgt_now_ns();
  long long left = reply_ll("PTTL %s", "rs:lock");   /* the key expires no sooner than t0 + left */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 30000, NULL));
  int64_t took = ms_since(t0);
  CHECK_MSG(took + 5 >= left && took < left + SOON_MS, "acquired after %lld ms, the dead holder's lease had %lld ms "
            "left", (long long)took, left);
  CHECK_OK(bg_lock_release(l));
  bg_lock_close(l);
}

/* ---- mutual exclusion -------------------------------------------------------------------------- */

typedef struct excl_shared {
  atomic_int inside;
  atomic_int overlaps;
  atomic_int not_increasing;
  atomic_int failures;
  atomic_int done;
  atomic_ullong last_token;
} excl_shared;

/* One critical section: exclusive, so tokens seen inside must grow, and nobody else is inside. */
static void critical(excl_shared *sh, uint64_t token) {
  if (atomic_fetch_add(&sh->inside, 1) != 0) atomic_fetch_add(&sh->overlaps, 1);
  if (token <= atomic_load(&sh->last_token)) atomic_fetch_add(&sh->not_increasing, 1);
  atomic_store(&sh->last_token, token);
  sleep_ms(1);
  atomic_fetch_sub(&sh->inside, 1);
  atomic_fetch_add(&sh->done, 1);
}

typedef struct excl_arg {
  bg_lock *l;
  excl_shared *sh;
  int iterations;
  int mode;
} excl_arg;

static void *excl_worker(void *p) {
  excl_arg *a = p;
  for (int i = 0; i < a->iterations; i++) {
    uint64_t token = 0;
    if (bg_lock_acquire(a->l, a->mode, 60000, &token) != BG_OK) {
      atomic_fetch_add(&a->sh->failures, 1);
      continue;
    }
    critical(a->sh, token);
    if (bg_lock_release(a->l) != BG_OK) atomic_fetch_add(&a->sh->failures, 1);
  }
  return NULL;
}

static void run_threads(const char *name, int nthreads, int shared_handle, int mode) {
  enum { ITER = 25 };
  excl_shared sh;
  memset(&sh, 0, sizeof sh);
  bg_lock *ls[8] = {0};
  pthread_t th[8];
  excl_arg args[8];
  clean(name);
  for (int i = 0; i < nthreads; i++) {
    ls[i] = shared_handle && i > 0 ? ls[0] : open_lock(name, 0, 1);
    args[i] = (excl_arg){ls[i], &sh, ITER, mode};
    pthread_create(&th[i], NULL, excl_worker, &args[i]);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < nthreads; i++)
    if (!shared_handle || i == 0) bg_lock_close(ls[i]);
  CHECK_EQ_INT(atomic_load(&sh.failures), 0);
  CHECK_EQ_INT(atomic_load(&sh.done), nthreads * ITER);
  CHECK_EQ_INT(atomic_load(&sh.overlaps), 0);
  CHECK_EQ_INT(atomic_load(&sh.not_increasing), 0);
  char k[64];
  snprintf(k, sizeof k, "%s:lock", name);
  expect_reply("EXISTS %s", k, "0");
}

static void test_mutual_exclusion_between_threads(void) {
  run_threads("mx-shared", 8, 1, BG_LOCK_EXCLUSIVE); /* one handle: each thread is its own holder */
  run_threads("mx-handles", 6, 0, BG_LOCK_EXCLUSIVE);
  run_threads("mx-write", 6, 1, BG_LOCK_WRITE);
}

static void test_mutual_exclusion_between_processes(void) {
  enum { PROCS = 4, ITER = 25 };
  excl_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED);
  memset(sh, 0, sizeof *sh);
  clean("mx-procs");
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      bg_client *c = NULL;
      bg_lock *l = NULL;
      if (bg_client_open(&c, srv.url, NULL) != BG_OK || bg_lock_open(&l, c, "mx-procs", NULL) != BG_OK) _exit(3);
      excl_arg a = {l, sh, ITER, p % 2 ? BG_LOCK_WRITE : BG_LOCK_EXCLUSIVE};
      excl_worker(&a);
      bg_lock_close(l);
      bg_client_close(c);
      _exit(0);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int st = 0;
    waitpid(pids[p], &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %d", p, st);
  }
  CHECK_EQ_INT(atomic_load(&sh->failures), 0);
  CHECK_EQ_INT(atomic_load(&sh->done), PROCS * ITER);
  CHECK_EQ_INT(atomic_load(&sh->overlaps), 0);
  CHECK_EQ_INT(atomic_load(&sh->not_increasing), 0);
  munmap(sh, sizeof *sh);
}

/* ---- reentrancy, ownership ---------------------------------------------------------------------- */

static void *try_release(void *p) {
  bg_lock *l = p;
  int st = bg_lock_release(l);
  int st2 = bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL);
  return (void *)(intptr_t)(st * 100 + st2);
}

static void test_reentrancy_and_release_by_owner_only(void) {
  clean("own");
  bg_lock *a = open_lock("own", 0, 1), *b = open_lock("own", 0, 1);
  uint64_t t1, t2, t3;
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, &t1));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, &t2));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_WRITE, 0, &t3));
  CHECK_EQ_U64(t2, t1);
  CHECK_EQ_U64(t3, t1);
  char holder[128];
  bg_lock_holder_id(a, holder, sizeof holder);
  char *r = bgt_redis_cmd(&srv, "HGET own:lock %s", holder);
  CHECK_EQ_STR(r, "3");
  free(r);

  /* another thread, same handle: not the owner - its release is refused, its acquire waits */
  pthread_t th;
  void *ret;
  pthread_create(&th, NULL, try_release, a);
  pthread_join(th, &ret);
  CHECK_EQ_INT((intptr_t)ret, BG_EINVAL * 100 + BG_ELOCKED);
  /* another handle, same thread: another owner too */
  CHECK_STATUS(bg_lock_release(b), BG_EINVAL);
  CHECK_STATUS(bg_lock_acquire(b, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(b), holder);
  r = bgt_redis_cmd(&srv, "HGET own:lock %s", holder);
  CHECK_EQ_STR(r, "3");
  free(r);

  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_release(a));
  expect_reply("EXISTS %s", "own:lock", "1");
  CHECK_OK(bg_lock_release(a));
  expect_reply("EXISTS %s", "own:lock", "0");
  CHECK_STATUS(bg_lock_release(a), BG_EINVAL);

  /* exclusive, then READ: one more exclusive hold; READ, then exclusive: refused (deadlock) */
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  int mode = 0;
  uint32_t count = 0;
  CHECK_OK(bg_lock_held(a, &mode, &count, NULL));
  CHECK_EQ_INT(mode, BG_LOCK_EXCLUSIVE);
  CHECK_EQ_INT(count, 2);
  expect_reply("HEXISTS %s mode", "own:lock", "0");
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  CHECK_STATUS(bg_lock_acquire(a, BG_LOCK_WRITE, 0, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(a), "upgrade");
  CHECK_STATUS(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EINVAL);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  CHECK_OK(bg_lock_held(a, &mode, &count, NULL));
  CHECK_EQ_INT(mode, BG_LOCK_READ);
  CHECK_EQ_INT(count, 2);
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_release(a));
  expect_reply("EXISTS %s", "own:lock", "0");
  bg_lock_close(a);
  bg_lock_close(b);
}

/* ---- waiting ------------------------------------------------------------------------------------- */

static void test_wait_timeout_names_the_holder(void) {
  clean("wt");
  bg_lock *a = open_lock("wt", 0, 1), *b = open_lock("wt", 0, 1);
  char holder[128];
  bg_lock_holder_id(a, holder, sizeof holder);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  uint64_t t0 = bgt_now_ns();
  CHECK_STATUS(bg_lock_acquire(b, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_MSG(ms_since(t0) < SOON_MS, "a single try took %lld ms (the holder's lease is 30 s)", (long long)ms_since(t0));
  for (int mode = BG_LOCK_EXCLUSIVE; mode <= BG_LOCK_WRITE; mode++) {
    t0 = bgt_now_ns();
    CHECK_STATUS(bg_lock_acquire(b, mode, 300, NULL), BG_ELOCKED);
    int64_t took = ms_since(t0);
    CHECK_MSG(took >= 300 && took < 300 + SOON_MS, "mode %d: wait of 300 ms took %lld ms (the holder's lease is 30 s)",
              mode, (long long)took);
    CHECK_CONTAINS(bg_lock_errmsg(b), holder);
    CHECK_CONTAINS(bg_lock_errmsg(b), "lease left");
    CHECK_CONTAINS(bg_lock_errmsg(b), "gave up after");
  }
  /* the waiting writer withdrew its intent when it gave up */
  expect_reply("ZCARD %s", "{wt:lock}:writers", "0");
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_acquire(b, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release(b));
  bg_lock_close(a);
  bg_lock_close(b);
}

static void wake_case(int subscribe, int64_t poll_max) {
  clean("wake");
  bg_lock *a = open_lock("wake", 0, 1), *b = NULL;
  bg_options *o = NULL;
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_LOCK_SUBSCRIBE, subscribe);
  bg_options_set_int(o, BG_OPT_LOCK_POLL_MAX_MS, poll_max);
  CHECK_OK(bg_lock_open(&b, cl, "wake", o));
  bg_options_free(o);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  async_acq w;
  long long tries = script_calls();
  async_start(&w, b, BG_LOCK_EXCLUSIVE, 20000, 0);
  /* released while it waits: subscribed, or (polling) past its second try */
  if (subscribe) wait_waiters("wake", 1);
  for (uint64_t t0 = bgt_now_ns(); !subscribe && script_calls() < tries + 2 && ms_since(t0) < 20000;) sleep_ms(2);
  uint64_t released = bgt_now_ns();
  CHECK_OK(bg_lock_release(a));
  async_join(&w);
  CHECK_OK(w.st);
  CHECK_MSG(w.acquired_at >= released, "the waiter got the lock %lld us before it was released",
            (long long)(released - w.acquired_at) / 1000);
  /* the lease was 30 s: only the release can have woken it this soon */
  CHECK_MSG(w.acquired_at - released < SOON_MS * 1000000ull, "subscribe=%d: the waiter got the lock %lld ms after "
            "the release", subscribe, (long long)((int64_t)(w.acquired_at - released) / 1000000));
  bg_lock_close(a);
  bg_lock_close(b);
}

static void test_waiter_wakes_on_release(void) {
  /* no polling at all and a 30 s lease: only the message can wake it in seconds */
  wake_case(1, 60000);
  wake_case(0, 100);   /* polling, backoff capped at 100 ms */
}

/* ---- fencing tokens ---------------------------------------------------------------------------- */

static void test_fencing_tokens_strictly_increase(void) {
  clean("fence");
  bg_lock *a = open_lock("fence", 0, 1), *b = open_lock("fence", 0, 1);
  uint64_t last = 0, t = 0;
  for (int i = 0; i < 20; i++) {
    bg_lock *l = i % 2 ? a : b;
    int mode = i % 3 == 0 ? BG_LOCK_READ : i % 3 == 1 ? BG_LOCK_EXCLUSIVE : BG_LOCK_WRITE;
    CHECK_OK(bg_lock_acquire(l, mode, 1000, &t));
    CHECK_MSG(t > last, "token %llu after %llu", (unsigned long long)t, (unsigned long long)last);
    uint64_t again = 0;
    CHECK_OK(bg_lock_acquire(l, mode, 0, &again)); /* re-entering: the same hold, the same token */
    CHECK_EQ_U64(again, t);
    last = t;
    CHECK_OK(bg_lock_release(l));
    CHECK_OK(bg_lock_release(l));
  }
  /* two readers at once: each hold has its own token */
  uint64_t r1, r2;
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, &r1));
  CHECK_OK(bg_lock_acquire(b, BG_LOCK_READ, 0, &r2));
  CHECK(r1 > last && r2 > r1);
  char want[32];
  snprintf(want, sizeof want, "%llu", (unsigned long long)r2);
  expect_reply("GET %s", "{fence:lock}:fence", want);
  expect_reply("PTTL %s", "{fence:lock}:fence", "-1");
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_release(b));
  bg_lock_close(a);
  bg_lock_close(b);
}

/* bg_lock_retire: the fence key goes only when nobody holds the lock and nobody waits for it. */
static void test_retire_only_a_free_lock(void) {
  clean("retire");
  bg_lock *a = open_lock("retire", 0, 1), *b = open_lock("retire", 0, 1);
  uint64_t t = 0;
  int deleted = -1;
  CHECK_STATUS(bg_lock_retire(NULL, &deleted), BG_EINVAL);
  CHECK_EQ_INT(deleted, 0);
  for (int mode = BG_LOCK_EXCLUSIVE; mode <= BG_LOCK_WRITE; mode++) {
    CHECK_OK(bg_lock_acquire(a, mode, 1000, &t));
    char holder[96];
    bg_lock_holder_id(a, holder, sizeof holder);
    deleted = -1;
    CHECK_STATUS(bg_lock_retire(b, &deleted), BG_ELOCKED);
    CHECK_EQ_INT(deleted, 0);
    CHECK_CONTAINS(bg_lock_errmsg(b), "not retired: held by");
    CHECK_CONTAINS(bg_lock_errmsg(b), holder);
    CHECK_STATUS(bg_lock_retire(a, NULL), BG_ELOCKED); /* the holder's own handle too */
    CHECK(reply_ll("GET %s", "{retire:lock}:fence") == (long long)t);
    CHECK_OK(bg_lock_release(a));
  }
  /* a Redisson RLock holder (its own script) */
  free(bgt_redis_cmd(&srv, "EVAL %s 1 retire:lock 30000 java-uuid:1", redisson_try_lock));
  CHECK_STATUS(bg_lock_retire(b, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(b), "java-uuid:1");
  free(bgt_redis_cmd(&srv, "DEL retire:lock"));
  /* a waiting writer's intent */
  free(bgt_redis_cmd(&srv, "ZADD {retire:lock}:writers 99999999999999 waiting-writer"));
  CHECK_STATUS(bg_lock_retire(b, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(b), "waiting-writer");
  free(bgt_redis_cmd(&srv, "DEL {retire:lock}:writers"));
  CHECK(reply_ll("EXISTS %s", "{retire:lock}:fence") == 1); /* every refusal deleted nothing */
  /* free: retired, and the tokens restart (what lock.h warns about) */
  free(bgt_redis_cmd(&srv, "ZADD {retire:lock}:readers 1 long-gone-reader"));
  CHECK_OK(bg_lock_retire(b, &deleted));
  CHECK_EQ_INT(deleted, 1);
  CHECK(reply_ll("EXISTS %s", "{retire:lock}:fence") == 0);
  CHECK(reply_ll("EXISTS %s", "{retire:lock}:readers") == 0);
  CHECK_OK(bg_lock_retire(b, &deleted)); /* nothing left: still fine */
  CHECK_EQ_INT(deleted, 0);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, &t));
  CHECK_EQ_U64(t, 1);
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_retire(b, NULL));
  bg_lock_close(a);
  bg_lock_close(b);
}

/* bg_filter_delete keeps the filter's write-lock fence (a writer holding an old token must keep
 * losing to every later one); retiring the filter's lock removes it. */
static void test_filter_delete_keeps_its_lock_fence(void) {
  bg_filter *f = NULL;
  bg_lock *l = NULL;
  uint64_t t1 = 0, t2 = 0;
  CHECK_OK(bg_filter_open(&f, cl, "retired-filter"));
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  CHECK_OK(bg_lock_open_filter(&l, f, NULL));
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, &t1));
  CHECK_OK(bg_lock_release(l));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK(reply_ll("EXISTS %s", "{retired-filter}:lock:fence") == 1);
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL)); /* the name used again: tokens go on */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_WRITE, 0, &t2));
  CHECK(t2 > t1);
  CHECK_OK(bg_lock_release(l));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_lock_retire(l, NULL));
  CHECK(reply_ll("EXISTS %s", "{retired-filter}:lock:fence") == 0);
  bg_lock_close(l);
  bg_filter_close(f);
}

/* ---- the lease ------------------------------------------------------------------------------------ */

/* Tries (wait 0) every 50 ms for ms; returns after the first success (*at: when) or the end. */
static int poll_takeover(bg_lock *l, int64_t ms, int64_t *at) {
  uint64_t t0 = bgt_now_ns();
  while (ms_since(t0) < ms) {
    if (bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL) == BG_OK) {
      *at = ms_since(t0);
      return 1;
    }
    sleep_ms(50);
  }
  return 0;
}

static void test_renewal_keeps_a_long_hold(void) {
  clean("renew");
  /* a 600 ms lease is renewed every 200 ms. Under TSan it was once taken at 727 ms: the first
   * renewal was due a period after the acquire's reply, so a reply that came 400 ms after the
   * server took the lock left it to expire; it is due a period after the acquire was sent now
   * (test_lock_renew.c measures every renewal's lateness) */
  bg_lock *a = open_lock("renew", 600, 1), *b = open_lock("renew", 600, 1);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  int64_t at = 0;
  /* 3600 ms = six leases */
  CHECK_MSG(!poll_takeover(b, 3600, &at), "the lock was taken at %lld ms despite renewal", (long long)at);
  long long pttl = reply_ll("PTTL %s", "renew:lock");
  CHECK_MSG(pttl > 0 && pttl <= 600, "PTTL %lld", pttl);
  CHECK_OK(bg_lock_held(a, NULL, NULL, NULL));
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_acquire(b, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release(b));

  /* readers are renewed too */
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  CHECK_MSG(!poll_takeover(b, 2400, &at), "a renewed reader lost the lock at %lld ms", (long long)at);
  CHECK_OK(bg_lock_release(a));
  bg_lock_close(a);
  bg_lock_close(b);
}

/* The negative control of the renewal test: the same harness without renewal sees the takeover. */
static void test_without_renewal_the_lock_is_taken_after_its_lease(void) {
  clean("norenew");
  bg_lock *a = open_lock("norenew", 300, 0), *b = open_lock("norenew", 300, 1);
  char ha[128], hb[128];
  bg_lock_holder_id(a, ha, sizeof ha);
  bg_lock_holder_id(b, hb, sizeof hb);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  int64_t at = -1;
  uint64_t t0 = bgt_now_ns();
  long long left = reply_ll("PTTL %s", "norenew:lock");
  CHECK_MSG(poll_takeover(b, 20000, &at), "the unrenewed lock was never taken");
  at = ms_since(t0);
  CHECK_MSG(at + 5 >= left && at < left + SOON_MS, "taken at %lld ms, its lease had %lld ms left", (long long)at, left);
  /* the old holder's release is refused by the server-side holder check: b keeps the lock */
  CHECK_STATUS(bg_lock_release(a), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(a), "lost");
  char *r = bgt_redis_cmd(&srv, "HEXISTS norenew:lock %s", hb);
  CHECK_EQ_STR(r, "1");
  free(r);
  r = bgt_redis_cmd(&srv, "HEXISTS norenew:lock %s", ha);
  CHECK_EQ_STR(r, "0");
  free(r);
  CHECK_STATUS(bg_lock_release(a), BG_EINVAL); /* it holds nothing any more */
  CHECK_OK(bg_lock_release(b));

  /* a reentrant acquire of a hold that ran out is refused too */
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  wait_reply("EXISTS %s", "norenew:lock", "0");
  CHECK_STATUS(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(a), "lost");
  CHECK_STATUS(bg_lock_release(a), BG_EINVAL);
  bg_lock_close(a);
  bg_lock_close(b);
}

static void test_renewal_notices_a_lost_hold(void) {
  clean("lost");
  bg_lock *a = open_lock("lost", 300, 1);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  free(bgt_redis_cmd(&srv, "DEL lost:lock"));
  /* the next renewal finds it gone (bounded: it is due every 100 ms) */
  int mode = 0, st = BG_OK;
  for (uint64_t t0 = bgt_now_ns(); (st = bg_lock_held(a, &mode, NULL, NULL)) == BG_OK && ms_since(t0) < 20000;)
    sleep_ms(5);
  CHECK_STATUS(st, BG_ELOCKED);
  CHECK_EQ_INT(mode, BG_LOCK_EXCLUSIVE);
  CHECK_CONTAINS(bg_lock_errmsg(a), "was lost");
  CHECK_STATUS(bg_lock_release(a), BG_ELOCKED);
  CHECK_OK(bg_lock_held(a, &mode, NULL, NULL));
  CHECK_EQ_INT(mode, 0);
  expect_reply("EXISTS %s", "lost:lock", "0"); /* renewal never recreates a key */
  bg_lock_close(a);
}

/* A holder killed with SIGKILL: its lease runs out and the next acquire succeeds. */
static void test_holder_killed_lock_expires(void) {
  clean("killed");
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *c = NULL;
    bg_lock *l = NULL;
    bg_options *o = NULL;
    uint64_t token = 0;
    bg_options_new(&o);
    /* long enough to be still held when the parent looks, however loaded the machine */
    bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, 2000);
    if (bg_client_open(&c, srv.url, NULL) != BG_OK || bg_lock_open(&l, c, "killed", o) != BG_OK ||
        bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, &token) != BG_OK)
      _exit(3);
    sleep_ms(2200); /* renewed past its first lease */
    if (write(fds[1], &token, sizeof token) != (ssize_t)sizeof token) _exit(4);
    raise(SIGKILL);
    _exit(5);
  }
  close(fds[1]);
  uint64_t child_token = 0;
  CHECK(read(fds[0], &child_token, sizeof child_token) == (ssize_t)sizeof child_token);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
  bg_lock *l = open_lock("killed", 0, 1);
  uint64_t t0 = bgt_now_ns(), token = 0;
  long long pttl = reply_ll("PTTL %s", "killed:lock");
  CHECK_MSG(pttl > 0 && pttl <= 2000, "PTTL %lld after the holder died", pttl);
  if (pttl > 0) CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 30000, &token));
  int64_t took = ms_since(t0);
  CHECK_MSG(took + 5 >= pttl && took < pttl + SOON_MS, "took %lld ms; the dead holder's lease had %lld ms left",
            (long long)took, pttl);
  CHECK(token > child_token);
  CHECK_OK(bg_lock_release(l));
  bg_lock_close(l);
}

/* ---- readers and writers ---------------------------------------------------------------------- */

static void test_readers_share_writers_exclude(void) {
  clean("rw");
  bg_lock *r[4], *w = open_lock("rw", 0, 1), *w2 = open_lock("rw", 0, 1);
  for (int i = 0; i < 4; i++) {
    r[i] = open_lock("rw", 0, 1);
    CHECK_OK(bg_lock_acquire(r[i], BG_LOCK_READ, 0, NULL));
  }
  expect_reply("HGET %s mode", "rw:lock", "read");
  expect_reply("HLEN %s", "rw:lock", "5");
  expect_reply("ZCARD %s", "{rw:lock}:readers", "4");
  long long pttl = reply_ll("PTTL %s", "rw:lock");
  CHECK_MSG(pttl > 29000 && pttl <= 30000, "PTTL %lld of a read-held key", pttl);
  CHECK_STATUS(bg_lock_acquire(w, BG_LOCK_WRITE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(w), "4 readers");
  CHECK_STATUS(bg_lock_acquire(w, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  for (int i = 0; i < 3; i++) CHECK_OK(bg_lock_release(r[i]));
  CHECK_STATUS(bg_lock_acquire(w, BG_LOCK_WRITE, 0, NULL), BG_ELOCKED);
  redisContext *sub = subscribe("redisson_lock__channel:{rw:lock}");
  CHECK_OK(bg_lock_release(r[3]));
  char *m = next_message(sub, 2000); /* the last reader out publishes the unlock */
  CHECK_MSG(m && !strcmp(m, "0"), "last reader's unlock message: %s", m ? m : "(none)");
  free(m);
  redisFree(sub);
  expect_reply("EXISTS %s", "rw:lock", "0");
  expect_reply("EXISTS %s", "{rw:lock}:readers", "0");
  CHECK_OK(bg_lock_acquire(w, BG_LOCK_WRITE, 0, NULL));
  /* a writer is an RLock-layout hold, marked as a write (what filter queries wait for) */
  expect_reply("HGET %s mode", "rw:lock", "write");
  CHECK_STATUS(bg_lock_acquire(r[0], BG_LOCK_READ, 0, NULL), BG_ELOCKED);
  CHECK_STATUS(bg_lock_acquire(w2, BG_LOCK_WRITE, 0, NULL), BG_ELOCKED);
  CHECK_STATUS(bg_lock_acquire(w2, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_OK(bg_lock_release(w));
  CHECK_OK(bg_lock_acquire(r[0], BG_LOCK_READ, 0, NULL));
  CHECK_OK(bg_lock_release(r[0]));
  for (int i = 0; i < 4; i++) bg_lock_close(r[i]);
  bg_lock_close(w);
  bg_lock_close(w2);
}

/* Many reader threads on one handle hold the lock at the same time. */
typedef struct rd_arg {
  bg_lock *l;
  atomic_int *inside, *max_inside, *arrived;
  int nthreads;
  int st;
} rd_arg;

static void *reader_together(void *p) {
  rd_arg *a = p;
  a->st = bg_lock_acquire(a->l, BG_LOCK_READ, 5000, NULL);
  if (a->st != BG_OK) return NULL;
  int now = atomic_fetch_add(a->inside, 1) + 1;
  int m = atomic_load(a->max_inside);
  while (now > m && !atomic_compare_exchange_weak(a->max_inside, &m, now)) {}
  atomic_fetch_add(a->arrived, 1);
  uint64_t t0 = bgt_now_ns();
  while (atomic_load(a->arrived) < a->nthreads && ms_since(t0) < 5000) sleep_ms(5);
  atomic_fetch_sub(a->inside, 1);
  a->st = bg_lock_release(a->l);
  return NULL;
}

static void test_many_readers_together(void) {
  enum { N = 6 };
  clean("rdall");
  bg_lock *l = open_lock("rdall", 0, 1);
  atomic_int inside = 0, max_inside = 0, arrived = 0;
  pthread_t th[N];
  rd_arg args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (rd_arg){l, &inside, &max_inside, &arrived, N, -100};
    pthread_create(&th[i], NULL, reader_together, &args[i]);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < N; i++) CHECK_OK(args[i].st);
  CHECK_EQ_INT(atomic_load(&max_inside), N);
  expect_reply("EXISTS %s", "rdall:lock", "0");
  bg_lock_close(l);
}

/* A stream of overlapping readers never leaves a gap; a waiting writer still gets in. */
typedef struct stream {
  bg_lock *l;
  atomic_int *stop, *inside, *errors, *writer_inside, *readers_during_writer;
  int64_t hold_ms;
} stream;

static void *reader_stream(void *p) {
  stream *s = p;
  while (!atomic_load(s->stop)) {
    int st = bg_lock_acquire(s->l, BG_LOCK_READ, 20000, NULL);
    if (st != BG_OK) {
      atomic_fetch_add(s->errors, 1);
      continue;
    }
    atomic_fetch_add(s->inside, 1);
    if (atomic_load(s->writer_inside)) atomic_fetch_add(s->readers_during_writer, 1);
    sleep_ms(s->hold_ms);
    atomic_fetch_sub(s->inside, 1);
    if (bg_lock_release(s->l) != BG_OK) atomic_fetch_add(s->errors, 1);
  }
  return NULL;
}

static void test_writer_not_starved_by_readers(void) {
  enum { N = 6 };
  clean("starve");
  bg_lock *rl = open_lock("starve", 0, 1), *w = open_lock("starve", 0, 1);
  atomic_int stop = 0, inside = 0, errors = 0, writer_inside = 0, during = 0;
  /* readers hold 150 ms each, six of them staggered: however late a thread is scheduled, one is in */
  stream s = {rl, &stop, &inside, &errors, &writer_inside, &during, 150};
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    pthread_create(&th[i], NULL, reader_stream, &s);
    sleep_ms(25); /* staggered: some reader is always inside */
  }
  for (uint64_t t0 = bgt_now_ns(); atomic_load(&inside) < 2 && ms_since(t0) < 20000;) sleep_ms(2);
  /* negative control: a writer that only tries (no wait, so no recorded intent) never gets in */
  int tries = 0, wins = 0;
  uint64_t t0 = bgt_now_ns();
  while (ms_since(t0) < 1500) {
    tries++;
    if (bg_lock_acquire(w, BG_LOCK_WRITE, 0, NULL) == BG_OK) {
      wins++;
      bg_lock_release(w);
    }
    sleep_ms(5);
  }
  CHECK_MSG(wins <= 1, "the reader stream left gaps: a try-only writer got in %d of %d times", wins, tries);
  /* a waiting writer records its intent: new readers queue, the current ones drain, it gets in */
  for (int round = 0; round < 3; round++) {
    t0 = bgt_now_ns();
    CHECK_OK(bg_lock_acquire(w, BG_LOCK_WRITE, 30000, NULL));
    int64_t took = ms_since(t0);
    atomic_store(&writer_inside, 1);
    CHECK_EQ_INT(atomic_load(&inside), 0);
    sleep_ms(20);
    CHECK_EQ_INT(atomic_load(&inside), 0);
    atomic_store(&writer_inside, 0);
    CHECK_OK(bg_lock_release(w));
    /* what it stands against: readers coming in forever (the wait running out) */
    CHECK_MSG(took < SOON_MS, "round %d: the writer waited %lld ms behind 150 ms readers", round, (long long)took);
    sleep_ms(100);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  CHECK_EQ_INT(atomic_load(&errors), 0);
  CHECK_EQ_INT(atomic_load(&during), 0);
  bg_lock_close(rl);
  bg_lock_close(w);
}

static void test_readers_and_a_waiting_writer(void) {
  clean("wq");
  bg_lock *a = open_lock("wq", 0, 1), *b = open_lock("wq", 0, 1), *w = open_lock("wq", 0, 1);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  async_acq wr;
  async_start(&wr, w, BG_LOCK_WRITE, 30000, 100);
  wait_reply("ZCARD %s", "{wq:lock}:writers", "1");
  /* the reader holding it re-enters (else: deadlock); a new reader queues behind the writer */
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  CHECK_STATUS(bg_lock_acquire(b, BG_LOCK_READ, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(b), "writer(s) waiting");
  async_acq rd;
  async_start(&rd, b, BG_LOCK_READ, 30000, 0);
  wait_waiters("wq", 2);   /* the writer and the reader both wait */
  CHECK_OK(bg_lock_release(a));
  CHECK_OK(bg_lock_release(a)); /* the last reader out: the writer goes first, then the reader */
  async_join(&wr);
  async_join(&rd);
  CHECK_OK(wr.st);
  CHECK_OK(wr.release_st);
  CHECK_OK(rd.st);
  /* the writer went first: the reader got in only once the writer's release began */
  CHECK_MSG(wr.release_begun && rd.acquired_at >= wr.release_begun, "the queued reader got in %lld us before the "
            "writer's release", (long long)((int64_t)(wr.release_begun - rd.acquired_at) / 1000));
  CHECK(rd.token > wr.token);
  expect_reply("EXISTS %s", "{wq:lock}:writers", "0");

  /* a writer that gives up withdraws its intent and wakes the readers queued behind it */
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  async_start(&wr, w, BG_LOCK_WRITE, 300, 0);
  wait_reply("ZCARD %s", "{wq:lock}:writers", "1");
  async_start(&rd, b, BG_LOCK_READ, 30000, 0);
  async_join(&wr);
  async_join(&rd);
  CHECK_STATUS(wr.st, BG_ELOCKED);
  CHECK_OK(rd.st);
  /* woken by the withdrawal when the writer gave up, not by its intent running out (2 s after it
   * was recorded) */
  int64_t after = (int64_t)(rd.acquired_at - wr.acquired_at);   /* < 0: it woke before the writer's thread noted it */
  CHECK_MSG(after < 1500 * 1000000ll, "the reader got in %lld ms after the writer gave up; its intent would have "
            "lasted 2000 ms", (long long)(after / 1000000));
  CHECK_OK(bg_lock_release(a));
  bg_lock_close(a);
  bg_lock_close(b);
  bg_lock_close(w);
}

/* A waiting writer killed with SIGKILL holds readers back only until its intent expires. */
static void test_dead_waiting_writer(void) {
  clean("deadw");
  bg_lock *a = open_lock("deadw", 0, 1), *b = open_lock("deadw", 0, 1);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *c = NULL;
    bg_lock *l = NULL;
    if (bg_client_open(&c, srv.url, NULL) != BG_OK || bg_lock_open(&l, c, "deadw", NULL) != BG_OK) _exit(3);
    bg_lock_acquire(l, BG_LOCK_WRITE, 60000, NULL);
    _exit(4);
  }
  uint64_t t0 = bgt_now_ns();
  while (reply_ll("ZCARD %s", "{deadw:lock}:writers") == 0 && ms_since(t0) < 5000) sleep_ms(10);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_STATUS(bg_lock_acquire(b, BG_LOCK_READ, 0, NULL), BG_ELOCKED);
  t0 = bgt_now_ns();
  CHECK_OK(bg_lock_acquire(b, BG_LOCK_READ, 30000, NULL));
  int64_t took = ms_since(t0);
  /* what it stands against: an intent that never runs out (the 30 s wait running out) */
  CHECK_MSG(took <= 2000 + SOON_MS, "readers held back %lld ms by a dead writer's intent (2000 max)", (long long)took);
  CHECK_OK(bg_lock_release(b));
  CHECK_OK(bg_lock_release(a));
  bg_lock_close(a);
  bg_lock_close(b);
}

/* A reader that died: its lease runs out on its own though other readers renew theirs. */
static void test_dead_reader_expires(void) {
  clean("deadr");
  /* the live reader's lease is 600 ms (renewed every 200 ms), long enough to be renewed in time on a loaded machine */
  bg_lock *dead = open_lock("deadr", 300, 0), *live = open_lock("deadr", 600, 1), *w = open_lock("deadr", 0, 1);
  char hd[128];
  bg_lock_holder_id(dead, hd, sizeof hd);
  CHECK_OK(bg_lock_acquire(dead, BG_LOCK_READ, 0, NULL));
  CHECK_OK(bg_lock_acquire(live, BG_LOCK_READ, 0, NULL));
  async_acq wr;
  async_start(&wr, w, BG_LOCK_WRITE, 30000, 0);
  /* its lease (300 ms) runs out: pruned by the writer's tries */
  wait_reply("HEXISTS deadr:lock %s", hd, "0");
  CHECK_EQ_INT(wr.st, -100); /* still waiting for the live reader */
  uint64_t released = bgt_now_ns();
  CHECK_OK(bg_lock_release(live));
  async_join(&wr);
  CHECK_OK(wr.st);
  CHECK_MSG(wr.acquired_at >= released && wr.acquired_at - released < SOON_MS * 1000000ull,
            "the writer got in %lld ms after the live reader left", (long long)((int64_t)(wr.acquired_at - released) / 1000000));
  CHECK_STATUS(bg_lock_release(dead), BG_ELOCKED);
  bg_lock_close(dead);
  bg_lock_close(live);
  bg_lock_close(w);
}

/* ---- odds and ends ------------------------------------------------------------------------------ */

static void test_script_flush_and_close(void) {
  clean("misc");
  bg_lock *a = open_lock("misc", 0, 1);
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL));
  free(bgt_redis_cmd(&srv, "SCRIPT FLUSH"));
  CHECK_OK(bg_lock_release(a));
  free(bgt_redis_cmd(&srv, "SCRIPT FLUSH"));
  CHECK_OK(bg_lock_acquire(a, BG_LOCK_READ, 0, NULL));
  /* close releases what the handle still holds (others need not wait out the lease) */
  redisContext *sub = subscribe("redisson_lock__channel:{misc:lock}");
  bg_lock_close(a);
  expect_reply("EXISTS %s", "misc:lock", "0");
  char *m = next_message(sub, 2000);
  CHECK_MSG(m && !strcmp(m, "0"), "close: unlock message %s", m ? m : "(none)");
  free(m);
  redisFree(sub);
  /* a key of another type is reported, not overwritten */
  free(bgt_redis_cmd(&srv, "SET misc:lock x"));
  a = open_lock("misc", 0, 1);
  CHECK_STATUS(bg_lock_acquire(a, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EWRONGTYPE);
  expect_reply("GET %s", "misc:lock", "x");
  bg_lock_close(a);
  free(bgt_redis_cmd(&srv, "DEL misc:lock"));
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_open_and_options), BGT_CASE(test_wire_layout_is_rlock),
        BGT_CASE(test_redisson_scripts_and_bloomguard_exclude_each_other),
        BGT_CASE(test_mutual_exclusion_between_threads), BGT_CASE(test_mutual_exclusion_between_processes),
        BGT_CASE(test_reentrancy_and_release_by_owner_only), BGT_CASE(test_wait_timeout_names_the_holder),
        BGT_CASE(test_waiter_wakes_on_release), BGT_CASE(test_fencing_tokens_strictly_increase),
        BGT_CASE(test_retire_only_a_free_lock), BGT_CASE(test_filter_delete_keeps_its_lock_fence),
        BGT_CASE(test_renewal_keeps_a_long_hold), BGT_CASE(test_without_renewal_the_lock_is_taken_after_its_lease),
        BGT_CASE(test_renewal_notices_a_lost_hold), BGT_CASE(test_holder_killed_lock_expires),
        BGT_CASE(test_readers_share_writers_exclude), BGT_CASE(test_many_readers_together),
        BGT_CASE(test_writer_not_starved_by_readers), BGT_CASE(test_readers_and_a_waiting_writer),
        BGT_CASE(test_dead_waiting_writer), BGT_CASE(test_dead_reader_expires),
        BGT_CASE(test_script_flush_and_close), BGT_CASE(teardown))
