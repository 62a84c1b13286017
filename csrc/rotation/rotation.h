/* Internal layout of bg_rotation. */
#ifndef BG_INTERNAL_ROTATION_H
#define BG_INTERNAL_ROTATION_H

#include <pthread.h>
#include <stdatomic.h>

#include "bloomguard/lock.h"
#include "bloomguard/rotation.h"
#include "common/options.h"
#include "common/worker.h"
#include "filter/filter.h"
#include "filter/partitioned.h"
#include "hash/fastmod.h"

/* The next generation, built in memory (bitmap.c): a Redisson bitmap, bits in SETBIT order (bit o:
 * byte o/8, mask 0x80 >> o%8), or a RedisBloom filter's first link (a native rotation: bit o: byte
 * o/8, mask 1 << o%8, items counted as the server counts them). */
typedef struct bgi_bitmap {
  uint8_t *bytes;
  size_t len;           /* ceil(size / 8) */
  uint64_t size;
  uint32_t k;
  int rbloom;           /* a RedisBloom link */
  /* the item's k bit indexes, in [0, size) */
  void (*index)(const struct bgi_bitmap *b, const void *item, size_t len, uint64_t *out);
  uint64_t recip;       /* Redisson: floor((2^64 - 1) / size) */
  bgi_fastmod mod;      /* RedisBloom: size's reciprocal */
  uint64_t added;       /* RedisBloom: items that found one of their bits 0 (pending ones not yet) */
  uint32_t region_shift;   /* log2 of a region's bits (tests make regions small) */
  size_t bucketed_min;     /* fewer items than this go by the direct loop (tests lower it) */
  void *scratch;        /* the build's per-thread buffers and pending items, kept across add calls */
} bgi_bitmap;

int bgi_bitmap_init(bgi_bitmap *b, uint64_t size, uint32_t k);
/* A RedisBloom link of bits bits (hash/murmur.h: bgi_rbloom_geometry), k <= BGI_RBLOOM_MAX_K. */
int bgi_bitmap_init_rbloom(bgi_bitmap *b, uint64_t bits, uint32_t k);
void bgi_bitmap_free(bgi_bitmap *b);
/* Hashes the items into the bitmap on up to `threads` threads, their nice value raised by `nice`
 * (0: the caller's thread takes part, at its priority); no allocation per item (scratch buffers
 * sized by a batch, not by n, are kept with the bitmap). All bits are set on return. */
void bgi_bitmap_add(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, int threads, int nice);
/* A link's add: the items in order until the link's count would pass capacity (the item where the
 * server would open a new link); returns how many it took. Their bits may stay pending until
 * bgi_bitmap_flush (or a later add that fills the scratch); b->added counts the set ones. */
size_t bgi_bitmap_add_upto(bgi_bitmap *b, const void *const *items, const size_t *lens, size_t n, int threads,
                           int nice, uint64_t capacity);
/* Sets the pending items' bits (on up to `threads` threads) and counts them into b->added. */
void bgi_bitmap_flush(bgi_bitmap *b, int threads, int nice);
/* Raises the calling thread's nice value by nice (> 0; a build thread of its own, BG_OPT_ROTATE_NICE). */
void bgi_build_thread_nice(int nice);
/* Length Redis would give the string after SETBITs of the same bits: last non-zero byte + 1. */
size_t bgi_bitmap_used_len(const bgi_bitmap *b);

/* The lease keeper (lease.c): renews the lease (and the staging TTLs) every third of the lease. */
typedef struct bgi_lease {
  bgi_worker worker;
  uint64_t until_ns;    /* the keeper's: when the lease runs out unless renewed */
  uint64_t gone_by_ns;  /* the keeper's: the lease has surely run out by then (the last answer + the
                         * lease), what a give-back after a failure tries until (giveback.c) */
  atomic_int lost;      /* the server no longer holds our token */
  char lost_why[256];   /* written before lost is set */
} bgi_lease;

enum { BGI_ROT_ACTIVE = 0, BGI_ROT_COMMITTED, BGI_ROT_ABORTED, BGI_ROT_FAILED };

/* ---- a partitioned filter's rotation (pswap.c; its steps psteps.c; the build pbuild.c) ------- */

/* The next generation's partitions, built in memory: partition i's bits in SETBIT order from
 * bytes + i * pbytes. */
typedef struct bgi_pbuild {
  uint8_t *bytes;
  size_t pbytes;
  bgi_pgen g;
} bgi_pbuild;

int bgi_pbuild_init(bgi_pbuild *b, const bgi_pgen *g);
void bgi_pbuild_free(bgi_pbuild *b);
/* Hashes the items into their partitions on up to `threads` threads (nice as bgi_bitmap_add). */
void bgi_pbuild_add(bgi_pbuild *b, const void *const *items, const size_t *lens, size_t n, int threads, int nice);

/* Where a partitioned rotation is: what its lease keeper renews besides the lease. */
enum {
  BGI_PROT_BUILDING,   /* the live partitions' marks and the staged ones */
  BGI_PROT_PERSISTED,  /* the marks (the staged partitions no longer expire) */
  BGI_PROT_DRAINING    /* nothing more: the marks are being replaced by forwards */
};

typedef struct bgi_prot {
  bgi_pgen live, next;   /* the generation rotated from, and the one built (in place: the same) */
  int in_place;          /* LOCKED: the live generation's partitions rewritten one at a time */
  _Atomic uint32_t done; /* LOCKED: partitions rewritten (their marks gone: not renewed) */
  bgi_pbuild build;
  uint64_t *written;     /* per partition of next: bytes its bitmap must have (the last chunk sent) */
  atomic_int phase;
  pthread_mutex_t mu;    /* a renewal runs under it; the phase changes under it */
  char mark[64];         /* the marks' value: "token:delta TTL" */
  uint64_t (*delta)[2];  /* hashes drained from the live partitions' deltas */
  size_t ndelta, cap;
  char *keybuf;          /* room for 4 partition keys */
  size_t keycap;
} bgi_prot;

/*
 * One strategy (swap.c, locked.c, naive.c); rotation.c keeps the ABI and calls these.
 *  begin   after the handle is set up: take what the strategy needs (lease, lock, or the naive
 *          delete + tryInit); on failure leave nothing on the server (begin's caller frees r);
 *  add     items of the next generation (the items are checked);
 *  commit  make the next generation live; on failure rotation.c calls abort;
 *  abort   undo everything still held on the server (after a failure, or bg_rotation_abort);
 *          err gets the first failure of the undo (a failure's own undo ignores it).
 */
typedef struct bgi_rot_ops {
  const char *name;
  int (*begin)(bg_rotation *r, bgi_err *err);
  int (*add)(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err);
  int (*commit)(bg_rotation *r, bgi_err *err);
  void (*abort)(bg_rotation *r, bgi_err *err);
} bgi_rot_ops;

extern const bgi_rot_ops bgi_rot_swap, bgi_rot_locked, bgi_rot_naive, bgi_rot_pswap, bgi_rot_plocked, bgi_rot_nswap;

/* A native rotation's client-side build of the next generation's first link (nload.c). */
typedef struct bgi_nload {
  int on;               /* the server dumps and loads chunks, and the link is not full yet */
  bgi_bitmap link;      /* the first link (bits in link.bytes, its count in link.added once flushed) */
  uint64_t capacity;
} bgi_nload;

struct bg_rotation {
  bg_filter *f;
  const bgi_rot_ops *ops;
  int state;
  struct bg_options opts;
  char token[33];       /* random: proves this rotator holds the lease */
  uint64_t fork_gen;    /* the process's fork generation it began in (rotation.c: forked_away) */
  /* SWAP: NAME's "next:TOKEN", the upload's target (this rotation's own); the previous bitmap,
   * handed over as its buffer, is the filter's spare_key */
  bgi_key staging_key;
  uint64_t spare_len;   /* bytes of the spare begin moved into the staging key (0: none) */
  bgi_key native_reg;   /* a native filter's: NAME's "stagings" set (nswap.c) */
  bgi_nload nload;      /* a native filter's client-side build (nload.c) */
  /* TTL given to every key the lease guards (staging bitmap, delta) at each write and renewal:
   * max(staging TTL, lease), so none can expire while the lease that guards it is still held
   * (a renewal sets the lease to its full length, never more) */
  int64_t guarded_ttl_ms;
  char owner[128];      /* host:pid, for the "rotation in progress" message */
  uint64_t size;
  uint32_t k;
  int64_t n;
  double fpp_value;
  char fpp[32];         /* Java's Double.toString, as the config hash stores it */
  bgi_bitmap next;      /* SWAP, LOCKED (leased.c) */
  bgi_prot *part;       /* a partitioned filter's rotation (pswap.c); NULL for a plain one */
  bgi_lease lease;      /* SWAP, LOCKED */
  bg_lock *lock;        /* LOCKED: the filter's write lock */
  int lock_held;        /* LOCKED: taken by the commit, on the committing thread */
  int lock_left;        /* LOCKED: its release failed: the give-back takes the handle (giveback.c) */
  uint64_t items;
  uint64_t bytes_uploaded;   /* bytes actually sent (all-zero chunks are skipped) */
  uint64_t upload_pos;       /* how far the upload got, for progress */
  uint64_t upload_total;     /* bytes the upload covers: up to the last non-zero byte; the commit
                               * refuses a staging bitmap shorter than this */
  uint64_t started_ns;
  uint64_t last_progress_ns;
  bg_progress_fn progress;
  void *progress_data;
  bgi_errslot err;
};

/* Server-side steps (csrc/rotation/steps.c); each returns a status with the message in err. */
int bgi_rot_step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err);
int bgi_rot_step_upload(bg_rotation *r, size_t offset, const uint8_t *data, size_t len, bgi_err *err);
/* deadline_ns: when the lease runs out if this renewal does not land (a later answer is of no use) */
int bgi_rot_step_renew(bg_rotation *r, uint64_t deadline_ns, bgi_err *err);
int bgi_rot_step_commit(bg_rotation *r, bgi_err *err);
/* Applies the delta to target (the uploaded or rewritten bitmap) in short lease-checked steps,
 * until what is left is short enough for the final step (rotation/delta.h). */
int bgi_rot_drain_delta(bg_rotation *r, const bgi_key *target, bgi_err *err);
int bgi_rot_step_abort(bg_rotation *r, bgi_err *err);

/* What giving a lease back needs, without the handle (a give-back may outlive it: giveback.c). */
typedef struct bgi_lease_ref {
  bg_client *client;
  int slot;
  const char *keys[4];  /* rotation (the lease), staging, delta, spare */
  size_t lens[4];
  const char *token;    /* 32 hex digits */
  int64_t spare_ttl_ms;
} bgi_lease_ref;

void bgi_rot_lease_ref(const bg_rotation *r, bgi_lease_ref *ref);
/* The abort step for ref's token: the lease released if it is still that token's (*was_ours = 1),
 * the staging key dropped or kept as the spare, the delta dropped; deadline_ns 0: the command timeout. */
int bgi_rot_step_release(const bgi_lease_ref *ref, uint64_t deadline_ns, int *was_ours, bgi_err *err);
/* BG_ESERVER: the bitmap key (staging for SWAP, live for LOCKED) was lost under the rotation. */
int bgi_rot_vanished(bg_rotation *r, const char *what, const char *key, bgi_err *err);

/* Shared by the strategies (progress.c): the progress callback (BG_EABORTED if it says stop),
 * and the check that the rotation is still on and its lease still held. */
int bgi_rot_report(bg_rotation *r, int phase, int force, bgi_err *err);
int bgi_rot_check_active(bg_rotation *r, const char *what, bgi_err *err);

/* What SWAP and LOCKED share (leased.c): begin takes the lease (waiting for another rotation),
 * add builds in memory; settle, after a commit, stops the keeper and gives the handle the new
 * config; abort gives the lease back and drops the staging keys. */
int bgi_leased_begin(bg_rotation *r, bgi_err *err);
/* The lease alone: begin's step until it is not BG_EROTATING, waiting up to BG_OPT_ROTATE_WAIT_MS
 * for another rotation to end (and taking over a lease this process left behind). */
typedef int (*bgi_lease_step_fn)(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap,
                                 bgi_err *err);
int bgi_leased_wait(bg_rotation *r, bgi_lease_step_fn step, bgi_err *err);
int bgi_leased_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err);
void bgi_leased_settle(bg_rotation *r);
void bgi_leased_abort(bg_rotation *r, bgi_err *err);

int bgi_lease_start(bg_rotation *r);
/* A native rotation's bulk load (nload.c): begin turns it on where the server has BF.SCANDUMP /
 * BF.LOADCHUNK; add hashes items into it and returns how many it took (fewer than n: the link is
 * at its capacity, the rest go by BF.INSERT after an upload); upload sends what was built into the
 * staging key (nothing when off) and turns it off; free drops it. */
int bgi_nload_begin(bg_rotation *r, bgi_err *err);
size_t bgi_nload_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n);
int bgi_nload_upload(bg_rotation *r, bgi_err *err);
void bgi_nload_free(bg_rotation *r);
/* Test only: 1 turns the bulk load off (the BF.INSERT fallback on a server that could dump). */
void bgi_nload_fault_no_dump(int on);
/* A partitioned rotation's state (pswap.c): G' over `parts` partitions (0: as many as live has),
 * for the rotation's n and fpp; the failure's message says what to change. */
int bgi_prot_new(bg_rotation *r, const bgi_pgen *live, int64_t parts, bgi_err *err);
/* LOCKED: BG_OK when the rotation's geometry is the live one's (it rewrites in place), else the
 * BG_EBADPARAMS saying what to keep. */
int bgi_plocked_check(bg_rotation *r, bgi_err *err);
/* What swap and locked add: the items hashed into the build. */
int bgi_pswap_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err);
void bgi_prot_free(bg_rotation *r);
/* A partitioned rotation's part of a renewal (psteps.c): its phase's keys. */
int bgi_prot_renew(bg_rotation *r, uint64_t deadline_ns, bgi_err *err);

/* A partitioned rotation's server steps (psteps.c); each a status with its message in err. */
int bgi_prot_step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err);
int bgi_prot_step_mark(bg_rotation *r, uint32_t part, bgi_err *err);
int bgi_prot_step_stage(bg_rotation *r, uint32_t part, bgi_err *err);
int bgi_prot_step_write(bg_rotation *r, uint32_t part, size_t offset, const uint8_t *data, size_t len, bgi_err *err);
int bgi_prot_step_persist(bg_rotation *r, uint32_t part, bgi_err *err);
int bgi_prot_step_drain(bg_rotation *r, uint32_t part, bgi_err *err);
int bgi_prot_step_flip(bg_rotation *r, int64_t *config_ttl_ms, bgi_err *err);
int bgi_prot_step_unmark(bg_rotation *r, uint32_t part, bgi_err *err);
/* LOCKED: a live partition's rewrite begins (*old_len: its bitmap's bytes), and ends once the
 * adds its mark recorded are set (the loop of take and finish steps). Then the config's record. */
int bgi_prot_step_rewrite_start(bg_rotation *r, uint32_t part, uint64_t *old_len, bgi_err *err);
int bgi_prot_step_rewrite_finish(bg_rotation *r, uint32_t part, bgi_err *err);
int bgi_prot_step_rewrite_done(bg_rotation *r, bgi_err *err);
/* The central config's part of an abort: the lease given back, the built generation's record
 * dropped - unless that generation is live (*live 1: a flip whose answer was lost; nothing done). */
int bgi_prot_step_release(bg_rotation *r, int *live, bgi_err *err);
/* Generation g's keys deleted (a sweep), then its record and its place in the list to delete. */
int bgi_prot_delete_gen(bg_filter *f, const bgi_pgen *g, bgi_err *err);
/* Runs a sweep of every partition of g (filter/partitioned.h) on this thread. */
int bgi_prot_sweep(bg_filter *f, const bgi_pgen *g, int op, int64_t ttl_ms, bgi_err *err);
/* Tests only: the rotator process kills itself (SIGKILL) at point (BGI_PROT_DIE_*; 0: never). */
enum { BGI_PROT_DIE_BEGUN = 1, BGI_PROT_DIE_UPLOADING, BGI_PROT_DIE_FORWARDING, BGI_PROT_DIE_FLIPPED,
       BGI_PROT_DIE_REWRITING };
void bgi_prot_fault_die_at(int point);
void bgi_prot_maybe_die(int point);
/* Tests only: a swap's flip runs and its answer is lost (BG_ECONN); _UNCHECKED, the negative
 * control, also keeps commit and abort from asking the config whether it ran. 0: off. */
enum { BGI_PROT_FLIP_LOST = 1, BGI_PROT_FLIP_LOST_UNCHECKED };
void bgi_prot_fault_lose_flip(int mode);
void bgi_lease_stop(bg_rotation *r);

/* What an abort could not give back (giveback.c): the lease (lease_left: its abort step failed)
 * and, if r->lock_left, the write lock, whose handle it takes (r->lock becomes NULL). A background
 * thread tries again until each is given back or would have run out anyway. BG_OK, or BG_ENOMEM
 * (then they just run out). */
int bgi_giveback_start(bg_rotation *r, int lease_left);
/* Begin found the lease held: if its token is one this process left behind, releases it. 1: it was
 * (begin again at once), 0: it is another's, or a status (the round trip failed; err says why). */
int bgi_giveback_take_over(bg_rotation *r, bgi_err *err);
/* Tests only: switches the give-back's two halves off (BGI_FAULT_* bits; 0: both on). */
enum { BGI_FAULT_NO_GIVEBACK = 1, BGI_FAULT_NO_TAKEOVER = 2 };
void bgi_rotation_fault_giveback(int mask);


#endif
