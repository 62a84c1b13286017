/*
 * Internal: the degrade policy engine (see include/bloomguard/policy.h for the contract).
 *
 * Pieces, each usable without a server (tests/c/test_policy_unit.c):
 *  - bgi_policy_cfg: the settings (a bg_policy is one; a filter holds a refcounted copy);
 *  - bgi_breaker: the circuit breaker state machine (time passed in);
 *  - bgi_bucket: the token bucket in front of the fallback callback (time passed in);
 *  - bgi_snapshot: an immutable, refcounted bitmap + config that answers locally;
 *  - bgi_guard: per filter handle: the published policy, breaker, bucket, the engine's counters,
 *    the snapshot and its background refresher; bgi_guard_run drives one call through the chain.
 *
 * The engine knows nothing of filters or Redis: a call is an attempt callback it is given
 * (bgi_op), and a snapshot comes from a download callback (bgi_guard_set_source). The filter's
 * side - the hooks that run queries and adds through it, the snapshot download, the BG_STAT_*
 * counters and the ABI - is in csrc/filter/ (guarded.c, download.c, stats.c).
 *
 * Happy path cost (a call that Redis answers, breaker closed): one relaxed load of the policy
 * pointer, one of the breaker state, the call itself, two relaxed loads to see that the breaker
 * has nothing to reset, and one atomic increment of a counter. No lock, no allocation.
 */
#ifndef BG_INTERNAL_POLICY_GUARD_H
#define BG_INTERNAL_POLICY_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/policy.h"
#include "common/clock.h"
#include "common/task.h"
#include "common/err.h"
#include "common/histogram.h"
#include "common/observe.h"
#include "common/fork.h"
#include "common/worker.h"

#define BGI_FAIL_CLASSES 9   /* 1..BG_FAIL_OTHER; 0: not a failure (success, or BG_EINVAL) */

/* ---- settings ---------------------------------------------------------------------------- */

typedef struct bgi_policy_cfg {
  uint8_t chain[BGI_FAIL_CLASSES][BG_POLICY_MAX_CHAIN];
  uint8_t chain_len[BGI_FAIL_CLASSES];
  int64_t retry_count, backoff_base_ms, backoff_max_ms, jitter_pct;
  int64_t breaker_threshold, breaker_cooldown_ms;
  int64_t callback_rate, callback_burst;
  int64_t snapshot_interval_ms, snapshot_max_age_ms, snapshot_chunk_bytes;
  bg_fallback_fn fallback;
  void *userdata;
} bgi_policy_cfg;

struct bg_policy {
  bgi_policy_cfg cfg;
};

/* A filter's copy of a policy: immutable once published, freed by its last reference. */
typedef struct bgi_policy {
  atomic_long refs;
  bgi_policy_cfg cfg;
} bgi_policy;

void bgi_policy_defaults(bgi_policy_cfg *c);

/* BG_FAIL_* of a status; 0 for BG_OK and BG_EINVAL (never degraded). */
int bgi_fail_class(int status);
/* BG_OUTCOME_* of a status (observe.h: the histograms' error.type): BG_OK, BG_ECANCELED, else its
 * failure class (BG_EINVAL among the others). */
int bgi_outcome(int status);

/* Wait before retry number `attempt` (0-based) in ns: min(max, base << attempt), shortened by a
 * random part of jitter_pct percent drawn from r (uniform 64 bits). */
uint64_t bgi_backoff_ns(const bgi_policy_cfg *c, int64_t attempt, uint64_t r);

/* ---- circuit breaker ----------------------------------------------------------------------- */

typedef struct bgi_breaker {
  _Alignas(64) atomic_int state;     /* BG_BREAKER_*; read on every call */
  atomic_int consecutive;            /* connection/timeout failures in a row */
  _Alignas(64) pthread_mutex_t mu;   /* transitions */
  atomic_int_fast64_t threshold;     /* 0: off */
  atomic_int_fast64_t cooldown_ns;
  uint64_t since_ns;                 /* when it opened, or when the probe went through (under mu) */
  uint64_t left_closed_ns;           /* when it last left CLOSED (under mu) */
  int trip_status;                   /* BG_ECONN or BG_ETIMEOUT that opened it (under mu) */
  char trip_msg[BGI_ERRMSG_MAX];     /* its message (under mu) */
  atomic_llong trips, rejected, probes;
} bgi_breaker;

void bgi_breaker_init(bgi_breaker *b);
void bgi_breaker_destroy(bgi_breaker *b);
/* Closed, counts kept, with these settings (threshold 0: off). */
void bgi_breaker_reset(bgi_breaker *b, int64_t threshold, int64_t cooldown_ms);
/* 1: send the call (closed, off); 2: send it, it is the probe after a cooldown (the breaker went
 * HALF_OPEN); 0: rejected, err set to the status that opened it with a message saying so. */
int bgi_breaker_admit(bgi_breaker *b, uint64_t now_ns, bgi_err *err);
/* Outcome of an admitted call: BG_OK or its failure status (msg: its message, may be NULL). Returns
 * the state it moved to (BG_BREAKER_OPEN, _CLOSED), or -1 when it stayed as it was. */
int bgi_breaker_record(bgi_breaker *b, uint64_t now_ns, int status, const char *msg);
/* What an event of a transition tells (observe.h): the status that opened it, its message, the
 * consecutive failures, the cooldown, and how long ago it left CLOSED. */
void bgi_breaker_describe(bgi_breaker *b, uint64_t now_ns, int *status, char *msg, size_t cap, int64_t *consecutive,
                          int64_t *cooldown_ms, int64_t *not_closed_us);
static inline int bgi_breaker_state(bgi_breaker *b) { return atomic_load_explicit(&b->state, memory_order_relaxed); }

/* ---- token bucket --------------------------------------------------------------------------- */

typedef struct bgi_bucket {
  pthread_mutex_t mu;
  int64_t rate;       /* tokens per second; 0: unlimited */
  int64_t burst;      /* capacity in tokens */
  int64_t micro;      /* tokens * 1e6 */
  uint64_t last_ns;
} bgi_bucket;

void bgi_bucket_init(bgi_bucket *b);
void bgi_bucket_destroy(bgi_bucket *b);
/* Full, with these settings. */
void bgi_bucket_reset(bgi_bucket *b, int64_t rate, int64_t burst, uint64_t now_ns);
/* 1 if a token was taken (always, when unlimited), 0 if the bucket is empty. */
int bgi_bucket_take(bgi_bucket *b, uint64_t now_ns);

/* ---- snapshot -------------------------------------------------------------------------------- */

typedef struct bgi_snapshot {
  atomic_long refs;
  uint64_t cfg;          /* packed size << 32 | k (filter.h); a partitioned filter's: of a partition */
  uint64_t taken_ns;     /* when its download started */
  uint32_t parts;        /* a partitioned filter's partitions, one after another; 0: a plain filter */
  size_t pbytes;         /* (size + 7) / 8: one partition's bytes (the whole bitmap's when plain) */
  size_t nbytes;         /* all of them */
  uint8_t bits[];        /* SETBIT order: bit o is byte o / 8, mask 0x80 >> (o % 8) */
} bgi_snapshot;

/* A zeroed snapshot for this config (one reference); NULL when out of memory. */
bgi_snapshot *bgi_snapshot_new(uint64_t cfg, uint64_t taken_ns);
/* The same for a partitioned filter of `parts` partitions of cfg's size (filter/partition.h). */
bgi_snapshot *bgi_snapshot_new_parts(uint64_t cfg, uint32_t parts, uint64_t taken_ns);
void bgi_snapshot_unref(bgi_snapshot *s);
/* Sets an item's bits (tests, and a snapshot being built). */
void bgi_snapshot_add(bgi_snapshot *s, const void *item, size_t len);
/* present[i] for items[0..n): 1 if all the item's bits are set. No allocation. */
void bgi_snapshot_query(const bgi_snapshot *s, const void *const *items, const size_t *lens, size_t n,
                        uint8_t *present);

/* ---- per filter handle ------------------------------------------------------------------------ */

/* The engine's counter slots (filter/stats.c maps the public BG_STAT_* ids onto them). */
enum {
  BGI_ST_ANSWERS = 0,       /* + BG_SOURCE_* (1..5) */
  BGI_ST_QUERY_ERRORS = 6,
  BGI_ST_ADDS_OK,
  BGI_ST_ADD_ERRORS,
  BGI_ST_RETRIES,
  BGI_ST_CB_CALLS,
  BGI_ST_CB_REFUSED,
  BGI_ST_CB_DECLINED,
  BGI_ST_SNAP_OK,
  BGI_ST_SNAP_FAILED,
  BGI_ST_FAIL,              /* + BG_FAIL_* (1..8) */
  BGI_ST_COUNT = BGI_ST_FAIL + BGI_FAIL_CLASSES
};

/*
 * Downloads a consistent snapshot (one generation's bitmap with its config) into *out; stop (may be
 * NULL) aborts it between chunks when set (BG_EABORTED). The filter's is filter/download.c.
 */
typedef int (*bgi_download_fn)(void *ctx, uint64_t deadline_ns, int64_t chunk_bytes, atomic_int *stop,
                               bgi_snapshot **out, bgi_err *err);

typedef struct bgi_guard {
  _Alignas(64) _Atomic(bgi_policy *) policy;   /* NULL: no policy. Dereferenced only under a reference */
  _Alignas(64) atomic_llong stats[BGI_ST_COUNT];
  _Alignas(64) pthread_mutex_t mu;             /* taking a reference on policy / snapshot; publishing */
  bgi_snapshot *snap;                          /* under mu */
  atomic_uint_fast64_t rng;                    /* jitter */
  bgi_breaker breaker;
  bgi_bucket bucket;
  pthread_mutex_t admin_mu;                    /* set_policy, starting/stopping the refresher */
  pthread_mutex_t dl_mu;                       /* one snapshot download at a time */
  bgi_download_fn download;                    /* NULL: no snapshot source (unit tests) */
  void *download_ctx;
  /* background refresher (snapshot.c; started and stopped under admin_mu) */
  bgi_worker rf;
  int64_t rf_interval_ms;
  _Atomic uint64_t fork_gen;                   /* the process's fork generation its locks and refresher
                                                  belong to (bgi_guard_fork_check) */
  /* where its events go (the filter's client's hub, or NULL) and the name they carry */
  bgi_obs *obs;
  const char *name;
  bgi_sampler degraded;
} bgi_guard;

void bgi_guard_init(bgi_guard *g);
/* Stops the refresher, drops the policy and the snapshot. */
void bgi_guard_destroy(bgi_guard *g);

/* Where its events go (observe.h: breaker transitions, sampled degraded answers); before use. */
void bgi_guard_set_observer(bgi_guard *g, bgi_obs *obs, const char *name);

/* Where snapshots come from (before the first bgi_guard_set_policy; fn NULL: nowhere, so no refresher). */
void bgi_guard_set_source(bgi_guard *g, bgi_download_fn fn, void *ctx);
/* Publishes a copy of p (NULL: none); starts / stops the refresher as its interval says. */
int bgi_guard_set_policy(bgi_guard *g, const bg_policy *p, bgi_err *err);
/* A reference on the current policy, or NULL. */
bgi_policy *bgi_guard_policy(bgi_guard *g);
void bgi_policy_unref(bgi_policy *p);

/* Replaces the snapshot (takes over the caller's reference; s may be NULL). */
void bgi_guard_publish_snapshot(bgi_guard *g, bgi_snapshot *s);
/* A reference on the current snapshot, or NULL. */
bgi_snapshot *bgi_guard_snapshot(bgi_guard *g);

/* The value of one of the engine's counters (BGI_ST_*). */
static inline int64_t bgi_guard_load(const bgi_guard *g, int slot) {
  return atomic_load_explicit(&((bgi_guard *)g)->stats[slot], memory_order_relaxed);
}

/*
 * The attempt against Redis for items [from, n) of an operation: a task (common/task.h) at its
 * start, which ends with the attempt's status having set *done to how many of the items from
 * `from` on are finished - answered, or added (n - from on success).
 */
typedef bgi_task *(*bgi_attempt_fn)(void *ctx, uint64_t deadline_ns, size_t from, size_t *done);

typedef struct bgi_op {
  int is_add;
  bgi_attempt_fn attempt;
  void *ctx;
  const void *const *items;    /* queries: what the snapshot and the callback answer */
  const size_t *lens;
  size_t n;
  uint8_t *present;
  bgi_hist *hist;              /* the operation's histograms by BG_OUTCOME_* (NULL: not recorded) */
} bgi_op;

/*
 * One operation under g's policy, as a task: the breaker, the attempt, then the chain of the
 * failure's class (retries wait their backoff as SLEEPs). It ends with the status; source is the
 * answer's BG_SOURCE_* (BG_SOURCE_REDIS for a successful add). After a degraded answer the status
 * is BG_OK, err->status BG_OK and err->msg says what was degraded.
 */
typedef struct bgi_guard_task {
  bgi_task t;
  int source;
  /* what it runs */
  bgi_guard *g;
  bgi_op op;
  uint64_t deadline_ns;
  /* where it is */
  int state, guarded, rejected, st, cls, chain_i;
  int64_t retry;
  size_t from, done;
  bgi_policy *p;
  uint64_t started_ns;   /* for the histogram (0 when op.hist is NULL) */
} bgi_guard_task;

void bgi_guard_task_init(bgi_guard_task *gt, bgi_guard *g, const bgi_op *op, uint64_t deadline_ns);

/* Runs op under g's policy on this thread (bgi_guard_task through bgi_task_run, CALLs via exec). */
int bgi_guard_run(bgi_guard *g, const bgi_op *op, uint64_t deadline_ns, bgi_exec_fn exec, int *source, bgi_err *err);

/* ---- snapshot refresh (snapshot.c) ------------------------------------------------------------- */

/* One refresh now: downloads through the source with the policy's chunk size (one download at a
 * time), publishes the snapshot and counts the outcome; stop (may be NULL) aborts it between chunks. */
int bgi_guard_refresh(bgi_guard *g, uint64_t deadline_ns, atomic_int *stop, bgi_err *err);
/* Starts / stops the background refresher (snapshot.c); under g->admin_mu. */
int bgi_refresher_start(bgi_guard *g, int64_t interval_ms);
void bgi_refresher_stop(bgi_guard *g);

/* fork (common/fork.h): in a child, the first operation of a handle made before the fork makes the
 * guard's locks anew (a download of the parent's refresher may have held one) and starts the
 * refresher again when the parent had one (its thread is not in the child); the snapshot and the
 * breaker's state are kept. One relaxed atomic load per operation. */
void bgi_guard_after_fork(bgi_guard *g);
static inline void bgi_guard_fork_check(bgi_guard *g) {
  if (bgi_forked_since(atomic_load_explicit(&g->fork_gen, memory_order_acquire))) bgi_guard_after_fork(g);
}

#endif
