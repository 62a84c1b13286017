/*
 * The renewal threads: one per client and server with holds, not one per handle (10,000 handles
 * of one client on one server holding locks cost one thread, not 10,000). A handle goes on the
 * list with its first hold and stays there until bg_lock_close; every third of the handle's lease
 * its thread renews each hold of it (the holds of all its owners), the way Redisson's watchdog
 * renews an RLock every lockWatchdogTimeout / 3. A thread with no handle of its own on the list
 * ends; the next hold starts another.
 *
 * Why per server, not one for the process: a renewal is a blocking round trip, and a server that
 * hangs (frozen, or gone without a reset) keeps each one waiting out the command timeout; with
 * one thread, a few handles on that server delayed every other handle of the process past its
 * lease (test_lock_renew's frozen-server cases). So a thread renews the handles of one client
 * that live on one server: a standalone client's, or those of a cluster client whose slot a node
 * served when the handle was put on the list (nodes live as long as their client; a slot that
 * moves later is still renewed right, by the client's routing, only on its old node's thread).
 *
 * One pass over the list renews every handle of the thread's own that is due within half a
 * period (renewing early only extends a lease), so handles registered at scattered moments share
 * passes instead of each waking the thread on its own: a pass costs O(handles) plus one round trip
 * per BGI_RENEW_BATCH holds. A renewal that finds the hold gone (its lease ran out while this
 * process stalled, or the key was deleted) marks the hold lost; a failed round trip is retried at
 * the next period (the lease outlives two of them).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cond.h"
#include "lock/lock.h"

typedef struct snap {
  uint64_t seq;
  int kind;
  uint64_t gen;
  uint64_t lease_from_ns, held_from_ns;
} snap;

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

/* Renews every hold of l, due at due_ns, in the pass that began at pass_ns (the thread has marked it busy: close waits for it). */
static void renew_handle(bg_lock *l, uint64_t due_ns, uint64_t pass_ns, snap **s, size_t *scap) {
  pthread_mutex_lock(&l->mu);
  size_t n = 0;
  if (l->nholds > *scap) {
    snap *p = realloc(*s, l->nholds * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&l->mu);
      return; /* try again next period */
    }
    *s = p, *scap = l->nholds;
  }
  for (size_t i = 0; i < l->nholds; i++)
    if (l->holds[i].count > 0)
      (*s)[n++] = (snap){l->holds[i].seq, l->holds[i].kind, l->holds[i].gen, l->holds[i].lease_from_ns,
                          l->holds[i].held_from_ns};
  pthread_mutex_unlock(&l->mu);
  /* one round trip per BGI_RENEW_BATCH holds (a pass over many holds must stay short next to a lease) */
  for (size_t b = 0; b < n; b += BGI_RENEW_BATCH) {
    size_t m = n - b < BGI_RENEW_BATCH ? n - b : BGI_RENEW_BATCH;
    uint64_t seqs[BGI_RENEW_BATCH];
    int kinds[BGI_RENEW_BATCH];
    char held[BGI_RENEW_BATCH];
    bgi_err err = {0};
    for (size_t i = 0; i < m; i++) seqs[i] = (*s)[b + i].seq, kinds[i] = (*s)[b + i].kind;
    uint64_t sent = bgi_now_ns();
    int st = bgi_lock_step_renew(l, seqs, kinds, m, held, &err);
    if (atomic_load(&trace_on)) {
      uint64_t done = bgi_now_ns();
      for (size_t i = 0; i < m; i++)
        trace(&(bgi_renew_rec){l, (*s)[b + i].seq, (*s)[b + i].gen, l->lease_ms, due_ns, pass_ns, (*s)[b + i].lease_from_ns,
                               (*s)[b + i].held_from_ns, sent, done, st, st == BG_OK && held[i]});
    }
    if (st != BG_OK) continue; /* next period */
    /* only the trace reads lease_from_ns: without it a renewed hold costs no search of the list */
    int note = atomic_load(&trace_on);
    for (size_t i = 0; i < m; i++) {
      if (held[i] && !note) continue;
      snap *x = &(*s)[b + i];
      pthread_mutex_lock(&l->mu);
      for (size_t j = 0; j < l->nholds; j++) {
        bgi_hold *h = &l->holds[j];
        if (h->seq != x->seq || h->gen != x->gen) continue;
        if (held[i]) {
          h->lease_from_ns = sent;
        } else if (!h->lost) {
          h->lost = 1;
          snprintf(h->lost_why, sizeof h->lost_why, "the %s hold of lock \"%.100s\" was lost: renewal found it "
                   "gone (its lease of %lld ms ran out, or the key was deleted)",
                   h->kind == BGI_KIND_X ? "exclusive" : "read", l->key.s, (long long)l->lease_ms);
        }
      }
      pthread_mutex_unlock(&l->mu);
    }
  }
}

static void *renewer(void *arg) {
  domain *me = arg;
  snap *s = NULL;
  size_t scap = 0;
  bg_lock **due = NULL;
  uint64_t *due_at = NULL; /* when each of due[] was due (the trace) */
  size_t dcap = 0;
  pthread_mutex_lock(&reg_mu);
  for (;;) {
    uint64_t now = bgi_now_ns(), next = UINT64_MAX;
    size_t n = 0;
    int mine = 0;
    for (bg_lock *l = reg_head; l; l = l->rn_next) {
      if (l->rn_domain != me->key) continue;
      mine = 1;
      if (l->rn_due_ns <= now + period_ns(l) / 2) {
        if (n == dcap) {
          size_t cap = dcap ? dcap * 2 : 16;
          bg_lock **p = realloc(due, cap * sizeof *p);
          if (p) due = p;
          uint64_t *q = p ? realloc(due_at, cap * sizeof *q) : NULL;
          if (!q) break; /* the rest wait for the next pass */
          due_at = q, dcap = cap;
        }
        due[n] = l;
        due_at[n++] = l->rn_due_ns;
        l->rn_busy = 1;
        l->rn_due_ns = now + period_ns(l);
      }
      if (l->rn_due_ns < next) next = l->rn_due_ns;
    }
    if (!mine) break;
    if (n == 0) {
      if (next == UINT64_MAX) next = bgi_after_ms(now, 1000); /* out of memory above: look again in a second */
      bgi_cond_wait_until(&reg_cv, &reg_mu, next);
      continue;
    }
    pthread_mutex_unlock(&reg_mu);
    uint64_t delay = atomic_load(&fault_delay_ns);
    if (delay) bgi_sleep_ns(delay);
    for (size_t i = 0; i < n; i++) renew_handle(due[i], due_at[i], now, &s, &scap);
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < n; i++) due[i]->rn_busy = 0;
    pthread_cond_broadcast(&reg_cv);
  }
  for (domain **pp = &reg_domains; *pp; pp = &(*pp)->next)
    if (*pp == me) {
      *pp = me->next;
      break;
    }
  pthread_mutex_unlock(&reg_mu);
  free(me);
  free(s);
  free(due);
  free(due_at);
  return NULL;
}

/* Whose thread renews l: its slot's node in a cluster (or Sentinel) client, else its client. */
static const void *domain_of(const bg_lock *l) {
  /* the negative control of the frozen-server tests puts every handle on one thread */
  if (atomic_load(&fault_one_domain)) return NULL;
  bgi_node *node = l->client->cluster ? bgi_cluster_route(l->client->cluster, (unsigned)l->slot) : NULL;
  return node ? (const void *)node : (const void *)l->client;
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
