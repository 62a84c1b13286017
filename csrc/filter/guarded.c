/*
 * A filter's queries and adds through its policy engine (policy/guard.h): the engine is given the
 * raw Redis steps of query.c and add.c as its attempt callbacks, and this file is the only place
 * that joins the two. The engine itself never calls into filter/.
 */
#include "filter/filter.h"

#include <stdio.h>

/* p + i, without computing NULL + 0 (items may be NULL for an empty batch) */
#define OFF(p, i) ((i) ? (p) + (i) : (p))

typedef struct query_ctx {
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t n;
  uint8_t *present;
} query_ctx;

static int query_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err) {
  query_ctx *q = ctx;
  size_t d = 0;
  int st = bgi_filter_contains_raw(q->f, deadline_ns, OFF(q->items, from), OFF(q->lens, from), q->n - from,
                                   OFF(q->present, from), &d, err);
  *done = from + d;
  return st;
}

int bgi_filter_guarded_contains(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *present, int *source, bgi_err *err) {
  query_ctx q = {f, items, lens, n, present};
  bgi_op op = {0, query_attempt, &q, items, lens, n, present};
  return bgi_guard_run(&f->guard, &op, deadline_ns, source, err);
}

typedef struct add_ctx {
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t n;
  size_t added;
} add_ctx;

static int add_attempt(void *ctx, uint64_t deadline_ns, size_t from, size_t *done, bgi_err *err) {
  add_ctx *a = ctx;
  size_t d = 0, added = 0;
  int st = bgi_filter_add_raw(a->f, deadline_ns, OFF(a->items, from), OFF(a->lens, from), a->n - from, &added, &d, err);
  a->added += added;
  *done = from + d;
  return st;
}

int bgi_filter_guarded_add(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                           size_t *added, bgi_err *err) {
  add_ctx a = {f, items, lens, n, 0};
  bgi_op op = {1, add_attempt, &a, items, lens, n, NULL};
  int source;
  int st = bgi_guard_run(&f->guard, &op, deadline_ns, &source, err);
  if (st == BG_OK && added) *added = a.added;
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
