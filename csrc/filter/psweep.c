/*
 * Whole-filter steps of a partitioned filter (partitioned.h): a sweep runs one small request per
 * partition of a generation - writing its meta at init, BITCOUNT for count, DEL / PEXPIRE /
 * PERSIST - in rounds of up to BGI_PLANES_MAX partitions, each round one fan-out; and the init
 * that claims the central config, writes every partition's meta, then makes the generation live.
 */
#include "filter/partitioned.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/jdouble.h"
#include "common/random.h"
#include "filter/scripts.h"

#define NOMEM(err) bgi_err_set(err, BG_ENOMEM, "out of memory")

/* ---- one partition's request ---------------------------------------------------------------- */

static void append_key_cmd(bgi_buf *b, const bgi_pkey_lane *l, const char *cmd, char what, int with_ttl) {
  bgi_resp_array(b, with_ttl ? 3 : 2);
  bgi_resp_cstr(b, cmd);
  bgi_resp_pk(b, l->f, l->g.gen, l->part, l->g.parts, what);
  if (with_ttl) bgi_resp_u64(b, (uint64_t)l->ttl_ms);
}

static int build_lane(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_pkey_lane *l = ctx;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(16, 4 * bgi_pk_bound(l->f) + 128)) != BG_OK) return NOMEM(err);
  switch (l->op) {
    case BGI_PSWEEP_INIT:
      /* a bitmap left by a filter of this name that was not deleted whole goes first */
      append_key_cmd(&c->out, l, "DEL", BGI_PKEY_BITMAP, 0);
      bgi_resp_array(&c->out, 8);
      bgi_resp_bulk(&c->out, "HSET", 4);
      bgi_resp_pk(&c->out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META);
      bgi_resp_lit(&c->out, BGI_CONFIG_SIZE);
      bgi_resp_u64(&c->out, bgi_cfg_size(l->g.cfg));
      bgi_resp_lit(&c->out, BGI_CONFIG_K);
      bgi_resp_u64(&c->out, bgi_cfg_k(l->g.cfg));
      bgi_resp_lit(&c->out, BGI_PCONF_PARTITIONS);
      bgi_resp_u64(&c->out, l->g.parts);
      *nreplies = 2;
      return BG_OK;
    case BGI_PSWEEP_COUNT:
      append_key_cmd(&c->out, l, "BITCOUNT", BGI_PKEY_BITMAP, 0);
      *nreplies = 1;
      return BG_OK;
    case BGI_PSWEEP_DELETE: {
      /* UNLINK: a partition's bitmap may be hundreds of MB, freed off the server's main thread */
      static const char keys[] = {BGI_PKEY_BITMAP, BGI_PKEY_META, BGI_PKEY_MARK, BGI_PKEY_DELTA};
      bgi_resp_array(&c->out, 1 + sizeof keys);
      bgi_resp_bulk(&c->out, "UNLINK", 6);
      for (size_t i = 0; i < sizeof keys; i++) bgi_resp_pk(&c->out, l->f, l->g.gen, l->part, l->g.parts, keys[i]);
      *nreplies = 1;
      return BG_OK;
    }
    default:
      /* PEXPIRE / PERSIST: both keys of the partition in one MULTI, so they never disagree */
      bgi_resp_array(&c->out, 1);
      bgi_resp_bulk(&c->out, "MULTI", 5);
      append_key_cmd(&c->out, l, l->op == BGI_PSWEEP_EXPIRE ? "PEXPIRE" : "PERSIST", BGI_PKEY_BITMAP,
                     l->op == BGI_PSWEEP_EXPIRE);
      append_key_cmd(&c->out, l, l->op == BGI_PSWEEP_EXPIRE ? "PEXPIRE" : "PERSIST", BGI_PKEY_META,
                     l->op == BGI_PSWEEP_EXPIRE);
      bgi_resp_array(&c->out, 1);
      bgi_resp_bulk(&c->out, "EXEC", 4);
      *nreplies = 4;
      return BG_OK;
  }
}

static int parse_lane(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_pkey_lane *l = ctx;
  (void)c;
  for (size_t i = 0; i < n; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[i], "partition", err);
  const bgi_reply *last = rep[n - 1];
  l->value = 0;
  if (l->op == BGI_PSWEEP_EXPIRE || l->op == BGI_PSWEEP_PERSIST) {
    if (last->type != REDIS_REPLY_ARRAY || last->elements != 2)
      return bgi_err_set(err, BG_EPROTO, "partition: unexpected reply to EXEC");
    for (size_t i = 0; i < 2; i++) {
      if (last->element[i]->type != REDIS_REPLY_INTEGER)
        return bgi_err_set(err, BG_EPROTO, "partition: unexpected reply to EXEC");
      l->value |= last->element[i]->integer;
    }
    return BG_OK;
  }
  if (last->type != REDIS_REPLY_INTEGER) return bgi_err_set(err, BG_EPROTO, "partition: unexpected reply");
  l->value = last->integer;
  return BG_OK;
}

static int resume_lane(bgi_task *t, int st, bgi_err *err) {
  bgi_pkey_lane *l = (bgi_pkey_lane *)t;
  (void)err;
  if (!l->sent) {
    l->sent = 1;
    l->req = (bgi_req){.client = l->f->client, .slot = (int)bgi_pslot(l->part, l->g.parts),
                       .deadline_ns = l->deadline_ns, .build = build_lane, .parse = parse_lane, .ctx = l};
    return bgi_task_call(t, &l->req);
  }
  return bgi_task_done(t, st);
}

/* ---- the sweep: every partition, a round at a time ----------------------------------------- */

static int sweep_round(bgi_psweep *s) {
  uint32_t n = 0;
  while (n < BGI_PLANES_MAX && s->cursor < s->g.parts) {
    bgi_pkey_lane *l = &s->lanes[n];
    memset(l, 0, sizeof *l);
    bgi_task_init(&l->t, resume_lane);
    l->f = s->f;
    l->g = s->g;
    l->part = s->cursor++;
    l->op = s->op;
    l->ttl_ms = s->ttl_ms;
    l->deadline_ns = s->deadline_ns;
    s->subs[n].t = &l->t;
    n++;
  }
  s->nlanes = n;
  return bgi_task_fanout(&s->t, s->subs, n);
}

static int resume_sweep(bgi_task *t, int st, bgi_err *err) {
  bgi_psweep *s = (bgi_psweep *)t;
  (void)st;
  if (s->nlanes) {
    double size = (double)bgi_cfg_size(s->g.cfg), k = bgi_cfg_k(s->g.cfg);
    for (uint32_t i = 0; i < s->nlanes; i++) {
      int ls = s->subs[i].t->status;
      if (ls != BG_OK) {
        *err = s->subs[i].err;
        return bgi_task_done(t, ls);
      }
      int64_t v = s->lanes[i].value;
      /* count: Redisson's estimate per partition (each a filter of its own over its items) */
      if (s->op == BGI_PSWEEP_COUNT) s->count += -size / k * log(1 - (double)v / size);
      else s->applied |= v > 0;
    }
  }
  if (s->cursor >= s->g.parts) return bgi_task_done(t, BG_OK);
  return sweep_round(s);
}

void bgi_psweep_init(bgi_psweep *s, bg_filter *f, const bgi_pgen *g, int op, int64_t ttl_ms, uint64_t deadline_ns) {
  bgi_task_init(&s->t, resume_sweep);
  s->f = f;
  s->g = *g;
  s->op = op;
  s->ttl_ms = ttl_ms;
  s->deadline_ns = deadline_ns;
  s->cursor = s->nlanes = 0;
  s->applied = 0;
  s->count = 0;
}

/* ---- init --------------------------------------------------------------------------------- */

/* How long an init may take from its claim to its commit (ms): the claim of one that died expires. */
#define CLAIM_MS 60000

enum { I_START, I_CLAIMED, I_SWEPT, I_COMMITTED };

static int build_claim(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_pinit *in = ctx;
  const bg_filter *f = in->f;
  if (bgi_script_begin(&c->out, &bgi_script_pinit_claim, in->run.use_body, 1, 9) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(10, f->config_key.len + 256)) != BG_OK)
    return NOMEM(err);
  bgi_resp_key(&c->out, &f->config_key);
  bgi_resp_cstr(&c->out, in->token);
  bgi_resp_u64(&c->out, CLAIM_MS);
  bgi_resp_u64(&c->out, in->g.gen);
  bgi_resp_u64(&c->out, in->g.parts);
  bgi_resp_u64(&c->out, bgi_cfg_size(in->g.cfg));
  bgi_resp_u64(&c->out, bgi_cfg_size(in->g.cfg) * in->g.parts);
  bgi_resp_u64(&c->out, bgi_cfg_k(in->g.cfg));
  bgi_resp_u64(&c->out, (uint64_t)in->g.n);
  bgi_resp_cstr(&c->out, in->fpp);
  *nreplies = 1;
  return BG_OK;
}

static int build_commit(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_pinit *in = ctx;
  const bg_filter *f = in->f;
  if (bgi_script_begin(&c->out, &bgi_script_pinit_commit, in->run.use_body, 1, 2) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(3, f->config_key.len + 64)) != BG_OK)
    return NOMEM(err);
  bgi_resp_key(&c->out, &f->config_key);
  bgi_resp_cstr(&c->out, in->token);
  bgi_resp_u64(&c->out, in->g.gen);
  *nreplies = 1;
  return BG_OK;
}

/* Both scripts answer {1} (done) or {0} (not done: the claim found a config, the commit lost its claim). */
static int parse_script(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_pinit *in = ctx;
  const bgi_reply *x = rep[0];
  (void)c, (void)n;
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    in->run.noscript = 1;
    return BG_OK;
  }
  if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, "init", err);
  if (x->type != REDIS_REPLY_ARRAY || x->elements != 1 || x->element[0]->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "init: unexpected reply from the partitioned init script");
  in->ok = x->element[0]->integer == 1;
  return BG_OK;
}

static int call_script(bgi_pinit *in, bgi_build_fn build, const char *what, int state) {
  in->run = (bgi_script_run){0};
  in->req = (bgi_req){.client = in->f->client, .slot = in->f->slot, .deadline_ns = in->deadline_ns, .build = build,
                      .parse = parse_script, .ctx = in, .run = &in->run, .what = what};
  in->state = state;
  return bgi_task_call(&in->t, &in->req);
}

static int resume_pinit(bgi_task *t, int st, bgi_err *err) {
  bgi_pinit *in = (bgi_pinit *)t;
  if (in->state != I_START && st != BG_OK) return bgi_task_done(t, st);
  switch (in->state) {
    case I_START:
      return call_script(in, build_claim, "partitioned init (claim)", I_CLAIMED);
    case I_CLAIMED:
      /* tryInit: a config already there (of either kind) is kept */
      if (!in->ok) return bgi_task_done(t, BG_OK);
      bgi_psweep_init(&in->sweep, in->f, &in->g, BGI_PSWEEP_INIT, 0, in->deadline_ns);
      in->state = I_SWEPT;
      return bgi_task_sub(t, &in->sweep.t);
    case I_SWEPT:
      return call_script(in, build_commit, "partitioned init (commit)", I_COMMITTED);
    case I_COMMITTED:
    default:
      if (!in->ok)
        return bgi_task_done(t, bgi_err_set(err, BG_ETIMEOUT, "init: the partitioned filter \"%s\" was not made live: "
                                            "its claim on %s expired (after %d ms) or was deleted before every "
                                            "partition was written; init again", in->f->name.s,
                                            in->f->config_key.s, CLAIM_MS));
      in->created = 1;
      bgi_pconf_set(in->f, &(bgi_pconf){.live = in->g});
      return bgi_task_done(t, BG_OK);
  }
}

int bgi_pinit_geometry(int64_t n, double fpp, int64_t parts, bgi_pgen *g, bgi_err *err) {
  bgi_pgeom geo;
  int st = bgi_partition_geometry(n, fpp, parts, &geo, err);
  if (st != BG_OK) {
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return bgi_err_set(err, st, "init: %s", why);
  }
  *g = (bgi_pgen){.gen = 1, .parts = geo.parts, .cfg = bgi_cfg_pack(geo.psize, geo.k), .n = n, .fpp = fpp};
  return BG_OK;
}

int bgi_pinit_prepare(bgi_pinit *in, bg_filter *f, uint64_t deadline_ns, int64_t n, double fpp, int64_t parts,
                      bgi_err *err) {
  memset(in, 0, sizeof *in);
  int st = bgi_pinit_geometry(n, fpp, parts, &in->g, err);
  if (st != BG_OK) return st;
  bgi_task_init(&in->t, resume_pinit);
  in->f = f;
  in->deadline_ns = deadline_ns;
  bgi_format_java_double(fpp, in->fpp, sizeof in->fpp);
  bgi_random_hex(in->token, 16);
  in->state = I_START;
  return BG_OK;
}
