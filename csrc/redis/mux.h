/*
 * Internal: multiplexed connections (BG_OPT_PIPELINE): the calls of many threads share a few
 * connections per server, their commands written together and their replies matched in order.
 *
 * A call takes a workspace (bgi_mux_call: the out buffer, ASK scratch, index scratch, reply
 * arena and flags a pooled bgi_conn would carry, so the build and parse functions are the same)
 * from the set's free list, builds into it, and submits it to one connection of the set. Submit
 * appends the encoded commands to the connection's queue in one piece (a call's MULTI..EXEC, or
 * its CLIENT CACHING + BITFIELD_RO, stay adjacent) and links the call at the tail of the
 * connection's FIFO, both under the connection's lock, so the byte order on the wire is the FIFO
 * order. Whoever submits while no one is writing becomes the writer and writes everything queued
 * meanwhile in one write (flat combining: no writer thread, no wake-up hop, and the more callers
 * there are, the bigger each write).
 *
 * Reading has no thread of its own either (leader/follower): a waiting caller that finds no one
 * reading takes the reader's turn, polls the (non-blocking) socket and parses reply after reply
 * straight into the arena of the call at the FIFO's head, waking each call as its replies are
 * complete, until its own are; then it hands the turn to the first call still waiting (usually
 * the one whose reply is next). Why not a reader thread: on a busy machine (here: 2 cores, many
 * processes) every reply then needs that thread scheduled before any caller can go on, which
 * measured a p99 of 3.6-6.4x the baseline's at 8 threads (bench/README.md); the reader's own reply costs no
 * wake-up at all. RESP3 pushes are taken in stream order (the connection's tracking epoch moves
 * before the replies behind the push are handed out), which keeps "no push before the reply" a
 * proof per call; with no call in flight nobody reads, so a push waits in the socket for the next
 * reader, as on a pooled connection. The hiredis context is touched by the writer and the reader
 * under the connection's io lock (TLS: one SSL object must not be read and written at once).
 *
 * A call whose deadline passes returns BG_ETIMEOUT at once; it stays in the FIFO, marked
 * abandoned, its workspace owned by the connection until its replies have been read (and
 * dropped): a late reply is never given to another call. A connection that fails (an I/O or
 * protocol error, or a reader waiting max(command timeout, the oldest call's wait) without a
 * reply) fails every call in flight on it with BG_ECONN; the next call reconnects.
 */
#ifndef BG_INTERNAL_MUX_H
#define BG_INTERNAL_MUX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/park.h"
#include "redis/conn.h"

/* Calls whose commands are bigger than this go to a pooled connection of their own (bulk). */
#define BGI_MUX_MAX_CALL_BYTES (64 * 1024)

typedef struct bgi_mux bgi_mux;
typedef struct bgi_muxset bgi_muxset;

typedef struct bgi_mux_call {
  bgi_conn ws;                 /* what build() and parse() see; ws.ctx stays NULL, ws.track is the
                                  connection's tracking state */
  bgi_reply **rep;             /* the replies, filled in by the reader */
  size_t nrep, got;
  uint64_t earlier_calls;      /* calls the connection had completed when this one was linked */
  uint64_t gen;                /* the connection (bgi_mux.gen) the workspace was taken for */
  uint64_t linked_ns;          /* when it was linked */
  uint64_t limit_ns;           /* max(command timeout, its wait): the connection is given up when a
                                  reader waited this long for it (or since the last reply) */
  atomic_int done;             /* set last, after status and the replies: a woken caller that
                                  sees it returns without the lock */
  int abandoned, status;
  int silent;                  /* BG_ECONN: the connection was given up for silence (bgi_conn_silent_at) */
  int detached;                /* submitted, its owner not waiting for it yet (bgi_mux_submit): a
                                  hand-off of the reader's turn passes over it */
  uint64_t deadline_ns;        /* the submit's */
  char msg[128];               /* why it failed (the connection's loss) */
  bgi_parker park;             /* woken when it is done or handed the reader's turn */
  bgi_mux *mux;                /* the connection it was submitted to */
  struct bgi_mux_call *next;   /* FIFO / free list */
} bgi_mux_call;

struct bgi_mux {
  pthread_mutex_t mu;          /* everything below but the context */
  pthread_cond_t cv;           /* callers wait for a connect or a teardown */
  pthread_mutex_t io;          /* conn.ctx: writes and reads */
  bgi_conn conn;               /* the transport (its own_track is the shared tracking state) */
  bgi_muxset *set;
  bgi_buf q, wbuf;             /* queued commands; the writer's batch being written */
  bgi_buf pend;                /* under io: bytes of earlier batches the socket did not take yet, */
  size_t pend_off;             /* from pend_off on (the reader writes them on POLLOUT) */
  bgi_mux_call *head, *tail;   /* in flight, in wire order */
  int state;                   /* BGI_MUX_DOWN / CONNECTING / UP */
  uint64_t gen;                /* connections made (under mu and io) */
  int writing, want_out, failed;
  int reading;                 /* a caller has the reader's turn */
  int idle;                    /* no one has read since the last turn ended */
  uint64_t progress_ns;        /* the last reply read */
  uint64_t calls;              /* calls completed on the current connection */
  atomic_int inflight;         /* calls linked and not done (the set's picker reads it) */
  atomic_uint_least64_t writes; /* batches written (a test counts a fan-out's: one per connection) */
  int wake[2];                 /* pipe: wakes the reader's poll (a failure, a full socket) */
  bgi_arena spare;             /* pushes that arrive with nothing in flight */
  char fail_msg[128];
  int fail_silent;             /* the failure is silence: the calls fail with silent set */
};

struct bgi_muxset {
  bgi_mux *mux;
  size_t n;
  const bgi_endpoint *ep;
  uint64_t spin_ns;
  pthread_mutex_t free_mu;
  bgi_mux_call *free;
  bgi_mux_call *graveyard;     /* fault_no_discard's forgotten calls, freed with the set */
  /* The pipelining tests' negative control, never set otherwise: a call whose deadline passes is
   * unlinked from the FIFO instead of marked abandoned, so its late replies go to the next call. */
  atomic_int fault_no_discard;
};

#define BGI_MUX_DOWN 0
#define BGI_MUX_CONNECTING 1
#define BGI_MUX_UP 2

/* n connections (lazily connected) to ep; n == 0 leaves it off (bgi_muxset_on is 0). A waiting
 * call spins (yielding) up to spin_ns before it sleeps (BG_OPT_PIPELINE_SPIN_US). */
int bgi_muxset_init(bgi_muxset *s, size_t n, uint64_t spin_ns, const bgi_endpoint *ep);
static inline int bgi_muxset_on(const bgi_muxset *s) { return s->n > 0; }
/* Stops the readers, fails what is in flight, frees everything. */
void bgi_muxset_destroy(bgi_muxset *s);
/* In a child after fork (common/fork.h; no thread of the child uses the set meanwhile): every
 * connection is let go without a write (bgi_conn_abandon) and left down for the next call to
 * connect; the calls in flight are the parent's threads' (not in the child), their workspaces go
 * back to the free list; the locks and the reader's wake pipe (shared with the parent: a byte
 * either wrote would wake the other's reader) are made anew. */
void bgi_muxset_after_fork(bgi_muxset *s);

/*
 * A workspace on a connected connection of the set, ws.out reset and flags cleared: connecting it
 * when needed, or waiting for another caller's connect, until the call's absolute deadline_ns (0:
 * the command timeout from now, a connect the connect timeout); the wait ends with BG_ECANCELED
 * when the current call is cancelled.
 */
int bgi_muxset_begin(bgi_muxset *s, uint64_t deadline_ns, bgi_mux_call **out, bgi_err *err);
/* Gives the workspace back (after parse, or without submitting it). */
void bgi_muxset_end(bgi_muxset *s, bgi_mux_call *mc);

/*
 * Sends mc->ws.out and waits for n replies (mc->rep[0..n)), at most until deadline_ns (absolute,
 * > 0). BG_ETIMEOUT: mc belongs to the connection now (do not touch or end it). BG_ECONN: the
 * connection was lost (mc->earlier_calls says whether it had served calls before this one), or
 * given up for silence (mc->silent: a timeout to the caller, client/call_loop.c).
 */
int bgi_mux_roundtrip(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err);

/*
 * The two halves of bgi_mux_roundtrip, for a caller with several calls in flight at once (a
 * fan-out on the blocking runner, common/task.h): submit links mc and writes its commands; wait
 * (by the submit's deadline) then reads as the roundtrip does. Between the two no hand-off of the
 * reader's turn goes to mc (its owner is busy elsewhere: other callers on the connection must not
 * wait for it); its replies are still read by whoever reads. A failed submit needs no wait.
 */
int bgi_mux_submit(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err);
int bgi_mux_wait(bgi_mux_call *mc, bgi_err *err);
/* Submit that links mc and queues its commands but leaves the write to the next writer or to
 * bgi_mux_flush: a fan-out holds all its calls, then flushes each connection - one write per
 * connection, not one per call (a partitioned batch of 100 made ~70 send calls). */
int bgi_mux_submit_held(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err);
/* Writes what is queued on m unless someone is writing it already. */
void bgi_mux_flush(bgi_mux *m);

#endif
