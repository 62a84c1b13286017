/*
 * A submission queue's connections (queue.h) and the transport its request tasks use
 * (client/transport.h): per server, a few shared non-blocking connections (BG_OPT_PIPELINE_CONNS)
 * and one for requests that need a connection of their own (big batches, WAIT), each a FIFO of
 * requests in wire order whose replies are matched in order - the multiplexed connection of
 * redis/mux.h, driven by the queue's thread through its poller (client/poller.h) instead of by waiting callers.
 *
 * A connection is made when a request first needs it: the non-blocking connect and the TLS
 * handshake run as the queue is polled, then the RESP handshake's commands go first and its
 * replies are the FIFO's first entry; requests queue behind them meanwhile. A request whose wait
 * ended (its deadline, a cancel) is abandoned: its entry stays in the FIFO until its replies are
 * read and dropped, so a late reply never reaches another request. A connection that fails - an
 * I/O or protocol error, the handshake refused - fails every request on it with the cause, and the
 * request task decides whether to retry (a stale connection), as with the blocking transport. One
 * given up for silence (no reply for max(command timeout, the oldest request's wait):
 * bgi_conn_silent_at) fails them as silent: the request task makes that a timeout, as mux.c's.
 */
#include "client/queue.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

#include "common/clock.h"

#define PIPE_DOWN 0
#define PIPE_CONNECTING 1   /* TCP connect and TLS handshake under way */
#define PIPE_UP 2           /* writing (the RESP handshake first) and reading */

typedef struct pipe_s pipe_s;

typedef struct pentry {
  bgi_conn ws;               /* the request's build space; ws.track is its pipe's tracking state */
  bgi_reply **rep;
  size_t cap, nrep, got;
  uint64_t earlier;          /* requests the connection had answered when this one was linked */
  uint64_t linked_ns, wait_ns;
  int abandoned;
  bgi_timer timer;           /* the end of its wait */
  bgi_req_task *waiter;      /* resumed when the replies are in; NULL for the handshake's */
  pipe_s *pipe;
  struct pentry *next;
} pentry;

struct pipe_s {
  bgi_pipes *set;
  const bgi_endpoint *ep;
  bgi_conn conn;             /* conn.own_track is the connection's tracking state */
  int state, own;
  uint32_t watched;          /* the BGI_PEV_* events the poller watches for it (0: not registered) */
  bgi_buf q;                 /* bytes to write, from q_off on */
  size_t q_off;
  pentry *head, *tail;       /* in wire order */
  pentry hs;                 /* the RESP handshake's replies */
  uint64_t calls;            /* requests answered since connecting */
  uint64_t progress_ns;      /* the last reply read (or the connect) */
  size_t inflight;
  int dirty;                 /* on the set's list of pipes with bytes to write */
  pipe_s *next_dirty;
  bgi_arena spare;           /* pushes that arrive with nothing in flight */
};

typedef struct server {
  const bgi_endpoint *ep;
  pipe_s *pipes;             /* n shared, then the one for requests of their own */
  size_t n;
} server;

struct bgi_pipes {
  bgi_transport tr;
  bg_queue *q;
  server *servers;
  size_t nservers, cap;
  size_t per_server;         /* shared connections per server */
  pentry *free;
  pipe_s *dirty;
  /* The queue tests' negative control, never set otherwise: an abandoned request is unlinked from
   * its FIFO instead of kept, so its late replies go to the requests behind it. */
  int fault_no_discard;
  pentry *graveyard;         /* its forgotten entries, freed with the set */
  /* The stall tests' negative control, never set otherwise: a connection given up for silence
   * fails its requests as a lost one, and each send waits a whole command timeout (a retry too). */
  int fault_fresh_waits;
  pentry *orphans;           /* fork: the inherited pipes' entries, until their requests ended */
  int any_resolving;         /* some pipe's host name is being resolved: look at them when woken */
};

/* ---- entries ------------------------------------------------------------------------------------ */

static pentry *entry_take(bgi_pipes *p) {
  pentry *e = p->free;
  if (e) {
    p->free = e->next;
  } else if ((e = calloc(1, sizeof *e))) {
    e->timer.kind = BGI_QTIMER_IO;
    e->ws.arena.first_cap = 2048;   /* one reply of a few bits; a batch's grows it once */
  } else {
    return NULL;
  }
  e->next = NULL;
  e->abandoned = 0;
  e->waiter = NULL;
  e->ws.durable = e->ws.no_verdict = e->ws.fault_bits_only = e->ws.fault_no_guard = e->ws.broken = 0;
  bgi_buf_reset(&e->ws.out);
  return e;
}

static void entry_put(bgi_pipes *p, pentry *e) {
  bgi_queue_timer_cancel(p->q, &e->timer);
  e->ws.track = NULL;   /* the pipe's, not the entry's to reset */
  e->next = p->free;
  p->free = e;
}

static void entry_free(pentry *e) {
  e->ws.track = NULL;
  bgi_conn_free(&e->ws);
  free(e->rep);
  free(e);
}

static void free_entries(pentry *e) {
  while (e) {
    pentry *next = e->next;
    entry_free(e);
    e = next;
  }
}

/* ---- readiness (client/poller.h) ---------------------------------------------------------------- */

static void watch(pipe_s *pp, uint32_t events) {
  if (!pp->conn.ctx || events == pp->watched) return;
  bgi_poller_watch(&pp->set->q->poller, pp->conn.ctx->fd, pp, pp->watched, events);
  pp->watched = events;
}

/* before the socket closes: the poll backend's array would keep its number */
static void unwatch(pipe_s *pp) {
  if (pp->watched && pp->conn.ctx) bgi_poller_watch(&pp->set->q->poller, pp->conn.ctx->fd, pp, pp->watched, 0);
  pp->watched = 0;
}

static void mark_dirty(pipe_s *pp) {
  if (pp->dirty) return;
  pp->dirty = 1;
  pp->next_dirty = pp->set->dirty;
  pp->set->dirty = pp;
}

/* ---- failure ------------------------------------------------------------------------------------- */

/* Closes pp and fails every request on it with st (abandoned ones are freed); silent: it was given
 * up for silence (bgi_xfer.silent). */
static void pipe_fail_as(pipe_s *pp, int st, const char *why, int silent) {
  bgi_pipes *p = pp->set;
  char msg[BGI_ERRMSG_MAX];
  pentry *e = pp->head;
  snprintf(msg, sizeof msg, "%s: %s", pp->ep->label[0] ? pp->ep->label : "the server", why);
  /* A connection the server had accepted was the server's a moment ago: what it leaves unanswered
   * is sent again on another (a connection killed, idle or fresh; a restart), at most a few times
   * per request (bgi_xfer.stale_tries). One whose connect failed tells that the server cannot be
   * reached: final. */
  uint64_t proven = pp->state == PIPE_UP, pp_calls = pp->calls;
  pp->head = pp->tail = NULL;
  pp->inflight = 0;
  bgi_queue_timer_cancel(p->q, &pp->hs.timer);
  unwatch(pp);
  bgi_conn_mark_lost(&pp->conn, st);
  bgi_conn_drop(&pp->conn);
  pp->state = PIPE_DOWN;
  pp->q.len = pp->q_off = 0;
  /* resumed once the pipe is down and its list detached: a retry may connect it again at once */
  while (e) {
    pentry *next = e->next;
    if (e != &pp->hs) {
      bgi_req_task *rt = e->abandoned ? NULL : e->waiter;
      if (rt) {
        rt->x.earlier_calls = e->earlier + proven;
        rt->x.progressed = pp_calls > e->earlier;
        rt->x.silent = silent;
        bgi_queue_timer_cancel(p->q, &e->timer);
        e->waiter = NULL;
        bgi_queue_io_done(rt, st, msg);   /* the task releases the entry */
      } else {
        entry_put(p, e);
      }
    }
    e = next;
  }
}

static void pipe_fail(pipe_s *pp, int st, const char *why) { pipe_fail_as(pp, st, why, 0); }

/* ---- connecting ------------------------------------------------------------------------------------ */

/* Starts connecting pp: the TCP connect (and, when it is done, TLS) run as the queue is polled;
 * the RESP handshake's commands go first. */
static int pipe_connect(pipe_s *pp, bgi_err *err) {
  int flags = 0;
  size_t n = 0;
  /* a host name is resolved on a thread, which wakes the queue through its wake fd when done */
  int st = bgi_conn_start(&pp->conn, pp->ep, bgi_poller_wake_fd(&pp->set->q->poller), err);
  if (st != BG_OK) return st;
  pp->state = PIPE_CONNECTING;
  pp->calls = 0;
  pp->progress_ns = bgi_now_ns();
  bgi_buf_reset(&pp->q);
  pp->q_off = 0;
  if ((st = bgi_conn_handshake_build(&pp->conn, pp->ep, flags, &pp->q, &n, err)) != BG_OK) {
    bgi_conn_drop(&pp->conn);
    pp->state = PIPE_DOWN;
    return st;
  }
  pp->hs.nrep = n;
  pp->hs.got = 0;
  pp->hs.next = NULL;
  pp->hs.waiter = NULL;
  pp->hs.linked_ns = pp->progress_ns;
  pp->hs.wait_ns = bgi_ms_ns(pp->ep->connect_timeout_ms);
  if (pp->hs.cap < n) {
    bgi_reply **r = realloc(pp->hs.rep, n * sizeof *r);
    if (!r) {
      bgi_conn_drop(&pp->conn);
      pp->state = PIPE_DOWN;
      return bgi_err_set(err, BG_ENOMEM, "out of memory");
    }
    pp->hs.rep = r;
    pp->hs.cap = n;
  }
  pp->head = pp->tail = &pp->hs;
  bgi_arena_reset(&pp->hs.ws.arena);
  /* the connect and both handshakes get the connect timeout */
  if (bgi_queue_timer_arm(pp->set->q, &pp->hs.timer, pp->progress_ns + pp->hs.wait_ns) != BG_OK) {
    bgi_conn_drop(&pp->conn);
    pp->state = PIPE_DOWN;
    pp->head = pp->tail = NULL;
    return bgi_err_set(err, BG_ENOMEM, "out of memory (timers)");
  }
  if (bgi_conn_resolving(&pp->conn)) pp->set->any_resolving = 1;   /* no socket yet */
  else watch(pp, BGI_PEV_OUT);
  return BG_OK;
}

/* The TCP connect or TLS handshake moved on: UP once both are done. */
static void connect_step(pipe_s *pp) {
  bgi_err err = {0};
  short want = 0;
  int st = bgi_conn_connect_step(&pp->conn, pp->ep, &want, &err);
  if (st == BGI_PENDING) {
    if (want) watch(pp, want == POLLIN ? BGI_PEV_IN : BGI_PEV_OUT);
    else pp->set->any_resolving = 1;   /* still resolving: the resolver wakes the queue */
    return;
  }
  if (st != BG_OK) {
    pipe_fail(pp, st, err.msg);
    return;
  }
  pp->state = PIPE_UP;
  pp->progress_ns = bgi_now_ns();
  watch(pp, BGI_PEV_IN | BGI_PEV_OUT);
  mark_dirty(pp);
}

/* ---- reading ---------------------------------------------------------------------------------------- */

/* The arena for the next reply: the head's, or the spare one for pushes. */
static bgi_arena *target_arena(pipe_s *pp) {
  if (pp->head) return &pp->head->ws.arena;
  bgi_arena_reset(&pp->spare);
  return &pp->spare;
}

/* The head's replies are all in: it leaves the FIFO and its waiter goes on. 0, or -1 when the
 * pipe failed (the handshake refused). */
static int entry_done(pipe_s *pp) {
  bgi_pipes *p = pp->set;
  pentry *e = pp->head;
  pp->head = e->next;
  if (!pp->head) pp->tail = NULL;
  if (e == &pp->hs) {
    bgi_err err = {0};
    bgi_queue_timer_cancel(p->q, &e->timer);
    if (bgi_conn_handshake_take(&pp->conn, pp->ep, e->rep, e->nrep, &err) != BG_OK) {
      pipe_fail(pp, err.status, err.msg);
      return -1;
    }
    return 0;
  }
  pp->calls++;
  pp->inflight--;
  bgi_req_task *rt = e->abandoned ? NULL : e->waiter;
  if (!rt) {
    entry_put(p, e);   /* its late replies are dropped with its arena */
    return 0;
  }
  bgi_queue_timer_cancel(p->q, &e->timer);
  e->waiter = NULL;
  rt->x.rep = e->rep;
  rt->x.earlier_calls = e->earlier;
  bgi_queue_io_done(rt, BG_OK, NULL);
  return 0;
}

/* Parses every complete reply the reader holds. */
static void parse_all(pipe_s *pp) {
  redisReader *rd = pp->conn.ctx->reader;
  for (;;) {
    /* hiredis takes the arena for a reply when asked for one with the stack empty - even with
     * no byte of it buffered yet: ask only when a byte of it is there */
    if (rd->pos >= rd->len) return;
    if (rd->ridx == -1) rd->privdata = target_arena(pp);
    void *obj = NULL;
    if (redisReaderGetReply(rd, &obj) != REDIS_OK || ((bgi_arena *)rd->privdata)->failed) {
      pipe_fail(pp, rd->err ? BG_EPROTO : BG_ENOMEM,
                rd->err ? "protocol error on the connection" : "out of memory reading a reply");
      return;
    }
    if (!obj) return;
    bgi_reply *r = obj;
#ifdef REDIS_REPLY_PUSH
    if (r->type == REDIS_REPLY_PUSH) {
      /* in stream order: the requests whose replies follow see the epoch moved */
      bgi_conn_pushed(&pp->conn);
      continue;
    }
#endif
    pentry *e = pp->head;
    if (!e) {
      pipe_fail(pp, BG_EPROTO, "the server sent a reply no request was waiting for");
      return;
    }
    e->rep[e->got++] = r;
    pp->progress_ns = bgi_now_ns();
    if (e->got == e->nrep && entry_done(pp) != 0) return;
    if (pp->state != PIPE_UP) return;   /* a waiter's task failed it (it cannot) - or the handshake did */
  }
}

static void pipe_read(pipe_s *pp) {
  bgi_err err = {0};
  do {
    if (bgi_conn_recv_some(&pp->conn, &err) != BG_OK) {
      pipe_fail(pp, err.status, err.msg);
      return;
    }
    parse_all(pp);
  } while (pp->state == PIPE_UP && bgi_conn_buffered(&pp->conn));
}

/* ---- writing ---------------------------------------------------------------------------------------- */

static void pipe_write(pipe_s *pp) {
  bgi_err err = {0};
  while (pp->q_off < pp->q.len) {
    ssize_t k = bgi_conn_send_some(&pp->conn, pp->q.data + pp->q_off, pp->q.len - pp->q_off, &err);
    if (k < 0) {
      pipe_fail(pp, err.status, err.msg);
      return;
    }
    if (k == 0) {
      watch(pp, BGI_PEV_IN | BGI_PEV_OUT);   /* the socket is full: go on when it drains */
      return;
    }
    pp->q_off += (size_t)k;
  }
  /* the handshake's secret must not linger in the reusable buffer */
  memset(pp->q.data, 0, pp->q.len);
  pp->q.len = pp->q_off = 0;
  watch(pp, BGI_PEV_IN);
}

void bgi_pipes_resolved(bgi_pipes *p) {
  if (!p->any_resolving) return;
  p->any_resolving = 0;   /* set again by a pipe still resolving */
  for (size_t i = 0; i < p->nservers; i++)
    for (size_t j = 0; j <= p->servers[i].n; j++) {
      pipe_s *pp = &p->servers[i].pipes[j];
      if (pp->state == PIPE_CONNECTING && bgi_conn_resolving(&pp->conn)) connect_step(pp);
    }
}

void bgi_pipes_flush(bgi_pipes *p) {
  while (p->dirty) {
    pipe_s *pp = p->dirty;
    p->dirty = pp->next_dirty;
    pp->dirty = 0;
    if (pp->state == PIPE_UP) pipe_write(pp);
  }
}

void bgi_pipes_event(bgi_pipes *p, void *ptr, uint32_t events) {
  pipe_s *pp = ptr;
  (void)p;
  if (pp->state == PIPE_CONNECTING) {
    connect_step(pp);
    if (pp->state != PIPE_UP) return;
  }
  if (pp->state == PIPE_UP && (events & BGI_PEV_OUT)) pipe_write(pp);
  if (pp->state == PIPE_UP && (events & (BGI_PEV_IN | BGI_PEV_ERR))) pipe_read(pp);
}

/* ---- waits ------------------------------------------------------------------------------------------- */

/* The negative control's abandon: e leaves its FIFO for the set's graveyard (freed with the set),
 * so its replies are taken for the next requests'. */
static void forget(pipe_s *pp, pentry *e) {
  pentry **pe = &pp->head, *prev = NULL;
  while (*pe && *pe != e) prev = *pe, pe = &(*pe)->next;
  if (!*pe) return;
  *pe = e->next;
  if (pp->tail == e) pp->tail = prev;
  pp->inflight--;
  e->next = pp->set->graveyard;
  pp->set->graveyard = e;
}

void bgi_pipes_abandon(bgi_pipes *p, bgi_xfer *x) {
  pentry *e = x->h;
  x->kept = 1;
  if (!e) return;
  bgi_queue_timer_cancel(p->q, &e->timer);
  e->waiter = NULL;
  e->abandoned = 1;
  if (p->fault_no_discard) forget(e->pipe, e);
}

/* ---- fork (queue.h: bgi_queue_after_fork) ---------------------------------------------------- */

void bgi_pipes_fork_detach(bgi_pipes *p) {
  for (size_t i = 0; i < p->nservers; i++)
    for (size_t j = 0; j <= p->servers[i].n; j++) {
      pipe_s *pp = &p->servers[i].pipes[j];
      pp->watched = 0;   /* the queue's new poller has none of its sockets */
      /* the entries stay valid for the requests that still point at them, off the pipe: a
       * request that went on after its end would find the pipe down and connect it anew */
      for (pentry *e = pp->head; e;) {
        pentry *next = e->next;
        if (e != &pp->hs) {
          e->next = p->orphans;
          p->orphans = e;
        }
        e = next;
      }
      pp->head = pp->tail = NULL;
      pp->inflight = 0;
      pp->dirty = 0;
      bgi_queue_timer_cancel(p->q, &pp->hs.timer);
      bgi_conn_abandon(&pp->conn);
      pp->state = PIPE_DOWN;
      if (pp->q.len) memset(pp->q.data, 0, pp->q.len);   /* a handshake's secret may wait there */
      pp->q.len = pp->q_off = 0;
    }
  p->dirty = NULL;
}

void bgi_pipes_fork_drop(bgi_pipes *p) {
  while (p->orphans) {
    pentry *e = p->orphans;
    p->orphans = e->next;
    entry_put(p, e);   /* abandoned: their requests were ended */
  }
}

void bgi_pipes_fault_no_discard(bgi_pipes *p, int on) { p->fault_no_discard = on; }

void bgi_pipes_fault_fresh_waits(bgi_pipes *p, int on) { p->fault_fresh_waits = on; }

void bgi_pipes_on_timer(bgi_pipes *p, bgi_timer *t) {
  pentry *e = (pentry *)((char *)t - offsetof(pentry, timer));
  pipe_s *pp = e->pipe;
  if (e == &pp->hs) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot connect (and complete the handshake) within %lld ms",
             (long long)pp->ep->connect_timeout_ms);
    pipe_fail(pp, BG_ECONN, msg);
    return;
  }
  /* e's own wait ended: it times out, as a blocking call does (redis/mux.c). The connection is
   * given up only when the oldest request on it, another one, got no reply for its whole wait
   * (at least the command timeout) and e still waited after that. */
  uint64_t now = bgi_now_ns(), cmd = bgi_ms_ns(pp->ep->command_timeout_ms);
  pentry *h = pp->head;
  if (h && h != e && h != &pp->hs && now >= bgi_conn_silent_at(h->linked_ns, pp->progress_ns, h->wait_ns, cmd)) {
    /* no reply for this long: the server is stalled or the network is gone. Every request on it
     * times out with e (the server answers in order: none of them could be answered first). */
    char msg[160];
    snprintf(msg, sizeof msg, "the server did not answer on the connection for %lld ms",
             (long long)bgi_ns_ms_ceil(now - (h->linked_ns > pp->progress_ns ? h->linked_ns : pp->progress_ns)));
    pipe_fail_as(pp, BG_ECONN, msg, !p->fault_fresh_waits);
    return;
  }
  bgi_req_task *rt = e->waiter;
  if (!rt) return;
  bgi_pipes_abandon(p, &rt->x);   /* its replies are read and dropped when they come */
  char msg[160];
  snprintf(msg, sizeof msg, "the server did not answer within %lld ms", (long long)bgi_ns_ms_ceil(e->wait_ns));
  bgi_queue_io_done(rt, BG_ETIMEOUT, msg);
}


/* ---- the transport ------------------------------------------------------------------------------------ */

static server *server_of(bgi_pipes *p, const bgi_endpoint *ep) {
  for (size_t i = 0; i < p->nservers; i++)
    if (p->servers[i].ep == ep) return &p->servers[i];
  if (p->nservers == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 4;
    server *s = realloc(p->servers, cap * sizeof *s);
    if (!s) return NULL;
    p->servers = s;
    p->cap = cap;
  }
  server *s = &p->servers[p->nservers];
  s->ep = ep;
  s->n = p->per_server;
  if (!(s->pipes = calloc(s->n + 1, sizeof *s->pipes))) return NULL;
  for (size_t i = 0; i <= s->n; i++) {
    s->pipes[i].set = p;
    s->pipes[i].ep = ep;
    s->pipes[i].own = i == s->n;
    s->pipes[i].conn.track = &s->pipes[i].conn.own_track;
    s->pipes[i].hs.pipe = &s->pipes[i];
    s->pipes[i].hs.timer.kind = BGI_QTIMER_IO;
  }
  p->nservers++;
  return s;
}

static int ready(bgi_transport *tr, bgi_task *waiter, bg_client *cl, uint64_t deadline_ns, bgi_err *err) {
  bgi_pipes *p = (bgi_pipes *)tr;
  bgi_client_fork_check(cl);   /* the routes and a discovery use the client's own connections */
  if (atomic_load_explicit(&cl->ready, memory_order_acquire)) return BG_OK;
  return bgi_queue_discover(p->q, (bgi_req_task *)waiter, deadline_ns, err);
}

static int acquire(bgi_transport *tr, bgi_task *waiter, const bgi_route *route, int own, uint64_t deadline_ns,
                   bgi_xfer *x, bgi_err *err) {
  bgi_pipes *p = (bgi_pipes *)tr;
  /* a connection is made when needed, bounded by the connect timeout (the deadline ends the wait) */
  (void)waiter, (void)deadline_ns;
  server *s = server_of(p, route->ep);
  if (!s) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  /* the shared connection with the fewest requests in flight; the first among equals */
  pipe_s *pp = &s->pipes[own ? s->n : 0];
  for (size_t i = 1; !own && i < s->n && pp->inflight > 0; i++)
    if (s->pipes[i].inflight < pp->inflight) pp = &s->pipes[i];
  if (pp->state == PIPE_DOWN) {
    int st = pipe_connect(pp, err);
    if (st != BG_OK) return st;
  }
  pentry *e = entry_take(p);
  if (!e) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  e->pipe = pp;
  e->ws.track = pp->conn.track;
  x->ws = &e->ws;
  x->h = e;
  x->shared = !own;
  x->stale_tries = own ? 2 : s->n + 1;
  x->progressed = 0;
  x->silent = 0;
  x->kept = 0;
  x->earlier_calls = 0;
  x->rep = NULL;
  return BG_OK;
}

static int roundtrip(bgi_transport *tr, bgi_task *waiter, bgi_xfer *x, size_t n, uint64_t deadline_ns, int64_t wait_ms,
                     bgi_err *err) {
  bgi_pipes *p = (bgi_pipes *)tr;
  pentry *e = x->h;
  pipe_s *pp = e->pipe;
  if (p->fault_fresh_waits && !deadline_ns) wait_ms = pp->ep->command_timeout_ms;
  uint64_t now = bgi_now_ns(), until_ns = deadline_ns ? deadline_ns : bgi_after_ms(now, wait_ms);
  if (pp->state == PIPE_DOWN) {
    /* the connection failed between acquire and now (another request's failure) */
    x->earlier_calls = 1;
    return bgi_err_set(err, BG_ECONN, "the connection was lost");
  }
  if (n > e->cap) {
    bgi_reply **r = realloc(e->rep, n * sizeof *r);
    if (!r) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    e->rep = r;
    e->cap = n;
  }
  if (bgi_buf_reserve(&pp->q, e->ws.out.len) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  memcpy(pp->q.data + pp->q.len, e->ws.out.data, e->ws.out.len);
  pp->q.len += e->ws.out.len;
  bgi_arena_reset(&e->ws.arena);
  e->nrep = n;
  e->got = 0;
  e->earlier = pp->calls;
  e->linked_ns = now;
  e->wait_ns = until_ns > now ? until_ns - now : 0;
  e->waiter = (bgi_req_task *)waiter;
  e->next = NULL;
  if (pp->tail) pp->tail->next = e;
  else pp->head = e;
  pp->tail = e;
  pp->inflight++;
  if (bgi_queue_timer_arm(p->q, &e->timer, until_ns) != BG_OK) {
    /* it is linked: its replies are dropped when they come */
    e->abandoned = 1;
    e->waiter = NULL;
    x->kept = 1;
    return bgi_err_set(err, BG_ENOMEM, "out of memory (timers)");
  }
  if (pp->state == PIPE_UP) mark_dirty(pp);
  return BGI_PENDING;
}

static void release(bgi_transport *tr, bgi_xfer *x) {
  bgi_pipes *p = (bgi_pipes *)tr;
  pentry *e = x->h;
  if (e && !x->kept) entry_put(p, e);
  x->h = NULL;
}

bgi_transport *bgi_pipes_transport(bgi_pipes *p) { return &p->tr; }

int bgi_pipes_new(bg_queue *q, bgi_pipes **out) {
  bgi_pipes *p = calloc(1, sizeof *p);
  if (!p) return BG_ENOMEM;
  p->q = q;
  p->tr.ready = ready;
  p->tr.acquire = acquire;
  p->tr.roundtrip = roundtrip;
  p->tr.release = release;
  p->per_server = q->client->opts.pipeline_conns > 0 ? (size_t)q->client->opts.pipeline_conns : 1;
  *out = p;
  return BG_OK;
}

void bgi_pipes_free(bgi_pipes *p) {
  if (!p) return;
  for (size_t i = 0; i < p->nservers; i++) {
    server *s = &p->servers[i];
    for (size_t j = 0; j <= s->n; j++) {
      pipe_s *pp = &s->pipes[j];
      unwatch(pp);
      for (pentry *e = pp->head; e;) {
        pentry *next = e->next;
        if (e != &pp->hs) entry_free(e);
        e = next;
      }
      pp->hs.ws.track = NULL;
      bgi_conn_free(&pp->hs.ws);
      free(pp->hs.rep);
      bgi_conn_free(&pp->conn);
      bgi_buf_free(&pp->q);
      bgi_arena_free(&pp->spare);
    }
    free(s->pipes);
  }
  free(p->servers);
  free_entries(p->free);
  free_entries(p->graveyard);
  free_entries(p->orphans);
  free(p);
}
