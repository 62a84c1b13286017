#include "redis/mux.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cond.h"
#include "common/fork.h"
#include "common/wait.h"

/* Replies one call may wait for (as bgi_client_call's). */
#define MUX_MAX_REPLIES 4096
/* The reader looks at the oldest call's stall limit at least this often. */
#define MUX_POLL_MS 50

/*
 * io held: writes what is still pending (m->pend, from m->pend_off), as far as the socket takes it
 * now. Every byte goes through bgi_conn_send_some (no SIGPIPE, redis/conn.h). Returns 0, or 2
 * when the connection failed; *done: nothing is pending any more.
 */
static int flush_pending(bgi_mux *m, int *done) {
  bgi_err ignored = {0};
  while (m->pend_off < m->pend.len) {
    ssize_t k = bgi_conn_send_some(&m->conn, m->pend.data + m->pend_off, m->pend.len - m->pend_off, &ignored);
    if (k < 0) return 2;
    if (k == 0) break;
    m->pend_off += (size_t)k;
  }
  *done = m->pend_off == m->pend.len;
  if (*done) m->pend.len = m->pend_off = 0;
  return 0;
}

/*
 * io held: writes a batch: straight from b when nothing is pending (one system call for a batch
 * the socket takes whole), else after what is pending; the rest is kept in m->pend for the reader
 * to write on POLLOUT. Returns 0, 1 (out of memory) or 2 (the connection failed).
 */
static int send_batch(bgi_mux *m, const bgi_buf *b, int *done) {
  bgi_err ignored = {0};
  size_t sent = 0;
  atomic_fetch_add_explicit(&m->writes, 1, memory_order_relaxed);
  if (m->pend_off == m->pend.len) {
    while (sent < b->len) {
      ssize_t k = bgi_conn_send_some(&m->conn, b->data + sent, b->len - sent, &ignored);
      if (k < 0) return 2;
      if (k == 0) break;
      sent += (size_t)k;
    }
    if (sent == b->len) {
      *done = 1;
      return 0;
    }
  }
  /* the rest goes after what is pending; a TLS write retried later starts with the same bytes */
  if (bgi_buf_reserve(&m->pend, b->len - sent) != BG_OK) return 1;
  memcpy(m->pend.data + m->pend.len, b->data + sent, b->len - sent);
  m->pend.len += b->len - sent;
  return flush_pending(m, done);
}

static void wake_reader(bgi_mux *m) {
  char b = 1;
  /* a full pipe already wakes it */
  ssize_t ignored = write(m->wake[1], &b, 1);
  (void)ignored;
}

static void call_free(bgi_mux_call *mc) {
  mc->ws.track = NULL;   /* the connection's, not the workspace's to reset */
  bgi_conn_free(&mc->ws);
  free(mc->rep);
  bgi_park_destroy(&mc->park);
  free(mc);
}

static void put_free(bgi_muxset *s, bgi_mux_call *mc) {
  pthread_mutex_lock(&s->free_mu);
  mc->next = s->free;
  s->free = mc;
  pthread_mutex_unlock(&s->free_mu);
}

/* m->mu held (mc's state changed: its reply or the reader's turn): wakes it. The wake may reach
 * the call after it returned (a woken caller that sees done returns at once): then it is a
 * spurious wake-up of its workspace's next use, which waits in a loop. */
static void wake_now(bgi_mux_call *mc) { bgi_park_wake(&mc->park); }

/* m->mu held: every call in flight fails with BG_ECONN (abandoned ones are freed); silent: the
 * connection was given up for silence (bgi_mux_call.silent). */
static void fail_all(bgi_mux *m, const char *why, int silent) {
  bgi_mux_call *mc = m->head;
  m->head = m->tail = NULL;
  while (mc) {
    bgi_mux_call *next = mc->next;
    atomic_fetch_sub(&m->inflight, 1);
    if (mc->abandoned) {
      put_free(m->set, mc);
    } else {
      mc->status = BG_ECONN;
      mc->silent = silent;
      snprintf(mc->msg, sizeof mc->msg, "%s", why);
      mc->done = 1;
      wake_now(mc);
    }
    mc = next;
  }
  m->q.len = 0;
}

/* m->mu held, by a caller with no one reading: closes the connection after a failure. */
static void teardown(bgi_mux *m) {
  fail_all(m, m->fail_msg[0] ? m->fail_msg : "the multiplexed connection was lost", m->fail_silent);
  m->state = BGI_MUX_DOWN;
  m->failed = m->want_out = m->fail_silent = 0;
  pthread_mutex_lock(&m->io);
  bgi_conn_mark_lost(&m->conn, BG_ECONN);   /* a teardown follows a failure (m->failed) */
  bgi_conn_drop(&m->conn);
  m->pend.len = m->pend_off = 0;
  /* here, not when the next connection is in: a writer still holding a batch of this one's
   * (failed) calls must find the generation moved before any new context exists, or it would
   * write those stale commands onto the new connection, whose replies would go to other calls */
  m->gen++;
  pthread_mutex_unlock(&m->io);
  pthread_cond_broadcast(&m->cv);
}

/* m->mu held: records the first failure (the next caller not reading tears it down) and wakes a
 * reader in poll. */
static void set_failed(bgi_mux *m, const char *why) {
  if (!m->failed) snprintf(m->fail_msg, sizeof m->fail_msg, "%s", why);
  m->failed = 1;
  wake_reader(m);
}

/* m->mu held: set_failed for silence (bgi_conn_silent_at): the calls time out, not lost. */
static void set_silent(bgi_mux *m, const char *why) {
  if (!m->failed) m->fail_silent = 1;
  set_failed(m, why);
}

/* The reader's arena for the next reply: the head call's, or the spare one for pushes. */
static bgi_arena *target_arena(bgi_mux *m) {
  if (m->head) return &m->head->ws.arena;
  bgi_arena_reset(&m->spare);
  return &m->spare;
}

/* Calls made done while parsing a batch, woken after the lock is let go (a caller woken while
 * the reader still holds it would only block on it again). */
#define MUX_WAKE_BATCH 64
typedef struct wake_list {
  bgi_parker *p[MUX_WAKE_BATCH];
  int n;
} wake_list;

/* A complete reply (not a push): to the head call. m->mu held. */
static int deliver(bgi_mux *m, bgi_reply *r, wake_list *w) {
  bgi_mux_call *mc = m->head;
  if (!mc) return -1;   /* a reply nobody asked for: the stream is out of step */
  mc->rep[mc->got++] = r;
  m->progress_ns = bgi_now_ns();
  if (mc->got < mc->nrep) return 0;
  m->head = mc->next;
  if (!m->head) m->tail = NULL;
  m->calls++;
  atomic_fetch_sub(&m->inflight, 1);
  if (mc->abandoned) {
    put_free(m->set, mc);   /* its late replies are dropped with its arena */
  } else {
    mc->status = BG_OK;
    mc->done = 1;
    /* its parker lives as long as the set: a late wake of a reused call is a spurious one */
    if (w->n < MUX_WAKE_BATCH) w->p[w->n++] = &mc->park;
    else wake_now(mc);
  }
  return 0;
}

/* Parses every complete reply in the reader's buffer, under m->mu (one lock for the whole batch:
 * replies of a few bits parse in well under a microsecond); the redisReader is only used by the
 * caller whose reader's turn it is. */
static void parse_all(bgi_mux *m) {
  redisReader *rd = m->conn.ctx->reader;
  wake_list w;
  w.n = 0;
  pthread_mutex_lock(&m->mu);
  for (;;) {
    /* hiredis takes the arena for a reply when asked for one with the stack empty - even with
     * no byte of it buffered yet: ask only when a byte of it is there (then its call is linked) */
    if (rd->pos >= rd->len) break;
    /* a reply starts: its nodes go to the arena of the call it answers (FIFO) */
    if (rd->ridx == -1) rd->privdata = target_arena(m);
    void *obj = NULL;
    if (redisReaderGetReply(rd, &obj) != REDIS_OK || ((bgi_arena *)rd->privdata)->failed) {
      set_failed(m, rd->err ? "protocol error on the multiplexed connection" : "out of memory reading a reply");
      break;
    }
    if (!obj) break;
    bgi_reply *r = obj;
#ifdef REDIS_REPLY_PUSH
    if (r->type == REDIS_REPLY_PUSH) {
      /* in stream order: the calls whose replies follow see the epoch moved */
      bgi_conn_pushed(&m->conn);
      continue;
    }
#endif
    if (deliver(m, r, &w) != 0) {
      set_failed(m, "the server sent a reply no call was waiting for");
      break;
    }
  }
  pthread_mutex_unlock(&m->mu);
  for (int i = 0; i < w.n; i++) bgi_park_wake(w.p[i]);
}

/*
 * The reader's turn (m->mu held, m->reading claimed by the caller): polls the socket and parses
 * what arrives - for every call in flight - until its own call `mine` is done, the connection
 * fails, or until_ns passes. Returns with m->mu held.
 */
static void read_some(bgi_mux *m, const bgi_mux_call *mine, uint64_t until_ns) {
  uint64_t cmd_ns = bgi_ms_ns(m->set->ep->command_timeout_ms);
  if (m->idle) {
    /* nobody read since the last reader left: the silence is not the server's */
    m->progress_ns = bgi_now_ns();
    m->idle = 0;
  }
  while (!mine->done && !m->failed && m->state == BGI_MUX_UP) {
    uint64_t now = bgi_now_ns();
    if (now >= until_ns) break;
    /* no reply for this long while someone was reading: the server is stalled or the network is gone */
    uint64_t silent_at = m->head ? bgi_conn_silent_at(m->head->linked_ns, m->progress_ns, m->head->limit_ns, cmd_ns)
                                 : UINT64_MAX;
    if (now >= silent_at) {
      set_silent(m, "the server did not answer on the multiplexed connection in time");
      break;
    }
    uint64_t wait_ns = until_ns - now;
    if (silent_at - now < wait_ns) wait_ns = silent_at - now;
    int timeout = (int)(wait_ns / 1000000u) + 1;
    int want_out = m->want_out;
    int fd = m->conn.ctx->fd;
    pthread_mutex_unlock(&m->mu);

    struct pollfd p[2] = {{.fd = fd, .events = (short)(POLLIN | (want_out ? POLLOUT : 0))},
                          {.fd = m->wake[0], .events = POLLIN}};
    int r = poll(p, 2, timeout);
    if (r > 0 && (p[1].revents & POLLIN)) {
      char buf[64];
      while (read(m->wake[0], buf, sizeof buf) > 0) {
      }
    }
    int io_err = 0, out_done = -1;
    if (r > 0 && (p[0].revents & (POLLIN | POLLOUT | POLLERR | POLLHUP))) {
      bgi_err ignored = {0};
      pthread_mutex_lock(&m->io);
      if (p[0].revents & POLLOUT) {
        int done = 0;
        if (flush_pending(m, &done) != 0) io_err = 1;
        out_done = done;
      }
      if (!io_err && (p[0].revents & (POLLIN | POLLERR | POLLHUP))) {
        /* TLS: what OpenSSL decrypted beyond one read is taken now, poll would not show it */
        do io_err = bgi_conn_recv_some(&m->conn, &ignored) != BG_OK;
        while (!io_err && bgi_conn_buffered(&m->conn));
      }
      pthread_mutex_unlock(&m->io);
      if (!io_err) parse_all(m);
    }
    pthread_mutex_lock(&m->mu);
    if (out_done == 1) m->want_out = 0;
    if (io_err) set_failed(m, "the multiplexed connection was closed or failed");
  }
}

/* m->mu held, the reader's turn just ended: the first call still waiting takes it (usually the
 * one whose reply comes next), else the connection is idle until the next call. */
static void hand_off(bgi_mux *m) {
  for (bgi_mux_call *mc = m->head; mc; mc = mc->next)
    if (!mc->done && !mc->abandoned && !mc->detached) {
      wake_now(mc);
      return;
    }
  m->idle = 1;
}

static int make_wake(bgi_mux *m) {
  if (pipe(m->wake) != 0) {
    m->wake[0] = m->wake[1] = -1;
    return BG_ENOMEM;
  }
  fcntl(m->wake[0], F_SETFL, O_NONBLOCK);
  fcntl(m->wake[1], F_SETFL, O_NONBLOCK);
  fcntl(m->wake[0], F_SETFD, FD_CLOEXEC);
  fcntl(m->wake[1], F_SETFD, FD_CLOEXEC);
  return BG_OK;
}

static int mux_init(bgi_mux *m, bgi_muxset *s) {
  memset(m, 0, sizeof *m);
  m->set = s;
  if (make_wake(m) != BG_OK) return BG_ENOMEM;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->io, NULL);
  bgi_cond_init_monotonic(&m->cv);
  return BG_OK;
}

static void mux_destroy(bgi_mux *m) {
  pthread_mutex_lock(&m->mu);
  fail_all(m, "the client was closed", 0);
  pthread_mutex_unlock(&m->mu);
  bgi_conn_free(&m->conn);
  bgi_buf_free(&m->q);
  bgi_buf_free(&m->wbuf);
  bgi_buf_free(&m->pend);
  bgi_arena_free(&m->spare);
  close(m->wake[0]);
  close(m->wake[1]);
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->io);
}

int bgi_muxset_init(bgi_muxset *s, size_t n, uint64_t spin_ns, const bgi_endpoint *ep) {
  memset(s, 0, sizeof *s);
  s->ep = ep;
  s->spin_ns = spin_ns;
  pthread_mutex_init(&s->free_mu, NULL);
  if (!n) return BG_OK;
  if (!(s->mux = calloc(n, sizeof *s->mux))) return BG_ENOMEM;
  for (; s->n < n; s->n++)
    if (mux_init(&s->mux[s->n], s) != BG_OK) return BG_ENOMEM;
  return BG_OK;
}

void bgi_muxset_destroy(bgi_muxset *s) {
  if (!s->ep) return;   /* never initialised (a client that failed to open early) */
  for (size_t i = 0; i < s->n; i++) mux_destroy(&s->mux[i]);
  free(s->mux);
  s->mux = NULL;
  s->n = 0;
  for (bgi_mux_call *mc = s->free; mc;) {
    bgi_mux_call *next = mc->next;
    call_free(mc);
    mc = next;
  }
  s->free = NULL;
  for (bgi_mux_call *mc = s->graveyard; mc;) {
    bgi_mux_call *next = mc->next;
    call_free(mc);
    mc = next;
  }
  s->graveyard = NULL;
  pthread_mutex_destroy(&s->free_mu);
}

static void mux_after_fork(bgi_mux *m) {
  bgi_fork_remake_mutex(&m->mu);
  bgi_fork_remake_mutex(&m->io);
  memset(&m->cv, 0, sizeof m->cv);
  bgi_cond_init_monotonic(&m->cv);
  close(m->wake[0]);   /* the child's copies only: the parent's pipe stays open */
  close(m->wake[1]);
  /* without a pipe (no fd left) a reader's poll misses the early wake-ups (a failure, a full
   * socket) and ends at its own time limit instead */
  (void)make_wake(m);
  for (bgi_mux_call *mc = m->head; mc;) {
    bgi_mux_call *next = mc->next;
    put_free(m->set, mc);
    mc = next;
  }
  m->head = m->tail = NULL;
  atomic_store(&m->inflight, 0);
  bgi_conn_abandon(&m->conn);
  m->state = BGI_MUX_DOWN;
  m->gen++;   /* a workspace taken for the inherited connection is never sent on a new one */
  m->writing = m->reading = m->want_out = m->failed = 0;
  m->idle = 1;
  m->calls = 0;
  /* a writer of the parent's may have been between taking the queue and clearing its batch: none
   * of those bytes may go out on the child's connection (their replies would answer other calls) */
  m->q.len = m->wbuf.len = 0;
  m->pend.len = m->pend_off = 0;
  m->fail_msg[0] = 0;
}

void bgi_muxset_after_fork(bgi_muxset *s) {
  if (!s->ep) return;
  bgi_fork_remake_mutex(&s->free_mu);
  for (size_t i = 0; i < s->n; i++) mux_after_fork(&s->mux[i]);
}

/* Connects m (m->mu held, state DOWN; returns with it held) by the call's deadline (0: none,
 * the connect timeout alone). Other callers wait meanwhile. */
static int mux_connect(bgi_mux *m, uint64_t deadline_ns, bgi_err *err) {
  m->state = BGI_MUX_CONNECTING;
  pthread_mutex_unlock(&m->mu);
  pthread_mutex_lock(&m->io);
  /* the socket is non-blocking from the connect on: the reader polls, the writer leaves the rest
   * of a big write to it */
  int st = bgi_conn_open(&m->conn, m->set->ep, deadline_ns, 0, err);
  m->pend.len = m->pend_off = 0;
  pthread_mutex_unlock(&m->io);
  pthread_mutex_lock(&m->mu);
  if (st == BG_OK) {
    m->state = BGI_MUX_UP;
    pthread_mutex_lock(&m->io);   /* the writer checks it under io alone */
    m->gen++;
    pthread_mutex_unlock(&m->io);
    m->calls = 0;
    m->failed = m->want_out = m->fail_silent = 0;
    m->fail_msg[0] = 0;
    m->idle = 1;
  } else {
    m->state = BGI_MUX_DOWN;
  }
  pthread_cond_broadcast(&m->cv);
  return st;
}

static bgi_mux_call *take_call(bgi_muxset *s) {
  pthread_mutex_lock(&s->free_mu);
  bgi_mux_call *mc = s->free;
  if (mc) s->free = mc->next;
  pthread_mutex_unlock(&s->free_mu);
  if (mc) return mc;
  if (!(mc = calloc(1, sizeof *mc))) return NULL;
  if (!(mc->rep = malloc(MUX_MAX_REPLIES * sizeof *mc->rep))) {
    free(mc);
    return NULL;
  }
  bgi_park_init(&mc->park);
  return mc;
}

int bgi_muxset_begin(bgi_muxset *s, uint64_t deadline_ns, bgi_mux_call **out, bgi_err *err) {
  uint64_t started = bgi_now_ns();
  uint64_t until = deadline_ns ? deadline_ns : bgi_after_ms(started, s->ep->command_timeout_ms);
  /* the one with the fewest calls in flight, the first among equals: one caller at a time keeps
   * to one connection (and its tracking verdicts); many spread out */
  bgi_mux *m = &s->mux[0];
  int least = atomic_load(&m->inflight);
  for (size_t i = 1; i < s->n && least > 0; i++) {
    int k = atomic_load(&s->mux[i].inflight);
    if (k < least) m = &s->mux[i], least = k;
  }
  pthread_mutex_lock(&m->mu);
  /* a failed connection is first torn down by its reader (which fails what is in flight) */
  while (m->state != BGI_MUX_UP || m->failed) {
    if (m->state == BGI_MUX_UP && !m->reading) {
      teardown(m);   /* failed: what was in flight fails with it, then a new connection */
      continue;
    }
    if (m->state == BGI_MUX_DOWN) {
      /* by the call's own deadline: a caller that waited for another's connect has no more */
      int st = mux_connect(m, deadline_ns, err);
      if (st != BG_OK) {
        pthread_mutex_unlock(&m->mu);
        return st;
      }
      continue;
    }
    int r = bgi_cond_wait_cancellable(&m->cv, &m->mu, until);
    if (r != 0 && (m->state != BGI_MUX_UP || m->failed)) {
      pthread_mutex_unlock(&m->mu);
      if (r == BG_ECANCELED) return bgi_cancel_err(err, "waiting for a connection another call is making");
      return bgi_err_set(err, BG_ETIMEOUT, "connecting took longer than %lld ms",
                         (long long)bgi_ns_ms_ceil(bgi_now_ns() - started));
    }
  }
  uint64_t gen = m->gen;
  pthread_mutex_unlock(&m->mu);
  bgi_mux_call *mc = take_call(s);
  if (!mc) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  mc->mux = m;
  mc->gen = gen;
  mc->ws.track = m->conn.track;
  bgi_buf_reset(&mc->ws.out);
  mc->ws.durable = mc->ws.no_verdict = mc->ws.fault_bits_only = mc->ws.fault_no_guard = mc->ws.broken = 0;
  *out = mc;
  return BG_OK;
}

void bgi_muxset_end(bgi_muxset *s, bgi_mux_call *mc) { put_free(s, mc); }

/* m->mu held, and m->writing claimed: writes everything queued, batch after batch. */
static void write_queued(bgi_mux *m) {
  while (m->q.len && m->state == BGI_MUX_UP && !m->failed) {
    bgi_buf t = m->q;
    m->q = m->wbuf;
    m->wbuf = t;
    uint64_t gen = m->gen;
    int st = 0, done = 0;
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_lock(&m->io);
    /* a teardown and a reconnect may have come between: those bytes' calls were failed */
    if (m->conn.ctx && m->gen == gen) {
      st = send_batch(m, &m->wbuf, &done);
    } else {
      done = 1;
    }
    pthread_mutex_unlock(&m->io);
    m->wbuf.len = 0;
    pthread_mutex_lock(&m->mu);
    if (m->gen != gen) continue;
    if (st) set_failed(m, st == 1 ? "out of memory queueing a request" : "writing to the multiplexed connection failed");
    else if (!done && !m->want_out) {
      m->want_out = 1;   /* the socket is full: the reader writes the rest when it drains */
      wake_reader(m);
    }
  }
}

/* m->mu held: writes everything queued, unless someone is writing already (who then writes it). */
static void write_unless_writing(bgi_mux *m) {
  if (m->writing) return;
  m->writing = 1;
  write_queued(m);
  m->writing = 0;
}

/* A completed call's outcome (done was set after status and msg). */
static int finish(const bgi_mux_call *mc, bgi_err *err) {
  if (mc->status != BG_OK) return bgi_err_set(err, mc->status, "%s", mc->msg);
  return BG_OK;
}

static int submit(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, int hold, bgi_err *err) {
  bgi_mux *m = mc->mux;
  bgi_muxset *s = m->set;
  if (n > MUX_MAX_REPLIES) return bgi_err_set(err, BG_EINVAL, "internal: too many replies");
  if (n == 0) {
    mc->nrep = 0;
    return BG_OK;
  }
  uint64_t now = bgi_now_ns(), cmd_ns = bgi_ms_ns(s->ep->command_timeout_ms);
  bgi_arena_reset(&mc->ws.arena);
  mc->nrep = n;
  mc->got = 0;
  mc->done = mc->abandoned = mc->silent = 0;
  mc->status = BG_OK;
  mc->msg[0] = 0;
  mc->next = NULL;
  mc->detached = 1;
  mc->deadline_ns = deadline_ns;
  mc->linked_ns = now;
  mc->limit_ns = deadline_ns > now + cmd_ns ? deadline_ns - now : cmd_ns;
  pthread_mutex_lock(&m->mu);
  if (m->state != BGI_MUX_UP || m->failed || m->gen != mc->gen) {
    mc->earlier_calls = 1;   /* it was connected when the call began: as stale as a pooled one */
    pthread_mutex_unlock(&m->mu);
    return bgi_err_set(err, BG_ECONN, "the multiplexed connection was lost");
  }
  if (bgi_buf_reserve(&m->q, mc->ws.out.len) != BG_OK) {
    pthread_mutex_unlock(&m->mu);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  memcpy(m->q.data + m->q.len, mc->ws.out.data, mc->ws.out.len);
  m->q.len += mc->ws.out.len;
  mc->earlier_calls = m->calls;
  if (m->tail) m->tail->next = mc;
  else m->head = mc;
  m->tail = mc;
  atomic_fetch_add(&m->inflight, 1);
  /* this caller writes, unless someone is writing already (who then writes this too). Leaving
   * the commands to an awake reader instead, to be written with what else the callers it woke
   * queued, made the writes at 64 threads 2.5x bigger - and a CI rehearsal then saw crossed
   * answers after rapid CLIENT KILLs under ASan (test_pipeline; not understood yet): not done */
  if (!hold) write_unless_writing(m);
  pthread_mutex_unlock(&m->mu);
  return BG_OK;
}

int bgi_mux_submit(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err) {
  return submit(mc, n, deadline_ns, 0, err);
}

int bgi_mux_submit_held(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err) {
  return submit(mc, n, deadline_ns, 1, err);
}

void bgi_mux_flush(bgi_mux *m) {
  pthread_mutex_lock(&m->mu);
  write_unless_writing(m);
  pthread_mutex_unlock(&m->mu);
}

int bgi_mux_wait(bgi_mux_call *mc, bgi_err *err) {
  if (mc->nrep == 0) return BG_OK;
  bgi_mux *m = mc->mux;
  bgi_muxset *s = m->set;
  uint64_t deadline_ns = mc->deadline_ns, now = mc->linked_ns;
  pthread_mutex_lock(&m->mu);
  /* its owner waits now: hand-offs may wake it (a turn passed over it meanwhile left the
   * connection idle if no one else waited: the loop below then reads) */
  mc->detached = 0;
  while (!mc->done) {
    int timed_out = 0;
    if (m->failed && !m->reading && m->gen == mc->gen) {
      teardown(m);   /* fails mc too */
      continue;
    }
    if (!m->reading && m->state == BGI_MUX_UP && m->gen == mc->gen) {
      /* no one reads: this caller does, for everyone, until its own reply is there */
      m->reading = 1;
      read_some(m, mc, deadline_ns);
      m->reading = 0;
      if (m->failed) {
        teardown(m);
        continue;
      }
      timed_out = !mc->done && bgi_now_ns() >= deadline_ns;
      if (timed_out) mc->abandoned = 1;   /* before the hand-off, which then skips it */
      hand_off(m);
      if (!timed_out) continue;
    }
    if (!timed_out) {
      /* parked without the lock: the reader that completes it wakes it, and it returns without
       * taking the lock again (the reader is likely to hold it, parsing the next replies) */
      unsigned ticket = bgi_park_ticket(&mc->park);
      pthread_mutex_unlock(&m->mu);
      int r = bgi_park_wait(&mc->park, ticket, deadline_ns, s->spin_ns);
      if (mc->done) return finish(mc, err);
      pthread_mutex_lock(&m->mu);
      timed_out = r == ETIMEDOUT && !mc->done;
    }
    if (timed_out) {
      mc->abandoned = 0;
      if (atomic_load(&s->fault_no_discard)) {
        /* the negative control: forget the call, its replies go to whoever is next */
        bgi_mux_call **pp = &m->head, *prev = NULL;
        while (*pp && *pp != mc) prev = *pp, pp = &(*pp)->next;
        if (*pp) {
          *pp = mc->next;
          if (m->tail == mc) m->tail = prev;
          atomic_fetch_sub(&m->inflight, 1);
        }
        pthread_mutex_unlock(&m->mu);
        /* not reused: the reader may still be parsing into its arena */
        pthread_mutex_lock(&s->free_mu);
        mc->next = s->graveyard;
        s->graveyard = mc;
        pthread_mutex_unlock(&s->free_mu);
        pthread_mutex_lock(&m->mu);
        if (!m->reading) hand_off(m);
        pthread_mutex_unlock(&m->mu);
      } else {
        mc->abandoned = 1;   /* the reader reads its replies, drops them and frees it */
        /* a hand-off may have been meant for this caller: pass it on */
        if (!m->reading) hand_off(m);
        pthread_mutex_unlock(&m->mu);
      }
      return bgi_err_set(err, BG_ETIMEOUT, "the server did not answer within %lld ms",
                         (long long)bgi_ns_ms_ceil(deadline_ns - now));
    }
  }
  pthread_mutex_unlock(&m->mu);
  return finish(mc, err);
}

int bgi_mux_roundtrip(bgi_mux_call *mc, size_t n, uint64_t deadline_ns, bgi_err *err) {
  int st = bgi_mux_submit(mc, n, deadline_ns, err);
  return st == BG_OK ? bgi_mux_wait(mc, err) : st;
}
