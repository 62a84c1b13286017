/*
 * Lock owners (bg_lock_owner, lock.h) against a real redis-server: two owners in one thread
 * exclude each other, one owner spans threads, reentrancy counts per (handle, owner), the
 * per-thread default owner of the simple calls, many holds renewed by one thread (with its
 * negative control: the thread counter sees threads, and without renewal the holds expire),
 * freeing an owner that still holds, fencing tokens, overlapping calls of one owner, cancel and
 * lost holds per owner.
 */
#include <bloomguard.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;
/* Timing margins: sanitizer builds and loaded CI machines are slow. */
static int64_t margin_ms = 400;

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static char *cmd(const char *fmt, const char *a) { return bgt_redis_cmd(&srv, fmt, a); }

static void expect_reply(const char *fmt, const char *arg, const char *want) {
  char *got = cmd(fmt, arg);
  CHECK_MSG(!strcmp(got, want), "%s %s: got \"%s\", want \"%s\"", fmt, arg, got, want);
  free(got);
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

/* The process's threads, from /proc/self/task. */
/* Threads of this process (/proc/self/task); with `only`, just those among the n tids given. */
static int count_threads_among(const pid_t *only, int n) {
  DIR *d = opendir("/proc/self/task");
  int count = 0;
  struct dirent *e;
  if (!d) return -1;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = (pid_t)atoi(e->d_name);
    int wanted = !only;
    for (int i = 0; i < n && !wanted; i++) wanted = only[i] == tid;
    count += wanted;
  }
  closedir(d);
  return count;
}

static int count_threads(void) { return count_threads_among(NULL, 0); }

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
  const char *m = getenv("BG_TEST_MARGIN_MS");
  if (m && atoll(m) > 0) margin_ms = atoll(m);
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

/* ---- the owner object ------------------------------------------------------------------------- */

static void test_owner_api(void) {
  bg_lock_owner *a = NULL, *b = NULL;
  CHECK_STATUS(bg_lock_owner_new(NULL), BG_EINVAL);
  CHECK_OK(bg_lock_owner_new(&a));
  CHECK_OK(bg_lock_owner_new(&b));
  CHECK(bg_lock_owner_seq(a) > 0);
  CHECK(bg_lock_owner_seq(b) > bg_lock_owner_seq(a));   /* one per-process counter */
  CHECK(bg_lock_owner_seq(NULL) != bg_lock_owner_seq(a)); /* the thread's default owner is another */
  CHECK_EQ_U64(bg_lock_owner_seq(NULL), bg_lock_owner_seq(NULL));
  CHECK_EQ_INT(bg_lock_owner_holds(a), 0);

  bg_lock *l = open_lock("own-api", 0, 1);
  char ida[128], idb[128], idt[128];
  size_t n = bg_lock_holder_id_owner(l, a, ida, sizeof ida);
  CHECK_EQ_INT(n, strlen(ida));
  bg_lock_holder_id_owner(l, b, idb, sizeof idb);
  bg_lock_holder_id(l, idt, sizeof idt);
  /* "<uuid>:<seq>": the handle's UUID, then the owner's number */
  CHECK_EQ_INT(strlen(ida) > 37 ? ida[36] : 0, ':');
  CHECK(!strncmp(ida, idb, 37) && !strncmp(ida, idt, 37));
  CHECK_EQ_U64(strtoull(ida + 37, NULL, 10), bg_lock_owner_seq(a));
  CHECK_EQ_U64(strtoull(idt + 37, NULL, 10), bg_lock_owner_seq(NULL));
  char id0[128];
  bg_lock_holder_id_owner(l, NULL, id0, sizeof id0);
  CHECK_EQ_STR(id0, idt);
  /* a short buffer: truncated, NUL-terminated, the full length returned */
  char small[8];
  CHECK_EQ_INT(bg_lock_holder_id_owner(l, a, small, sizeof small), strlen(ida));
  CHECK_EQ_INT(strlen(small), 7);

  CHECK_STATUS(bg_lock_acquire_owner_ex(NULL, NULL, a, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_release_owner_ex(NULL, NULL, a), BG_EINVAL);
  CHECK_STATUS(bg_lock_held_owner_ex(NULL, NULL, a, NULL, NULL, NULL), BG_EINVAL);
  CHECK_STATUS(bg_lock_release_owner_ex(l, NULL, a), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(l), "this owner does not hold it");
  CHECK_STATUS(bg_lock_release_owner_ex(l, NULL, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(l), "the calling thread (its default owner) does not hold it");
  bg_lock_close(l);
  bg_lock_owner_free(a);
  bg_lock_owner_free(b);
  bg_lock_owner_free(NULL);
}

/* ---- two owners, one thread ------------------------------------------------------------------- */

typedef struct later {
  bg_lock *l;
  bg_lock_owner *o;
  int64_t after_ms;
  int st;
} later;

static void *release_later(void *p) {
  later *x = p;
  sleep_ms(x->after_ms);
  x->st = bg_lock_release_owner_ex(x->l, NULL, x->o);
  return NULL;
}

static void test_two_owners_in_one_thread_contend(void) {
  clean("own-two");
  bg_lock *l = open_lock("own-two", 0, 1);
  bg_lock_owner *a, *b;
  CHECK_OK(bg_lock_owner_new(&a));
  CHECK_OK(bg_lock_owner_new(&b));
  uint64_t ta = 0, tb = 0;
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, a, BG_LOCK_EXCLUSIVE, 0, &ta));
  char ida[128];
  bg_lock_holder_id_owner(l, a, ida, sizeof ida);
  char want[160];
  snprintf(want, sizeof want, "%s 1", ida);
  expect_reply("HGETALL %s", "own-two:lock", want); /* Redisson's RLock layout: one field, the count */

  /* b, same thread, same handle: excluded (fails at once, names a's holder id) */
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_STATUS(bg_lock_acquire_owner_ex(l, call, b, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_call_errmsg(call), ida);
  CHECK_EQ_INT(bg_lock_owner_holds(b), 0);
  /* the default owner of this thread is a third holder: excluded as well */
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  int mode = -1;
  uint32_t count = 9;
  CHECK_OK(bg_lock_held_owner_ex(l, call, b, &mode, &count, NULL));
  CHECK_EQ_INT(mode, 0);
  CHECK_EQ_INT(count, 0);

  /* b waits; a is released from another thread; b gets it */
  later x = {l, a, 150, -99};
  pthread_t th;
  pthread_create(&th, NULL, release_later, &x);
  uint64_t t0 = bgt_now_ns();
  CHECK_OK(bg_lock_acquire_owner_ex(l, call, b, BG_LOCK_EXCLUSIVE, 5000 + margin_ms, &tb));
  int64_t waited = (int64_t)((bgt_now_ns() - t0) / 1000000u);
  pthread_join(th, NULL);
  CHECK_OK(x.st);
  CHECK_MSG(waited >= 100, "b waited %lld ms: it must have waited for a's release", (long long)waited);
  CHECK(tb > ta);
  CHECK_EQ_INT(bg_lock_owner_holds(a), 0);
  CHECK_EQ_INT(bg_lock_owner_holds(b), 1);
  CHECK_OK(bg_lock_release_owner_ex(l, call, b));
  expect_reply("EXISTS %s", "own-two:lock", "0");
  bg_call_free(call);
  bg_lock_close(l);
  bg_lock_owner_free(a);
  bg_lock_owner_free(b);
}

/* ---- one owner, many threads ------------------------------------------------------------------- */

typedef struct in_thread {
  bg_lock *l;
  bg_lock_owner *o;
  int what;  /* 0 acquire, 1 release, 2 held */
  int st;
  uint32_t count;
  uint64_t token;
} in_thread;

static void *run_in_thread(void *p) {
  in_thread *x = p;
  if (x->what == 0) x->st = bg_lock_acquire_owner_ex(x->l, NULL, x->o, BG_LOCK_EXCLUSIVE, 0, &x->token);
  else if (x->what == 1) x->st = bg_lock_release_owner_ex(x->l, NULL, x->o);
  else x->st = bg_lock_held_owner_ex(x->l, NULL, x->o, NULL, &x->count, &x->token);
  return NULL;
}

static int on_thread(in_thread *x) {
  pthread_t th;
  pthread_create(&th, NULL, run_in_thread, x);
  pthread_join(th, NULL);
  return x->st;
}

static void test_one_owner_across_threads(void) {
  clean("own-threads");
  bg_lock *l = open_lock("own-threads", 0, 1);
  bg_lock_owner *o;
  CHECK_OK(bg_lock_owner_new(&o));
  in_thread acq = {l, o, 0, -99, 0, 0};
  CHECK_OK(on_thread(&acq));                         /* acquired on thread 1 (which then exits) */
  in_thread again = {l, o, 0, -99, 0, 0};
  CHECK_OK(on_thread(&again));                       /* re-entered on thread 2 */
  CHECK_EQ_U64(again.token, acq.token);
  in_thread h = {l, o, 2, -99, 0, 0};
  CHECK_OK(on_thread(&h));                           /* seen from thread 3 */
  CHECK_EQ_INT(h.count, 2);
  CHECK_EQ_U64(h.token, acq.token);
  char id[128];
  bg_lock_holder_id_owner(l, o, id, sizeof id);
  char *r = bgt_redis_cmd(&srv, "HGET own-threads:lock %s", id);
  CHECK_EQ_STR(r, "2");
  free(r);
  /* this thread's default owner is not o: it cannot release */
  CHECK_STATUS(bg_lock_release(l), BG_EINVAL);
  in_thread rel = {l, o, 1, -99, 0, 0};
  CHECK_OK(on_thread(&rel));                         /* released on thread 4 */
  expect_reply("EXISTS %s", "own-threads:lock", "1");
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));       /* and the last one here */
  expect_reply("EXISTS %s", "own-threads:lock", "0");
  CHECK_EQ_INT(bg_lock_owner_holds(o), 0);
  bg_lock_close(l);
  bg_lock_owner_free(o);
}

/* ---- reentrancy per (handle, owner) ------------------------------------------------------------- */

static void test_reentrant_counts_per_handle_and_owner(void) {
  clean("own-reent");
  bg_lock *l = open_lock("own-reent", 0, 1), *m = open_lock("own-reent", 0, 1);
  bg_lock_owner *o;
  CHECK_OK(bg_lock_owner_new(&o));
  uint64_t t1, t2, t3;
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, &t1));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_WRITE, 0, &t2));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_READ, 0, &t3)); /* one more exclusive hold */
  CHECK_EQ_U64(t2, t1);
  CHECK_EQ_U64(t3, t1);
  int mode = 0;
  uint32_t count = 0;
  CHECK_OK(bg_lock_held_owner_ex(l, NULL, o, &mode, &count, NULL));
  CHECK_EQ_INT(mode, BG_LOCK_EXCLUSIVE);
  CHECK_EQ_INT(count, 3);
  char id[128];
  bg_lock_holder_id_owner(l, o, id, sizeof id);
  char *r = bgt_redis_cmd(&srv, "HGET own-reent:lock %s", id);
  CHECK_EQ_STR(r, "3");
  free(r);
  /* the same owner through another handle of the same key is another holder (the UUID is the handle's) */
  CHECK_STATUS(bg_lock_acquire_owner_ex(m, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_OK(bg_lock_held_owner_ex(m, NULL, o, &mode, &count, NULL));
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(bg_lock_owner_holds(o), 1);
  for (int i = 0; i < 3; i++) {
    expect_reply("EXISTS %s", "own-reent:lock", "1");
    CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));
  }
  expect_reply("EXISTS %s", "own-reent:lock", "0");
  CHECK_STATUS(bg_lock_release_owner_ex(l, NULL, o), BG_EINVAL);
  /* READ, then exclusive: refused (upgrades deadlock), for owners as for threads */
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_READ, 0, NULL));
  CHECK_STATUS(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(l), "this owner holds it for reading");
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));
  bg_lock_close(l);
  bg_lock_close(m);
  bg_lock_owner_free(o);
}

/* ---- the default owner: the calls without one keep their per-thread meaning ------------------ */

typedef struct dflt {
  bg_lock *l;
  uint64_t seq;
  int acq, rel_other;
  char id[128];
} dflt;

static void *default_worker(void *p) {
  dflt *d = p;
  d->seq = bg_lock_owner_seq(NULL);
  bg_lock_holder_id(d->l, d->id, sizeof d->id);
  d->acq = bg_lock_acquire(d->l, BG_LOCK_EXCLUSIVE, 0, NULL);
  return NULL; /* exits holding it */
}

static void test_default_owner_is_per_thread(void) {
  clean("own-default");
  bg_lock *l = open_lock("own-default", 0, 1);
  /* the simple calls and the _owner calls with NULL are one owner: this thread's */
  CHECK_OK(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, NULL, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_EQ_INT(bg_lock_owner_holds(NULL), 1);
  uint32_t count = 0;
  CHECK_OK(bg_lock_held(l, NULL, &count, NULL));
  CHECK_EQ_INT(count, 2);
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, NULL));
  CHECK_OK(bg_lock_release(l));
  expect_reply("EXISTS %s", "own-default:lock", "0");

  /* another thread has another default owner; it exits holding the lock */
  dflt d = {l, 0, -99, 0, ""};
  pthread_t th;
  pthread_create(&th, NULL, default_worker, &d);
  pthread_join(th, NULL);
  CHECK_OK(d.acq);
  CHECK(d.seq != bg_lock_owner_seq(NULL));
  char mine[128];
  bg_lock_holder_id(l, mine, sizeof mine);
  CHECK(strcmp(mine, d.id) != 0);
  /* a new thread never inherits it (seqs are not reused, unlike thread ids) and neither do we */
  CHECK_STATUS(bg_lock_release(l), BG_EINVAL);
  CHECK_STATUS(bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(l), d.id);
  for (int i = 0; i < 3; i++) {
    dflt e = {l, 0, -99, 0, ""};
    pthread_create(&th, NULL, default_worker, &e);
    pthread_join(th, NULL);
    CHECK_STATUS(e.acq, BG_ELOCKED);
    CHECK(e.seq != d.seq);
  }
  /* the exited thread's hold stays until the handle closes, which releases it */
  bg_lock_close(l);
  expect_reply("EXISTS %s", "own-default:lock", "0");
}

/* ---- many holds, one renewal thread ------------------------------------------------------------- */

enum { MANY = 200 };

typedef struct idle_arg {
  atomic_int stop, slots, ready;   /* ready counts the tids written (it publishes them) */
  pid_t tid[5];
} idle_arg;

static void *idle_thread(void *p) {
  idle_arg *a = p;
  a->tid[atomic_fetch_add(&a->slots, 1)] = (pid_t)syscall(SYS_gettid);
  atomic_fetch_add(&a->ready, 1);
  while (!atomic_load(&a->stop)) sleep_ms(5);
  return NULL;
}

/*
 * The counter is real: it sees threads come and go (negative control for the counts below). It
 * looks for the threads it started, by tid: the library's renewal thread may end (or start)
 * meanwhile, which once made a plain before/after difference of the whole process miss one.
 */
static void test_thread_counter_sees_threads(void) {
  enum { N = 5 };
  CHECK(count_threads() >= 1);
  idle_arg a = {.stop = 0, .slots = 0, .ready = 0};
  pthread_t th[N];
  for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, idle_thread, &a);
  while (atomic_load(&a.ready) < N) sleep_ms(1);
  int during = count_threads_among(a.tid, N);
  atomic_store(&a.stop, 1);
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  CHECK_MSG(during == N, "counted %d of the %d threads started", during, N);
  int after = count_threads_among(a.tid, N);
  CHECK_MSG(after == 0, "counted %d of the %d threads joined", after, N);
}

/* MANY handles (one hold each, the simple calls) and MANY owners reading through one handle: the
 * process gains at most one thread, and every hold outlives several leases. Failed before owners:
 * each handle started a renewal thread of its own (MANY threads). */
static void test_many_holds_one_renewal_thread(void) {
  /* long enough that a pass over 400 holds, on a loaded machine or under a sanitizer, stays
   * well inside two thirds of it */
  const int64_t lease = 1000;
  int before = count_threads();
  bg_lock *ls[MANY];
  char name[64];
  for (int i = 0; i < MANY; i++) {
    snprintf(name, sizeof name, "own-many-%d", i);
    clean(name);
    ls[i] = open_lock(name, lease, 1);
    CHECK_OK(bg_lock_acquire(ls[i], BG_LOCK_EXCLUSIVE, 0, NULL));
  }
  clean("own-readers");
  bg_lock *r = open_lock("own-readers", lease, 1);
  bg_lock_owner *os[MANY];
  for (int i = 0; i < MANY; i++) {
    CHECK_OK(bg_lock_owner_new(&os[i]));
    CHECK_OK(bg_lock_acquire_owner_ex(r, NULL, os[i], BG_LOCK_READ, 0, NULL));
  }
  int during = count_threads();
  CHECK_MSG(during - before <= 1, "%d threads more for %d holds (want at most 1: one renewal thread)",
            during - before, 2 * MANY);
  sleep_ms(2 * lease + margin_ms); /* two leases: only renewal keeps them */
  CHECK_MSG(count_threads() - before <= 1, "threads grew while renewing");
  for (int i = 0; i < MANY; i++) {
    snprintf(name, sizeof name, "own-many-%d:lock", i);
    expect_reply("EXISTS %s", name, "1");
    CHECK_OK(bg_lock_held(ls[i], NULL, NULL, NULL));
    CHECK_OK(bg_lock_release(ls[i]));
    expect_reply("EXISTS %s", name, "0");
  }
  expect_reply("HLEN %s", "own-readers:lock", "201"); /* MANY readers + the mode field */
  for (int i = 0; i < MANY; i++) {
    CHECK_OK(bg_lock_held_owner_ex(r, NULL, os[i], NULL, NULL, NULL));
    CHECK_OK(bg_lock_release_owner_ex(r, NULL, os[i]));
    bg_lock_owner_free(os[i]);
  }
  expect_reply("EXISTS %s", "own-readers:lock", "0");
  for (int i = 0; i < MANY; i++) bg_lock_close(ls[i]);
  bg_lock_close(r);
}

/* Negative control: the same holds without renewal are gone after their lease. */
static void test_many_holds_without_renewal_expire(void) {
  const int64_t lease = 150;
  enum { N = 20 };
  bg_lock *ls[N];
  char name[64];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "own-norenew-%d", i);
    clean(name);
    ls[i] = open_lock(name, lease, 0);
    CHECK_OK(bg_lock_acquire(ls[i], BG_LOCK_EXCLUSIVE, 0, NULL));
  }
  sleep_ms(lease + margin_ms);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "own-norenew-%d:lock", i);
    expect_reply("EXISTS %s", name, "0");
    CHECK_STATUS(bg_lock_release(ls[i]), BG_ELOCKED);
    bg_lock_close(ls[i]);
  }
}

/* ---- freeing an owner that still holds ------------------------------------------------------ */

static void test_free_with_holds_keeps_them_until_close(void) {
  const int64_t lease = 1000; /* renewal must survive a loaded machine or a sanitizer's stalls */
  clean("own-free");
  bg_lock *l = open_lock("own-free", lease, 1), *m = open_lock("own-free", lease, 1);
  bg_lock_owner *o, *other;
  CHECK_OK(bg_lock_owner_new(&o));
  CHECK_OK(bg_lock_owner_new(&other));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_EQ_INT(bg_lock_owner_holds(o), 1);
  bg_lock_owner_free(o); /* still holding: nothing released, the hold stays (and is renewed) */
  sleep_ms(2 * lease + margin_ms);
  expect_reply("EXISTS %s", "own-free:lock", "1");
  CHECK_STATUS(bg_lock_acquire_owner_ex(l, NULL, other, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_STATUS(bg_lock_acquire_owner_ex(m, NULL, other, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  bg_lock_close(l);     /* releases it (and frees the owner's memory: ASan sees no leak) */
  expect_reply("EXISTS %s", "own-free:lock", "0");
  CHECK_OK(bg_lock_acquire_owner_ex(m, NULL, other, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_OK(bg_lock_release_owner_ex(m, NULL, other));
  bg_lock_close(m);
  bg_lock_owner_free(other);
}

/* ---- fencing tokens across owners -------------------------------------------------------------- */

static void test_fencing_tokens_increase_across_owners(void) {
  clean("own-fence");
  bg_lock *l = open_lock("own-fence", 0, 1);
  enum { N = 4 };
  bg_lock_owner *os[N];
  for (int i = 0; i < N; i++) CHECK_OK(bg_lock_owner_new(&os[i]));
  uint64_t last = 0;
  for (int round = 0; round < 20; round++) {
    bg_lock_owner *o = os[round % N];
    uint64_t t = 0, t2 = 0;
    int mode = round % 3 == 0 ? BG_LOCK_READ : round % 3 == 1 ? BG_LOCK_WRITE : BG_LOCK_EXCLUSIVE;
    CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, mode, 0, &t));
    CHECK_MSG(t > last, "round %d: token %llu after %llu", round, (unsigned long long)t, (unsigned long long)last);
    CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, mode, 0, &t2)); /* reentrant: the same token */
    CHECK_EQ_U64(t2, t);
    CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));
    CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));
    last = t;
  }
  /* readers together each draw their own token */
  uint64_t ta = 0, tb = 0;
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, os[0], BG_LOCK_READ, 0, &ta));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, os[1], BG_LOCK_READ, 0, &tb));
  CHECK(ta > last && tb > ta);
  /* a writer owner waits out both readers: refused at once */
  CHECK_STATUS(bg_lock_acquire_owner_ex(l, NULL, os[2], BG_LOCK_WRITE, 0, NULL), BG_ELOCKED);
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, os[0]));
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, os[1]));
  bg_lock_close(l);
  for (int i = 0; i < N; i++) bg_lock_owner_free(os[i]);
}

/* ---- an owner's calls on one handle must not overlap; cancel; lost holds ------------------- */

typedef struct waiter {
  bg_lock *l;
  bg_lock_owner *o;
  bg_call *call;
  atomic_int started;
  int st;
} waiter;

static void *wait_acquire(void *p) {
  waiter *w = p;
  atomic_store(&w->started, 1);
  w->st = bg_lock_acquire_owner_ex(w->l, w->call, w->o, BG_LOCK_EXCLUSIVE, 20000, NULL);
  return NULL;
}

static void test_overlapping_calls_and_cancel(void) {
  clean("own-overlap");
  bg_lock *l = open_lock("own-overlap", 0, 1), *m = open_lock("own-overlap-2", 0, 1);
  clean("own-overlap-2");
  bg_lock_owner *holder, *o;
  CHECK_OK(bg_lock_owner_new(&holder));
  CHECK_OK(bg_lock_owner_new(&o));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, holder, BG_LOCK_EXCLUSIVE, 0, NULL));
  waiter w = {l, o, NULL, 0, -99};
  CHECK_OK(bg_call_new(&w.call));
  pthread_t th;
  pthread_create(&th, NULL, wait_acquire, &w);
  while (!atomic_load(&w.started)) sleep_ms(1);
  sleep_ms(100); /* o's acquire is waiting */
  CHECK_EQ_INT(bg_lock_owner_holds(o), 1); /* its record: an acquire in flight */
  uint32_t count = 9;
  CHECK_OK(bg_lock_held_owner_ex(l, NULL, o, NULL, &count, NULL));
  CHECK_EQ_INT(count, 0);                  /* holds nothing yet */
  /* a second call of o on l while the first runs: refused at once */
  CHECK_STATUS(bg_lock_release_owner_ex(l, NULL, o), BG_EINVAL);
  CHECK_CONTAINS(bg_lock_errmsg(l), "must not overlap");
  CHECK_STATUS(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL), BG_EINVAL);
  /* o's calls on another handle may run meanwhile */
  CHECK_OK(bg_lock_acquire_owner_ex(m, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL));
  CHECK_EQ_INT(bg_lock_owner_holds(o), 2);
  CHECK_OK(bg_lock_release_owner_ex(m, NULL, o));
  /* cancel: the waiter returns, holds nothing, its intent is withdrawn */
  uint64_t t0 = bgt_now_ns();
  CHECK_OK(bg_call_cancel(w.call));
  pthread_join(th, NULL);
  int64_t took = (int64_t)((bgt_now_ns() - t0) / 1000000u);
  CHECK_STATUS(w.st, BG_ECANCELED);
  CHECK_MSG(took < 150 + margin_ms, "cancel took %lld ms", (long long)took);
  CHECK_EQ_INT(bg_lock_owner_holds(o), 0);
  expect_reply("ZCARD %s", "{own-overlap:lock}:writers", "0");
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, holder));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL)); /* o is usable again */
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, o));
  bg_call_free(w.call);
  bg_lock_close(l);
  bg_lock_close(m);
  bg_lock_owner_free(holder);
  bg_lock_owner_free(o);
}

static void test_lost_hold_of_an_owner(void) {
  const int64_t lease = 100;
  clean("own-lost");
  bg_lock *l = open_lock("own-lost", lease, 0);
  bg_lock_owner *o, *p;
  CHECK_OK(bg_lock_owner_new(&o));
  CHECK_OK(bg_lock_owner_new(&p));
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL));
  sleep_ms(lease + margin_ms);
  CHECK_OK(bg_lock_acquire_owner_ex(l, NULL, p, BG_LOCK_EXCLUSIVE, 0, NULL)); /* the lease ran out */
  CHECK_STATUS(bg_lock_release_owner_ex(l, NULL, o), BG_ELOCKED);
  CHECK_CONTAINS(bg_lock_errmsg(l), "was lost");
  CHECK_EQ_INT(bg_lock_owner_holds(o), 0);
  expect_reply("EXISTS %s", "own-lost:lock", "1"); /* p's hold was left alone */
  CHECK_OK(bg_lock_release_owner_ex(l, NULL, p));
  /* with renewal, the renewal thread marks a deleted hold lost; held_owner reports it on the call */
  bg_lock *r = open_lock("own-lost-r", 90, 1);
  clean("own-lost-r");
  CHECK_OK(bg_lock_acquire_owner_ex(r, NULL, o, BG_LOCK_EXCLUSIVE, 0, NULL));
  expect_reply("DEL %s", "own-lost-r:lock", "1");
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  int st = BG_OK;
  for (int i = 0; i < 100 && (st = bg_lock_held_owner_ex(r, call, o, NULL, NULL, NULL)) == BG_OK; i++) sleep_ms(20);
  CHECK_STATUS(st, BG_ELOCKED);
  CHECK_CONTAINS(bg_call_errmsg(call), "renewal found it gone");
  CHECK_STATUS(bg_lock_acquire_owner_ex(r, call, o, BG_LOCK_EXCLUSIVE, 0, NULL), BG_ELOCKED);
  CHECK_EQ_INT(bg_lock_owner_holds(o), 0);
  bg_call_free(call);
  bg_lock_close(r);
  bg_lock_close(l);
  bg_lock_owner_free(o);
  bg_lock_owner_free(p);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_owner_api), BGT_CASE(test_two_owners_in_one_thread_contend),
        BGT_CASE(test_one_owner_across_threads), BGT_CASE(test_reentrant_counts_per_handle_and_owner),
        BGT_CASE(test_default_owner_is_per_thread), BGT_CASE(test_thread_counter_sees_threads),
        BGT_CASE(test_many_holds_one_renewal_thread), BGT_CASE(test_many_holds_without_renewal_expire),
        BGT_CASE(test_free_with_holds_keeps_them_until_close), BGT_CASE(test_fencing_tokens_increase_across_owners),
        BGT_CASE(test_overlapping_calls_and_cancel), BGT_CASE(test_lost_hold_of_an_owner), BGT_CASE(teardown))
