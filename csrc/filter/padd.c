/*
 * add on a partitioned filter (partitioned.h): per partition of a window, one lane whose chunks
 * are each one run of the partition add script (scripts.h, bgi_script_padd): it checks the
 * partition's meta and sets the bits in one atomic step, or touches nothing when the meta is gone
 * or holds another geometry (then the central config is read again). During a rotation the same
 * step records the items' hashes for the generation being built, or (its commit under way) names
 * that generation, which pop.c then adds the items to.
 */
#include "filter/partitioned.h"

#include "filter/scripts.h"

static int build_padd(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_plane *l = ctx;
  uint32_t k = bgi_cfg_k(l->g.cfg);
  int st = bgi_plane_indexes(c, l, err);
  if (st != BG_OK) return st;
  size_t n = l->n, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  const uint64_t *idx = c->idx;
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    size_t nargs = 4 + m * (2 + k);
    if (bgi_script_begin(&c->out, &bgi_script_padd, l->run.use_body, 4, nargs) != BG_OK ||
        bgi_buf_reserve(&c->out, 4 * bgi_pk_bound(l->f) + nargs * BGI_RESP_U64_MAX) != BG_OK)
      return bgi_err_set(err, BG_ENOMEM, "out of memory");
    static const char keys[] = {BGI_PKEY_META, BGI_PKEY_BITMAP, BGI_PKEY_MARK, BGI_PKEY_DELTA};
    for (size_t i = 0; i < sizeof keys; i++) bgi_resp_pk(&c->out, l->f, l->g.gen, l->part, l->g.parts, keys[i]);
    bgi_resp_u64(&c->out, bgi_cfg_size(l->g.cfg));
    bgi_resp_u64(&c->out, k);
    bgi_resp_u64(&c->out, l->g.parts);
    bgi_resp_u64(&c->out, m);
    /* the hashes, for a rotation's delta: the generation it builds may have another geometry */
    for (size_t j = 0; j < m; j++) {
      const uint64_t *h = l->w->h[l->items[done + j]];
      bgi_resp_u64(&c->out, h[0]);
      bgi_resp_u64(&c->out, h[1]);
    }
    for (size_t j = 0; j < m * k; j++) bgi_resp_u64(&c->out, *idx++);
  }
  c->durable = 1;
  *nreplies = chunks;
  return BG_OK;
}

static int parse_padd(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  bgi_plane *l = ctx;
  (void)c;
  l->added = 0;
  l->forward = 0;
  for (size_t r = 0; r < nreplies; r++) {
    const bgi_reply *x = rep[r];
    if (bgi_reply_is_error(x, "NOSCRIPT")) {
      l->run.noscript = 1;
      return BG_OK;
    }
    if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, "add", err);
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 3 || x->element[0]->type != REDIS_REPLY_INTEGER ||
        x->element[1]->type != REDIS_REPLY_INTEGER || x->element[2]->type != REDIS_REPLY_INTEGER)
      return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the partition add script");
    if (x->element[0]->integer == 0) {
      /* the first chunk found the meta changed and wrote nothing; so did the rest */
      l->outcome = BGI_LANE_GONE;
      l->added = 0;
      return BG_OK;
    }
    l->added += (size_t)x->element[1]->integer;
    if (x->element[0]->integer == 2) l->forward = (uint64_t)x->element[2]->integer;
  }
  return BG_OK;
}

static int resume_lane(bgi_task *t, int st, bgi_err *err) {
  bgi_plane *l = (bgi_plane *)t;
  (void)err;
  if (l->state == 0) {
    size_t min_bytes = (size_t)l->n * bgi_cfg_k(l->g.cfg) * bgi_resp_offset_min_len(bgi_cfg_size(l->g.cfg));
    l->req = (bgi_req){.client = l->f->client, .slot = (int)bgi_pslot(l->part, l->g.parts),
                       .flags = bgi_call_flags_for_min_size(min_bytes), .deadline_ns = l->deadline_ns,
                       .build = build_padd, .parse = parse_padd, .ctx = l, .run = &l->run, .what = "add"};
    l->state = 1;
    return bgi_task_call(t, &l->req);
  }
  return bgi_task_done(t, st);
}

void bgi_plane_add_init(bgi_plane *l) { bgi_task_init(&l->t, resume_lane); }
