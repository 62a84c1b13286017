/*
 * bloomguard/filter.h - a Bloom filter stored in Redis exactly as Redisson's RBloomFilter stores it.
 *
 * Keys: the bitmap at NAME, the config hash at NAME + ":config" if NAME contains '{', else
 * "{" + NAME + "}:config" (fields size, hashIterations, expectedInsertions, falseProbability).
 *
 * Every add or query is one atomic server-side step that checks the config and touches the bits
 * together, in one round trip for one item or for a whole batch. When another client changed the
 * config (a rebuild with other parameters), the step returns the new config and the call is
 * retried with it, up to BG_OPT_CONFIG_RETRIES times: the caller never sees an error or a silent
 * "absent" for that. A filter without a config hash answers BG_ENOTINIT. The same step reads the
 * filter's write lock (lock.h, bg_lock_open_filter): while it is held in WRITE mode (an in-place
 * rebuild) a query waits up to BG_OPT_WRITE_LOCK_WAIT_MS, then fails with BG_ELOCKED.
 *
 * Queries with tracking (BG_OPT_TRACKING, on by default where hiredis >= 1.0 and Redis >= 6): once
 * a full check has found the config, no write lock and no TTL on the config, its connection keeps
 * that verdict, and the server tracks both keys for it (CLIENT TRACKING OPTIN over RESP3). Later
 * queries on that connection send BITFIELD_RO alone. Any change to either key - a rebuild, a
 * delete, a write lock taken (by bloomguard or by a Redisson RReadWriteLock), an EXPIRE, FLUSHDB -
 * makes the server push an invalidation on that connection, ahead of the reply to any command it
 * runs later; an answer preceded by one is dropped and the query asked again with the full check.
 * So an answer is still read from a bitmap whose config and lock were as checked at the moment it
 * was read - the same guarantee as the single MULTI step, at the cost of one BITFIELD_RO.
 *
 * Thread safety: a bg_filter may be shared between threads. Its error message is the most recent
 * failure on the handle, possibly another thread's; a bg_call (call.h) carries one call's own.
 */
#ifndef BLOOMGUARD_FILTER_H
#define BLOOMGUARD_FILTER_H

#include "common.h"
#include "call.h"
#include "client.h"

BG_BEGIN_DECLS

typedef struct bg_filter bg_filter;

/*
 * No I/O: validates the name (BG_EBADNAME if its bitmap and config keys would hash to different
 * cluster slots, e.g. "a{}b") and takes a reference on the client.
 */
BG_API int  bg_filter_open(bg_filter **out, bg_client *c, const char *name);
/* The same; a failure's message goes to call when given, else to the client's message slot. */
BG_API int  bg_filter_open_ex(bg_filter **out, bg_call *call, bg_client *c, const char *name);
/*
 * Lets go of the handle (NULL is a no-op). Operations submitted to a queue (queue.h) and still in
 * flight keep the filter alive and complete as they would have: the last of them frees it. The
 * handle must not be used after this call; blocking calls on it must have returned.
 */
BG_API void bg_filter_close(bg_filter *f);
BG_API const char *bg_filter_name(const bg_filter *f);

/*
 * Redisson's tryInit: computes size and k (bg_optimal_params; BG_EBADPARAMS with Redisson's
 * message when rejected) and writes the config hash only if it does not exist. *created (may be
 * NULL) is 1 if this call wrote it, 0 if a config was already there (the existing one is kept,
 * and used from now on, even if its parameters differ).
 */
BG_API int bg_filter_init(bg_filter *f, int64_t expected_insertions, double fpp, int *created);

/*
 * A partitioned filter (docs/layout.md): one filter of `partitions` bitmaps, each in a cluster slot
 * of its own spread evenly over the 16384 (so over the masters, in proportion to the slots each
 * serves), for totals beyond Redisson's 2^32 bits and for a load spread over the cluster. An item
 * lives in ONE partition chosen from its hash (all its k bits there): a single-item add or query is
 * one key, one node, one round trip; a batch is split per partition and sent to them together.
 * Sizes: each partition below 2^32 bits, chosen so the false-positive rate at expected_insertions
 * stays within 1.02x of a plain filter's of the same (n, fpp). Its config hash holds none of the
 * fields Redisson reads and NAME holds no bitmap: a Redisson RBloomFilter given the name fails
 * "not initialized" on add and count (and its contains answers false, as for any name without a
 * config: Redisson 3.45.1).
 * partitions 0 is bg_filter_init; 1..16384 else BG_EINVAL; BG_EBADPARAMS for Redisson's rules on n
 * and fpp (without its 2^32-bit cap on the total) and for partitions too few to stay below 2^32
 * bits each (the message names the fewest that fit). tryInit's meaning: a config already there, of
 * either kind, is kept (*created 0). Every other operation of this header works on both kinds;
 * rotations rebuild one (rotation.h: swap with BG_OPT_ROTATE_PARTITIONS giving the next
 * generation's partitions, locked in place), and the degrade policy's snapshot copies its
 * partitions (policy.h).
 */
BG_API int bg_filter_init_partitioned(bg_filter *f, int64_t expected_insertions, double fpp, int64_t partitions,
                                      int *created);
BG_API int bg_filter_init_partitioned_ex(bg_filter *f, bg_call *call, int64_t expected_insertions, double fpp,
                                         int64_t partitions, int *created);

/* *added (may be NULL) is 1 if at least one of the item's bits was newly set (during a LOCKED
 * rotation's rewrite it may be 1 for an item added since the rotation began: rotation.h). */
BG_API int bg_filter_add(bg_filter *f, const void *item, size_t len, int *added);
/* items[i] may be NULL when lens[i] is 0. *added (may be NULL): how many items set a new bit. */
BG_API int bg_filter_add_many(bg_filter *f, const void *const *items, const size_t *lens, size_t n,
                              size_t *added);

BG_API int bg_filter_contains(bg_filter *f, const void *item, size_t len, int *present);
/* present[i] is set to 1 or 0 for each item. */
BG_API int bg_filter_contains_many(bg_filter *f, const void *const *items, const size_t *lens,
                                   size_t n, uint8_t *present);

/* Redisson's estimate: round(-size / k * ln(1 - bits_set / size)). */
BG_API int bg_filter_count(bg_filter *f, int64_t *count);

/*
 * Reads the config hash (one round trip). Each out-parameter may be NULL. expected_insertions and
 * fpp are 0 when the hash lacks those fields (only size and hashIterations are required).
 */
BG_API int bg_filter_info(bg_filter *f, uint64_t *size, uint32_t *hash_iterations,
                          int64_t *expected_insertions, double *fpp);

/* bg_filter_info, and *partitions (may be NULL): a partitioned filter's P (0: Redisson's layout);
 * *size is then the total of its partitions' bits, and may exceed 2^32. */
BG_API int bg_filter_info_partitioned(bg_filter *f, uint64_t *size, uint32_t *hash_iterations,
                                      int64_t *expected_insertions, double *fpp, uint32_t *partitions);
BG_API int bg_filter_info_partitioned_ex(bg_filter *f, bg_call *call, uint64_t *size, uint32_t *hash_iterations,
                                         int64_t *expected_insertions, double *fpp, uint32_t *partitions);

/* Deletes the bitmap and the config (and the spare bitmap a swap rotation keeps for the next one);
 * *deleted (may be NULL) is 1 if the bitmap or the config existed. The fencing-token counter of
 * the filter's write lock ("{NAME}:lock:fence", lock.h) stays, on purpose: a writer that drew its
 * token before the delete must keep losing to every later writer if the name is used again.
 * Retire it with bg_lock_retire on bg_lock_open_filter's handle once the name is done with. */
BG_API int bg_filter_delete(bg_filter *f, int *deleted);
/* Sets (PEXPIRE) or clears (PERSIST) a time to live on both keys; *applied: 1 if any key changed.
 * ttl_ms: 1 .. 70368744177664 (2^46 ms, about 2230 years), else BG_EINVAL; Redis itself refuses a
 * TTL that overflows its clock, a bound that moves with the date. */
BG_API int bg_filter_expire(bg_filter *f, int64_t ttl_ms, int *applied);
BG_API int bg_filter_persist(bg_filter *f, int *applied);

/*
 * The same operations with a per-call object (see call.h): a timeout for this call, and this
 * call's own message and answer source. call may be NULL (then they behave as the forms above).
 * On failure the message goes to the call if given, else to the filter handle.
 */
BG_API int bg_filter_init_ex(bg_filter *f, bg_call *call, int64_t expected_insertions, double fpp, int *created);
BG_API int bg_filter_add_ex(bg_filter *f, bg_call *call, const void *item, size_t len, int *added);
BG_API int bg_filter_add_many_ex(bg_filter *f, bg_call *call, const void *const *items, const size_t *lens,
                                 size_t n, size_t *added);
BG_API int bg_filter_contains_ex(bg_filter *f, bg_call *call, const void *item, size_t len, int *present);
BG_API int bg_filter_contains_many_ex(bg_filter *f, bg_call *call, const void *const *items,
                                      const size_t *lens, size_t n, uint8_t *present);
BG_API int bg_filter_count_ex(bg_filter *f, bg_call *call, int64_t *count);
BG_API int bg_filter_info_ex(bg_filter *f, bg_call *call, uint64_t *size, uint32_t *hash_iterations,
                             int64_t *expected_insertions, double *fpp);
BG_API int bg_filter_delete_ex(bg_filter *f, bg_call *call, int *deleted);
BG_API int bg_filter_expire_ex(bg_filter *f, bg_call *call, int64_t ttl_ms, int *applied);
BG_API int bg_filter_persist_ex(bg_filter *f, bg_call *call, int *applied);

/*
 * Where the filter lives: "host:port" of the master serving its hash slot now, per the client's
 * slot map (a Redis Cluster), or of the server (standalone; "unix:PATH" for a socket), written to
 * buf (NUL-terminated, cut to cap); *slot (may be NULL) is the filter's hash slot (0..16383) in
 * either case. No round trip. BG_ESERVER when no master serves the slot now (a failover).
 */
BG_API int bg_filter_node(bg_filter *f, char *buf, size_t cap, int32_t *slot);
BG_API int bg_filter_node_ex(bg_filter *f, bg_call *call, char *buf, size_t cap, int32_t *slot);

/* Message of the most recent failure on this handle ("" if none); never contains a password. The
 * pointer is a copy owned by the calling thread, valid until it asks for an error message again. */
BG_API const char *bg_filter_errmsg(const bg_filter *f);
BG_API size_t bg_filter_errmsg_copy(const bg_filter *f, char *buf, size_t buf_size);

/*
 * Native filters (docs/native.md): a Bloom filter the server keeps itself, with the BF.* commands
 * of RedisBloom (Redis 8 ships it; a module for Redis 7 and Valkey) or valkey-bloom, in one key at
 * NAME (TYPE MBbloom-- or bloomfltr). A handle opened with bg_filter_open_native uses that kind for
 * its whole life; every operation of this header then takes its native step, on the blocking path
 * and on a queue, through the handle's policy:
 *   init        BF.RESERVE NAME error_rate capacity (the server's default expansion); *created 0 when
 *               a native filter is already there (kept, as tryInit keeps a config)
 *   add         BF.INSERT NAME NOCREATE ITEMS ... (a missing filter is not created: BG_ENOTINIT)
 *   contains    BF.MEXISTS, in one MULTI/EXEC with the key's TYPE (the script when TYPE names no
 *               native filter); with tracking, BF.MEXISTS alone while the server tracks the key for
 *               the connection and no invalidation came (docs/native.md): a missing key is
 *               BG_ENOTINIT (to the degrade policy), never an answer of 0
 *   count       BF.CARD;  info  BF.INFO (size: the bits of all links; hash_iterations 0;
 *               expected_insertions: the capacity; fpp 0 - the server does not say)
 *   delete, expire, persist  the one key
 * Each is one server-side step that checks the key's TYPE first: a Redisson-layout filter under the
 * name (its bitmap, or its config hash) is refused with BG_EWRONGTYPE naming it, as is any other
 * type; a server without the module fails with BG_ENOTSUP naming the missing module. A NONSCALING
 * filter that fills stops an add at the first item it refuses: BG_EFULL, the message naming that
 * item's index and how many were not added (*added counts the new ones before it).
 */
BG_API int bg_filter_open_native(bg_filter **out, bg_client *c, const char *name);
BG_API int bg_filter_open_native_ex(bg_filter **out, bg_call *call, bg_client *c, const char *name);
/* 1 for a handle opened with bg_filter_open_native, else 0 (NULL: 0). */
BG_API int32_t bg_filter_is_native(const bg_filter *f);
/*
 * BF.RESERVE with an expansion: expansion 0 is NONSCALING (a full filter refuses adds: BG_EFULL),
 * 1..32768 EXPANSION n, -1 the server's default. capacity 1..2^53, 0 < error_rate < 1, else
 * BG_EBADPARAMS; so is a first link larger than BG_OPT_NATIVE_MAX_BYTES (options.h), before
 * anything is sent. BG_EINVAL on a handle that is not native.
 */
BG_API int bg_filter_init_native(bg_filter *f, int64_t capacity, double error_rate, int32_t expansion, int *created);
BG_API int bg_filter_init_native_ex(bg_filter *f, bg_call *call, int64_t capacity, double error_rate,
                                    int32_t expansion, int *created);
/*
 * BF.INFO of a native filter: each out-parameter may be NULL. capacity: of all links; bytes: the
 * server's memory for it; filters: links; items: inserted; expansion: 0 for NONSCALING.
 * BG_EINVAL on a handle that is not native.
 */
BG_API int bg_filter_info_native(bg_filter *f, int64_t *capacity, int64_t *bytes, int64_t *filters, int64_t *items,
                                 int64_t *expansion);
BG_API int bg_filter_info_native_ex(bg_filter *f, bg_call *call, int64_t *capacity, int64_t *bytes, int64_t *filters,
                                    int64_t *items, int64_t *expansion);

BG_END_DECLS

#endif
