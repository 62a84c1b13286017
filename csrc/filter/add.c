/* add / add_many: one EVALSHA of the add script per chunk of items, all chunks in one round trip. */
#include "filter/filter.h"

#include "filter/scripts.h"

#include <string.h>


static int build_add(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_adder *a = ctx;
  const bg_filter *f = a->f;
  uint32_t k = bgi_cfg_k(a->cfg), nk = bgi_cfg_k(a->next_cfg);
  int st = bgi_compute_indexes(c, a->items, a->lens, a->from, a->to, a->cfg, a->next_cfg, err);
  if (st != BG_OK) return st;
  size_t n = a->to - a->from, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  const uint64_t *idx = c->idx, *next_idx = c->idx + n * k;
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    size_t keys_len = f->name.len + f->config_key.len + f->rotation_key.len + f->delta_key.len;
    if (bgi_script_begin(&c->out, &bgi_script_add, a->run.use_body, 4, 4 + m * (k + nk)) != BG_OK ||
        bgi_buf_reserve(&c->out, bgi_resp_bound(8, keys_len) + (4 + m * (k + nk)) * BGI_RESP_U64_MAX) != BG_OK)
      return bgi_err_set(err, BG_ENOMEM, "out of memory");
    bgi_resp_key(&c->out, &f->config_key);
    bgi_resp_key(&c->out, &f->name);
    bgi_resp_key(&c->out, &f->rotation_key);
    bgi_resp_key(&c->out, &f->delta_key);
    bgi_resp_u64(&c->out, bgi_cfg_size(a->cfg));
    bgi_resp_u64(&c->out, k);
    bgi_resp_u64(&c->out, bgi_cfg_size(a->next_cfg));
    bgi_resp_u64(&c->out, nk);
    for (size_t j = 0; j < m * k; j++) bgi_resp_u64(&c->out, *idx++);
    for (size_t j = 0; j < m * nk; j++) bgi_resp_u64(&c->out, *next_idx++);
  }
  c->durable = 1;
  *nreplies = chunks;
  return BG_OK;
}

static int parse_add(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  bgi_adder *a = ctx;
  uint64_t cfg;
  (void)c;
  a->added = 0;
  for (size_t r = 0; r < nreplies; r++) {
    const bgi_reply *x = rep[r];
    if (bgi_reply_is_error(x, "NOSCRIPT")) {
      a->run.noscript = 1;
      return BG_OK;
    }
    if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, "add", err);
    if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 || x->element[0]->type != REDIS_REPLY_INTEGER)
      return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the add script");
    switch (x->element[0]->integer) {
      case 1:
        if (x->elements != 3) return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the add script");
        a->added += (size_t)x->element[1]->integer;
        a->rotation_seen |= x->element[2]->integer == 1;
        break;
      case 0:
        return bgi_err_set(err, BG_ENOTINIT, "Bloom filter \"%s\" is not initialized: its config hash %s has no "
                           "size/hashIterations (call init first)", a->f->name.s, a->f->config_key.s);
      case 2: {
        if (x->elements != 5) return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the add script");
        int st = bgi_cfg_from_pair(a->f, x->element[1], x->element[2], &cfg, err);
        if (st != BG_OK) return st;
        a->seen_cfg = cfg;
        /* the rotation's state of the same instant: the retry hashes for it at once */
        a->seen_next_after_cfg = 0;
        if (x->element[3]->type != REDIS_REPLY_NIL &&
            bgi_cfg_from_pair(a->f, x->element[3], x->element[4], &cfg, err) == BG_OK)
          a->seen_next_after_cfg = cfg;
        return BG_OK;
      }
      case 3: {
        /* a rotation runs to another config than we hashed for: its delta needs those indexes */
        if (x->elements != 3) return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the add script");
        int st = bgi_cfg_from_pair(a->f, x->element[1], x->element[2], &cfg, err);
        if (st != BG_OK) return bgi_err_set(err, BG_ECORRUPT, "add: the rotation lease %s holds a bad next config",
                                            a->f->rotation_key.s);
        a->seen_next = cfg;
        return BG_OK;
      }
      default:
        return bgi_err_set(err, BG_EPROTO, "add: unexpected reply from the add script");
    }
  }
  return BG_OK;
}

/* Where an add task is (bgi_add_task.state). */
enum {
  A_START,       /* the next window */
  A_CONFIG,      /* the config was loaded */
  A_SENT         /* the window's chunks were answered */
};

/* Sends the window's chunks with a config and a rotation's next one (loading the config first
 * when none is known). */
static int send_window_with(bgi_add_task *at, uint64_t cfg, uint64_t next_cfg) {
  bgi_adder *a = &at->a;
  bg_filter *f = a->f;
  a->cfg = cfg;
  if (!a->cfg) {
    at->state = A_CONFIG;
    bgi_filter_config_req(&at->req, f, at->deadline_ns);
    return bgi_task_call(&at->t, &at->req);
  }
  a->next_cfg = next_cfg;
  a->seen_cfg = a->seen_next = 0;
  a->rotation_seen = 0;
  /* a window too big to multiplex says so before it is built (client.h, BGI_CALL_BULK): its
   * offsets (k per item for the config, and for a rotation's next one) are about the least it takes */
  uint64_t size = bgi_cfg_size(a->cfg) > bgi_cfg_size(a->next_cfg) ? bgi_cfg_size(a->cfg) : bgi_cfg_size(a->next_cfg);
  size_t min_bytes = (a->to - a->from) * (bgi_cfg_k(a->cfg) + bgi_cfg_k(a->next_cfg)) * bgi_resp_offset_min_len(size);
  at->req = (bgi_req){.client = f->client, .slot = f->slot, .flags = bgi_call_flags_for_min_size(min_bytes),
                      .deadline_ns = at->deadline_ns, .build = build_add, .parse = parse_add, .ctx = a,
                      .run = &a->run, .what = "add"};
  at->state = A_SENT;
  return bgi_task_call(&at->t, &at->req);
}

/* ... with what the handle knows. */
static int send_window(bgi_add_task *at) {
  return send_window_with(at, atomic_load(&at->a.f->cfg), atomic_load(&at->a.f->next_cfg));
}

/* The next window (config changes and rotation changes each get the retry budget: a rebuild
 * legitimately brings one of each - a rotation begins, then commits), or the end. */
static int next_window(bgi_add_task *at) {
  bgi_adder *a = &at->a;
  if (a->to >= at->n) {
    *at->done = at->n;
    return bgi_task_done(&at->t, BG_OK);
  }
  a->from = a->to;
  a->to = at->n - a->from < BGI_WINDOW_ITEMS ? at->n : a->from + BGI_WINDOW_ITEMS;
  *at->done = a->from;
  at->attempt = at->rot_attempt = 0;
  return send_window(at);
}

static int resume_add(bgi_task *t, int st, bgi_err *err) {
  bgi_add_task *at = (bgi_add_task *)t;
  bgi_adder *a = &at->a;
  bg_filter *f = a->f;
  if (at->state == A_START) return next_window(at);
  if (st != BG_OK) return bgi_task_done(t, st);
  if (at->state == A_CONFIG) return send_window(at);
  if (a->seen_next) {
    bgi_filter_cfg_learnt(&f->next_cfg, a->next_cfg, a->seen_next);
    if (at->rot_attempt++ >= at->retries)
      return bgi_task_done(t, bgi_err_set(err, BG_ECONFIG, "add: the rotation of \"%s\" changed on each of %lld "
                                          "attempts", f->name.s, (long long)at->rot_attempt));
    return send_window_with(at, a->cfg, a->seen_next);
  }
  if (!a->seen_cfg) {
    /* no rotation runs any more: stop hashing for one (unless another thread learnt of a new one) */
    uint64_t known = a->next_cfg;
    if (known && !a->rotation_seen) atomic_compare_exchange_strong(&f->next_cfg, &known, 0);
    *at->added += a->added;
    return next_window(at);
  }
  /* rebuilt with other parameters: nothing was written by the refused chunk; redo the window
   * with the config the server just named (setting bits twice is harmless) - fresher than the
   * handle's, which replies to older requests may have set since */
  if (bgi_filter_cfg_learnt(&f->cfg, a->cfg, a->seen_cfg)) atomic_store(&f->next_cfg, a->seen_next_after_cfg);
  if (at->attempt++ >= at->retries)
    return bgi_task_done(t, bgi_err_set(err, BG_ECONFIG, "add: the config of \"%s\" changed on each of %lld attempts",
                                        f->name.s, (long long)at->attempt));
  return send_window_with(at, a->seen_cfg, a->seen_next_after_cfg);
}

void bgi_add_task_init(bgi_add_task *at, bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                       size_t n, size_t *added, size_t *done) {
  bgi_task_init(&at->t, resume_add);
  memset(&at->a, 0, sizeof at->a);
  at->a.f = f;
  at->a.items = items;
  at->a.lens = lens;
  at->n = n;
  at->added = added;
  at->done = done;
  at->deadline_ns = deadline_ns;
  at->retries = f->client->opts.config_retries;
  at->attempt = at->rot_attempt = 0;
  at->state = A_START;
  *added = 0;
  *done = 0;
}

int bgi_filter_add_raw(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                       size_t *added, size_t *done, bgi_err *err) {
  if (f->native) {
    bgi_native_task nt;
    bgi_native_task_init(&nt, f, 1, deadline_ns, items, lens, n, NULL, added, done);
    return bgi_task_run_with(&nt.t, &bgi_req_executor, err);
  }
  bgi_add_task at;
  bgi_add_task_init(&at, f, deadline_ns, items, lens, n, added, done);
  return bgi_task_run_with(&at.t, &bgi_req_executor, err);
}

BG_API int bg_filter_add_many_ex(bg_filter *f, bg_call *call, const void *const *items, const size_t *lens,
                                 size_t n, size_t *added) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  /* added is optional: check the items only; the policy (filter/guarded.c) may retry */
  if (bgi_check_items("add", items, lens, n, lens, &err) == BG_OK)
    BGI_WITH_CALL(call, err.status = bgi_filter_guarded_add(f, bgi_call_deadline(call), items, lens, n, added, &err));
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_add_many(bg_filter *f, const void *const *items, const size_t *lens, size_t n,
                              size_t *added) {
  return bg_filter_add_many_ex(f, NULL, items, lens, n, added);
}

BG_API int bg_filter_add_ex(bg_filter *f, bg_call *call, const void *item, size_t len, int *added) {
  size_t n = 0;
  int st = bg_filter_add_many_ex(f, call, &item, &len, 1, &n);
  if (added) *added = st == BG_OK && n > 0;
  return st;
}

BG_API int bg_filter_add(bg_filter *f, const void *item, size_t len, int *added) {
  return bg_filter_add_ex(f, NULL, item, len, added);
}
