/*
 * A filter's queries and adds through its policy engine (policy/guard.h): the engine is given the
 * raw Redis steps of query.c and add.c as its attempt callbacks, and this file is the only place
 * that joins the two. The engine itself never calls into filter/.
 */
#include "filter/filter.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/fork.h"
#include "filter/partitioned.h"

/* p + i, without computing NULL + 0 (items may be NULL for an empty batch) */
#define OFF(p, i) ((i) ? (p) + (i) : (p))

/* ---- one attempt, on the filter's layout --------------------------------------------------- */

enum { K_START, K_RAN, K_PROBED, K_TYPED };

/* The operation a kinded task is part of. */
static bgi_guarded_op *op_of(bgi_kinded_task *kt) {
  return (bgi_guarded_op *)((char *)kt - offsetof(bgi_guarded_op, kt));
}

/* A partitioned filter's task and the probe's config load, on the heap together (~2 KB: too big
 * for every operation's slot). An operation that ends gives it back to the handle, and the next
 * takes it (at most SPARE_KEPT kept): once warm, a query allocates nothing. */
typedef struct bgi_pheap {
  bgi_pop_task pop;
  bgi_pconf_load ld;
  bgi_err first;   /* the BG_ENOTINIT that made the probe, given back when the layout is the same */
  struct bgi_pheap *next;
} pheap;

#define SPARE_KEPT 64

/* The allocation test's negative control (test_partitioned), never set otherwise: nothing kept. */
static atomic_int fault_no_spares;

void bgi_guarded_fault_no_spares(int on) { atomic_store(&fault_no_spares, on); }

static pheap *take_heap(bg_filter *f) {
  pthread_mutex_lock(&f->spare_mu);
  pheap *h = f->spare;
  if (h) f->spare = h->next, f->nspare--;
  pthread_mutex_unlock(&f->spare_mu);
  return h ? h : malloc(sizeof *h);
}

static void give_heap(bg_filter *f, pheap *h) {
  pthread_mutex_lock(&f->spare_mu);
  if (f->nspare < SPARE_KEPT && !atomic_load_explicit(&fault_no_spares, memory_order_relaxed)) {
    h->next = f->spare, f->spare = h, f->nspare++;
    h = NULL;
  }
  pthread_mutex_unlock(&f->spare_mu);
  free(h);
}

void bgi_guarded_free_spares(bg_filter *f) {
  for (pheap *h = f->spare, *next; h; h = next) {
    next = h->next;
    free(h);
  }
  f->spare = NULL;
  f->nspare = 0;
}

static int kinded_end(bgi_kinded_task *kt, int st) {
  bgi_guarded_op *op = op_of(kt);
  if (kt->pop) give_heap(op->f, (pheap *)kt->pop);   /* pop is the first member of its pheap */
  kt->pop = NULL;
  kt->ld = NULL;
  return bgi_task_done(&kt->t, st);
}

static int need_heap(bgi_kinded_task *kt, bgi_err *err) {
  if (kt->pop) return BG_OK;
  bgi_guarded_op *op = op_of(kt);
  pheap *h = take_heap(op->f);
  if (!h) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  kt->pop = &h->pop;
  kt->ld = &h->ld;
  return BG_OK;
}

/* The attempt's task for the layout `kind`, as a SUB. */
static int run_kind(bgi_kinded_task *kt, int kind, bgi_err *err) {
  bgi_guarded_op *op = op_of(kt);
  int is_add = op->is_add;
  uint8_t *present = is_add ? NULL : OFF(op->present, op->from);
  kt->kind = kind;
  kt->state = K_RAN;
  if (kind == BGI_KIND_NATIVE) {
    bgi_native_task_init(&kt->u.native, op->f, is_add, op->deadline_ns, OFF(op->items, op->from),
                         OFF(op->lens, op->from), op->n - op->from, present, is_add ? &op->attempt_added : NULL,
                         op->done);
    return bgi_task_sub(&kt->t, &kt->u.native.t);
  }
  if (kind == BGI_KIND_PARTITIONED) {
    int st = need_heap(kt, err);
    if (st != BG_OK) return kinded_end(kt, st);
    bgi_pop_task_init(kt->pop, op->f, is_add, op->deadline_ns, OFF(op->items, op->from), OFF(op->lens, op->from),
                      op->n - op->from, present, is_add ? &op->attempt_added : NULL, op->done);
    return bgi_task_sub(&kt->t, &kt->pop->t);
  }
  if (is_add) {
    bgi_add_task_init(&kt->u.add, op->f, op->deadline_ns, OFF(op->items, op->from), OFF(op->lens, op->from),
                      op->n - op->from, &op->attempt_added, op->done);
    return bgi_task_sub(&kt->t, &kt->u.add.t);
  }
  bgi_contains_task_init(&kt->u.contains, op->f, op->deadline_ns, OFF(op->items, op->from), OFF(op->lens, op->from),
                         op->n - op->from, present, op->done);
  return bgi_task_sub(&kt->t, &kt->u.contains.t);
}

static int resume_kinded(bgi_task *t, int st, bgi_err *err) {
  bgi_kinded_task *kt = (bgi_kinded_task *)t;
  bgi_guarded_op *op = op_of(kt);
  switch (kt->state) {
    case K_START:
      /* a native handle's kind never changes (a delete resets the others' to plain) */
      return run_kind(kt, op->f->native ? BGI_KIND_NATIVE : atomic_load(&op->f->kind), err);
    case K_RAN:
      /* a native filter's step told its kind itself */
      if (st != BG_ENOTINIT || kt->probed || kt->kind == BGI_KIND_NATIVE) return kinded_end(kt, st);
      /* the handle's idea of the layout may be old: what does the name hold now? */
      if ((st = need_heap(kt, err)) != BG_OK) return kinded_end(kt, st);
      ((pheap *)kt->pop)->first = *err;
      kt->probed = 1;
      kt->state = K_PROBED;
      bgi_pconf_req(&kt->req, kt->ld, op->f, op->deadline_ns);
      return bgi_task_call(t, &kt->req);
    case K_TYPED:
      /* a native filter under the name is refused by name; anything else: the step's own answer */
      if (st == BG_EWRONGTYPE) return kinded_end(kt, st);
      *err = ((pheap *)kt->pop)->first;
      return kinded_end(kt, BG_ENOTINIT);
    case K_PROBED:
    default:
      if (st == BG_OK && kt->ld->kind != kt->kind) return run_kind(kt, kt->ld->kind, err);
      if (st == BG_ENOTINIT) {
        /* no config of either layout: is the name a native filter's key? (only on this path) */
        kt->state = K_TYPED;
        bgi_native_type_req(&kt->req, op->f, op->deadline_ns);
        return bgi_task_call(t, &kt->req);
      }
      /* the same layout (made again meanwhile, or still none): the step's own answer stands - a
       * plain filter's caller sees what it saw before partitioned filters existed */
      if (st == BG_OK || st == BG_ENOTINIT) {
        *err = ((pheap *)kt->pop)->first;
        st = BG_ENOTINIT;
      }
      return kinded_end(kt, st);
  }
}

static bgi_task *attempt(bgi_guarded_op *op, uint64_t deadline_ns, size_t from, size_t *done) {
  bgi_kinded_task *kt = &op->kt;
  op->deadline_ns = deadline_ns;
  op->from = from;
  op->done = done;
  bgi_task_init(&kt->t, resume_kinded);
  kt->state = K_START;
  kt->probed = 0;
  return &kt->t;
}

static bgi_task *contains_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  return attempt(ctx, deadline_ns, from, done);
}

static bgi_task *add_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  bgi_guarded_op *op = ctx;
  /* the items an earlier attempt added are counted: each attempt adds its own count */
  op->added += op->attempt_added;
  op->attempt_added = 0;
  return attempt(op, deadline_ns, from, done);
}

/* fork (common/fork.h): in a child, the first operation of a filter made before the fork makes its
 * locks anew - a thread of the parent's (not in the child) may have held one. The spare task
 * memory is kept when its list's lock was free at the fork (the list is whole), else left. */
static void after_fork(bg_filter *f) {
  bgi_fork_lock();
  uint64_t now = bgi_fork_gen_note();
  if (atomic_load(&f->fork_gen) != now) {
    if (pthread_mutex_trylock(&f->spare_mu) == 0) pthread_mutex_unlock(&f->spare_mu);
    else f->spare = NULL, f->nspare = 0;
    bgi_fork_remake_mutex(&f->spare_mu);
    bgi_fork_remake_mutex(&f->pmu);
    atomic_store_explicit(&f->fork_gen, now, memory_order_release);
  }
  bgi_fork_unlock();
}

void bgi_guarded_op_init(bgi_guarded_op *op, int is_add, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                         const size_t *lens, size_t n, uint8_t *present) {
  if (bgi_forked_since(atomic_load_explicit(&f->fork_gen, memory_order_acquire))) after_fork(f);
  bgi_op o = {is_add, is_add ? add_attempt : contains_attempt, op, items, lens, n, present,
              bgi_filter_hists(&f->stats, is_add ? BG_OP_ADD : BG_OP_CONTAINS)};
  op->f = f;
  op->items = items;
  op->lens = lens;
  op->n = n;
  op->present = present;
  op->is_add = is_add;
  op->added = op->attempt_added = 0;
  op->kt.pop = NULL;
  op->kt.ld = NULL;
  bgi_guard_task_init(&op->gt, &f->guard, &o, deadline_ns);
}

int bgi_filter_guarded_contains(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *present, int *source, bgi_err *err) {
  bgi_guarded_op op;
  bgi_guarded_op_init(&op, 0, f, deadline_ns, items, lens, n, present);
  int st = bgi_task_run_with(&op.gt.t, &bgi_req_executor, err);
  *source = op.gt.source;
  return st;
}

int bgi_filter_guarded_add(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                           size_t *added, bgi_err *err) {
  bgi_guarded_op op;
  bgi_guarded_op_init(&op, 1, f, deadline_ns, items, lens, n, NULL);
  int st = bgi_task_run_with(&op.gt.t, &bgi_req_executor, err);
  if (st == BG_OK && added) *added = bgi_guarded_op_added(&op);
  return st;
}

int bgi_filter_guarded_finish(bg_filter *f, bg_call *call, const bgi_err *err, int source) {
  int st = bgi_call_finish(call, &f->err, err, source);
  if (st == BG_OK && source > BG_SOURCE_REDIS) {
    /* a degraded answer is a success that still says what failed */
    if (call) {
      snprintf(call->msg, sizeof call->msg, "%s", err->msg);
      call->degraded = err->degraded;
    }
    else bgi_errslot_set(&f->err, BG_OK, "%s", err->msg);
  }
  return st;
}

/* ---- ABI ------------------------------------------------------------------------------------------ */

BG_API int bg_filter_set_policy_ex(bg_filter *f, bg_call *call, const bg_policy *p) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  err.status = bgi_guard_set_policy(&f->guard, p, &err);
  return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_filter_set_policy(bg_filter *f, const bg_policy *p) { return bg_filter_set_policy_ex(f, NULL, p); }
