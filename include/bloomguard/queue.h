/*
 * bloomguard/queue.h - operations that hold no thread: submit now, complete later.
 *
 * A bg_queue takes operations on the filters of one client and hands back their outcomes. A
 * submit function returns at once: BG_OK means accepted, and exactly one completion with the
 * caller's tag will follow; any other status means refused (bad input, a closed queue), with
 * the message where the blocking form would put it, and no completion. The completions come back
 * in batches from bg_queue_poll.
 *
 * The library has no thread of its own for this. The host drives the queue: bg_queue_fd is one
 * file descriptor that is readable while completions wait to be polled or the queue's
 * connections or timers need attention; when it is readable (or whenever it likes) the host calls
 * bg_queue_poll, which does the I/O that can be done without waiting, runs the operations
 * forward and returns the completions that are ready. Watch the fd with epoll, kqueue, poll,
 * libuv (uv_poll_t), asyncio (loop.add_reader) or Go's netpoller; or call bg_queue_poll with a
 * timeout, which waits on the fd itself. The fd is level-triggered: it stays readable until
 * everything it signals was handled, so a host may poll for a bounded batch at a time. It is an
 * epoll instance on Linux and a kqueue on macOS and the BSDs; the portable poll backend (chosen
 * with the environment variable BG_QUEUE_POLLER=poll) gives an fd that signals completions and
 * cancels only, not sockets or timers: with it, call bg_queue_poll with a timeout, or often
 * (docs/queue.md, "The fd on each platform").
 *
 * Every guarantee of the blocking calls holds for a submitted operation, by the same code: the
 * atomic config + write-lock check (and the tracked bits-only read), retries after a config
 * change, the write lock waited out, the degrade policy (breaker, retry backoff, snapshot,
 * fallback callback - which runs on the thread that drives the queue, inside bg_queue_poll, or
 * inside the submit when the chain answers at once: an open breaker), Cluster redirects, Sentinel
 * failover, TLS. Waits are timers, never sleeps. A deadline (the bg_call's
 * timeout, else the client's command timeout per request, from its first send: a server that
 * stalls ends each request there, retries after a lost connection included) completes the
 * operation with BG_ETIMEOUT when it passes, at once; a reply that arrives later is read and
 * dropped, never given to another operation. A connection that drops fails or retries (as the
 * blocking calls would) every operation that was waiting on it; none is left hanging.
 *
 * Ordering: none between operations. Completions come as operations finish; two operations on
 * the same filter may complete in either order (a retry, a redirect or a policy answer reorders
 * them). Use the tag to match them.
 *
 * Cancelling: bg_queue_cancel(q, tag), or bg_call_cancel on the bg_call given to the submit; both
 * are async-signal-safe and may be called from any thread. The operation completes with
 * BG_ECANCELED at the next poll (within one poll of the host's loop: the cancel makes the fd
 * readable); a request already sent is not withdrawn - its reply is read and dropped. A cancel
 * that comes after the operation completed does nothing.
 *
 * Items are copied at submit: the caller's buffers may be reused as soon as it returns. Answers
 * live in the completion (bg_completion_present).
 *
 * Thread safety: a bg_queue is driven by one thread at a time - bg_queue_poll and the submit
 * functions must not run concurrently on the same queue (an event loop's thread, or callers
 * that serialize them). bg_queue_cancel may be called from any thread or a signal handler. A
 * client may have any number of queues; each has connections of its own. The filters and the
 * client stay shared with blocking callers on other threads.
 *
 * fork(): in a child, the first poll, submit or close of a queue opened before the fork gives it
 * fresh poller instances (epoll, eventfd and timerfd; a kqueue and its wake) on the same fd
 * numbers (bg_queue_fd is unchanged; a loop that registered it in an epoll or kqueue of its own
 * before the fork must register it again) and new
 * connections; every operation in flight at the fork is the parent's and completes in the child
 * with BG_ECANCELED, nothing of it sent or read there. docs/operations.md, "Across fork()".
 */
#ifndef BLOOMGUARD_QUEUE_H
#define BLOOMGUARD_QUEUE_H

#include "common.h"
#include "call.h"
#include "client.h"
#include "filter.h"

BG_BEGIN_DECLS

typedef struct bg_queue bg_queue;
typedef struct bg_completion bg_completion;

/* A queue for operations on filters of client c (a reference is taken: close the queue first
 * or later, in any order; a submitted operation also holds its filter until it completes, so
 * filters, clients and queues may be closed in any order with operations in flight). Makes its fd;
 * connects nothing yet. */
BG_API int  bg_queue_open(bg_queue **out, bg_client *c);
BG_API int  bg_queue_open_ex(bg_queue **out, bg_call *call, bg_client *c);
/* Drops every operation not yet polled (no completion follows), closes the queue's connections
 * and its fd. NULL is a no-op. Never waits on the network: a discovery of the server still under
 * way (the first operations of a client opened without connecting) is left to end on its own
 * thread, which holds what it uses. */
BG_API void bg_queue_close(bg_queue *q);
/* The fd to watch for readability (the queue's own: do not read, write or close it); -1 for NULL. */
BG_API int  bg_queue_fd(const bg_queue *q);
/* The most recent failure's message on the queue (a refused submit without a bg_call). */
BG_API const char *bg_queue_errmsg(const bg_queue *q);

/*
 * Runs the queue forward and hands out up to max completions (*n of them): waits up to
 * timeout_ms for at least one (0: not at all; -1: until one arrives). The completions stay valid
 * until the next bg_queue_poll or bg_queue_close on this queue. BG_OK (also when *n is 0),
 * BG_EINVAL for bad arguments, BG_ECANCELED when the thread's... never: a wait here ends early
 * only by a completion or the timeout.
 */
BG_API int  bg_queue_poll(bg_queue *q, int64_t timeout_ms, bg_completion **out, size_t max, size_t *n);

/* Asks the operation submitted with this tag to stop (see above). BG_OK, or BG_EINVAL for NULL.
 * Async-signal-safe; the operation itself completes with BG_ECANCELED unless it already ended. */
BG_API int  bg_queue_cancel(bg_queue *q, uint64_t tag);

/* Inside a callback the library makes while it runs one of q's operations - the policy's fallback,
 * called from bg_queue_poll or from a submit, on that thread - the tag of the operation it serves
 * (BG_OK); BG_EINVAL anywhere else. For a host whose callback must know whom it answers for (its
 * context, where to report a failure). */
BG_API int  bg_queue_running(const bg_queue *q, uint64_t *tag);

/* ---- submitting ----------------------------------------------------------------------------- */

/* contains: the answer is bg_completion_present (n entries of 0/1), or value for one item. */
BG_API int  bg_filter_contains_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *item, size_t len);
BG_API int  bg_filter_contains_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, const void *item,
                                         size_t len);
BG_API int  bg_filter_contains_many_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *const *items,
                                           const size_t *lens, size_t n);
BG_API int  bg_filter_contains_many_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                              const void *const *items, const size_t *lens, size_t n);
/* add: value is 1 / the count of items that set a new bit. */
BG_API int  bg_filter_add_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *item, size_t len);
BG_API int  bg_filter_add_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, const void *item,
                                    size_t len);
BG_API int  bg_filter_add_many_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *const *items,
                                      const size_t *lens, size_t n);
BG_API int  bg_filter_add_many_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                         const void *const *items, const size_t *lens, size_t n);
/* count: value is Redisson's count(); info: bg_completion_info. */
BG_API int  bg_filter_count_submit(bg_filter *f, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_count_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_info_submit(bg_filter *f, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_info_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag);
/* init (value: 1 if this call wrote the config), delete (value: 1 if a key was deleted), expire
 * and persist (value: 1 if applied) - the blocking calls' meanings. */
BG_API int  bg_filter_init_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t expected_insertions, double fpp);
BG_API int  bg_filter_init_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                     int64_t expected_insertions, double fpp);
BG_API int  bg_filter_init_partitioned_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t expected_insertions,
                                               double fpp, int64_t partitions);
BG_API int  bg_filter_init_partitioned_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                                  int64_t expected_insertions, double fpp, int64_t partitions);
/* A native filter's init with its expansion (filter.h, bg_filter_init_native): value 1 if created. */
BG_API int  bg_filter_init_native_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t capacity, double error_rate,
                                         int32_t expansion);
BG_API int  bg_filter_init_native_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int64_t capacity,
                                            double error_rate, int32_t expansion);
BG_API int  bg_filter_delete_submit(bg_filter *f, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_delete_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_expire_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t ttl_ms);
BG_API int  bg_filter_expire_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int64_t ttl_ms);
BG_API int  bg_filter_persist_submit(bg_filter *f, bg_queue *q, uint64_t tag);
BG_API int  bg_filter_persist_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag);

/* ---- completions ---------------------------------------------------------------------------- */

BG_API uint64_t bg_completion_tag(const bg_completion *c);
/* BG_OK, or the failure (a degraded answer is BG_OK with its source past BG_SOURCE_REDIS). */
BG_API int  bg_completion_status(const bg_completion *c);
/* BG_SOURCE_* of the answer (call.h). */
BG_API int  bg_completion_source(const bg_completion *c);
/* The failure a degraded answer replaced (bg_call_degraded_status's meaning), else BG_OK. */
BG_API int  bg_completion_degraded_status(const bg_completion *c);
/* The failure's message ("" after a plain success; a degraded answer's cause). */
BG_API const char *bg_completion_errmsg(const bg_completion *c);
/* The operation's number: contains of one item 0/1, adds their count of new items, count, the
 * 0/1 of init, delete and expire; 0 otherwise. */
BG_API int64_t bg_completion_value(const bg_completion *c);
/* contains: one 0/1 per item, in order (*n items); NULL (and *n 0) for other operations. */
BG_API const uint8_t *bg_completion_present(const bg_completion *c, size_t *n);
/* info: the blocking bg_filter_info's values. BG_EINVAL for another operation's completion. */
BG_API int  bg_completion_info(const bg_completion *c, uint64_t *size, uint32_t *hash_iterations,
                               int64_t *expected_insertions, double *fpp);

/* info: a partitioned filter's P, 0 for Redisson's layout (bg_filter_info_partitioned). BG_EINVAL
 * for another operation's completion. */
BG_API int  bg_completion_partitions(const bg_completion *c, uint32_t *partitions);

/* The common fields of a batch in one call (for bindings, which pay per call into C): tags,
 * statuses, sources and values of cs[0..n), each array may be NULL. */
BG_API void bg_completions_read(bg_completion *const *cs, size_t n, uint64_t *tags, int32_t *statuses,
                                int32_t *sources, int64_t *values);

BG_END_DECLS

#endif
