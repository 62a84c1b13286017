/* init, count, info, delete, expire, persist: the whole-filter operations. */
#include "filter/filter.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bloomguard/hash.h"
#include "common/jdouble.h"
#include "filter/partitioned.h"
#include "filter/scripts.h"
#include "hash/hash.h"

#define NOMEM(err) bgi_err_set(err, BG_ENOMEM, "out of memory")

/* ---- init (Redisson's tryInit) ------------------------------------------------------------- */


static int build_init(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_initer *in = ctx;
  const bg_filter *f = in->f;
  if (bgi_script_begin(&c->out, &bgi_script_init, in->run.use_body, 2, 4) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(6, f->name.len + f->config_key.len + 128)) != BG_OK)
    return NOMEM(err);
  bgi_resp_key(&c->out, &f->config_key);
  bgi_resp_key(&c->out, &f->name);
  bgi_resp_u64(&c->out, in->size);
  bgi_resp_u64(&c->out, in->k);
  bgi_resp_u64(&c->out, (uint64_t)in->n);
  bgi_resp_cstr(&c->out, in->fpp);
  *nreplies = 1;
  return BG_OK;
}

static int parse_init(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_initer *in = ctx;
  const bgi_reply *x = rep[0];
  uint64_t cfg;
  (void)c, (void)n;
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    in->run.noscript = 1;
    return BG_OK;
  }
  if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, "init", err);
  if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 || x->element[0]->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "init: unexpected reply from the init script");
  if (x->element[0]->integer == 1) {
    in->created = 1;
    atomic_store(&in->f->cfg, bgi_cfg_pack(in->size, in->k));
    atomic_store(&in->f->kind, BGI_KIND_PLAIN);
    return BG_OK;
  }
  in->created = 0;
  if (x->elements != 4) return bgi_err_set(err, BG_EPROTO, "init: unexpected reply from the init script");
  if (x->element[3]->type == REDIS_REPLY_STRING) {
    /* a partitioned filter of this name: kept, as any config found (its own steps answer from now on) */
    atomic_store(&in->f->kind, BGI_KIND_PARTITIONED);
    return BG_OK;
  }
  int st = bgi_cfg_from_pair(in->f, x->element[1], x->element[2], &cfg, err);
  if (st == BG_ENOTINIT)
    return bgi_err_set(err, BG_ECORRUPT, "init: the config hash %s exists but has no size/hashIterations "
                       "(delete the filter, or repair the hash)", in->f->config_key.s);
  if (st == BG_OK) atomic_store(&in->f->cfg, cfg);  /* tryInit semantics: the existing config wins */
  return st;
}

static int prepare_init(bgi_admin *a, bg_filter *f, int64_t expected_insertions, double fpp, bgi_err *err) {
  bgi_initer *in = &a->u.init;
  char why[256];
  *in = (bgi_initer){.f = f, .n = expected_insertions};
  if (bgi_params(expected_insertions, fpp, &in->size, &in->k, why, sizeof why) != BG_OK)
    return bgi_err_set(err, BG_EBADPARAMS, "init: %s", why);
  bgi_format_java_double(fpp, in->fpp, sizeof in->fpp);
  a->req.build = build_init;
  a->req.parse = parse_init;
  a->req.ctx = in;
  a->req.run = &in->run;
  a->req.what = "init";
  return BG_OK;
}

int bgi_filter_init_parts(bg_filter *f, uint64_t deadline_ns, int64_t expected_insertions, double fpp, int64_t parts,
                          int *created, bgi_err *err) {
  bgi_admin a;
  int st = bgi_admin_prepare_init(&a, f, deadline_ns, expected_insertions, fpp, parts, err);
  if (st == BG_OK) st = bgi_admin_run(&a, err);
  if (st == BG_OK && created) *created = (int)bgi_admin_value(&a);
  return st;
}

int bgi_filter_init(bg_filter *f, uint64_t deadline_ns, int64_t expected_insertions, double fpp, int *created,
                    bgi_err *err) {
  return bgi_filter_init_parts(f, deadline_ns, expected_insertions, fpp, 0, created, err);
}

BG_API int bg_filter_init_partitioned_ex(bg_filter *f, bg_call *call, int64_t expected_insertions, double fpp,
                                         int64_t partitions, int *created) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  BGI_WITH_CALL(call, err.status = bgi_filter_init_parts(f, bgi_call_deadline(call), expected_insertions, fpp, partitions,
                                                    created, &err));
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_init_partitioned(bg_filter *f, int64_t expected_insertions, double fpp, int64_t partitions,
                                      int *created) {
  return bg_filter_init_partitioned_ex(f, NULL, expected_insertions, fpp, partitions, created);
}

BG_API int bg_filter_init_ex(bg_filter *f, bg_call *call, int64_t expected_insertions, double fpp, int *created) {
  return bg_filter_init_partitioned_ex(f, call, expected_insertions, fpp, 0, created);
}

BG_API int bg_filter_init(bg_filter *f, int64_t expected_insertions, double fpp, int *created) {
  return bg_filter_init_ex(f, NULL, expected_insertions, fpp, created);
}

/* ---- count: Redisson's estimate from BITCOUNT, with the config of the same instant ---------- */


static int build_count(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  const bg_filter *f = ((bgi_counter *)ctx)->f;
  if (bgi_buf_reserve(&c->out, 64 + bgi_hmget_config_bound(f) + bgi_resp_bound(2, f->name.len + 8)) != BG_OK)
    return NOMEM(err);
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "MULTI", 5);
  bgi_append_hmget_config(&c->out, f);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "BITCOUNT", 8);
  bgi_resp_key(&c->out, &f->name);
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "EXEC", 4);
  *nreplies = 4;
  return BG_OK;
}

static int parse_count(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_counter *ct = ctx;
  uint64_t cfg;
  (void)c, (void)n;
  for (int i = 0; i < 4; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[i], "count", err);
  const bgi_reply *ex = rep[3];
  if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 2) return bgi_err_set(err, BG_EPROTO, "count: unexpected reply");
  const bgi_reply *pair = ex->element[0], *bits = ex->element[1];
  if (pair->type == REDIS_REPLY_ERROR) return bgi_reply_error(pair, "count (config)", err);
  if (bits->type == REDIS_REPLY_ERROR) return bgi_reply_error(bits, "count (bitmap)", err);
  if (pair->type != REDIS_REPLY_ARRAY || pair->elements != 2 || bits->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "count: unexpected reply");
  int st = bgi_cfg_from_pair(ct->f, pair->element[0], pair->element[1], &cfg, err);
  if (st != BG_OK) return st;
  atomic_store(&ct->f->cfg, cfg);
  double size = (double)bgi_cfg_size(cfg), k = bgi_cfg_k(cfg);
  ct->count = bgi_java_round(-size / k * log(1 - (double)bits->integer / size));
  return BG_OK;
}

/* The blocking form of an admin operation that needs no argument check beyond the handle's. */
static int run_admin(bg_filter *f, bg_call *call, int kind, int64_t arg, bgi_admin *a) {
  bgi_err err = {0};
  BGI_WITH_CALL(call, {
    err.status = bgi_admin_prepare(a, f, bgi_call_deadline(call), kind, arg, 0, &err);
    if (err.status == BG_OK) err.status = bgi_admin_run(a, &err);
  });
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_count_ex(bg_filter *f, bg_call *call, int64_t *count) {
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  if (!count) {
    bgi_err err = {0};
    bgi_err_set(&err, BG_EINVAL, "count: count must not be NULL");
    return bgi_filter_finish(f, call, &err);
  }
  int st = run_admin(f, call, BGI_ADMIN_COUNT, 0, &a);
  if (st == BG_OK) *count = bgi_admin_value(&a);
  return st;
}

BG_API int bg_filter_count(bg_filter *f, int64_t *count) { return bg_filter_count_ex(f, NULL, count); }

/* ---- info: the whole config hash ------------------------------------------------------------ */


static int build_info(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  const bg_filter *f = ((bgi_infoer *)ctx)->f;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(2, f->config_key.len + 8)) != BG_OK) return NOMEM(err);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "HGETALL", 7);
  bgi_resp_key(&c->out, &f->config_key);
  *nreplies = 1;
  return BG_OK;
}

static const bgi_reply *field(const bgi_reply *h, const char *name) { return bgi_reply_field(h, name, strlen(name)); }

static int parse_info(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_infoer *in = ctx;
  const bgi_reply *h = rep[0], *nil = &(bgi_reply){.type = REDIS_REPLY_NIL};
  (void)c, (void)n;
  if (h->type == REDIS_REPLY_ERROR) return bgi_reply_error(h, "info", err);
  if (!bgi_reply_is_pairs(h)) return bgi_err_set(err, BG_EPROTO, "info: unexpected reply to HGETALL");
  if (field(h, BGI_PCONF_KIND)) {
    bgi_pconf_load ld;
    int st = bgi_pconf_parse(in->f, h, &ld, err);
    if (st != BG_OK) return st;
    in->cfg = ld.conf.live.cfg;
    in->parts = ld.conf.live.parts;
    in->size = bgi_cfg_size(in->cfg) * in->parts;
    in->n = ld.conf.live.n;
    in->fpp = ld.conf.live.fpp;
    return BG_OK;
  }
  const bgi_reply *size = field(h, BGI_CONFIG_SIZE), *k = field(h, BGI_CONFIG_K);
  int st = bgi_cfg_from_pair(in->f, size ? size : nil, k ? k : nil, &in->cfg, err);
  if (st != BG_OK) return st;
  atomic_store(&in->f->cfg, in->cfg);
  atomic_store(&in->f->kind, BGI_KIND_PLAIN);
  in->size = bgi_cfg_size(in->cfg);
  in->parts = 0;
  const bgi_reply *ei = field(h, BGI_CONFIG_N), *fp = field(h, BGI_CONFIG_FPP);
  in->n = 0;
  in->fpp = 0;
  if (ei && bgi_parse_i64(ei->str, ei->len, &in->n) != 0)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: expectedInsertions \"%.40s\" is not a decimal integer",
                       in->f->config_key.s, ei->str);
  if (fp && bgi_parse_double(fp->str, fp->len, &in->fpp) != 0)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: falseProbability \"%.40s\" is not a number",
                       in->f->config_key.s, fp->str);
  return BG_OK;
}

BG_API int bg_filter_info_partitioned_ex(bg_filter *f, bg_call *call, uint64_t *size, uint32_t *hash_iterations,
                                         int64_t *expected_insertions, double *fpp, uint32_t *partitions) {
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  int st = run_admin(f, call, BGI_ADMIN_INFO, 0, &a);
  if (st == BG_OK && f->native) {
    const bgi_nadmin *na = &a.u.native;
    if (size) *size = (uint64_t)na->bytes * 8;
    if (hash_iterations) *hash_iterations = 0;
    if (expected_insertions) *expected_insertions = na->cap;
    if (fpp) *fpp = 0;
    if (partitions) *partitions = 0;
  }
  else if (st == BG_OK) {
    const bgi_infoer *in = &a.u.info;
    if (size) *size = in->size;
    if (hash_iterations) *hash_iterations = bgi_cfg_k(in->cfg);
    if (expected_insertions) *expected_insertions = in->n;
    if (fpp) *fpp = in->fpp;
    if (partitions) *partitions = in->parts;
  }
  return st;
}

BG_API int bg_filter_info_partitioned(bg_filter *f, uint64_t *size, uint32_t *hash_iterations,
                                      int64_t *expected_insertions, double *fpp, uint32_t *partitions) {
  return bg_filter_info_partitioned_ex(f, NULL, size, hash_iterations, expected_insertions, fpp, partitions);
}

BG_API int bg_filter_info_ex(bg_filter *f, bg_call *call, uint64_t *size, uint32_t *hash_iterations,
                             int64_t *expected_insertions, double *fpp) {
  return bg_filter_info_partitioned_ex(f, call, size, hash_iterations, expected_insertions, fpp, NULL);
}

BG_API int bg_filter_info(bg_filter *f, uint64_t *size, uint32_t *hash_iterations, int64_t *expected_insertions,
                          double *fpp) {
  return bg_filter_info_ex(f, NULL, size, hash_iterations, expected_insertions, fpp);
}

/* ---- delete, expire, persist: both keys ----------------------------------------------------- */


static void append_keyop(bgi_buf *b, const bgi_keyop *op, const bgi_key *key) {
  bgi_resp_array(b, op->ttl_ms > 0 ? 3 : 2);
  bgi_resp_cstr(b, op->cmd);
  bgi_resp_key(b, key);
  if (op->ttl_ms > 0) bgi_resp_u64(b, (uint64_t)op->ttl_ms);
}

static int build_keyop(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  const bgi_keyop *op = ctx;
  const bg_filter *f = op->f;
  if (bgi_buf_reserve(&c->out, 64 + bgi_resp_bound(8, f->name.len + f->config_key.len + f->spare_key.len + 64)) != BG_OK)
    return NOMEM(err);
  if (!strcmp(op->cmd, "DEL")) {
    bgi_resp_array(&c->out, 3);
    bgi_resp_cstr(&c->out, "DEL");
    bgi_resp_key(&c->out, &f->name);
    bgi_resp_key(&c->out, &f->config_key);
    /* the old bitmap a swap kept as its next upload buffer belongs to the filter too; a
     * rotation's own keys stay (its commit would re-create the filter: rotation.h) */
    bgi_resp_array(&c->out, 2);
    bgi_resp_cstr(&c->out, "DEL");
    bgi_resp_key(&c->out, &f->spare_key);
    *nreplies = 2;
    return BG_OK;
  }
  /* one MULTI so the two keys never disagree about their time to live */
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "MULTI", 5);
  append_keyop(&c->out, op, &f->name);
  append_keyop(&c->out, op, &f->config_key);
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "EXEC", 4);
  *nreplies = 4;
  return BG_OK;
}

static int parse_keyop(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_keyop *op = ctx;
  (void)c;
  for (size_t i = 0; i < n; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[i], op->cmd, err);
  const bgi_reply *x = rep[n - 1];
  if (!strcmp(op->cmd, "DEL")) {
    if (rep[0]->type != REDIS_REPLY_INTEGER) return bgi_err_set(err, BG_EPROTO, "DEL: unexpected reply");
    op->result = rep[0]->integer > 0;
    return BG_OK;
  }
  if (x->type != REDIS_REPLY_ARRAY || x->elements != 2) return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", op->cmd);
  op->result = 0;
  for (size_t i = 0; i < 2; i++) {
    if (x->element[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(x->element[i], op->cmd, err);
    op->result |= x->element[i]->type == REDIS_REPLY_INTEGER && x->element[i]->integer == 1;
  }
  return BG_OK;
}

int bgi_filter_delete(bg_filter *f, uint64_t deadline_ns, int *deleted, bgi_err *err) {
  bgi_admin a;
  int st = bgi_admin_prepare(&a, f, deadline_ns, BGI_ADMIN_DELETE, 0, 0, err);
  if (st == BG_OK) st = bgi_admin_run(&a, err);
  if (st == BG_OK && deleted) *deleted = (int)bgi_admin_value(&a);
  return st;
}

BG_API int bg_filter_delete_ex(bg_filter *f, bg_call *call, int *deleted) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  BGI_WITH_CALL(call, err.status = bgi_filter_delete(f, bgi_call_deadline(call), deleted, &err));
  return bgi_filter_finish(f, call, &err);
}

/*
 * Redis refuses a PEXPIRE whose ms + its clock overflows int64 ("invalid expire time"), a bound
 * that moves with the server's clock. A fixed one far below it, 2^46 ms (about 2230 years), is
 * the same on every server and every day; a longer life is no life limit at all: use persist.
 */
#define MAX_TTL_MS (INT64_C(1) << 46)

static int check_ttl(int64_t ttl_ms, bgi_err *err) {
  if (ttl_ms <= 0)
    return bgi_err_set(err, BG_EINVAL, "expire: ttl_ms must be positive (got %lld); use delete to remove the filter",
                       (long long)ttl_ms);
  if (ttl_ms > MAX_TTL_MS)
    return bgi_err_set(err, BG_EINVAL, "expire: ttl_ms must be at most %lld (2^46 ms, about 2230 years; got %lld); "
                       "use persist for no time to live", (long long)MAX_TTL_MS, (long long)ttl_ms);
  return BG_OK;
}

BG_API int bg_filter_expire_ex(bg_filter *f, bg_call *call, int64_t ttl_ms, int *applied) {
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  int st = run_admin(f, call, BGI_ADMIN_EXPIRE, ttl_ms, &a);
  if (st == BG_OK && applied) *applied = (int)bgi_admin_value(&a);
  return st;
}

BG_API int bg_filter_persist_ex(bg_filter *f, bg_call *call, int *applied) {
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  int st = run_admin(f, call, BGI_ADMIN_PERSIST, 0, &a);
  if (st == BG_OK && applied) *applied = (int)bgi_admin_value(&a);
  return st;
}

/* ---- one admin operation: its request, as a task ------------------------------------------ */

/* The histogram's operation (observe.h) of an admin kind. */
static int admin_op(int kind) {
  switch (kind) {
    case BGI_ADMIN_INIT: return BG_OP_INIT;
    case BGI_ADMIN_COUNT: return BG_OP_COUNT;
    case BGI_ADMIN_INFO: return BG_OP_INFO;
    case BGI_ADMIN_EXPIRE: return BG_OP_EXPIRE;
    case BGI_ADMIN_PERSIST: return BG_OP_PERSIST;
    default: return BG_OP_DELETE;
  }
}

/* A partitioned filter's steps of an admin operation: what the config hash holds, then a sweep of
 * its partitions or its init. */
struct bgi_admin_heap {
  bgi_pconf_load ld;
  bgi_req req;
  bgi_err first;   /* count: the BG_ENOTINIT of its plain step, given back when the name is not partitioned */
  uint32_t swept;  /* delete: generations swept (the live one, then a rotation's and those listed to go) */
  union {
    bgi_psweep sweep;
    bgi_pinit init;
  } u;
};

enum { AD_START, AD_PLAIN, AD_PROBED, AD_SWEPT, AD_PINIT };

static int admin_end(bgi_admin *a, int st) {
  free(a->heap);
  a->heap = NULL;
  /* a deleted filter's config is gone: the next operation reads it again */
  if (st == BG_OK && a->kind == BGI_ADMIN_DELETE && !a->f->native) {
    atomic_store(&a->f->cfg, 0);
    bgi_pconf_set_none(a->f);
  }
  bgi_filter_record(&a->f->stats, admin_op(a->kind), st, a->started_ns);
  return bgi_task_done(&a->t, st);
}

static int send_plain(bgi_admin *a) {
  a->state = AD_PLAIN;
  return bgi_task_call(&a->t, &a->req);
}

/* Reads the config hash's kind (and a partitioned filter's generation). */
static int probe(bgi_admin *a, bgi_err *err) {
  if (!a->heap && !(a->heap = calloc(1, sizeof *a->heap))) return admin_end(a, NOMEM(err));
  a->probed = 1;
  a->state = AD_PROBED;
  bgi_pconf_req(&a->heap->req, &a->heap->ld, a->f, a->req.deadline_ns);
  return bgi_task_call(&a->t, &a->heap->req);
}

static int sweep_op(int kind) {
  switch (kind) {
    case BGI_ADMIN_COUNT: return BGI_PSWEEP_COUNT;
    case BGI_ADMIN_EXPIRE: return BGI_PSWEEP_EXPIRE;
    case BGI_ADMIN_PERSIST: return BGI_PSWEEP_PERSIST;
    default: return BGI_PSWEEP_DELETE;
  }
}

static int resume_admin(bgi_task *t, int st, bgi_err *err) {
  bgi_admin *a = (bgi_admin *)t;
  switch (a->state) {
    case AD_START:
      if (a->f->native) return send_plain(a);   /* one step, which reads the key's type itself */
      if (a->kind == BGI_ADMIN_INIT && a->u.init.parts > 0) {
        if (!(a->heap = calloc(1, sizeof *a->heap))) return admin_end(a, NOMEM(err));
        bgi_initer *in = &a->u.init;
        st = bgi_pinit_prepare(&a->heap->u.init, a->f, a->req.deadline_ns, in->n, in->fpp_value, in->parts, err);
        if (st != BG_OK) return admin_end(a, st);
        a->state = AD_PINIT;
        return bgi_task_sub(t, &a->heap->u.init.t);
      }
      /* a partitioned filter's keys go before its config: which kind is it? */
      if (a->kind == BGI_ADMIN_DELETE || a->kind == BGI_ADMIN_EXPIRE || a->kind == BGI_ADMIN_PERSIST) return probe(a, err);
      return send_plain(a);
    case AD_PINIT:
      if (st == BG_OK) a->u.init.created = a->heap->u.init.created;
      return admin_end(a, st);
    case AD_PLAIN:
      if (a->f->native) return admin_end(a, st);
      if (a->kind == BGI_ADMIN_COUNT && st == BG_ENOTINIT && !a->probed) {
        bgi_err first = *err;
        st = probe(a, err);
        if (a->heap) a->heap->first = first;
        return st;
      }
      if (st == BG_OK && a->req.ctx == &a->u.key) a->u.key.result |= a->swept_applied;
      return admin_end(a, st);
    case AD_PROBED:
      if (st == BG_OK && a->heap->ld.kind == BGI_KIND_PARTITIONED) {
        bgi_psweep_init(&a->heap->u.sweep, a->f, &a->heap->ld.conf.live, sweep_op(a->kind),
                        a->kind == BGI_ADMIN_EXPIRE ? a->u.key.ttl_ms : 0, a->req.deadline_ns);
        a->state = AD_SWEPT;
        return bgi_task_sub(t, &a->heap->u.sweep.t);
      }
      /* Redisson's layout, or none, or a config hash that does not parse or is no hash: the plain
       * step acts on the keys as they are (a delete of a broken filter must work) */
      if (st != BG_OK && st != BG_ENOTINIT && st != BG_ECORRUPT && st != BG_EWRONGTYPE) return admin_end(a, st);
      if (a->kind == BGI_ADMIN_COUNT) {
        *err = a->heap->first;
        return admin_end(a, BG_ENOTINIT);
      }
      bgi_err_clear(err);
      return send_plain(a);
    case AD_SWEPT:
    default:
      if (st != BG_OK) return admin_end(a, st);
      if (a->kind == BGI_ADMIN_DELETE) {
        /* every generation the config names goes, not only the live one */
        const bgi_pconf *conf = &a->heap->ld.conf;
        a->swept_applied |= a->heap->u.sweep.applied;
        uint32_t i = a->heap->swept++, has_next = conf->next.gen != 0;
        const bgi_pgen *g = i < has_next ? &conf->next : i - has_next < conf->nsweep ? &conf->sweep[i - has_next] : NULL;
        if (g) {
          bgi_psweep_init(&a->heap->u.sweep, a->f, g, BGI_PSWEEP_DELETE, 0, a->req.deadline_ns);
          return bgi_task_sub(t, &a->heap->u.sweep.t);
        }
      }
      if (a->kind == BGI_ADMIN_COUNT) {
        a->u.count.count = bgi_java_round(a->heap->u.sweep.count);
        return admin_end(a, BG_OK);
      }
      /* then the central config (and the plain keys of the name, if any) */
      a->swept_applied |= a->heap->u.sweep.applied;
      return send_plain(a);
  }
}

int bgi_admin_prepare(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int kind, int64_t arg, double fpp,
                      bgi_err *err) {
  bgi_task_init(&a->t, resume_admin);
  a->f = f;
  a->kind = kind;
  a->state = AD_START;
  a->probed = a->swept_applied = 0;
  a->heap = NULL;
  a->started_ns = f->stats.hist_on ? bgi_now_ns() : 0;
  a->req = (bgi_req){.client = f->client, .slot = f->slot, .deadline_ns = deadline_ns};
  if (f->native) {
    if (kind == BGI_ADMIN_EXPIRE && check_ttl(arg, err) != BG_OK) return err->status;
    return bgi_nadmin_prepare(&a->u.native, &a->req, f, kind, arg, fpp, -1, err);
  }
  switch (kind) {
    case BGI_ADMIN_INIT:
      return prepare_init(a, f, arg, fpp, err);
    case BGI_ADMIN_COUNT:
      a->u.count = (bgi_counter){.f = f};
      a->req.build = build_count, a->req.parse = parse_count, a->req.ctx = &a->u.count;
      return BG_OK;
    case BGI_ADMIN_INFO:
      a->u.info = (bgi_infoer){.f = f};
      a->req.build = build_info, a->req.parse = parse_info, a->req.ctx = &a->u.info;
      return BG_OK;
    case BGI_ADMIN_EXPIRE:
      if (check_ttl(arg, err) != BG_OK) return err->status;
      a->u.key = (bgi_keyop){.f = f, .cmd = "PEXPIRE", .ttl_ms = arg};
      break;
    case BGI_ADMIN_PERSIST:
      a->u.key = (bgi_keyop){.f = f, .cmd = "PERSIST"};
      break;
    case BGI_ADMIN_DELETE:
    default:
      a->u.key = (bgi_keyop){.f = f, .cmd = "DEL"};
      break;
  }
  a->req.build = build_keyop, a->req.parse = parse_keyop, a->req.ctx = &a->u.key;
  return BG_OK;
}

int bgi_admin_prepare_init(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int64_t n, double fpp, int64_t parts,
                           bgi_err *err) {
  if (f->native && parts != 0)
    return bgi_err_set(err, BG_EINVAL, "init: native filter \"%s\" cannot be partitioned", f->name.s);
  if (parts == 0) return bgi_admin_prepare(a, f, deadline_ns, BGI_ADMIN_INIT, n, fpp, err);
  bgi_pgen g;
  int st = bgi_pinit_geometry(n, fpp, parts, &g, err);
  if (st != BG_OK) return st;
  bgi_admin_prepare(a, f, deadline_ns, BGI_ADMIN_COUNT, 0, 0, err);   /* the common part */
  a->kind = BGI_ADMIN_INIT;
  a->u.init = (bgi_initer){.f = f, .n = n, .parts = parts, .fpp_value = fpp};
  return BG_OK;
}

int bgi_admin_prepare_native_init(bgi_admin *a, bg_filter *f, uint64_t deadline_ns, int64_t capacity, double error_rate,
                                  int32_t expansion, bgi_err *err) {
  int st = bgi_admin_prepare(a, f, deadline_ns, BGI_ADMIN_COUNT, 0, 0, err);   /* the common part */
  if (st != BG_OK) return st;
  a->kind = BGI_ADMIN_INIT;
  return bgi_nadmin_prepare(&a->u.native, &a->req, f, BGI_ADMIN_INIT, capacity, error_rate, expansion, err);
}

int bgi_admin_run(bgi_admin *a, bgi_err *err) { return bgi_task_run_with(&a->t, &bgi_req_executor, err); }

int64_t bgi_admin_value(const bgi_admin *a) {
  if (a->f->native) return a->kind == BGI_ADMIN_INFO ? 0 : a->u.native.result;
  switch (a->kind) {
    case BGI_ADMIN_INIT: return a->u.init.created;
    case BGI_ADMIN_COUNT: return a->u.count.count;
    case BGI_ADMIN_INFO: return 0;
    default: return a->u.key.result;
  }
}

BG_API int bg_filter_delete(bg_filter *f, int *deleted) { return bg_filter_delete_ex(f, NULL, deleted); }
BG_API int bg_filter_expire(bg_filter *f, int64_t ttl_ms, int *applied) {
  return bg_filter_expire_ex(f, NULL, ttl_ms, applied);
}
BG_API int bg_filter_persist(bg_filter *f, int *applied) { return bg_filter_persist_ex(f, NULL, applied); }
