/*
 * bloomguard/lock.h - a distributed lock in Redis: exclusive (wire-compatible with Redisson's
 * RLock) and reader/writer, with a fencing token, a renewed lease and a wait timeout.
 *
 *   bg_lock *l;
 *   bg_lock_open(&l, client, "products", NULL);            // key "products:lock"
 *   uint64_t token;
 *   if (bg_lock_acquire(l, BG_LOCK_EXCLUSIVE, 5000, &token) == BG_OK) {
 *     ... critical section; pass `token` to the storage you write (fencing) ...
 *     bg_lock_release(l);
 *   }                                                      // BG_ELOCKED: waited 5 s; message names the holder
 *   bg_lock_close(l);
 *
 * Who holds it. A hold belongs to an owner (bg_lock_owner, see "lock owners" below) on one handle,
 * as an RLock belongs to a Java thread of one Redisson client; the calls without an owner use
 * the calling thread's default owner, so for them a hold belongs to the calling thread. Its
 * holder id is "<UUID>:<owner number>" (Redisson's "<UUID>:<thread id>" layout), the UUID made
 * at random for each handle (Java's UUID text form). Owners sharing a handle exclude each other;
 * an owner may acquire again what it holds (reentrant: a count, as in RLock) and releases as
 * often as it acquired; only its owner can release a hold (the server-side step checks the
 * holder field), and two handles are two holders even for one owner.
 *
 * Exclusive mode on the wire (Redisson 3.45.1's RedissonLock, its Lua scripts read from the jar):
 *  - key NAME + ":lock" (Redisson: getLock(NAME + ":lock")), a hash: field = holder id, value =
 *    reentrancy count; PEXPIRE = the lease (BG_OPT_LOCK_LEASE_MS, default 30000 like Redisson's
 *    lockWatchdogTimeout), renewed every third of it while held (Redisson's watchdog does the same);
 *  - the final release deletes the key and PUBLISHes "0" (LockPubSub.UNLOCK_MESSAGE) on
 *    "redisson_lock__channel:{NAME:lock}" (Redisson's prefixName rule: the lock key inside braces
 *    unless it already has a '{'), which wakes Redisson's waiters at once;
 *  - so a Java service holding redisson.getLock(NAME + ":lock") and a bloomguard handle exclude
 *    each other, and each wakes when the other releases.
 *
 * Reader/writer modes (bloomguard's own layout on the same key, not Redisson's RReadWriteLock):
 *  - BG_LOCK_WRITE is an exclusive hold, stored like BG_LOCK_EXCLUSIVE plus the field mode =
 *    "write" (Redisson's scripts ignore it): a writer also excludes (and is excluded by) Redisson
 *    RLock holders. On a filter's lock (bg_lock_open_filter, below) the mark is what makes
 *    that filter's queries wait: a write hold is an in-place rebuild in progress;
 *  - BG_LOCK_READ holders share the key: a hash with field "mode" = "read" and one field per
 *    reader (holder id -> count); each reader's lease is its score in the sorted set
 *    suffix(KEY, "readers") (server time, ms), and the key's PEXPIRE is the latest reader lease,
 *    so a Redisson RLock waits for the readers and the key vanishes when every reader is gone;
 *  - writer preference: an exclusive or write acquire that has to wait records its intent in the
 *    sorted set suffix(KEY, "writers") (renewed while it waits, expiring on its own within 2 s
 *    if the waiter dies); new readers then queue behind it, so a stream of readers cannot starve
 *    a writer (a reader that already holds the lock still re-enters). Readers can wait behind a
 *    stream of writers instead. Redisson's own RLock waiters record no intent.
 *  - an owner holding the lock exclusively may acquire it again in any mode (counted as one more
 *    exclusive hold); an owner holding it for reading cannot acquire it exclusively (BG_EINVAL:
 *    upgrades deadlock) - release first.
 *  - do not use Redisson's RReadWriteLock on NAME + ":lock": its layout differs (a key held by an
 *    RLock looks free to it), so it excludes neither side.
 * Extra keys are named like the filter's config key (suffix(KEY, s): KEY + ":" + s if KEY has a
 * '{', else "{" + KEY + "}:" + s) so all keys of one lock share a cluster slot.
 *
 * Fencing token: every acquire that starts a hold INCRs suffix(KEY, "fence") in the same
 * server-side step, so tokens are strictly increasing across every hold of this lock by any
 * bloomguard process; a reentrant acquire returns the token of the hold it re-enters. Holds
 * taken by Redisson draw no token.
 * The fence key lives forever, on purpose (docs/layout.md says why): nothing bloomguard does
 * deletes it - not the last release, not bg_filter_delete (a filter's lock, "{NAME}:lock:fence",
 * outlives the filter) - except bg_lock_retire below, for a name that will not be used again.
 * docs/layout.md lists every key.
 *
 * The lease. One renewal thread per client and server (a standalone or Sentinel client's, or a
 * cluster client's for each master its handles' slots live on; started with the first hold,
 * ending when no such handle that held is open) renews every hold of those handles every third
 * of the handle's lease, all that are due in one round trip (a pipeline, one step per handle and
 * 100 holds), so a server that hangs delays only the renewals of the holds on it, and one slow
 * answer does not delay the others behind it. No renewal waits past the first lease in it to run
 * out (whatever the command timeout); a failed one is tried again after a quarter of a third. Only holds still held are renewed: a process that
 * dies (or a handle with BG_OPT_LOCK_RENEW = 0 held longer than the lease) loses the lock when
 * its lease runs out, and the next acquire succeeds. A renewal that finds the hold
 * gone marks it lost: the owner's next release (or reentrant acquire) of it fails with
 * BG_ELOCKED and says so.
 *
 * Waiting. An acquire that finds the lock taken subscribes to the unlock channel on a connection
 * of its own (not a pooled one) and tries again on every message, and otherwise no later than
 * when the holder's lease would run out (a holder that died publishes nothing); with
 * BG_OPT_LOCK_SUBSCRIBE = 0, or when the server refuses SUBSCRIBE, it polls with a backoff from
 * 2 ms doubling to BG_OPT_LOCK_POLL_MAX_MS. Never past wait_ms: then BG_ELOCKED, the message
 * naming the holder (or the waiting writer) and its remaining lease. bg_call_cancel on the
 * bg_call of bg_lock_acquire_ex (from any thread or a signal handler, call.h) ends the wait
 * within about 50 ms with BG_ECANCELED: the owner then holds nothing new and its writer intent is
 * withdrawn (as for bg_lock_acquire_owner_ex).
 *
 * Thread safety: a bg_lock may be shared by any number of threads (each acquires and releases
 * for its owner, see above); bg_lock_errmsg may then show another thread's message: use the _ex
 * forms with a bg_call of the thread's own, or bg_lock_errmsg_copy. A handle keeps its client alive.
 *
 * fork(): holds taken before a fork stay the parent's. In the child the handle forgets them - it
 * neither renews nor releases them (bg_lock_release answers BG_EINVAL, bg_lock_close releases
 * nothing) - and takes a new uuid, so its holder ids are new: an acquire there waits for the
 * parent's hold as any other process's would, and what it acquires it renews with a renewal
 * thread of the child's own.
 * Needs Redis 5 or later (scripts read the server's TIME).
 */
#ifndef BLOOMGUARD_LOCK_H
#define BLOOMGUARD_LOCK_H

#include "call.h"
#include "client.h"
#include "common.h"
#include "filter.h"
#include "options.h"

BG_BEGIN_DECLS

typedef struct bg_lock bg_lock;

/* Modes. Values are pinned. */
#define BG_LOCK_EXCLUSIVE  1   /* one holder; Redisson RLock layout */
#define BG_LOCK_READ       2   /* shared with other readers */
#define BG_LOCK_WRITE      3   /* one holder, excluding readers: the same hold as BG_LOCK_EXCLUSIVE */

/*
 * A lock handle for the key NAME + ":lock" (NAME is typically a filter's name). Makes no round
 * trip. opts may be NULL; these options apply: BG_OPT_LOCK_LEASE_MS, BG_OPT_LOCK_RENEW,
 * BG_OPT_LOCK_SUBSCRIBE, BG_OPT_LOCK_POLL_MAX_MS; an explicitly set option of another consumer is
 * refused with BG_ENOTSUP (options.h). BG_EBADNAME when the lock's keys would not share one
 * cluster slot (e.g. "a{}b"). On failure *out is NULL and the message is on the call (_ex), else
 * on the client (bg_client_errmsg).
 */
BG_API int  bg_lock_open(bg_lock **out, bg_client *c, const char *name, const bg_options *opts);
BG_API int  bg_lock_open_ex(bg_lock **out, bg_call *call, bg_client *c, const char *name, const bg_options *opts);
/*
 * The lock of a filter: key suffix(NAME, "lock") - "{NAME}:lock", or "NAME:lock" when NAME has a
 * hash tag - in the filter's cluster slot (the handle is bg_lock_open's with the name "{NAME}").
 * While a thread holds it in BG_LOCK_WRITE mode, the filter's queries (from any process) wait
 * up to BG_OPT_WRITE_LOCK_WAIT_MS and then fail with BG_ELOCKED (the policy's BG_FAIL_LOCKED class):
 * this is how BG_ROTATE_LOCKED rebuilds in place, and how a caller can do its own in-place
 * writes. EXCLUSIVE and READ holds do not stop queries. A Java service shares it as
 * redisson.getLock("{NAME}:lock"). On failure *out is NULL and the message is on the call (_ex),
 * else on the filter. Options as bg_lock_open.
 */
BG_API int  bg_lock_open_filter(bg_lock **out, bg_filter *f, const bg_options *opts);
BG_API int  bg_lock_open_filter_ex(bg_lock **out, bg_call *call, bg_filter *f, const bg_options *opts);
/* Releases every hold still held through the handle, whichever owner's (errors ignored), takes it
 * off the renewal thread's list and frees it. Accepts NULL. No other call on the handle may be
 * running or follow. */
BG_API void bg_lock_close(bg_lock *l);

/*
 * Acquires the lock for the calling thread's default owner in `mode` (BG_LOCK_*), waiting up to wait_ms
 * (0: a single try; 0..3600000). On success *fencing_token (may be NULL) is the hold's token.
 * BG_ELOCKED when still taken after wait_ms (message: the holder and its lease), or when the
 * calling thread's hold was lost (its lease ran out); BG_EINVAL for a bad mode, an upgrade
 * from READ, or another call of the same owner on the handle still running; connection errors
 * as usual (the lock is then not held by this call).
 */
BG_API int  bg_lock_acquire(bg_lock *l, int mode, int64_t wait_ms, uint64_t *fencing_token);
BG_API int  bg_lock_acquire_ex(bg_lock *l, bg_call *call, int mode, int64_t wait_ms, uint64_t *fencing_token);

/*
 * Releases one acquire of the calling thread; the last one ends the hold (and wakes waiters).
 * BG_EINVAL when the calling thread holds nothing through this handle; BG_ELOCKED when its hold
 * was lost meanwhile (the lease ran out; the lock may now be someone else's, and is left alone).
 * After BG_ELOCKED the thread holds nothing.
 */
BG_API int  bg_lock_release(bg_lock *l);
BG_API int  bg_lock_release_ex(bg_lock *l, bg_call *call);

/*
 * Retires the lock's name: deletes its fence counter (and the readers / writers bookkeeping keys,
 * which would expire anyway) - only when nobody holds the lock (bloomguard in any mode, or a
 * Redisson RLock) and no writer waits for it, checked and deleted in one server-side step, so no
 * acquire can slip in between. BG_ELOCKED otherwise (the message names a holder; nothing is
 * deleted). *deleted (may be NULL): 1 if a fence key existed.
 * After it the name's tokens restart from 1: retire only a name that will not be locked again
 * while tokens drawn from it may still be checked (a storage that compares fencing tokens would
 * otherwise take a new holder's token 1 for a stale one). The lock key itself is not touched
 * (there is none while nobody holds it). A filter's lock is retired through bg_lock_open_filter's
 * handle, after bg_filter_delete.
 */
BG_API int  bg_lock_retire(bg_lock *l, int *deleted);
BG_API int  bg_lock_retire_ex(bg_lock *l, bg_call *call, int *deleted);

/*
 * What the calling thread holds through this handle, without a round trip: *mode BG_LOCK_* (the
 * mode of the acquire that started the hold) or 0, *count the reentrancy count, *fencing_token
 * the hold's token; each may be NULL. Returns BG_OK, or BG_ELOCKED when the renewal thread found
 * the hold lost (the outputs then still describe it until the thread releases it).
 */
BG_API int  bg_lock_held(bg_lock *l, int *mode, uint32_t *count, uint64_t *fencing_token);
BG_API int  bg_lock_held_ex(bg_lock *l, bg_call *call, int *mode, uint32_t *count, uint64_t *fencing_token);

/* The lock's Redis key: NAME + ":lock". */
BG_API const char *bg_lock_key(const bg_lock *l);
/* The calling thread's (default owner's) holder id "<UUID>:<owner number>" (the hash field while
 * it holds the lock), NUL-terminated into buf; returns its length. */
BG_API size_t bg_lock_holder_id(const bg_lock *l, char *buf, size_t buf_size);

/* ---- lock owners (issue 16): holds owned by an object instead of an OS thread ---------------- */

/*
 * An owner is what a hold belongs to. The calls above use the calling thread's default owner
 * (made on the thread's first lock call, given up when the thread exits), so they keep their
 * per-thread meaning; the _owner calls below take an owner explicitly (NULL: the calling
 * thread's default owner, the same as the calls above).
 *
 *   bg_lock_owner *job;
 *   bg_lock_owner_new(&job);
 *   bg_lock_acquire_owner(l, job, BG_LOCK_EXCLUSIVE, 5000, &token);   // on thread A
 *   ...
 *   bg_lock_release_owner(l, job);                                    // on thread B: fine
 *   bg_lock_owner_free(job);
 *
 *  - Holder id: "<UUID>:<seq>" - Redisson's "<UUID>:<thread id>" layout, unchanged on the wire
 *    (a Java RLock reads the same hash field, and a bloomguard hold and an RLock exclude each
 *    other as before): the UUID is the handle's, seq the owner's number (bg_lock_owner_seq),
 *    drawn from one per-process counter from 1 and never reused, so a new thread or a new owner
 *    never inherits an old one's hold. Default owners draw from the same counter (their seq is
 *    no longer the kernel's thread id).
 *  - An owner is a holder on each handle: two owners exclude each other, even in one thread;
 *    one owner re-enters what it holds (reentrancy counts per handle and owner); two handles
 *    are two holders even for one owner (as before: the UUID is the handle's).
 *  - Any thread may use an owner (acquire on one thread, release on another), but an owner's
 *    calls on one handle must not overlap: a second one while the first runs (e.g. a release
 *    while its acquire waits) fails at once with BG_EINVAL and changes nothing. Its calls on
 *    different handles may run at once.
 *  - Renewal: one thread per client and server renews every hold of every handle there (however
 *    many handles and owners: 10,000 holds cost one thread), each every third of its handle's lease.
 *    Lost holds, fencing tokens, modes, waiting and bg_call_cancel are as described above, per
 *    owner instead of per thread.
 *  - Freeing an owner that still holds locks (bg_lock_owner_holds > 0), or the exit of a thread
 *    whose default owner does: nothing is released then (that would need round trips, in a
 *    destructor); the holds stay held and renewed until their handle is closed (bg_lock_close
 *    releases them), and the owner's memory lives until then. Release first; a binding that
 *    frees owners from a finalizer may rely on close to clean up.
 */
typedef struct bg_lock_owner bg_lock_owner;

/* A new owner (no round trip; exempt from the _ex rule: BG_EINVAL / BG_ENOMEM say everything). Safe to use from any thread. */
BG_API int bg_lock_owner_new(bg_lock_owner **out);
/* Gives the owner up (see above for one that still holds locks). Accepts NULL; ignores a thread's
 * default owner. No call with the owner may be running or follow. */
BG_API void bg_lock_owner_free(bg_lock_owner *o);
/* The owner's number, the part after the ':' of its holder ids (NULL: the calling thread's default
 * owner; 0 only when that cannot be made, out of memory). */
BG_API uint64_t bg_lock_owner_seq(const bg_lock_owner *o);
/* How many holds (handles on which it holds a lock, or has an acquire in flight) the owner has. */
BG_API uint32_t bg_lock_owner_holds(const bg_lock_owner *o);

/* bg_lock_acquire for `owner`: the hold is owner's, reentrant per (handle, owner). */
BG_API int bg_lock_acquire_owner(bg_lock *l, bg_lock_owner *owner, int mode, int64_t wait_ms, uint64_t *fencing_token);
BG_API int bg_lock_acquire_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner, int mode, int64_t wait_ms,
                                    uint64_t *fencing_token);
/* bg_lock_release_ex for `owner`, from any thread. BG_EINVAL when owner holds nothing through l. */
BG_API int bg_lock_release_owner(bg_lock *l, bg_lock_owner *owner);
BG_API int bg_lock_release_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner);
/* bg_lock_held for `owner` (no round trip; the BG_ELOCKED message goes to call, or to the handle
 * when call is NULL). */
BG_API int bg_lock_held_owner(bg_lock *l, bg_lock_owner *owner, int *mode, uint32_t *count, uint64_t *fencing_token);
BG_API int bg_lock_held_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner, int *mode, uint32_t *count,
                                 uint64_t *fencing_token);
/* owner's holder id on l, "<UUID>:<seq>", NUL-terminated into buf; returns its length. */
BG_API size_t bg_lock_holder_id_owner(const bg_lock *l, const bg_lock_owner *owner, char *buf, size_t buf_size);

/* Message of the most recent failure on the handle ("" if none); see thread safety above. */
BG_API const char *bg_lock_errmsg(const bg_lock *l);
BG_API size_t bg_lock_errmsg_copy(const bg_lock *l, char *buf, size_t buf_size);

BG_END_DECLS

#endif
