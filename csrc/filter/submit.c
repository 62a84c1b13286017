/*
 * The filter operations of a submission queue (include/bloomguard/queue.h): each submit checks
 * its arguments as the blocking form does, copies the items into the queue's slot and starts the
 * same task the blocking form runs - the guarded query or add (guarded.c), or the admin
 * operation (admin.c) - on the queue's runner. A submitted operation holds a reference on its
 * filter until its finish has read the answer off it: bg_filter_close may come at any time.
 */
#include "filter/filter.h"

#include <stdio.h>

#include "client/queue.h"

/* What a queue's slot holds of a filter operation (bgi_qop.body). */
typedef struct fop {
  bg_filter *f;
  union {
    bgi_guarded_op g;   /* contains, add */
    bgi_admin a;        /* init, count, info, delete, expire, persist */
  } u;
} fop;

_Static_assert(sizeof(fop) <= BGI_QOP_BODY_BYTES, "a filter operation outgrew the queue's slot");

#define FOP(op) ((fop *)(op)->body)

static void finish_contains(bgi_qop *op, int st) {
  fop *o = FOP(op);
  op->source = o->u.g.gt.source;
  op->present = st == BG_OK ? op->answers : NULL;
  op->npresent = st == BG_OK ? o->u.g.n : 0;
  op->value = st == BG_OK && o->u.g.n == 1 ? op->answers[0] : 0;
  bgi_filter_unref(o->f);   /* last: it may free the filter */
}

static void finish_add(bgi_qop *op, int st) {
  fop *o = FOP(op);
  op->source = st == BG_OK ? BG_SOURCE_REDIS : BG_SOURCE_NONE;
  op->value = st == BG_OK ? (int64_t)bgi_guarded_op_added(&o->u.g) : 0;
  bgi_filter_unref(o->f);
}

static void finish_admin(bgi_qop *op, int st) {
  fop *o = FOP(op);
  op->source = st == BG_OK ? BG_SOURCE_REDIS : BG_SOURCE_NONE;
  op->value = st == BG_OK ? bgi_admin_value(&o->u.a) : 0;
  op->is_info = o->u.a.kind == BGI_ADMIN_INFO;
  if (op->is_info && st == BG_OK && o->f->native) {
    op->info_size = (uint64_t)o->u.a.u.native.bytes * 8;
    op->info_parts = 0;
    op->info_k = 0;
    op->info_expected = o->u.a.u.native.cap;
    op->info_fpp = 0;
  }
  else if (op->is_info && st == BG_OK) {
    op->info_size = o->u.a.u.info.size;
    op->info_parts = o->u.a.u.info.parts;
    op->info_k = bgi_cfg_k(o->u.a.u.info.cfg);
    op->info_expected = o->u.a.u.info.n;
    op->info_fpp = o->u.a.u.info.fpp;
  }
  bgi_filter_unref(o->f);
}

/* The checks every submit shares: handles, and the queue serving the filter's client. */
static int check_queue(bg_filter *f, bg_queue *q, bgi_err *err) {
  if (!q) return bgi_err_set(err, BG_EINVAL, "submit: queue handle is NULL");
  if (q->client != f->client)
    return bgi_err_set(err, BG_EINVAL, "submit: the filter \"%s\" belongs to another client than the queue (open the "
                       "queue on the filter's client)", f->name.s);
  return BG_OK;
}

/* A submit's outcome: accepted (BG_OK), or refused with the message where the blocking form puts it. */
static int submitted(bg_filter *f, bg_call *call, const bgi_err *err) {
  return bgi_call_finish(call, &f->err, err, BG_SOURCE_NONE);
}

static int submit_items(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int is_add, const void *const *items,
                        const size_t *lens, size_t n) {
  bgi_err err = {0};
  bgi_qop *op = NULL;
  const char *fn = is_add ? "add" : "contains";
  if (!f) return bgi_call_null_handle(call, "filter");
  if (check_queue(f, q, &err) != BG_OK || bgi_check_items(fn, items, lens, n, lens, &err) != BG_OK ||
      bgi_queue_op_new(q, call, tag, &op, &err) != BG_OK)
    return submitted(f, call, &err);
  if (bgi_queue_op_copy_items(op, items, lens, n, &err) != BG_OK) {
    bgi_queue_op_discard(q, op);
    return submitted(f, call, &err);
  }
  fop *o = FOP(op);
  o->f = f;
  bgi_guarded_op_init(&o->u.g, is_add, f, op->deadline_ns, op->item_ptrs, op->item_lens, n,
                      is_add ? NULL : op->answers);
  bgi_filter_ref(f);   /* the operation's, given back by its finish: a close meanwhile frees nothing */
  bgi_queue_op_start(q, op, &o->u.g.gt.t, is_add ? finish_add : finish_contains);
  return submitted(f, call, &err);
}

static int submit_admin(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int kind, int64_t arg, double fpp,
                        int64_t parts, int32_t expansion) {
  bgi_err err = {0};
  bgi_qop *op = NULL;
  if (!f) return bgi_call_null_handle(call, "filter");
  if (check_queue(f, q, &err) != BG_OK || bgi_queue_op_new(q, call, tag, &op, &err) != BG_OK)
    return submitted(f, call, &err);
  fop *o = FOP(op);
  o->f = f;
  int st = kind == BGI_ADMIN_INIT && expansion != -1
               ? bgi_admin_prepare_native_init(&o->u.a, f, op->deadline_ns, arg, fpp, expansion, &err)
           : kind == BGI_ADMIN_INIT ? bgi_admin_prepare_init(&o->u.a, f, op->deadline_ns, arg, fpp, parts, &err)
                                    : bgi_admin_prepare(&o->u.a, f, op->deadline_ns, kind, arg, fpp, &err);
  if (st != BG_OK) {
    bgi_queue_op_discard(q, op);
    return submitted(f, call, &err);
  }
  bgi_filter_ref(f);
  bgi_queue_op_start(q, op, &o->u.a.t, finish_admin);
  return submitted(f, call, &err);
}

BG_API int bg_filter_contains_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, const void *item,
                                        size_t len) {
  return submit_items(f, call, q, tag, 0, &item, &len, 1);
}
BG_API int bg_filter_contains_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *item, size_t len) {
  return bg_filter_contains_submit_ex(f, NULL, q, tag, item, len);
}
BG_API int bg_filter_contains_many_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                             const void *const *items, const size_t *lens, size_t n) {
  return submit_items(f, call, q, tag, 0, items, lens, n);
}
BG_API int bg_filter_contains_many_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *const *items,
                                          const size_t *lens, size_t n) {
  return bg_filter_contains_many_submit_ex(f, NULL, q, tag, items, lens, n);
}
BG_API int bg_filter_add_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, const void *item,
                                   size_t len) {
  return submit_items(f, call, q, tag, 1, &item, &len, 1);
}
BG_API int bg_filter_add_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *item, size_t len) {
  return bg_filter_add_submit_ex(f, NULL, q, tag, item, len);
}
BG_API int bg_filter_add_many_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                        const void *const *items, const size_t *lens, size_t n) {
  return submit_items(f, call, q, tag, 1, items, lens, n);
}
BG_API int bg_filter_add_many_submit(bg_filter *f, bg_queue *q, uint64_t tag, const void *const *items,
                                     const size_t *lens, size_t n) {
  return bg_filter_add_many_submit_ex(f, NULL, q, tag, items, lens, n);
}
BG_API int bg_filter_count_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_COUNT, 0, 0, 0, -1);
}
BG_API int bg_filter_count_submit(bg_filter *f, bg_queue *q, uint64_t tag) {
  return bg_filter_count_submit_ex(f, NULL, q, tag);
}
BG_API int bg_filter_info_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_INFO, 0, 0, 0, -1);
}
BG_API int bg_filter_info_submit(bg_filter *f, bg_queue *q, uint64_t tag) {
  return bg_filter_info_submit_ex(f, NULL, q, tag);
}
BG_API int bg_filter_init_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int64_t expected_insertions,
                                    double fpp) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_INIT, expected_insertions, fpp, 0, -1);
}
BG_API int bg_filter_init_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t expected_insertions, double fpp) {
  return bg_filter_init_submit_ex(f, NULL, q, tag, expected_insertions, fpp);
}
BG_API int bg_filter_delete_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_DELETE, 0, 0, 0, -1);
}
BG_API int bg_filter_delete_submit(bg_filter *f, bg_queue *q, uint64_t tag) {
  return bg_filter_delete_submit_ex(f, NULL, q, tag);
}
BG_API int bg_filter_expire_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int64_t ttl_ms) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_EXPIRE, ttl_ms, 0, 0, -1);
}
BG_API int bg_filter_expire_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t ttl_ms) {
  return bg_filter_expire_submit_ex(f, NULL, q, tag, ttl_ms);
}
BG_API int bg_filter_persist_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_PERSIST, 0, 0, 0, -1);
}
BG_API int bg_filter_persist_submit(bg_filter *f, bg_queue *q, uint64_t tag) {
  return bg_filter_persist_submit_ex(f, NULL, q, tag);
}

BG_API int bg_filter_init_partitioned_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag,
                                                int64_t expected_insertions, double fpp, int64_t partitions) {
  return submit_admin(f, call, q, tag, BGI_ADMIN_INIT, expected_insertions, fpp, partitions, -1);
}

BG_API int bg_filter_init_partitioned_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t expected_insertions,
                                             double fpp, int64_t partitions) {
  return bg_filter_init_partitioned_submit_ex(f, NULL, q, tag, expected_insertions, fpp, partitions);
}

BG_API int bg_filter_init_native_submit_ex(bg_filter *f, bg_call *call, bg_queue *q, uint64_t tag, int64_t capacity,
                                           double error_rate, int32_t expansion) {
  if (f && !f->native) {
    bgi_err err = {0};
    bgi_err_set(&err, BG_EINVAL, "init_native: \"%s\" was not opened as a native filter (bg_filter_open_native)",
                f->name.s);
    return submitted(f, call, &err);
  }
  /* -1 is the server's default expansion: the plain init's request (bgi_admin_prepare_init) */
  return submit_admin(f, call, q, tag, BGI_ADMIN_INIT, capacity, error_rate, 0, expansion);
}

BG_API int bg_filter_init_native_submit(bg_filter *f, bg_queue *q, uint64_t tag, int64_t capacity, double error_rate,
                                        int32_t expansion) {
  return bg_filter_init_native_submit_ex(f, NULL, q, tag, capacity, error_rate, expansion);
}
