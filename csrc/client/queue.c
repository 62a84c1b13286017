/*
 * The submission queue's engine (queue.h): the slab of operations, the runner that moves their
 * tasks forward, timers, cancels, completions and the one fd the host watches.
 *
 * The fd is the poller's (client/poller.h): an epoll instance (Linux) or a kqueue (macOS, the
 * BSDs) of the queue's own, holding the wake (made to fire when completions or writes wait that the
 * host has not polled for yet, by bg_queue_cancel, and by a name resolver that is done), a timer
 * armed for the earliest timer, and the sockets of the queue's connections; both kinds are
 * pollable, so the host sees one fd, readable whenever any of them is. With the poll backend the fd
 * is the wake alone, and the host polls the queue with a timeout.
 */
#include "client/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/call.h"
#include "common/clock.h"
#include "common/fork.h"
#include "common/sock.h"
#include "common/wait.h"

#define POLL_EVENTS 64

#define QOP_OF(member_ptr, member) ((bgi_qop *)((char *)(member_ptr) - offsetof(bgi_qop, member)))

/* ---- the fd --------------------------------------------------------------------------------- */

/* Makes the fd readable (until the next poll drains the wake): async-signal-safe. */
static void signal_fd(bg_queue *q) { bgi_poller_wake(&q->poller); }

/* Arms the timer for the earliest timer when that is earlier than what it is armed for: a later
 * one is re-armed by the poll its early wake causes (one system call per earlier timer, not one
 * per change of the earliest, which moves with nearly every reply). */
static void sync_timerfd(bg_queue *q) {
  uint64_t next = bgi_timers_next(&q->timers);
  if (next >= q->poller.timer_due) return;
  bgi_poller_arm(&q->poller, next);
}

/* ---- the slab ------------------------------------------------------------------------------- */

static inline int op_live(bgi_qop *op) { return (atomic_load(&op->state) & BGI_QOP_LIVE) != 0; }

/* The driving thread's: a started operation is live in a new generation of its slot, not
 * cancelled; an ended one keeps the generation and loses both bits (a cancel's compare-and-swap
 * on the word it read before then fails). */
static void set_live(bgi_qop *op) {
  uint64_t gen = (atomic_load(&op->state) >> BGI_QOP_GEN_SHIFT) + 1;
  atomic_store(&op->state, gen << BGI_QOP_GEN_SHIFT | BGI_QOP_LIVE);
}
static void set_ended(bgi_qop *op) { atomic_fetch_and(&op->state, ~(uint64_t)(BGI_QOP_LIVE | BGI_QOP_CANCEL)); }

static int grow(bg_queue *q) {
  size_t k = atomic_load(&q->nchunks);
  if (k == BGI_QOP_MAX_CHUNKS) return BG_ENOMEM;
  bgi_qop *chunk = calloc(BGI_QOP_CHUNK, sizeof *chunk);
  if (!chunk) return BG_ENOMEM;
  for (size_t i = BGI_QOP_CHUNK; i-- > 0;) {
    chunk[i].q = q;
    chunk[i].sleep_timer.kind = BGI_QTIMER_SLEEP;
    chunk[i].deadline_timer.kind = BGI_QTIMER_DEADLINE;
    chunk[i].next = q->free;
    q->free = &chunk[i];
  }
  atomic_store(&q->chunks[k], chunk);
  atomic_store(&q->nchunks, k + 1);   /* after the chunk: a cancel never sees a NULL one */
  return BG_OK;
}

int bgi_queue_op_new(bg_queue *q, const bg_call *call, uint64_t tag, bgi_qop **out, bgi_err *err) {
  bgi_queue_fork_check(q);
  if (!q->free && grow(q) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory (operations in flight)");
  bgi_qop *op = q->free;
  q->free = op->next;
  op->next = NULL;
  atomic_store(&op->tag, tag);
  op->call = call;
  op->deadline_ns = bgi_call_deadline(call);
  op->depth = 0;
  op->waiting = BGI_QOP_RUNNING;
  op->io = NULL;
  op->discovering = 0;
  op->err.status = op->err.degraded = op->err.not_durable = 0;
  op->err.msg[0] = 0;
  op->status = op->source = op->degraded = BG_OK;
  op->value = 0;
  op->present = NULL;
  op->npresent = 0;
  op->is_info = 0;
  op->parent = NULL;
  op->sub = NULL;
  op->children = 0;
  *out = op;
  return BG_OK;
}

int bgi_queue_op_copy_items(bgi_qop *op, const void *const *items, const size_t *lens, size_t n, bgi_err *err) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += lens[i];
  if (n > op->items_cap) {
    size_t cap = op->items_cap ? op->items_cap : 16;
    while (cap < n) cap *= 2;
    const void **ptrs = realloc(op->item_ptrs, cap * sizeof *ptrs);
    if (ptrs) op->item_ptrs = ptrs;
    size_t *ls = ptrs ? realloc(op->item_lens, cap * sizeof *ls) : NULL;
    if (ls) op->item_lens = ls;
    uint8_t *ans = ls ? realloc(op->answers, cap) : NULL;
    if (ans) op->answers = ans;
    if (!ans) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    op->items_cap = op->answers_cap = cap;
  }
  bgi_buf_reset(&op->item_bytes);
  if (bgi_buf_reserve(&op->item_bytes, total ? total : 1) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    op->item_ptrs[i] = lens[i] ? op->item_bytes.data + op->item_bytes.len : NULL;
    if (lens[i]) memcpy(op->item_bytes.data + op->item_bytes.len, items[i], lens[i]);
    op->item_bytes.len += lens[i];
    op->item_lens[i] = lens[i];
  }
  return BG_OK;
}

void bgi_queue_op_discard(bg_queue *q, bgi_qop *op) {
  op->next = q->free;
  q->free = op;
}

/* ---- running operations ------------------------------------------------------------------------- */

static void advance(bg_queue *q, bgi_qop *op, int st);

/* A child of a fan-out ended: its status and message go to its subtask, its slot back to the free
 * list, and the parent goes on once it was the last. */
static void child_ended(bg_queue *q, bgi_qop *op, int st) {
  bgi_qop *parent = op->parent;
  op->sub->err = op->err;
  op->sub->err.status = st;
  op->sub->t->status = st;
  set_ended(op);
  bgi_queue_op_discard(q, op);
  if (--parent->children == 0) advance(q, parent, BG_OK);
}

static void complete(bg_queue *q, bgi_qop *op, int st) {
  bgi_timers_cancel(&q->timers, &op->sleep_timer);
  bgi_timers_cancel(&q->timers, &op->deadline_timer);
  q->nlive--;
  if (op->call) q->ncalls--;
  if (op->parent) {
    child_ended(q, op, st);
    return;
  }
  op->status = st;
  op->finish(op, st);
  op->degraded = st == BG_OK && op->source > BG_SOURCE_REDIS ? op->err.degraded : BG_OK;
  set_ended(op);
  if (q->done_tail) q->done_tail->next = op;
  else q->done_head = op;
  q->done_tail = op;
  op->next = NULL;
}

static void start_op(bg_queue *q, bgi_qop *op, bgi_task *task);

/* Starts a fan-out's tasks as children of op: BG_OK once all run (op->children counts those still
 * running), or the failure to make one (the ones made still run: op waits for them too). */
static int start_children(bg_queue *q, bgi_qop *op, bgi_task *t) {
  op->children = 1;   /* none may resume op before all are started */
  op->waiting = BGI_QOP_CHILDREN;
  for (size_t i = 0; i < t->nsubs; i++) {
    bgi_qop *c = NULL;
    bgi_subtask *sub = &t->subs[i];
    if (bgi_queue_op_new(q, op->call, atomic_load(&op->tag), &c, &sub->err) != BG_OK) {
      sub->t->status = sub->err.status;
      continue;
    }
    c->deadline_ns = op->deadline_ns;
    c->parent = op;
    c->sub = sub;
    op->children++;
    start_op(q, c, sub->t);
  }
  return --op->children == 0 ? BG_OK : BGI_PENDING;
}

/* Resumes op's task with st and runs it (and the tasks it starts) until it waits or ends. */
static void run_task(bg_queue *q, bgi_qop *op, int st) {
  op->waiting = BGI_QOP_RUNNING;
  op->io = NULL;
  for (;;) {
    bgi_task *t = op->stack[op->depth];
    switch (t->resume(t, st, &op->err)) {
      case BGI_NEXT_CALL:
        if (op->depth + 1 == BGI_TASK_MAX_DEPTH) {
          st = bgi_err_set(&op->err, BG_EINVAL, "internal: tasks nested too deep");
          break;
        }
        bgi_req_task_init(&op->rt, t->req, bgi_pipes_transport(q->pipes));
        op->stack[++op->depth] = &op->rt.t;
        st = BG_OK;
        break;
      case BGI_NEXT_SUB:
        if (op->depth + 1 == BGI_TASK_MAX_DEPTH) {
          st = bgi_err_set(&op->err, BG_EINVAL, "internal: tasks nested too deep");
          break;
        }
        op->stack[++op->depth] = t->sub;
        st = BG_OK;
        break;
      case BGI_NEXT_FANOUT:
        if (start_children(q, op, t) != BG_OK) return;   /* the last child to end resumes op */
        op->waiting = BGI_QOP_RUNNING;
        st = BG_OK;
        break;
      case BGI_NEXT_SLEEP:
        if (bgi_timers_arm(&q->timers, &op->sleep_timer, t->until_ns) != BG_OK) {
          st = bgi_err_set(&op->err, BG_ENOMEM, "out of memory (timers)");
          break;
        }
        op->waiting = BGI_QOP_SLEEPING;
        return;
      case BGI_NEXT_WAIT:
        op->waiting = BGI_QOP_IO;
        op->io = op->discovering ? NULL : &op->rt.x;
        return;
      default:
        st = t->status;
        if (op->depth == 0) {
          complete(q, op, st);
          return;
        }
        op->depth--;
        break;
    }
  }
}

/* run_task, with op as the queue's running operation meanwhile (bg_queue_running): an operation
 * may resume another (a connection's failure fails every request on it), hence the restore. */
static void advance(bg_queue *q, bgi_qop *op, int st) {
  bgi_qop *outer = q->running;
  q->running = op;
  run_task(q, op, st);
  q->running = outer;
}

void bgi_queue_io_done(bgi_req_task *rt, int st, const char *msg) {
  bgi_qop *op = QOP_OF(rt, rt);
  if (st != BG_OK) bgi_err_set(&op->err, st, "%s", msg);
  advance(op->q, op, st);
}

int bgi_queue_timer_arm(bg_queue *q, bgi_timer *t, uint64_t due_ns) {
  int st = bgi_timers_arm(&q->timers, t, due_ns);
  sync_timerfd(q);
  return st;
}

void bgi_queue_timer_cancel(bg_queue *q, bgi_timer *t) { bgi_timers_cancel(&q->timers, t); }

/* ---- discovery: where the client's calls go, found on a thread of the queue's -------------------- */

/*
 * One discovery, shared by its thread and the queue until both let go: the queue's close does not
 * wait for a connect or an answer that may never come (the thread is detached and ends by the
 * discovery's own bounds), and what the thread still uses then - the client, the fd it signals,
 * this record - stays alive until it ends.
 */
typedef struct bgi_qdisc {
  atomic_int refs;     /* the thread's, and the queue's until it took the outcome or closed */
  bg_client *client;   /* a reference */
  int fd;              /* a duplicate of the queue's wake fd (the queue's own may be closed first) */
  atomic_int done;
  int status;
  bgi_err err;
} bgi_qdisc;

/* Discoveries not freed yet, in the whole process (for the tests: a detached one ends and frees). */
static atomic_int discoveries_live;
int bgi_queue_discoveries_live(void) { return atomic_load(&discoveries_live); }

/* The negative control of the test that a close does not wait for a discovery (never set
 * otherwise): the close waits for it, as it once joined its thread. */
static atomic_int fault_close_waits_discovery;
void bgi_queue_fault_close_waits_discovery(int on) { atomic_store(&fault_close_waits_discovery, on); }

static void disc_unref(bgi_qdisc *d) {
  if (atomic_fetch_sub(&d->refs, 1) != 1) return;
  if (d->fd >= 0) close(d->fd);
  bgi_client_unref(d->client);
  free(d);
  atomic_fetch_sub(&discoveries_live, 1);
}

/* After fork, in the child: the record as copied, whatever its count (its thread is not here). */
static void disc_forget(bgi_qdisc *d) {
  atomic_store(&d->refs, 1);
  disc_unref(d);
}

static void *discover_thread(void *p) {
  bgi_qdisc *d = p;
  /* no deadline of a caller: the discovery's own bounds (a connect and its answer); each waiting
   * operation's deadline ends its own wait */
  d->status = bgi_client_discover(d->client, 0, &d->err);
  atomic_store(&d->done, 1);
  bgi_wake_fd_write(d->fd);   /* the queue may be closed: no SIGPIPE */
  disc_unref(d);
  return NULL;
}

static int start_discovery(bg_queue *q, bgi_err *err) {
  bgi_qdisc *d = calloc(1, sizeof *d);
  if (!d) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  atomic_fetch_add(&discoveries_live, 1);
  atomic_init(&d->refs, 2);
  atomic_init(&d->done, 0);
  d->fd = fcntl(bgi_poller_wake_fd(&q->poller), F_DUPFD_CLOEXEC, 0);
  bgi_client_ref(q->client);
  d->client = q->client;
  pthread_attr_t attr;
  pthread_t thread;
  int started = d->fd >= 0 && pthread_attr_init(&attr) == 0;
  if (started) {
    started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
              pthread_create(&thread, &attr, discover_thread, d) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) {
    atomic_store(&d->refs, 1);
    disc_unref(d);
    return bgi_err_set(err, BG_ENOMEM, "cannot start a thread to find the server");
  }
  q->disc = d;
  return BG_OK;
}

int bgi_queue_discover(bg_queue *q, bgi_req_task *rt, uint64_t deadline_ns, bgi_err *err) {
  bgi_qop *op = QOP_OF(rt, rt);
  (void)deadline_ns;
  if (!q->disc && start_discovery(q, err) != BG_OK) return err->status;
  op->discovering = 1;
  op->disc_next = q->disc_waiters;
  q->disc_waiters = op;
  return BGI_PENDING;
}

/* The discovery ended: every operation that waited for it goes on with its outcome. */
static void discovery_ended(bg_queue *q) {
  bgi_qdisc *d = q->disc;
  q->disc = NULL;
  bgi_qop *op = q->disc_waiters;
  q->disc_waiters = NULL;
  while (op) {
    bgi_qop *next = op->disc_next;
    op->discovering = 0;
    if (d->status == BG_OK) advance(q, op, BG_OK);
    else {
      op->err = d->err;
      advance(q, op, d->status);
    }
    op = next;
  }
  disc_unref(d);
}

/* An operation stops waiting for the discovery (its deadline, a cancel). */
static void stop_discovering(bg_queue *q, bgi_qop *op) {
  for (bgi_qop **pp = &q->disc_waiters; *pp; pp = &(*pp)->disc_next)
    if (*pp == op) {
      *pp = op->disc_next;
      break;
    }
  op->discovering = 0;
}

/* Ends op's wait with st (a deadline or a cancel): its I/O is abandoned to the connection. */
static void interrupt(bg_queue *q, bgi_qop *op, int st, const char *why) {
  if (op->waiting == BGI_QOP_IO && op->discovering) stop_discovering(q, op);
  else if (op->waiting == BGI_QOP_IO) bgi_pipes_abandon(q->pipes, op->io);
  else if (op->waiting == BGI_QOP_SLEEPING) bgi_timers_cancel(&q->timers, &op->sleep_timer);
  else return;
  bgi_err_set(&op->err, st, "%s", why);
  advance(q, op, st);
}

/* Makes op live and runs its task as far as it goes without waiting. */
static void start_op(bg_queue *q, bgi_qop *op, bgi_task *task) {
  op->stack[0] = task;
  op->depth = 0;
  set_live(op);
  q->nlive++;
  if (op->call) {
    q->ncalls++;
    if (!bgi_timer_armed(&q->call_scan)) bgi_timers_arm(&q->timers, &q->call_scan, bgi_now_ns() + bgi_ms_ns(BGI_WAIT_SLICE_MS));
  }
  if (op->deadline_ns) bgi_timers_arm(&q->timers, &op->deadline_timer, op->deadline_ns);
  advance(q, op, BG_OK);
}

void bgi_queue_op_start(bg_queue *q, bgi_qop *op, bgi_task *task, bgi_qop_finish_fn finish) {
  op->finish = finish;
  start_op(q, op, task);
  /* what it queued or finished waits for the host's next poll: wake it */
  if (!q->signalled) {
    q->signalled = 1;
    signal_fd(q);
  }
  sync_timerfd(q);
}

/* Every live operation: fn(q, op). */
static void for_each_live(bg_queue *q, void (*fn)(bg_queue *, bgi_qop *)) {
  size_t k = atomic_load(&q->nchunks);
  for (size_t c = 0; c < k; c++) {
    bgi_qop *chunk = atomic_load(&q->chunks[c]);
    for (size_t i = 0; i < BGI_QOP_CHUNK; i++)
      if (op_live(&chunk[i])) fn(q, &chunk[i]);
  }
}

static void cancel_if_asked(bg_queue *q, bgi_qop *op) {
  if (atomic_load(&op->state) & BGI_QOP_CANCEL) interrupt(q, op, BG_ECANCELED, "cancelled by its tag");
  else if (op->call && atomic_load(&op->call->cancelled)) interrupt(q, op, BG_ECANCELED, "cancelled by its call");
}

static void on_timer(bg_queue *q, bgi_timer *t) {
  switch (t->kind) {
    case BGI_QTIMER_CALL_SCAN:
      for_each_live(q, cancel_if_asked);
      if (q->ncalls) bgi_timers_arm(&q->timers, &q->call_scan, bgi_now_ns() + bgi_ms_ns(BGI_WAIT_SLICE_MS));
      return;
    case BGI_QTIMER_SLEEP:
      advance(q, QOP_OF(t, sleep_timer), BG_OK);
      return;
    case BGI_QTIMER_IO:
      bgi_pipes_on_timer(q->pipes, t);
      return;
    case BGI_QTIMER_DEADLINE:
    default:
      interrupt(q, QOP_OF(t, deadline_timer), BG_ETIMEOUT, "the call's deadline passed");
      return;
  }
}

/* One pass: the I/O that is ready, cancels, due timers, then the writes everything queued. */
static void run_once(bg_queue *q, const bgi_pevent *ev, int nev, unsigned flags) {
  if (flags & BGI_POLLER_WOKEN) q->signalled = 0;
  for (int i = 0; i < nev; i++) bgi_pipes_event(q->pipes, ev[i].tag, ev[i].events);
  if (q->disc && atomic_load(&q->disc->done)) discovery_ended(q);
  bgi_pipes_resolved(q->pipes);
  if (atomic_exchange(&q->cancel_asked, 0)) for_each_live(q, cancel_if_asked);
  uint64_t now = bgi_now_ns();
  for (bgi_timer *t; (t = bgi_timers_pop_due(&q->timers, now));) on_timer(q, t);
  bgi_pipes_flush(q->pipes);
}

/* ---- the ABI ---------------------------------------------------------------------------------- */

static void queue_free(bg_queue *q) {
  if (q->disc && atomic_load(&fault_close_waits_discovery))
    while (!atomic_load(&q->disc->done)) usleep(1000);
  if (q->disc) disc_unref(q->disc);   /* its thread ends on its own */
  /* first: the heap points into the pipes and the slots */
  bgi_timers_free(&q->timers);
  if (q->pipes) bgi_pipes_free(q->pipes);
  for (size_t c = 0; c < atomic_load(&q->nchunks); c++) {
    bgi_qop *chunk = atomic_load(&q->chunks[c]);
    for (size_t i = 0; i < BGI_QOP_CHUNK; i++) {
      bgi_buf_free(&chunk[i].item_bytes);
      free(chunk[i].item_ptrs);
      free(chunk[i].item_lens);
      free(chunk[i].answers);
    }
    free(chunk);
  }
  bgi_poller_close(&q->poller);
  bgi_errslot_destroy(&q->err);
  if (q->client) bgi_client_unref(q->client);
  free(q);
}

/* ---- fork (queue.h) ----------------------------------------------------------------------------- */

static void end_forked(bg_queue *q, bgi_qop *op) {
  interrupt(q, op, BG_ECANCELED, "the process forked while it was in flight: it is the parent process's, which "
            "sent it and reads its answer; nothing of it is sent or read in this one");
}

void bgi_queue_after_fork(bg_queue *q) {
  q->fork_gen = bgi_fork_gen_note();
  bgi_poller_after_fork(&q->poller);
  q->signalled = 0;
  /* before any operation is resumed: no inherited socket is left to write to or watch */
  bgi_pipes_fork_detach(q->pipes);
  for_each_live(q, end_forked);
  /* a discovery's thread was the parent's (its waiters ended above): this process's copy of its
   * record, and what the record holds here, go */
  if (q->disc) {
    disc_forget(q->disc);
    q->disc = NULL;
  }
  q->disc_waiters = NULL;
  bgi_pipes_fork_drop(q->pipes);
  sync_timerfd(q);
  if (q->done_head) {
    q->signalled = 1;
    signal_fd(q);
  }
}

static int open_queue(bg_queue **out, bg_client *c, bgi_err *err) {
  if (!out) return bgi_err_set(err, BG_EINVAL, "bg_queue_open: out must not be NULL");
  *out = NULL;
  if (!c) return bgi_err_set(err, BG_EINVAL, "bg_queue_open: client handle is NULL");
  bg_queue *q = calloc(1, sizeof *q);
  if (!q) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_errslot_init(&q->err);
  bgi_timers_init(&q->timers);
  q->fork_gen = bgi_fork_gen_note();
  q->call_scan.kind = BGI_QTIMER_CALL_SCAN;
  int st = bgi_poller_open(&q->poller, BGI_POLLER_DEFAULT, err);
  if (st == BG_OK) {
    bgi_client_ref(c);
    q->client = c;
    if (bgi_pipes_new(q, &q->pipes) != BG_OK) st = bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  if (st != BG_OK) {
    queue_free(q);
    return st;
  }
  *out = q;
  return BG_OK;
}

BG_API int bg_queue_open_ex(bg_queue **out, bg_call *call, bg_client *c) {
  bgi_err err = {0};
  if (!c) {
    if (out) *out = NULL;
    return bgi_call_null_handle(call, "client");
  }
  err.status = open_queue(out, c, &err);
  return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_queue_open(bg_queue **out, bg_client *c) { return bg_queue_open_ex(out, NULL, c); }

/* Ends a live operation at close: its task unwinds with BG_ECANCELED (freeing what it holds). */
static void abort_op(bg_queue *q, bgi_qop *op) { interrupt(q, op, BG_ECANCELED, "cancelled: the queue was closed"); }

BG_API void bg_queue_close(bg_queue *q) {
  if (!q) return;
  bgi_queue_fork_check(q);   /* a child closes its own fds, not the parent's poller's entries */
  for_each_live(q, abort_op);
  queue_free(q);
}

BG_API int bg_queue_fd(const bg_queue *q) { return q ? q->poller.fd : -1; }

BG_API const char *bg_queue_errmsg(const bg_queue *q) {
  return q ? bgi_errslot_view((bgi_errslot *)&q->err) : "queue handle is NULL";
}

/* The negative control of the test that a cancel reaches only its own operation (never set
 * otherwise): the cancel bit is set without the compare-and-swap, after a pause that lets the
 * slot's operation end and another take the slot. */
static atomic_int fault_cancel_unchecked;
void bgi_queue_fault_cancel_unchecked(int on) { atomic_store(&fault_cancel_unchecked, on); }

/* Sets the cancel bit of the operation in slot op if it is live with this tag, in one step with
 * the check: the compare-and-swap succeeds only on the state word read before the tag, so the
 * operation that was live then is still the slot's (its end, and any reuse, change the word). */
static void cancel_slot(bgi_qop *op, uint64_t tag) {
  uint64_t s = atomic_load(&op->state);
  if (!(s & BGI_QOP_LIVE) || (s & BGI_QOP_CANCEL) || atomic_load(&op->tag) != tag) return;
  if (atomic_load_explicit(&fault_cancel_unchecked, memory_order_relaxed)) {
    struct timespec pause = {0, 2000000};   /* 2 ms, time for the operation to end and the slot to be
                                               taken again, even under a sanitizer; async-signal-safe */
    nanosleep(&pause, NULL);
    atomic_fetch_or(&op->state, BGI_QOP_CANCEL);
    return;
  }
  atomic_compare_exchange_strong(&op->state, &s, s | BGI_QOP_CANCEL);   /* fails: it ended; not ours */
}

BG_API int bg_queue_cancel(bg_queue *q, uint64_t tag) {
  if (!q) return BG_EINVAL;
  size_t k = atomic_load(&q->nchunks);
  for (size_t c = 0; c < k; c++) {
    bgi_qop *chunk = atomic_load(&q->chunks[c]);
    for (size_t i = 0; i < BGI_QOP_CHUNK; i++) cancel_slot(&chunk[i], tag);
  }
  atomic_store(&q->cancel_asked, 1);
  /* a child that did not poll since the fork would wake the parent's loop: its own next poll
   * ends what was in flight at the fork anyway (async-signal-safe: no reset here) */
  if (!bgi_forked_since(q->fork_gen)) signal_fd(q);
  return BG_OK;
}

BG_API int bg_queue_running(const bg_queue *q, uint64_t *tag) {
  if (!q || !tag || !q->running) return BG_EINVAL;
  *tag = atomic_load(&q->running->tag);
  return BG_OK;
}

BG_API int bg_queue_poll(bg_queue *q, int64_t timeout_ms, bg_completion **out, size_t max, size_t *n) {
  bgi_pevent ev[POLL_EVENTS];
  unsigned flags;
  if (!q) return BG_EINVAL;
  if (!n || (max && !out) || timeout_ms < -1)
    return bgi_errslot_set(&q->err, BG_EINVAL, "bg_queue_poll: n must not be NULL, out must not be NULL when max > 0, "
                           "and timeout_ms is -1 (no limit), 0 or a number of ms");
  *n = 0;
  bgi_queue_fork_check(q);
  /* the last batch's slots are free again */
  while (q->handed) {
    bgi_qop *op = q->handed;
    q->handed = op->next;
    bgi_queue_op_discard(q, op);
  }
  uint64_t until = timeout_ms > 0 ? bgi_deadline_in_ms(timeout_ms) : 0;
  int nev = bgi_poller_wait(&q->poller, ev, POLL_EVENTS, 0, &flags);
  run_once(q, ev, nev > 0 ? nev : 0, flags);
  while (!q->done_head && timeout_ms != 0) {
    uint64_t now = bgi_now_ns();
    if (until && now >= until) break;
    int64_t wait = until ? bgi_ms_until(until, now) : -1;
    uint64_t next = bgi_timers_next(&q->timers);
    if (next != UINT64_MAX) {
      int64_t t = bgi_ms_until(next, now);
      if (wait < 0 || t < wait) wait = t;
    }
    nev = bgi_poller_wait(&q->poller, ev, POLL_EVENTS, wait > INT32_MAX ? INT32_MAX : (int)wait, &flags);
    if (nev < 0 && errno != EINTR) break;
    run_once(q, ev, nev > 0 ? nev : 0, flags);
  }
  while (q->done_head && *n < max) {
    bgi_qop *op = q->done_head;
    q->done_head = op->next;
    if (!q->done_head) q->done_tail = NULL;
    op->next = q->handed;
    q->handed = op;
    out[(*n)++] = (bg_completion *)op;
  }
  sync_timerfd(q);
  /* completions still waiting keep the fd readable */
  if (q->done_head && !q->signalled) {
    q->signalled = 1;
    signal_fd(q);
  }
  return BG_OK;
}

/* ---- completions ------------------------------------------------------------------------------ */

#define OP(c) ((const bgi_qop *)(c))

BG_API uint64_t bg_completion_tag(const bg_completion *c) { return c ? atomic_load(&OP(c)->tag) : 0; }
BG_API int bg_completion_status(const bg_completion *c) { return c ? OP(c)->status : BG_EINVAL; }
BG_API int bg_completion_source(const bg_completion *c) { return c ? OP(c)->source : BG_SOURCE_NONE; }
BG_API int bg_completion_degraded_status(const bg_completion *c) { return c ? OP(c)->degraded : BG_OK; }
BG_API int64_t bg_completion_value(const bg_completion *c) { return c ? OP(c)->value : 0; }

BG_API const char *bg_completion_errmsg(const bg_completion *c) {
  if (!c) return "completion handle is NULL";
  if (OP(c)->status != BG_OK) return bgi_err_text(&OP(c)->err);
  return OP(c)->degraded ? OP(c)->err.msg : "";
}

BG_API const uint8_t *bg_completion_present(const bg_completion *c, size_t *n) {
  if (n) *n = c ? OP(c)->npresent : 0;
  return c ? OP(c)->present : NULL;
}

BG_API int bg_completion_info(const bg_completion *c, uint64_t *size, uint32_t *hash_iterations,
                              int64_t *expected_insertions, double *fpp) {
  if (!c || !OP(c)->is_info) return BG_EINVAL;
  if (OP(c)->status != BG_OK) return OP(c)->status;
  if (size) *size = OP(c)->info_size;
  if (hash_iterations) *hash_iterations = OP(c)->info_k;
  if (expected_insertions) *expected_insertions = OP(c)->info_expected;
  if (fpp) *fpp = OP(c)->info_fpp;
  return BG_OK;
}

BG_API int bg_completion_partitions(const bg_completion *c, uint32_t *partitions) {
  if (!c || !OP(c)->is_info) return BG_EINVAL;
  if (partitions) *partitions = OP(c)->info_parts;
  return BG_OK;
}

BG_API void bg_completions_read(bg_completion *const *cs, size_t n, uint64_t *tags, int32_t *statuses,
                                int32_t *sources, int64_t *values) {
  if (!cs) return;
  for (size_t i = 0; i < n; i++) {
    const bgi_qop *op = OP(cs[i]);
    if (tags) tags[i] = atomic_load(&op->tag);
    if (statuses) statuses[i] = op->status;
    if (sources) sources[i] = op->source;
    if (values) values[i] = op->value;
  }
}
