/*
 * A filter's queries and adds through its policy engine (policy/guard.h): the engine is given the
 * raw Redis steps of query.c and add.c as its attempt callbacks, and this file is the only place
 * that joins the two. The engine itself never calls into filter/.
 */
#include "filter/filter.h"

#include <stdio.h>

/* p + i, without computing NULL + 0 (items may be NULL for an empty batch) */
#define OFF(p, i) ((i) ? (p) + (i) : (p))

static bgi_task *contains_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  bgi_guarded_op *op = ctx;
  bgi_contains_task_init(&op->u.contains, op->f, deadline_ns, OFF(op->items, from), OFF(op->lens, from), op->n - from,
                         OFF(op->present, from), done);
  return &op->u.contains.t;
}

static bgi_task *add_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done) {
  bgi_guarded_op *op = ctx;
  /* the items an earlier attempt added are counted: each attempt adds its own count */
  op->added += op->attempt_added;
  bgi_add_task_init(&op->u.add, op->f, deadline_ns, OFF(op->items, from), OFF(op->lens, from), op->n - from,
                    &op->attempt_added, done);
  return &op->u.add.t;
}

void bgi_guarded_op_init(bgi_guarded_op *op, int is_add, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                         const size_t *lens, size_t n, uint8_t *present) {
  bgi_op o = {is_add, is_add ? add_attempt : contains_attempt, op, items, lens, n, present,
              bgi_filter_hists(&f->stats, is_add ? BG_OP_ADD : BG_OP_CONTAINS)};
  op->f = f;
  op->items = items;
  op->lens = lens;
  op->n = n;
  op->present = present;
  op->added = op->attempt_added = 0;
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
