/*
 * Internal: a submission queue (include/bloomguard/queue.h) - operations run as tasks
 * (common/task.h) by the thread that drives the queue, waiting through timers (common/timers.h)
 * and the queue's own non-blocking connections (client/pipes.c) instead of sleeping.
 *
 * An operation (bgi_qop) lives in a slot of the queue's slab from its submit until the poll after
 * the one that handed out its completion. The slab grows by whole chunks that are never freed
 * before the queue, so a cancel from any thread (or a signal handler) can look at every slot
 * without a lock. A slot's state word holds its generation (one more per operation the slot
 * carries), live and cancel bits: a cancel reads the word, then the tag, and sets the cancel bit
 * by a compare-and-swap on the word it read - which fails if the operation ended (or the slot
 * took another one) meanwhile, so a cancel never reaches an operation it was not aimed at.
 *
 * What an operation is - its task, its copy of the items, how its answer is read off it - belongs
 * to the layer that submits it (filter/submit.c): the slot holds that layer's record in `body`.
 */
#ifndef BG_INTERNAL_QUEUE_H
#define BG_INTERNAL_QUEUE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>

#include "bloomguard/queue.h"
#include "client/client.h"
#include "client/poller.h"
#include "common/timers.h"

/* Room for the submitting layer's record of an operation (checked there at compile time). */
#define BGI_QOP_BODY_BYTES 768

typedef struct bgi_qop bgi_qop;
typedef struct bgi_pipes bgi_pipes;

/* Reads the answer off the submitting layer's record once the operation's task ended with st. */
typedef void (*bgi_qop_finish_fn)(bgi_qop *op, int st);

/* The bits of bgi_qop.state below the generation (state >> BGI_QOP_GEN_SHIFT). */
#define BGI_QOP_LIVE 1u     /* submitted and not yet completed */
#define BGI_QOP_CANCEL 2u   /* bg_queue_cancel asked */
#define BGI_QOP_GEN_SHIFT 2

struct bgi_qop {
  /* read by cancels on any thread: the tag is written before the state word that makes it live */
  _Atomic uint64_t tag;
  _Atomic uint64_t state;    /* generation << BGI_QOP_GEN_SHIFT | BGI_QOP_LIVE | BGI_QOP_CANCEL */
  /* the driving thread's */
  bg_queue *q;
  const bg_call *call;       /* the submit's (its timeout, its cancel flag), or NULL */
  uint64_t deadline_ns;      /* 0: none */
  bgi_task *stack[BGI_TASK_MAX_DEPTH];
  int depth;
  int waiting;               /* BGI_QOP_RUNNING / SLEEPING / IO */
  bgi_timer sleep_timer, deadline_timer;
  bgi_req_task rt;           /* the request of the CALL in progress (one at a time) */
  int discovering;           /* rt waits for the client's discovery (on the queue's list) */
  bgi_qop *disc_next;
  bgi_xfer *io;              /* while IO: the transfer the transport holds */
  bgi_err err;
  bgi_qop_finish_fn finish;
  /* the completion (bg_completion is a bgi_qop) */
  int status, source, degraded;
  int64_t value;
  const uint8_t *present;
  size_t npresent;
  int is_info;
  uint64_t info_size;
  uint32_t info_k;
  int64_t info_expected;
  double info_fpp;
  uint32_t info_parts;
  /* the operation's copy of its items and its answers (kept for the slot's next use) */
  bgi_buf item_bytes;
  const void **item_ptrs;
  size_t *item_lens;
  size_t items_cap;
  uint8_t *answers;
  size_t answers_cap;
  /* a fan-out (common/task.h): each of its tasks runs as a child operation of the one that asked
   * (same tag, call and deadline; never handed out): the parent waits for its children */
  bgi_qop *parent;           /* a child's; NULL for an operation that was submitted */
  bgi_subtask *sub;          /* a child's task and its err */
  size_t children;           /* a parent's children still running (+1 while it starts them) */
  bgi_qop *next;             /* free list / completed list */
  alignas(16) unsigned char body[BGI_QOP_BODY_BYTES];
};

#define BGI_QOP_RUNNING 0
#define BGI_QOP_SLEEPING 1
#define BGI_QOP_IO 2
#define BGI_QOP_CHILDREN 3   /* a fan-out's children run */

/* bgi_timer.kind of the queue's timers */
#define BGI_QTIMER_CALL_SCAN 0
#define BGI_QTIMER_SLEEP 1
#define BGI_QTIMER_DEADLINE 2
#define BGI_QTIMER_IO 3

#define BGI_QOP_CHUNK 128
#define BGI_QOP_MAX_CHUNKS 8192

struct bg_queue {
  bg_client *client;
  uint64_t fork_gen;             /* the process's fork generation its fds were made in (bgi_queue_fork_check) */
  bgi_poller poller;             /* the fd the host watches, the wake, the timer (client/poller.h) */
  _Atomic(bgi_qop *) chunks[BGI_QOP_MAX_CHUNKS];
  atomic_size_t nchunks;
  bgi_qop *free;
  bgi_qop *done_head, *done_tail;   /* completed, not yet handed out */
  bgi_qop *handed;                  /* handed out by the last poll: freed by the next */
  size_t nlive, ncalls;             /* operations in flight; of them, with a bg_call */
  atomic_int cancel_asked;          /* a cancel came since the last scan */
  int signalled;                    /* the wake fired and was not drained yet */
  bgi_timers timers;
  bgi_timer call_scan;              /* while operations with a bg_call are in flight: look at their
                                       cancel flags every BGI_WAIT_SLICE_MS */
  bgi_pipes *pipes;                 /* the queue's connections (client/pipes.c) */
  /* a discovery of where the client's calls go (bgi_queue_discover) on a thread of its own, which
   * the queue never waits for (a close leaves it to end on its own: it holds what it uses) */
  struct bgi_qdisc *disc;
  bgi_qop *disc_waiters;
  bgi_qop *running;                 /* whose task runs now (bg_queue_running), else NULL */
  bgi_errslot err;
};

/*
 * A slot for a new operation with this tag: its deadline from call's timeout (call may be NULL).
 * BG_OK, or BG_ENOMEM (err set).
 */
int bgi_queue_op_new(bg_queue *q, const bg_call *call, uint64_t tag, bgi_qop **out, bgi_err *err);
/* Gives back a slot bgi_queue_op_new made, unsubmitted (a submit that failed after it). */
void bgi_queue_op_discard(bg_queue *q, bgi_qop *op);
/* Copies items[0..n) into op (item_ptrs, item_lens) and makes room for n answers (answers).
 * BG_OK or BG_ENOMEM (err set). */
int bgi_queue_op_copy_items(bgi_qop *op, const void *const *items, const size_t *lens, size_t n, bgi_err *err);
/* Starts the operation: runs its task on this thread as far as it goes without waiting. */
void bgi_queue_op_start(bg_queue *q, bgi_qop *op, bgi_task *task, bgi_qop_finish_fn finish);

/* The transport's side (client/pipes.c): the operation whose request task is rt waited for I/O
 * and is resumed with st (a failure's message: msg). */
void bgi_queue_io_done(bgi_req_task *rt, int st, const char *msg);
/* The client does not know yet where calls go: the operation whose request task is rt waits for
 * the discovery (bgi_client_discover, blocking, on a thread of the queue's, one at a time for all
 * the queue's operations waiting for it). BGI_PENDING, or a failure (no thread could be made). */
int bgi_queue_discover(bg_queue *q, bgi_req_task *rt, uint64_t deadline_ns, bgi_err *err);
/* A timer of the transport's (kind BGI_QTIMER_IO) on the queue's heap. */
int bgi_queue_timer_arm(bg_queue *q, bgi_timer *t, uint64_t due_ns);
void bgi_queue_timer_cancel(bg_queue *q, bgi_timer *t);

/*
 * fork (common/fork.h): a child's first use of a queue opened before the fork (poll, a submit,
 * close) first lets go of what it inherited. The poller's fds (an epoll instance, eventfd and
 * timerfd; a kqueue and a socket pair; the poll backend's wake) are the parent's too (a socket added to that epoll, or a
 * count read off that eventfd, would be taken from the parent): fresh ones are made and put on the
 * same numbers (bgi_poller_after_fork), so bg_queue_fd keeps its
 * number (a loop that polls it by number goes on; one that registered it in an epoll of its own
 * before the fork watches the parent's instance still, and must register it again). Every
 * operation in flight is the parent's (it sent the request and reads the answer): in the child it
 * ends with BG_ECANCELED, nothing sent or read for it, its completion handed out by the child's
 * next poll. The queue's connections are closed without a write; a discovery under way was the
 * parent's thread. The queue is then as new and connects on demand.
 */
void bgi_queue_after_fork(bg_queue *q);
static inline void bgi_queue_fork_check(bg_queue *q) {
  if (bgi_forked_since(q->fork_gen)) bgi_queue_after_fork(q);
}

/* ---- the queue's connections (client/pipes.c) ------------------------------------------------ */

int bgi_pipes_new(bg_queue *q, bgi_pipes **out);
void bgi_pipes_free(bgi_pipes *p);
bgi_transport *bgi_pipes_transport(bgi_pipes *p);
/* Gives the transfer's workspace to its connection, which reads and drops the replies still due
 * (a deadline or a cancel ended the wait): x->kept is set. */
void bgi_pipes_abandon(bgi_pipes *p, bgi_xfer *x);
/* One event of a connection (its tag and BGI_PEV_* events, client/poller.h): the I/O it allows. */
void bgi_pipes_event(bgi_pipes *p, void *ptr, uint32_t events);
/* The queue was woken: connections whose host name was being resolved go on if it now is. */
void bgi_pipes_resolved(bgi_pipes *p);
/* A timer of the pipes' (BGI_QTIMER_IO) is due. */
void bgi_pipes_on_timer(bgi_pipes *p, bgi_timer *t);
/* Tests only (the negative control of the late-reply tests): abandoned requests leave their FIFO. */
void bgi_pipes_fault_no_discard(bgi_pipes *p, int on);
/* Tests only (the negative control of the stall tests): a connection given up for silence fails
 * its requests as a lost one, and each send waits a whole command timeout (a retry too). */
void bgi_pipes_fault_fresh_waits(bgi_pipes *p, int on);
/* fork, in this order (bgi_queue_after_fork), once the queue has its new fds: every connection
 * is closed without a write and left down, the entries of its FIFO kept aside (the requests in
 * flight still point at them); then, once those requests ended, the entries are freed. */
void bgi_pipes_fork_detach(bgi_pipes *p);
void bgi_pipes_fork_drop(bgi_pipes *p);
/* Writes what submits and resumed operations queued since. */
void bgi_pipes_flush(bgi_pipes *p);

/* Tests only (the negative control of the stress test of cancels from other threads): a cancel sets
 * its bit without checking that the slot still holds the operation it looked at. */
void bgi_queue_fault_cancel_unchecked(int on);
/* Tests only: discoveries (bgi_queue_discover) whose record is not freed yet, in the whole process;
 * and the negative control of the test that a close never waits for one (the close waits). */
int bgi_queue_discoveries_live(void);
void bgi_queue_fault_close_waits_discovery(int on);

#endif
