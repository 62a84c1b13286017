/*
 * The renewal threads: one per client and server with holds, not one per handle (10,000 handles
 * of one client on one server holding locks cost one thread, not 10,000). A handle goes on the
 * list with its first hold and stays there until bg_lock_close; every third of the handle's lease
 * its thread renews each hold of it (the holds of all its owners), the way Redisson's watchdog
 * renews an RLock every lockWatchdogTimeout / 3. A thread with no handle of its own on the list
 * ends; the next hold starts another.
 *
 * Why per server, not one for the process: a renewal is a blocking round trip, and a server that
 * hangs (frozen, or gone without a reset) keeps each one waiting; with one thread, a few handles
 * on that server delayed every other handle of the process past its lease (test_lock_renew's
 * frozen-server cases). So a thread renews the handles of one client that live on one server: a
 * standalone client's, or those of a cluster client whose slot a node served when the handle was
 * put on the list (nodes live as long as their client; a slot that moves later is still renewed
 * right, by the client's routing, only on its old node's thread).
 *
 * One round trip per server and pass: a pass takes every handle of the thread's own that is due
 * within half a period (renewing early only extends a lease), so handles registered at scattered
 * moments share passes, and sends the renewal steps of all of them - one Lua step per handle,
 * per BGI_RENEW_BATCH of its holds - as one pipeline (no MULTI: each step is atomic on its own
 * keys, and they need not be atomic together; one script over every lock key would need them all
 * in one slot). Before, each handle had a round trip of its own, one after the other: the last
 * handle of a pass waited for all the others', and one slow answer (a server or a thread stalled
 * on a loaded machine: 60-230 ms were measured under TSan) made every handle after it late -
 * the renewal 127 ms late and the 600 ms lease taken at 727 ms (test_lock_renew measures each
 * renewal's lateness, and its control sends one round trip per handle again). In a cluster the
 * pipeline goes to the node that serves the parts' slots now (parts grouped by node); a redirect
 * of one slot sends that round trip's parts again one by one, each routed by its own slot.
 *
 * A renewal that finds the hold gone (its lease ran out while this process stalled, or the key
 * was deleted) marks the hold lost. No round trip waits past the end of the first lease in it
 * (whatever the command timeout: an answer after that is of no use), and a handle whose renewal
 * failed is due again after a quarter period instead of a whole one.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cond.h"
#include "lock/lock.h"

/* A round trip still gets this long when the first lease in it runs out sooner (it will find
 * that hold gone, or the server's clock slower than ours). */
#define MIN_WAIT_MS 10

/* A running renewal thread: the handles whose rn_domain is its key are its own. */
typedef struct domain {
  const void *key;   /* a client or a cluster node (domain_of; compared, never dereferenced) */
  struct domain *next;
} domain;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static pthread_cond_t reg_cv;      /* the threads' sleep; and unregister waiting out a round */
static bg_lock *reg_head;          /* every registered handle, of every client */
static domain *reg_domains;        /* the threads running */

/* the renewal trace and the fault of the tests (lock.h): off unless a test turns them on */
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int trace_on;
static bgi_renew_rec *trace_buf;
static size_t trace_cap, trace_n;
static _Atomic uint64_t fault_delay_ns;
static _Atomic int fault_one_domain;
static _Atomic int fault_per_handle;

size_t bgi_lock_renew_trace(bgi_renew_rec *buf, size_t cap) {
  pthread_mutex_lock(&trace_mu);
  size_t n = trace_n;
  trace_buf = buf, trace_cap = buf ? cap : 0, trace_n = 0;
  atomic_store(&trace_on, buf != NULL);
  pthread_mutex_unlock(&trace_mu);
  return n;
}

void bgi_lock_renew_fault_delay(uint64_t ns) { atomic_store(&fault_delay_ns, ns); }
void bgi_lock_renew_fault_one_thread(int on) { atomic_store(&fault_one_domain, on); }
void bgi_lock_renew_fault_per_handle(int on) { atomic_store(&fault_per_handle, on); }

static void trace(const bgi_renew_rec *r) {
  pthread_mutex_lock(&trace_mu);
  if (trace_buf && trace_n < trace_cap) trace_buf[trace_n] = *r;
  if (trace_buf) trace_n++;
  pthread_mutex_unlock(&trace_mu);
}

/* fork: the child has no renewal thread, whatever the parent had, and its handles are not to be
 * used (lock.h); a handle the child opens itself must find an empty list and start a thread */
static void fork_prepare(void) { pthread_mutex_lock(&reg_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&reg_mu); }
static void fork_child(void) {
  reg_head = NULL;
  while (reg_domains) {
    domain *d = reg_domains;
    reg_domains = d->next;
    free(d);
  }
  bgi_cond_init_monotonic(&reg_cv); /* the parent's thread may have been waiting on it */
  pthread_mutex_unlock(&reg_mu);
}

static void init_cv(void) {
  bgi_cond_init_monotonic(&reg_cv);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static uint64_t period_ns(const bg_lock *l) { return bgi_ms_ns(l->lease_ms / 3 > 0 ? l->lease_ms / 3 : 1); }

/* ---- one pass --------------------------------------------------------------------------------- */

/* A pass's work, the thread's own (grown as needed, kept across passes): the due handles, a
 * snapshot of their holds, and the parts (up to BGI_RENEW_BATCH holds of one handle) they make. */
typedef struct due_handle {
  bg_lock *l;
  uint64_t due_ns;      /* when it was due (the trace) */
  int failed;           /* a part of it failed: due again after a quarter period */
} due_handle;

typedef struct hold_snap {
  uint64_t seq, gen, lease_from_ns, held_from_ns;
  size_t at;            /* its index in the handle's holds then (checked: records move when one goes) */
} hold_snap;

typedef struct part {
  size_t handle;        /* in due[] */
  size_t first, n;      /* its holds: snaps[first .. first + n) */
  const void *node;     /* the node that serves its slot now (its client, standalone) */
  int sent, status;
  uint64_t sent_ns, done_ns, trip;
} part;

typedef struct pass {
  due_handle *due;
  size_t ndue, due_cap;
  hold_snap *snaps;     /* the holds' snapshot, and as the steps take them: */
  uint64_t *seqs;
  int *kinds;
  char *held;           /* the steps' answers */
  size_t nsnaps, snap_cap;
  part *parts;
  size_t nparts, part_cap;
  bgi_renew_part *req;  /* one round trip's parts ... */
  size_t *req_of;       /* ... and which of parts[] each is */
  size_t req_cap;
} pass;

static _Atomic uint64_t trips;   /* numbers the round trips (the trace) */

/* Makes room for need elements of size bytes in *p (capacity *cap); 0, or -1 out of memory. */
static int reserve(void *p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *q = realloc(*(void **)p, c * size);
  if (!q) return -1;
  *(void **)p = q;
  *cap = c;
  return 0;
}

static int reserve_snaps(pass *ps, size_t need) {
  size_t c[4] = {ps->snap_cap, ps->snap_cap, ps->snap_cap, ps->snap_cap};
  int bad = reserve(&ps->snaps, &c[0], need, sizeof *ps->snaps) || reserve(&ps->seqs, &c[1], need, sizeof *ps->seqs) ||
            reserve(&ps->kinds, &c[2], need, sizeof *ps->kinds) || reserve(&ps->held, &c[3], need, 1);
  /* the arrays that grew keep their new room; the common capacity is the smallest */
  size_t m = c[0];
  for (int i = 1; i < 4; i++) m = c[i] < m ? c[i] : m;
  ps->snap_cap = m;
  return bad ? -1 : 0;
}

static void pass_free(pass *ps) {
  free(ps->due), free(ps->snaps), free(ps->seqs), free(ps->kinds), free(ps->held);
  free(ps->parts), free(ps->req), free(ps->req_of);
}

/* The node that serves l's slot now: its cluster node, else its client. */
static const void *serving(const bg_lock *l) {
  bgi_node *node = l->client->cluster ? bgi_cluster_route(l->client->cluster, (unsigned)l->slot) : NULL;
  return node ? (const void *)node : (const void *)l->client;
}

/* Snapshots the holds of due[d] into parts of at most BGI_RENEW_BATCH holds. */
static void snapshot(pass *ps, size_t d) {
  bg_lock *l = ps->due[d].l;
  pthread_mutex_lock(&l->mu);
  if (reserve_snaps(ps, ps->nsnaps + l->nholds) != 0) {
    pthread_mutex_unlock(&l->mu);
    ps->due[d].failed = 1;   /* out of memory: tried again soon */
    return;
  }
  size_t first = ps->nsnaps;
  for (size_t i = 0; i < l->nholds; i++) {
    const bgi_hold *h = &l->holds[i];
    if (h->count == 0) continue;   /* a first acquire in flight: registered again when it lands */
    ps->snaps[ps->nsnaps] = (hold_snap){h->seq, h->gen, h->lease_from_ns, h->held_from_ns, i};
    ps->seqs[ps->nsnaps] = h->seq;
    ps->kinds[ps->nsnaps++] = h->kind;
  }
  pthread_mutex_unlock(&l->mu);
  const void *node = serving(l);
  for (size_t at = first; at < ps->nsnaps; at += BGI_RENEW_BATCH) {
    if (reserve(&ps->parts, &ps->part_cap, ps->nparts + 1, sizeof *ps->parts) != 0) {
      ps->due[d].failed = 1;
      return;
    }
    size_t n = ps->nsnaps - at < BGI_RENEW_BATCH ? ps->nsnaps - at : BGI_RENEW_BATCH;
    ps->parts[ps->nparts++] = (part){.handle = d, .first = at, .n = n, .node = node};
  }
}

/* One round trip for req[0..n), then, if the pipeline failed as a whole on a redirect (one slot
 * moved or migrates: the others were sent where it went), each part alone, routed by its slot. */
static void round_trip(pass *ps, size_t n) {
  /* an answer is of use until the first of its leases runs out (the later ones would have had
   * time for another try; a failed round trip is tried again a quarter period later) */
  uint64_t until = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    const part *p = &ps->parts[ps->req_of[i]];
    for (size_t j = p->first; j < p->first + p->n; j++) {
      uint64_t end = bgi_after_ms(ps->snaps[j].lease_from_ns, ps->req[i].l->lease_ms);
      if (end < until) until = end;
    }
  }
  /* the frozen-server tests' control waits out the command timeout, as every renewal did in 0.2 */
  int unbounded = atomic_load(&fault_one_domain);
  for (int alone = 0; alone < 2; alone++) {
    for (size_t i = 0; i < n; i++) {
      size_t m = alone ? 1 : n;
      bgi_err err = {0};
      uint64_t sent = bgi_now_ns(), trip = atomic_fetch_add(&trips, 1);
      uint64_t deadline = unbounded ? 0 : until > bgi_after_ms(sent, MIN_WAIT_MS) ? until : bgi_after_ms(sent, MIN_WAIT_MS);
      int st = bgi_lock_step_renew(ps->req + i, m, deadline, &err);
      uint64_t done = bgi_now_ns();
      for (size_t j = i; j < i + m; j++) {
        part *p = &ps->parts[ps->req_of[j]];
        p->sent = 1, p->status = ps->req[j].status, p->sent_ns = sent, p->done_ns = done, p->trip = trip;
      }
      if (!alone) {
        if (st != BG_ESERVER || n == 1) return;
        break;
      }
    }
  }
}

/* Renews every part, one round trip per node (at most BGI_STEPS_MAX parts each). */
static void renew_parts(pass *ps) {
  int one_each = atomic_load(&fault_per_handle);   /* the control: a round trip per handle, as before */
  size_t cap = ps->req_cap;
  if (reserve(&ps->req_of, &cap, ps->nparts, sizeof *ps->req_of) != 0 ||
      reserve(&ps->req, &ps->req_cap, ps->nparts, sizeof *ps->req) != 0)
    return;   /* out of memory: no part is sent, every handle is tried again soon */
  for (size_t k = 0; k < ps->nparts; k++) {
    if (ps->parts[k].sent) continue;
    size_t n = 0;
    for (size_t j = k; j < ps->nparts && n < BGI_STEPS_MAX; j++) {
      part *p = &ps->parts[j];
      if (p->sent || p->node != ps->parts[k].node) continue;
      if (one_each && ps->parts[j].handle != ps->parts[k].handle) continue;
      ps->req[n] = (bgi_renew_part){.l = ps->due[p->handle].l, .seqs = ps->seqs + p->first,
                                    .kinds = ps->kinds + p->first, .n = p->n, .held = ps->held + p->first};
      ps->req_of[n++] = j;
      p->sent = 1;
    }
    round_trip(ps, n);
  }
}

/* A hold of l was found gone (observe.h), told outside the handle's lock. */
static void lost_event(bg_lock *l, int64_t token, const char *why) {
  bgi_obs *o = &l->client->obs;
  if (!bgi_obs_on(o)) return;
  int64_t v[BG_EVENT_NVALUES] = {0};
  v[BG_EV_COUNT] = token;
  bgi_obs_emit(o, BG_EVENT_LOCK_LOST, l->name, v, "%s", why);
}

/* Records each part's outcome on its handle's holds (and in the trace). */
static void apply(pass *ps, uint64_t pass_ns) {
  int note = atomic_load(&trace_on);
  for (size_t k = 0; k < ps->nparts; k++) {
    const part *p = &ps->parts[k];
    due_handle *d = &ps->due[p->handle];
    bg_lock *l = d->l;
    if (!p->sent || p->status != BG_OK) d->failed = 1;
    for (size_t i = p->first; i < p->first + p->n; i++) {
      const hold_snap *x = &ps->snaps[i];
      int ok = p->sent && p->status == BG_OK, held = ok && ps->held[i];
      if (note)
        trace(&(bgi_renew_rec){l, x->seq, x->gen, l->lease_ms, d->due_ns, pass_ns, x->lease_from_ns, x->held_from_ns,
                               p->sent_ns, p->done_ns, p->sent ? p->status : BG_ENOMEM, held, p->trip});
      if (!ok) continue;
      char lost_why[sizeof l->holds[0].lost_why];
      int64_t lost_token = -1;
      pthread_mutex_lock(&l->mu);
      /* where the snapshot found it, unless a hold that went meanwhile moved it */
      size_t j0 = x->at < l->nholds && l->holds[x->at].seq == x->seq && l->holds[x->at].gen == x->gen ? x->at : 0;
      for (size_t j = j0; j < l->nholds; j++) {
        bgi_hold *h = &l->holds[j];
        if (h->seq != x->seq || h->gen != x->gen) continue;
        if (held) {
          /* the next round trip's deadline is the first lease in it to run out: from here */
          h->lease_from_ns = p->sent_ns;
        } else if (!h->lost) {
          h->lost = 1;
          snprintf(h->lost_why, sizeof h->lost_why, "the %s hold of lock \"%.100s\" was lost: renewal found it "
                   "gone (its lease of %lld ms ran out, or the key was deleted)",
                   h->kind == BGI_KIND_X ? "exclusive" : "read", l->key.s, (long long)l->lease_ms);
          memcpy(lost_why, h->lost_why, sizeof lost_why);
          lost_token = (int64_t)h->token;
        }
        break;
      }
      pthread_mutex_unlock(&l->mu);
      if (lost_token >= 0) lost_event(l, lost_token, lost_why);
    }
  }
}

static void run_pass(pass *ps, uint64_t pass_ns) {
  ps->nsnaps = ps->nparts = 0;
  for (size_t d = 0; d < ps->ndue; d++) snapshot(ps, d);
  renew_parts(ps);
  apply(ps, pass_ns);
}

static void *renewer(void *arg) {
  domain *me = arg;
  pass ps = {0};
  pthread_mutex_lock(&reg_mu);
  for (;;) {
    uint64_t now = bgi_now_ns(), next = UINT64_MAX;
    int mine = 0;
    ps.ndue = 0;
    for (bg_lock *l = reg_head; l; l = l->rn_next) {
      if (l->rn_domain != me->key) continue;
      mine = 1;
      if (l->rn_due_ns <= now + period_ns(l) / 2) {
        if (reserve(&ps.due, &ps.due_cap, ps.ndue + 1, sizeof *ps.due) != 0) break; /* the rest: next pass */
        ps.due[ps.ndue++] = (due_handle){l, l->rn_due_ns, 0};
        l->rn_busy = 1;
        l->rn_due_ns = now + period_ns(l);
      }
      if (l->rn_due_ns < next) next = l->rn_due_ns;
    }
    if (!mine) break;
    if (ps.ndue == 0) {
      if (next == UINT64_MAX) next = bgi_after_ms(now, 1000); /* out of memory above: look again in a second */
      bgi_cond_wait_until(&reg_cv, &reg_mu, next);
      continue;
    }
    pthread_mutex_unlock(&reg_mu);
    uint64_t delay = atomic_load(&fault_delay_ns);
    if (delay) bgi_sleep_ns(delay);
    run_pass(&ps, now);
    pthread_mutex_lock(&reg_mu);
    uint64_t after = bgi_now_ns();
    for (size_t i = 0; i < ps.ndue; i++) {
      bg_lock *l = ps.due[i].l;
      /* a failed renewal is tried again soon: the lease is running out meanwhile */
      uint64_t retry = after + period_ns(l) / 4;
      if (ps.due[i].failed && retry < l->rn_due_ns) l->rn_due_ns = retry;
      l->rn_busy = 0;
    }
    pthread_cond_broadcast(&reg_cv);
  }
  for (domain **pp = &reg_domains; *pp; pp = &(*pp)->next)
    if (*pp == me) {
      *pp = me->next;
      break;
    }
  pthread_mutex_unlock(&reg_mu);
  free(me);
  pass_free(&ps);
  return NULL;
}

/* Whose thread renews l: its slot's node in a cluster (or Sentinel) client, else its client. */
static const void *domain_of(const bg_lock *l) {
  /* the negative control of the frozen-server tests puts every handle on one thread */
  if (atomic_load(&fault_one_domain)) return NULL;
  return serving(l);
}

/* reg_mu held: the thread of key runs, or is started. */
static int ensure_thread(const void *key) {
  for (domain *d = reg_domains; d; d = d->next)
    if (d->key == key) return BG_OK;
  domain *d = calloc(1, sizeof *d);
  if (!d) return BG_ENOMEM;
  d->key = key;
  pthread_t t;
  pthread_attr_t attr;
  /* detached: it ends by itself when no handle of its own is on the list, and nobody joins it */
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, renewer, d);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    free(d);
    return BG_ENOMEM;
  }
  d->next = reg_domains;
  reg_domains = d;
  return BG_OK;
}

int bgi_lock_renewer_register(bg_lock *l, uint64_t lease_from_ns) {
  int st = BG_OK;
  if (!l->renew) return BG_OK;
  /* due a period after the acquire was sent, not after its reply: the lease may have started on
   * the server at once, and the reply (or this thread) may come late; a handle already on the
   * list keeps its schedule unless that is later (a pass during the acquire skipped the hold, in
   * flight then, and would only come back a whole period after itself) */
  uint64_t due = lease_from_ns + period_ns(l);
  const void *key = domain_of(l);   /* before reg_mu: it may take the cluster's lock */
  pthread_once(&reg_once, init_cv);
  pthread_mutex_lock(&reg_mu);
  if (l->rn_registered) {
    if (due < l->rn_due_ns) {
      l->rn_due_ns = due;
      pthread_cond_broadcast(&reg_cv); /* the thread may sleep towards a later due time */
    }
    goto out;
  }
  st = ensure_thread(key);
  if (st != BG_OK) goto out;
  l->rn_domain = key;
  l->rn_registered = 1;
  l->rn_due_ns = due;
  l->rn_prev = NULL;
  l->rn_next = reg_head;
  if (reg_head) reg_head->rn_prev = l;
  reg_head = l;
  pthread_cond_broadcast(&reg_cv);
out:
  pthread_mutex_unlock(&reg_mu);
  return st;
}

void bgi_lock_renewer_unregister(bg_lock *l) {
  if (!l->renew) return;
  pthread_once(&reg_once, init_cv);
  pthread_mutex_lock(&reg_mu);
  if (l->rn_registered) {
    if (l->rn_prev) l->rn_prev->rn_next = l->rn_next;
    else reg_head = l->rn_next;
    if (l->rn_next) l->rn_next->rn_prev = l->rn_prev;
    l->rn_registered = 0;
    pthread_cond_broadcast(&reg_cv);
  }
  /* a pass that picked l before it left the list is renewing it now: wait until it is done */
  while (l->rn_busy) pthread_cond_wait(&reg_cv, &reg_mu);
  pthread_mutex_unlock(&reg_mu);
}
