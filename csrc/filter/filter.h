/* Internal layout of bg_filter and the helpers its operations share. */
#ifndef BG_INTERNAL_FILTER_H
#define BG_INTERNAL_FILTER_H

#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/filter.h"
#include "common/call.h"
#include "client/client.h"
#include "common/task.h"
#include "common/wait.h"
#include "filter/native.h"
#include "filter/partition.h"
#include "filter/stats.h"
#include "hash/hash.h"
#include "policy/guard.h"
#include "redis/layout.h"
#include "redis/names.h"

/* The keys of a filter (docs/layout.md): all suffix(name, ...) but the bitmap, at the name itself. */
struct bg_filter {
  /* the caller's reference (bg_filter_close drops it) + one per submitted operation in flight, so a
   * filter closed with operations on a queue is freed by the last of them to complete */
  atomic_long refs;
  bg_client *client;
  bgi_key name;          /* the filter's name, and its bitmap's key */
  bgi_key config_key;
  /* keys of a rotation in progress (see rotation.h): lease hash, delta list (the staging bitmap is
   * the rotation's own, named after its token) */
  bgi_key rotation_key, delta_key;
  /* the filter's write lock (bg_lock_open_filter): queries wait while it is held in WRITE mode */
  bgi_key lock_key;
  /* the previous bitmap a SWAP commit keeps for the next upload (rotation/steps.c); delete drops it */
  bgi_key spare_key;
  int slot;              /* the cluster hash slot every key of the filter lives in */
  /* the config this handle last saw (bgi_cfg_pack, hash/hash.h): readers need no lock */
  atomic_uint_fast64_t cfg;
  /* names this handle in the connections' tracking verdicts (redis/tracking.h); never reused */
  uint64_t id;
  /* the next generation's config while a SWAP rotation runs (adds record into its delta), else 0 */
  atomic_uint_fast64_t next_cfg;
  bgi_errslot err;
  /* the degrade policy engine of this handle: breaker, bucket, its counters, snapshot (policy/guard.h) */
  bgi_guard guard;
  /* the handle's own counters, not the policy's (filter/stats.h) */
  bgi_filter_stats stats;
  /* BGI_KIND_* (filter/partitioned.h): which steps its operations take */
  atomic_int kind;
  /* opened with bg_filter_open_native: every operation takes its native step (filter/native.h) */
  int native;
  /* a partitioned filter's central config as last read (under pmu) */
  pthread_mutex_t pmu;
  bgi_pconf pconf;
  /* the task memory of partitioned operations that ended, for the next ones (guarded.c) */
  pthread_mutex_t spare_mu;
  struct bgi_pheap *spare;
  int nspare;
  /* the process's fork generation its locks belong to (guarded.c: a child's first operation
   * makes them anew, common/fork.h) */
  _Atomic uint64_t fork_gen;
};

void bgi_filter_ref(bg_filter *f);
void bgi_filter_unref(bg_filter *f);

/* Items hashed and sent per round trip, and per atomic server step within it: bounds client
 * memory for huge batches and keeps each server-side step short (other clients wait for it). */
#define BGI_WINDOW_ITEMS 16384
#define BGI_CHUNK_ITEMS 1024

/* Strict parses of config fields (plain decimal, no sign, no leading zeros): 0 ok, -1 bad. */
int bgi_parse_u64(const char *s, size_t len, uint64_t *out);
/* The same with an optional '-'. */
int bgi_parse_i64(const char *s, size_t len, int64_t *out);
/*
 * Turns the [size, hashIterations] pair of an HMGET reply into a packed config.
 * BG_ENOTINIT if either is missing, BG_ECORRUPT if unparsable or out of range.
 */
int bgi_cfg_from_pair(const bg_filter *f, const bgi_reply *size, const bgi_reply *k, uint64_t *cfg,
                      bgi_err *err);

/*
 * What a reply taught about the config: f->cfg becomes `seen` only if it still holds `used`, the
 * config the request was built with. Many requests are in flight on one handle (the queue, the
 * multiplexed connections); a reply to an older one would otherwise take the handle back to an
 * older config, and the newer requests would keep meeting a change (BG_ECONFIG after the retries).
 * 1 if it was replaced.
 */
static inline int bgi_filter_cfg_learnt(atomic_uint_fast64_t *slot, uint64_t used, uint64_t seen) {
  uint_fast64_t expected = used;
  return atomic_compare_exchange_strong(slot, &expected, seen);
}

/* The request that reads the config (HMGET) into f->cfg, as a task's CALL. */
void bgi_filter_config_req(bgi_req *r, bg_filter *f, uint64_t deadline_ns);

/* Appends "HMGET config size hashIterations". */
void bgi_append_hmget_config(bgi_buf *b, const bg_filter *f);
/* Room needed for bgi_append_hmget_config. */
size_t bgi_hmget_config_bound(const bg_filter *f);

/*
 * Hashes items[from..to) into c->idx: k indexes per item for cfg, then (when next_cfg is not 0)
 * next_k indexes per item for next_cfg - each item hashed once for both.
 */
int bgi_compute_indexes(bgi_conn *c, const void *const *items, const size_t *lens, size_t from, size_t to,
                        uint64_t cfg, uint64_t next_cfg, bgi_err *err);

/* Checks the arguments every batch call shares. */
int bgi_check_items(const char *fn, const void *const *items, const size_t *lens, size_t n, const void *out,
                    bgi_err *err);

/* One window of a query (query.c): its build and parse context. */
typedef struct bgi_query {
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  uint64_t cfg;        /* the config the indexes were computed with */
  uint64_t seen_cfg;   /* the server's config when it differed, else 0 */
  uint8_t *present;
  int locked;          /* the write lock was held */
  int interrupted;     /* an in-place rebuild's mark without its lock: it died half-way */
  int bits_only;       /* sent BITFIELD_RO alone, on the connection's verdict */
  int tracked;         /* sent the tracked block (CLIENT CACHING YES, PTTL) */
  int plain;           /* the negative control: sent the block without MULTI / EXEC (query.c) */
  int stale;           /* bits_only, and a push arrived before the answer */
  uint64_t epoch;      /* the connection's push count when bits_only was sent */
} bgi_query;

/* The wait of one query for the filter's write lock to go. */
typedef struct bgi_lock_wait {
  int64_t wait_ms;
  uint64_t deadline_ns;  /* the call's, 0 for none */
  uint64_t until_ns;     /* set at the first sight of the lock */
  uint64_t nap_ns;
  uint64_t look_ns;      /* how long the last look at the lock took (a round trip) */
} bgi_lock_wait;

/* The end of the next nap while what `held` says holds the filter (polled, the first naps short),
 * or BG_ELOCKED once the call may wait no longer (query.c; a partitioned filter's pop.c). */
int bgi_lock_nap(const bg_filter *f, bgi_lock_wait *w, const char *held, uint64_t *until, bgi_err *err);

/*
 * Queries items[0..n) against Redis, without the policy (filter/guarded.c wraps it), as a task
 * (common/task.h): window by window, a config change recomputed and asked again, a write lock
 * waited out in naps. *done: how many leading items are answered (whole windows; n at the end).
 */
typedef struct bgi_contains_task {
  bgi_task t;
  bgi_query q;
  bgi_req req;
  bgi_lock_wait w;
  size_t n, *done;
  uint64_t deadline_ns, look_started;
  int64_t retries, attempt;
  int state;
} bgi_contains_task;

void bgi_contains_task_init(bgi_contains_task *ct, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                            const size_t *lens, size_t n, uint8_t *present, size_t *done);

/* One window of an add (add.c): its build and parse context. */
typedef struct bgi_adder {
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  uint64_t cfg;
  uint64_t next_cfg;   /* a rotation's next config (0: none known) */
  uint64_t seen_cfg;   /* the server's config when it differed, else 0 */
  uint64_t seen_next;  /* the rotation's next config when it differed, else 0 */
  uint64_t seen_next_after_cfg;  /* with seen_cfg: the rotation running then (0: none) */
  int rotation_seen;   /* some step found a rotation running */
  bgi_script_run run;
  size_t added;
} bgi_adder;

/* Adds items[0..n) without the policy, as a task: *added counts the items that were new, *done
 * the leading items added (whole windows; n at the end). */
typedef struct bgi_add_task {
  bgi_task t;
  bgi_adder a;
  bgi_req req;
  size_t n, *added, *done;
  uint64_t deadline_ns;
  int64_t retries, attempt, rot_attempt;
  int state;
} bgi_add_task;

void bgi_add_task_init(bgi_add_task *at, bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                       size_t n, size_t *added, size_t *done);
/* The add task run on this thread (for the library's own blocking callers: the naive rotation). */
int bgi_filter_add_raw(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                       size_t *added, size_t *done, bgi_err *err);

/*
 * A query or add through the handle's policy (filter/guarded.c), as a task: the policy engine's
 * task (policy/guard.h) with the raw task above as its attempt. gt.source: the answer's BG_SOURCE_*.
 */
typedef struct bgi_pop_task bgi_pop_task;

/*
 * One attempt of a query or add, as a task, on whichever layout the filter has (guarded.c): the
 * one the handle last saw (plain until it saw another); a BG_ENOTINIT there reads the config hash
 * once (HGETALL: its kind) and runs the other layout's task when the name holds that one.
 */
typedef struct bgi_kinded_task {
  bgi_task t;
  int state, kind, probed;
  bgi_req req;
  union {
    bgi_contains_task contains;
    bgi_add_task add;
    bgi_native_task native;
  } u;
  bgi_pop_task *pop;             /* a partitioned filter's (partitioned.h), on the heap: it is big */
  struct bgi_pconf_load *ld;     /* the probe's, with pop's memory */
} bgi_kinded_task;

typedef struct bgi_guarded_op {
  bgi_guard_task gt;
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t n;
  uint8_t *present;
  int is_add;
  size_t added, attempt_added;   /* adds: the new items of the attempts before the last, and of the last */
  /* the attempt's arguments */
  uint64_t deadline_ns;
  size_t from, *done;
  bgi_kinded_task kt;
} bgi_guarded_op;

void bgi_guarded_op_init(bgi_guarded_op *op, int is_add, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                         const size_t *lens, size_t n, uint8_t *present);
/* How many items an add found new (after it ended). */
static inline size_t bgi_guarded_op_added(const bgi_guarded_op *op) { return op->added + op->attempt_added; }
/* Frees the task memory the handle kept (its close). */
void bgi_guarded_free_spares(bg_filter *f);
/* Test only (the negative control of "a warm query allocates nothing"): 1 keeps no task memory. */
void bgi_guarded_fault_no_spares(int on);

/* The op run on this thread. *source: the answer's BG_SOURCE_*. */
int bgi_filter_guarded_contains(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *present, int *source, bgi_err *err);
int bgi_filter_guarded_add(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                           size_t n, size_t *added, bgi_err *err);
/* Ends a query or add: like bgi_call_finish, and a degraded answer's cause goes to the call's
 * message (or the handle's, without a call). */
int bgi_filter_guarded_finish(bg_filter *f, bg_call *call, const bgi_err *err, int source);

/* The whole-filter operations (admin.c): their build and parse contexts. */
typedef struct bgi_initer {
  bg_filter *f;
  uint64_t size;
  uint32_t k;
  int64_t n;
  char fpp[32];
  bgi_script_run run;
  int created;
  int64_t parts;       /* a partitioned filter's P (0: Redisson's layout) */
  double fpp_value;
} bgi_initer;

typedef struct bgi_counter {
  bg_filter *f;
  int64_t count;
} bgi_counter;

typedef struct bgi_infoer {
  bg_filter *f;
  uint64_t cfg;        /* a partitioned filter's: its partitions' size and k */
  uint64_t size;       /* bits in all (a partitioned filter's total) */
  uint32_t parts;      /* 0: Redisson's layout */
  int64_t n;
  double fpp;
} bgi_infoer;

typedef struct bgi_keyop {
  bg_filter *f;
  const char *cmd;     /* DEL, PEXPIRE or PERSIST */
  int64_t ttl_ms;
  int result;
} bgi_keyop;

#define BGI_ADMIN_INIT 1
#define BGI_ADMIN_COUNT 2
#define BGI_ADMIN_INFO 3
#define BGI_ADMIN_DELETE 4
#define BGI_ADMIN_EXPIRE 5
#define BGI_ADMIN_PERSIST 6

/*
 * One whole-filter operation as a task: its request on Redisson's layout; on a partitioned filter
 * (found by the config hash's kind: delete, expire and persist read it first, count when its
 * request found no plain config) the same over every partition (filter/psweep.c), then on the
 * central config.
 */
typedef struct bgi_admin_heap bgi_admin_heap;
typedef struct bgi_admin {
  bgi_task t;
  bg_filter *f;
  int kind, state, probed, swept_applied;
  uint64_t started_ns;   /* for the histogram */
  bgi_req req;
  bgi_admin_heap *heap;  /* a partitioned filter's steps (admin.c) */
  union {
    bgi_initer init;
    bgi_counter count;
    bgi_infoer info;
    bgi_keyop key;
    bgi_nadmin native;   /* every kind, on a native filter */
  } u;
} bgi_admin;

/* Checks the arguments (init: expected insertions = arg and fpp; expire: the ttl in ms = arg) and
 * prepares the task: BG_OK, or BG_EBADPARAMS / BG_EINVAL with the message. */
int bgi_admin_prepare(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int kind, int64_t arg, double fpp,
                      bgi_err *err);
/* init of a partitioned filter of P partitions (P 0: bgi_admin_prepare's init, Redisson's layout):
 * BG_EINVAL for P out of 1..16384, BG_EBADPARAMS for n, p or partitions that would be too big. */
int bgi_admin_prepare_init(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int64_t n, double fpp, int64_t parts,
                           bgi_err *err);
/* init of a native filter (expansion: -1 the server's default, 0 NONSCALING, else EXPANSION n). */
int bgi_admin_prepare_native_init(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int64_t capacity, double error_rate,
                                  int32_t expansion, bgi_err *err);
/* Runs it on this thread. */
int bgi_admin_run(bgi_admin *a, bgi_err *err);
/* After it ended: init 1 if it wrote the config, count the estimate, delete / expire / persist
 * 1 if it applied; info 0 (its values are in u.info). */
int64_t bgi_admin_value(const bgi_admin *a);

/* Downloads a consistent snapshot of f (filter/download.c): the engine's bgi_download_fn, ctx = f. */
int bgi_filter_download(void *f, uint64_t deadline_ns, int64_t chunk_bytes, atomic_int *stop, bgi_snapshot **out,
                        bgi_err *err);

/* Redisson's tryInit (admin.c) and delete (bitmap, config, a swap's spare), without the ABI's call
 * handling: for callers inside the library (the naive rotation). created / deleted may be NULL. */
/* The same over `parts` partitions (0: a plain filter, Redisson's layout). */
int bgi_filter_init_parts(bg_filter *f, uint64_t deadline_ns, int64_t expected_insertions, double fpp, int64_t parts,
                          int *created, bgi_err *err);
int bgi_filter_init(bg_filter *f, uint64_t deadline_ns, int64_t expected_insertions, double fpp, int *created,
                    bgi_err *err);
int bgi_filter_delete(bg_filter *f, uint64_t deadline_ns, int *deleted, bgi_err *err);

/* Ends a public filter operation (see bgi_call_finish). */
static inline int bgi_filter_finish(bg_filter *f, bg_call *call, const bgi_err *err) {
  return bgi_call_finish(call, &f->err, err, BG_SOURCE_REDIS);
}

#endif
