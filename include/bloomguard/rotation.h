/*
 * bloomguard/rotation.h - rebuilding a live filter while queries and adds keep running.
 *
 *   bg_rotation *r;
 *   bg_rotation_begin(&r, filter, expected, fpp, BG_ROTATE_SWAP, opts);   // takes the lease
 *   ... read the source of truth (after begin!) and bg_rotation_add_many(r, ...) ...
 *   bg_rotation_commit(r);                                                // one atomic swap
 *   bg_rotation_free(r);
 *
 * BG_ROTATE_SWAP (the default) builds the next generation in memory on this client (hashing on
 * all cores but one by default), uploads it in bounded chunks to staging keys that carry a TTL, and swaps bitmap and
 * config in one atomic server-side step. Until then the live keys are never touched:
 *  - readers see the old generation, then the new one; never a missing or half-built filter;
 *  - items added through bloomguard (any process) after begin() are recorded for the next
 *    generation too (a list of bit offsets), applied to the uploaded bitmap in short steps of
 *    8192 offsets and, for the last few, inside the atomic swap: none is lost, and many adds
 *    do not make the swap long;
 *  - a second rotation of the same filter gets BG_EROTATING (or waits, BG_OPT_ROTATE_WAIT_MS);
 *  - the rotator holds a lease renewed by a background thread; if it dies, the lease expires and
 *    the staging keys expire on their own TTL, the live filter serving throughout;
 *  - a rotation that fails, is aborted or freed gives its lease (and LOCKED's write lock) back; if
 *    the server cannot be reached just then, a background thread tries again until it succeeds or
 *    the lease would have run out anyway, and meanwhile the next begin of the same process takes
 *    that lease over at once (another process waits for it, as for a rotator that died);
 *  - no key the rotation depends on (staging bitmap, delta) expires while the lease is held: each
 *    gets max(staging TTL, lease) at every write and renewal, so a rotator stalled past the
 *    staging TTL but not past its lease still commits every item;
 *  - the commit never installs a generation it did not fully upload: the staging bitmap exists
 *    from begin on and every chunk, drain step and the commit check it atomically (the commit
 *    also its length against the bytes uploaded). If it was lost anyway (evicted, deleted, or
 *    expired after a stall past the lease), the commit fails with BG_ESERVER, the live filter
 *    untouched, and the rotation's keys are removed.
 * Readers must read the source of truth after begin() returns, so that every item added before
 * that point is in what they feed to the rotation. Rotating a filter that does not exist yet
 * creates it: the commit writes its config (so the first build and every rebuild are one code path).
 *
 * A partitioned filter (filter.h, bg_filter_init_partitioned) rotates with SWAP (and NAIVE): the
 * next generation, with BG_OPT_ROTATE_PARTITIONS partitions (default: as many as now), is built
 * in memory, staged beside the live one partition by partition, and made live by one step on the
 * config; the guarantees above hold, adds being recorded per partition (their hashes) until the
 * commit drains each partition, and then sent to both generations by the adder (docs/layout.md,
 * "Rotating a partitioned filter"). A rotator that dies before that step leaves the live
 * generation whole; what it staged expires, or the next rotation deletes it. LOCKED rewrites a
 * partitioned filter's live partitions in place, one at a time (queries of the one being
 * rewritten wait as for the write lock), and keeps their geometry: (n, fpp) giving other
 * partitions is BG_EBADPARAMS.
 *
 * BG_ROTATE_LOCKED rebuilds in place, with no second copy of the bitmap in Redis: begin and add
 * are SWAP's (the lease, adds recorded for the next generation, the build in memory); the commit
 * takes the filter's write lock (bg_lock_open_filter, lock.h; waiting up to the lease for other
 * holders, e.g. a Redisson RLock on "{NAME}:lock"), marks the config hash as being rebuilt,
 * rewrites the live bitmap in chunks, then in one atomic step merges the adds, writes the new
 * config and removes the mark, and releases the lock:
 *  - bloomguard readers (any process) see the write lock in the same step that reads the bits:
 *    they wait for it up to BG_OPT_WRITE_LOCK_WAIT_MS (options.h), then fail with BG_ELOCKED, which the
 *    policy (policy.h, class BG_FAIL_LOCKED) answers - never from a half-written bitmap;
 *  - adds are never blocked, and none is lost (as SWAP). While the rewrite runs, an add's "newly
 *    set" answer (bg_filter_add's *added) may say 1 for an item that was present: a chunk already
 *    rewritten holds the new generation's bits, which get the items added since begin() only from
 *    the recorded adds at the final step, so re-adding one of those sets its bits again. Whether
 *    the item is present is never affected - only that count;
 *  - a rotator that dies after the rewrite began leaves the mark: once its lock's lease runs out,
 *    readers fail at once with BG_ELOCKED ("stopped half-way"; the policy answers) until the next
 *    rotation of any strategy, which may begin as soon as the rotation lease has run out;
 *  - from the first written chunk on, the progress callback's stop request is ignored: stopping
 *    would leave the filter incomplete;
 *  - Redisson readers know nothing of the lock. With unchanged (n, p) the bytes are overwritten in
 *    place, so items present in both generations keep their bits throughout and they see those;
 *    items only in the new generation (and adds made during the rewrite) appear when it ends.
 *    With other parameters the old bitmap is dropped first and they may miss items until the
 *    commit. SWAP does not save them either when (n, p) change (a long-lived RBloomFilter keeps
 *    its cached size and k; even a new object per call may read the config before the swap and
 *    the bits after it): keep (n, p) while Redisson readers share the filter (docs/rotation.md).
 *  - a bitmap that vanishes under the rewrite (the filter's own TTL, eviction, a delete) makes the
 *    commit fail with BG_ESERVER; the mark stays (queries: BG_ELOCKED) until the next rotation.
 * The write window (readers waiting) lasts the rewrite of the bitmap in BG_OPT_ROTATE_CHUNK_BYTES
 * chunks, the drain of the delta and the final step; in the demo (1M items, 1.2 MB) readers'
 * p99 rose to 1-4 ms during a rebuild, none waited out the default 100 ms.
 *
 * BG_ROTATE_NAIVE is the rebuild that fails in production, kept on purpose to reproduce the
 * failure in tests and demos: delete, tryInit, then add in batches straight into the live keys.
 *
 * Staging keys, in the filter's cluster slot and named like its config key: NAME's "rotation"
 * (the lease), "next:TOKEN" (this rotation's upload), "delta" and "spare"; docs/layout.md says
 * what each holds and who reads it. All carry a TTL; abort removes "next:TOKEN" and "delta" at
 * once (the former becomes the spare), the others expire.
 *
 * Thread safety: a bg_rotation is driven by one thread at a time (add_many hashes on several
 * threads internally); its filter and client stay usable by other threads meanwhile.
 *
 * fork(): a rotation begun before a fork is the parent's (its lease, staging keys, lock). In the
 * child, add, commit and abort fail with BG_EINVAL and bg_rotation_free only frees memory.
 */
#ifndef BLOOMGUARD_ROTATION_H
#define BLOOMGUARD_ROTATION_H

#include "call.h"
#include "common.h"
#include "filter.h"
#include "options.h"

BG_BEGIN_DECLS

typedef struct bg_rotation bg_rotation;

/* Strategies. Values are pinned. */
#define BG_ROTATE_SWAP    1
#define BG_ROTATE_NAIVE   2
#define BG_ROTATE_LOCKED  3   /* in place, under the filter's write lock */

/* Phases reported to the progress callback. */
#define BG_PHASE_BUILDING    1  /* items are being hashed into the next generation */
#define BG_PHASE_UPLOADING   2  /* the next generation is being uploaded to the staging keys */
#define BG_PHASE_COMMITTING  3  /* the atomic swap */
#define BG_PHASE_DONE        4

/*
 * Progress: called on the thread that called bg_rotation_add_many / bg_rotation_commit: while
 * building at most every 50 ms, after every uploaded chunk, and at each phase change. items: items
 * added so far; bytes_done / bytes_total: upload progress (the upload covers the bitmap up to its
 * last non-zero byte, or the whole spare it overwrites if that is longer; 0 / 0 before it starts). Return non-zero to abort the rotation: the call
 * then fails with BG_EABORTED and the rotation is aborted (at BG_PHASE_DONE the swap is already
 * done and the return value is ignored). Never called after bg_rotation_free.
 */
typedef int (*bg_progress_fn)(void *userdata, int phase, uint64_t items, uint64_t bytes_done,
                              uint64_t bytes_total);

/*
 * Starts a rotation of f to (expected_insertions, fpp) - the same or other parameters.
 * opts may be NULL; these options apply (an explicitly set option of another consumer is refused
 * with BG_ENOTSUP, options.h):
 *   BG_OPT_ROTATE_LEASE_MS (default 30000), BG_OPT_ROTATE_WAIT_MS (default 0: fail at once with
 *   BG_EROTATING), BG_OPT_ROTATE_STAGING_TTL_MS (default 300000), BG_OPT_ROTATE_THREADS (threads
 *   hashing the build; default: the online CPUs - 1, at least 1, so a CPU stays free for the
 *   process's queries and a co-located redis-server; set it to the online CPUs for the fastest
 *   build on an otherwise idle machine), BG_OPT_ROTATE_NICE (default 10: large builds hash on
 *   threads of their own whose nice value is raised by this much, so that on a busy machine the
 *   rebuild yields the CPU to the queries rather than the other way round - it costs nothing
 *   on an idle one; 0: the calling thread takes part, at its own priority),
 *   BG_OPT_ROTATE_CHUNK_BYTES (default 1 MiB), BG_OPT_ROTATE_BATCH (NAIVE's items per round
 *   trip, default 1000).
 * On failure *out is NULL and the message is on the filter handle.
 */
BG_API int  bg_rotation_begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp,
                              int strategy, const bg_options *opts);
/* The same with a bg_call (may be NULL): a bg_call_cancel ends the wait for another rotation
 * (BG_OPT_ROTATE_WAIT_MS) within about 50 ms with BG_ECANCELED, no lease taken. The failure's
 * message is on the call and on the filter. The call's timeout does not apply (the wait is
 * BG_OPT_ROTATE_WAIT_MS). */
BG_API int  bg_rotation_begin_ex(bg_rotation **out, bg_call *call, bg_filter *f, int64_t expected_insertions,
                                 double fpp, int strategy, const bg_options *opts);
BG_API int  bg_rotation_set_progress(bg_rotation *r, bg_progress_fn fn, void *userdata);

BG_API int  bg_rotation_add(bg_rotation *r, const void *item, size_t len);
BG_API int  bg_rotation_add_many(bg_rotation *r, const void *const *items, const size_t *lens, size_t n);
/* The same with a bg_call (may be NULL): a cancel reaches NAIVE's add round trips' waits; the
 * failure's message is on the call and on the rotation. The call's timeout does not apply. */
BG_API int  bg_rotation_add_ex(bg_rotation *r, bg_call *call, const void *item, size_t len);
BG_API int  bg_rotation_add_many_ex(bg_rotation *r, bg_call *call, const void *const *items, const size_t *lens,
                                    size_t n);

/* Uploads and swaps (SWAP), rewrites in place under the write lock (LOCKED) or finishes (NAIVE).
 * After it (success or not) the rotation is over. */
BG_API int  bg_rotation_commit(bg_rotation *r);
/* The same with a bg_call (may be NULL): a cancel ends a LOCKED commit's wait for the write lock
 * (BG_ECANCELED; the rotation is then aborted, its lease released, the live filter unchanged). */
BG_API int  bg_rotation_commit_ex(bg_rotation *r, bg_call *call);
/* Gives up: the staging keys are removed at once and the lease released (if the server cannot be
 * reached, the error says so and a background thread keeps trying: see the top). Idempotent. */
BG_API int  bg_rotation_abort(bg_rotation *r);
BG_API int  bg_rotation_abort_ex(bg_rotation *r, bg_call *call);
/* Aborts a rotation neither committed nor aborted, then frees. Accepts NULL. */
BG_API void bg_rotation_free(bg_rotation *r);

/* Message of the most recent failure ("" if none); a per-thread copy, as bg_filter_errmsg. */
BG_API const char *bg_rotation_errmsg(const bg_rotation *r);
/* Figures of the rotation so far (bytes_uploaded: bytes actually sent; all-zero chunks past the
 * spare are skipped); each out-parameter may be NULL. */
BG_API int  bg_rotation_stats(const bg_rotation *r, uint64_t *items, uint64_t *bytes_uploaded,
                              uint64_t *elapsed_us);

BG_END_DECLS

#endif
