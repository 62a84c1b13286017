/*
 * contains / contains_many: per chunk of items, one MULTI block
 *   HMGET config size hashIterations bgRebuilding;  HGET lock mode;  BITFIELD_RO bitmap GET u1 i...
 * so the config, the write lock and the bits are read in one atomic step: an answer is never
 * computed from a bitmap that an in-place rebuild (BG_ROTATE_LOCKED) is rewriting.
 *
 * On a connection with tracking (redis/tracking.h) the block reads the bits first, then says
 * CLIENT CACHING YES and reads the config, the lock and PTTL config, so the server tracks those two
 * keys for the connection - not the bitmap, which every add changes; a block that finds the
 * config as expected, no lock, no mark and no TTL leaves a verdict there.
 * While it holds, the next queries of this filter on that connection send BITFIELD_RO alone: any
 * change to the config or the lock since the verdict reaches the connection as a push ahead of
 * the bits' reply, so an answer that arrives with no push before it was read from the bitmap of
 * the config and lock state that was checked. One that arrives after a push is dropped and the
 * query asked again with the block. (A config with a TTL gets no verdict: it can expire without
 * being touched while only the bitmap is read, and a query must then say BG_ENOTINIT.)
 */
#include "filter/filter.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* replies per chunk: +OK to MULTI, a QUEUED per command, then EXEC's array */
#define BLOCK_REPLIES 5
#define TRACKED_BLOCK_REPLIES 7
/* the negative control's block (below): the three commands' own replies */
#define PLAIN_BLOCK_REPLIES 3


/* per index: "$3\r\nGET\r\n" + "$2\r\nu1\r\n" + the offset */
#define GET_U1 "$3\r\nGET\r\n$2\r\nu1\r\n"
#define GET_U1_LEN (sizeof GET_U1 - 1)

static void append_bits(bgi_buf *out, const bg_filter *f, const uint64_t *idx, size_t n) {
  bgi_resp_array(out, 2 + n * 3);
  bgi_resp_bulk(out, "BITFIELD_RO", 11);
  bgi_resp_key(out, &f->name);
  for (size_t j = 0; j < n; j++) {
    memcpy(out->data + out->len, GET_U1, GET_U1_LEN);
    out->len += GET_U1_LEN;
    bgi_resp_u64(out, idx[j]);
  }
}

static void append_config_and_lock(bgi_buf *out, const bg_filter *f) {
  bgi_resp_array(out, 5);
  bgi_resp_bulk(out, "HMGET", 5);
  bgi_resp_key(out, &f->config_key);
  bgi_resp_lit(out, BGI_CONFIG_SIZE);
  bgi_resp_lit(out, BGI_CONFIG_K);
  bgi_resp_lit(out, BGI_REBUILD_FIELD);
  bgi_resp_array(out, 3);
  bgi_resp_bulk(out, "HGET", 4);
  bgi_resp_key(out, &f->lock_key);
  bgi_resp_lit(out, BGI_LOCK_MODE);
}

/* EXEC answers [fields, mode, bits], or tracked [bits, OK, fields, mode, pttl]; plain (the
 * negative control) sends the three commands without MULTI and EXEC */
static void append_block(bgi_buf *out, const bg_filter *f, const uint64_t *idx, size_t n, int tracked, int plain) {
  if (plain) {
    append_config_and_lock(out, f);
    append_bits(out, f, idx, n);
    return;
  }
  bgi_resp_array(out, 1);
  bgi_resp_bulk(out, "MULTI", 5);
  if (tracked) {
    append_bits(out, f, idx, n);
    bgi_tracking_append_caching(out);   /* the config and lock read next are tracked */
    append_config_and_lock(out, f);
    bgi_resp_array(out, 2);
    bgi_resp_bulk(out, "PTTL", 4);
    bgi_resp_key(out, &f->config_key);
  } else {
    append_config_and_lock(out, f);
    append_bits(out, f, idx, n);
  }
  bgi_resp_array(out, 1);
  bgi_resp_bulk(out, "EXEC", 4);
}

static int build_query(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_query *q = ctx;
  const bg_filter *f = q->f;
  uint32_t k = bgi_cfg_k(q->cfg);
  int st = bgi_compute_indexes(c, q->items, q->lens, q->from, q->to, q->cfg, 0, err);
  if (st != BG_OK) return st;
  size_t n = q->to - q->from, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  /* after a redirect the block is the full check; the fault is the cluster tests' negative control */
  /* the epoch first: a push between the two reads then marks this query stale, never the reverse
   * (on a multiplexed connection the reader thread counts pushes meanwhile) */
  q->epoch = bgi_tracking_epoch(c->track);
  q->bits_only = c->fault_bits_only || (!c->no_verdict && bgi_tracking_fresh(c->track, f->id, q->cfg));
  /* The cluster tests' negative control (bgi_cluster.fault_ask_bits_only) reads the config, the
   * lock and the bits without MULTI, so a half-migrated slot answers ASK for the config alone on
   * any server (Redis 7.0 answers ASK per queued command too, Valkey >= 8 TRYAGAIN for the whole
   * EXEC), and the bits-only read that follows the ASK (c->fault_bits_only) finds the importing
   * node's missing bitmap: false negatives the harness must see. */
  bgi_cluster *cluster = atomic_load_explicit(&f->client->cluster, memory_order_relaxed);
  q->plain = !q->bits_only && cluster && cluster->fault_ask_bits_only;
  q->tracked = !q->bits_only && !q->plain && bgi_tracking_on(c->track);
  size_t need = chunks * (96 + bgi_resp_bound(5, f->config_key.len + 32) + bgi_resp_bound(3, f->lock_key.len + 8) +
                          bgi_resp_bound(2, f->name.len + 16) + bgi_resp_bound(2, f->config_key.len + 8)) +
                n * k * (17 + BGI_RESP_U64_MAX);
  if (bgi_buf_reserve(&c->out, need) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    if (q->bits_only) append_bits(&c->out, f, c->idx + done * k, m * k);
    else append_block(&c->out, f, c->idx + done * k, m * k, q->tracked, q->plain);
  }
  *nreplies = q->bits_only ? chunks
              : chunks * (q->plain ? PLAIN_BLOCK_REPLIES : q->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES);
  return BG_OK;
}

/* present[item..] from one BITFIELD_RO reply of k bits per item; *item moves past them. */
static int take_bits(bgi_query *q, const bgi_reply *bits, size_t *item, bgi_err *err) {
  uint32_t k = bgi_cfg_k(q->cfg);
  if (bits->type == REDIS_REPLY_ERROR) return bgi_reply_error(bits, "contains (bitmap)", err);
  size_t m = bits->elements / k;
  if (bits->type != REDIS_REPLY_ARRAY || bits->elements % k || *item + m > q->to)
    return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to BITFIELD_RO");
  for (size_t i = 0; i < m; i++, (*item)++) {
    uint8_t all = 1;
    for (uint32_t b = 0; b < k; b++) all &= bits->element[i * k + b]->integer == 1;
    q->present[*item] = all;
  }
  return BG_OK;
}

static int parse_bits_only(bgi_conn *c, bgi_reply **rep, size_t nreplies, bgi_query *q, bgi_err *err) {
  size_t item = q->from;
  /* a push came first: the config or the lock changed before (some of) these bits were read */
  if (bgi_tracking_epoch(c->track) != q->epoch) {
    q->stale = 1;
    return BG_OK;
  }
  for (size_t r = 0; r < nreplies; r++) {
    int st = take_bits(q, rep[r], &item, err);
    if (st != BG_OK) return st;
  }
  return item == q->to ? BG_OK : bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
}

static int parse_query(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  bgi_query *q = ctx;
  size_t item = q->from;
  size_t per_block = q->plain ? PLAIN_BLOCK_REPLIES : q->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES;
  int has_ttl = 0;
  if (q->bits_only) return parse_bits_only(c, rep, nreplies, q, err);
  for (size_t r = 0; r < nreplies; r += per_block) {
    /* CLIENT CACHING refused when queued (an ACL changed since the handshake): EXEC aborted; stop
     * tracking on this connection and ask again with the plain block */
    if (q->tracked && rep[r + 2]->type == REDIS_REPLY_ERROR) {
      bgi_tracking_off(c->track);
      q->stale = 1;
      return BG_OK;
    }
    const bgi_reply *const *el = (const bgi_reply *const *)rep + r;   /* plain: the replies themselves */
    const bgi_reply *ex = NULL;
    if (!q->plain) {
      /* queued replies: an error there means EXEC aborts; report the cause */
      for (size_t i = 0; i + 1 < per_block; i++)
        if (rep[r + i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[r + i], "contains", err);
      ex = rep[r + per_block - 1];
      if (ex->type == REDIS_REPLY_ERROR) return bgi_reply_error(ex, "contains", err);
      if (ex->type != REDIS_REPLY_ARRAY || ex->elements != per_block - 2)
        return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to EXEC");
      el = (const bgi_reply *const *)ex->element + (q->tracked ? 2 : 0);
    }
    const bgi_reply *fields = el[0], *mode = el[1], *bits = q->tracked ? ex->element[0] : el[2];
    /* CLIENT CACHING failed when run: answer, stop asking */
    if (q->tracked && ex->element[1]->type == REDIS_REPLY_ERROR) bgi_tracking_off(c->track);
    if (fields->type == REDIS_REPLY_ERROR) return bgi_reply_error(fields, "contains (config)", err);
    if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 3)
      return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to HMGET");
    if (mode->type == REDIS_REPLY_ERROR) return bgi_reply_error(mode, "contains (write lock)", err);
    if (bgi_reply_is_lit(mode, BGI_LOCK_MODE_WRITE)) {
      q->locked = 1;
      return BG_OK;
    }
    if (fields->element[2]->type != REDIS_REPLY_NIL) {
      q->interrupted = 1;
      return BG_OK;
    }
    uint64_t cfg;
    int st = bgi_cfg_from_pair(q->f, fields->element[0], fields->element[1], &cfg, err);
    if (st != BG_OK) return st;
    if (cfg != q->cfg) {
      q->seen_cfg = cfg;
      return BG_OK;
    }
    if ((st = take_bits(q, bits, &item, err)) != BG_OK) return st;
    if (q->tracked) has_ttl |= el[2]->type != REDIS_REPLY_INTEGER || el[2]->integer != -1;
  }
  if (item != q->to) return bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
  /* a push during this round trip may have been for a key this block then read: the server stops
   * tracking a key once it has pushed for it, so take no verdict from it */
  if (q->tracked && !has_ttl && !c->no_verdict) bgi_tracking_remember(c->track, q->f->id, q->cfg, q->epoch);
  return BG_OK;
}

#define LOCK_POLL_FIRST_NS 500000u
#define LOCK_POLL_MAX_NS 20000000u

static int locked_too_long(const bg_filter *f, const bgi_lock_wait *w, const char *held, bgi_err *err) {
  return bgi_err_set(err, BG_ELOCKED, "contains: \"%s\" is write-locked (%s) and stayed so for as long as this call "
                     "may wait (BG_OPT_WRITE_LOCK_WAIT_MS = %lld, or the call's deadline)", f->name.s, held,
                     (long long)w->wait_ms);
}

int bgi_lock_nap(const bg_filter *f, bgi_lock_wait *w, const char *held, uint64_t *until, bgi_err *err) {
  uint64_t now = bgi_now_ns();
  if (!w->until_ns) {
    w->until_ns = bgi_after_ms(now, w->wait_ms);
    if (w->deadline_ns && w->deadline_ns < w->until_ns) w->until_ns = w->deadline_ns;
    w->nap_ns = LOCK_POLL_FIRST_NS;
  }
  if (now >= w->until_ns) return locked_too_long(f, w, held, err);
  uint64_t nap = w->nap_ns < w->until_ns - now ? w->nap_ns : w->until_ns - now;
  /* the call's deadline leaves no time for one more look after this nap - one that takes twice
   * as long as the last one did, so a slow server does not turn the answer into a timeout: say
   * why now */
  if (w->until_ns == w->deadline_ns && now + nap + 2 * w->look_ns >= w->until_ns)
    return locked_too_long(f, w, held, err);
  *until = now + nap;
  w->nap_ns = w->nap_ns * 2 < LOCK_POLL_MAX_NS ? w->nap_ns * 2 : LOCK_POLL_MAX_NS;
  return BG_OK;
}

/* Where a contains task is (bgi_contains_task.state). */
enum {
  Q_START,       /* the next window */
  Q_CONFIG,      /* the config was loaded */
  Q_ASKED,       /* the window's block was answered */
  Q_NAPPED       /* a nap while the write lock was held ended */
};

/* Sends the window's block with a config (loading it first when none is known). */
static int ask_with(bgi_contains_task *ct, uint64_t cfg, bgi_err *err) {
  bgi_query *q = &ct->q;
  q->cfg = cfg;
  if (!q->cfg) {
    ct->state = Q_CONFIG;
    bgi_filter_config_req(&ct->req, q->f, ct->deadline_ns);
    return bgi_task_call(&ct->t, &ct->req);
  }
  (void)err;
  q->seen_cfg = 0;
  q->locked = q->interrupted = q->stale = q->bits_only = q->tracked = q->plain = 0;
  ct->look_started = bgi_now_ns();
  /* a window too big to multiplex says so before it is built (client.h, BGI_CALL_BULK): its
   * bits' reads alone (k offsets per item) are about the least its commands take */
  size_t min_bytes = (q->to - q->from) * bgi_cfg_k(q->cfg) * (GET_U1_LEN + bgi_resp_offset_min_len(bgi_cfg_size(q->cfg)));
  ct->req = (bgi_req){.client = q->f->client, .slot = q->f->slot, .flags = bgi_call_flags_for_min_size(min_bytes),
                      .deadline_ns = ct->deadline_ns, .build = build_query, .parse = parse_query, .ctx = q};
  ct->state = Q_ASKED;
  return bgi_task_call(&ct->t, &ct->req);
}

/* ... with the config the handle knows. */
static int ask(bgi_contains_task *ct, bgi_err *err) { return ask_with(ct, atomic_load(&ct->q.f->cfg), err); }

/* The next window, or the end. */
static int next_window(bgi_contains_task *ct, bgi_err *err) {
  bgi_query *q = &ct->q;
  if (q->to >= ct->n) {
    *ct->done = ct->n;
    return bgi_task_done(&ct->t, BG_OK);
  }
  q->from = q->to;
  q->to = ct->n - q->from < BGI_WINDOW_ITEMS ? ct->n : q->from + BGI_WINDOW_ITEMS;
  *ct->done = q->from;
  ct->attempt = 0;
  return ask(ct, err);
}

static int resume_contains(bgi_task *t, int st, bgi_err *err) {
  bgi_contains_task *ct = (bgi_contains_task *)t;
  bgi_query *q = &ct->q;
  bg_filter *f = q->f;
  switch (ct->state) {
    case Q_START:
      return next_window(ct, err);
    case Q_CONFIG:
      if (st != BG_OK) return bgi_task_done(t, st);
      return ask(ct, err);
    case Q_NAPPED:
      if (st == BG_ECANCELED) return bgi_task_done(t, bgi_cancel_err(err, "contains (waiting out the write lock)"));
      if (st != BG_OK) return bgi_task_done(t, st);
      return ask(ct, err);   /* waiting is not a config change: it has its own budget */
    case Q_ASKED:
    default:
      break;
  }
  if (st != BG_OK) return bgi_task_done(t, st);
  ct->w.look_ns = bgi_now_ns() - ct->look_started;
  if (q->bits_only) bgi_filter_count_tracked(f, q->stale);
  if (q->stale) return ask(ct, err);   /* the verdict is gone: the next attempt sends the full block */
  if (q->interrupted)
    return bgi_task_done(t, bgi_err_set(err, BG_ELOCKED, "contains: an in-place rebuild of \"%s\" stopped half-way "
                                        "(its rotator died or gave up: the config hash still has %s, the write lock "
                                        "is gone); the bitmap is incomplete until the next rotation", f->name.s,
                                        BGI_REBUILD_FIELD));
  if (q->locked) {
    uint64_t until = 0;
    char held[300];
    snprintf(held, sizeof held, "an in-place rebuild holds %s", f->lock_key.s);
    if ((st = bgi_lock_nap(f, &ct->w, held, &until, err)) != BG_OK) return bgi_task_done(t, st);
    ct->state = Q_NAPPED;
    return bgi_task_sleep(t, until);
  }
  if (!q->seen_cfg) return next_window(ct, err);
  /* the filter was rebuilt with other parameters: ask again with the config the server just
   * named - fresher than the handle's, which replies to older requests may have set since */
  bgi_filter_cfg_learnt(&f->cfg, q->cfg, q->seen_cfg);
  if (ct->attempt >= ct->retries)
    return bgi_task_done(t, bgi_err_set(err, BG_ECONFIG, "contains: the config of \"%s\" changed on each of %lld "
                                        "attempts", f->name.s, (long long)ct->attempt + 1));
  ct->attempt++;
  return ask_with(ct, q->seen_cfg, err);
}

void bgi_contains_task_init(bgi_contains_task *ct, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                            const size_t *lens, size_t n, uint8_t *present, size_t *done) {
  bgi_task_init(&ct->t, resume_contains);
  memset(&ct->q, 0, sizeof ct->q);
  ct->q.f = f;
  ct->q.items = items;
  ct->q.lens = lens;
  ct->q.present = present;
  ct->n = n;
  ct->done = done;
  ct->deadline_ns = deadline_ns;
  ct->retries = f->client->opts.config_retries;
  ct->attempt = 0;
  ct->w = (bgi_lock_wait){.wait_ms = f->client->opts.lock_wait_ms, .deadline_ns = deadline_ns};
  ct->state = Q_START;
  *done = 0;
}

BG_API int bg_filter_contains_many_ex(bg_filter *f, bg_call *call, const void *const *items, const size_t *lens,
                                      size_t n, uint8_t *present) {
  bgi_err err = {0};
  int source = BG_SOURCE_NONE;
  if (!f) return bgi_call_null_handle(call, "filter");
  /* the degrade policy (filter/guarded.c, policy/guard.c) answers when Redis cannot */
  if (bgi_check_items("contains", items, lens, n, present, &err) == BG_OK) {
    const bg_call *outer = bgi_call_enter(call);
    err.status = bgi_filter_guarded_contains(f, bgi_call_deadline(call), items, lens, n, present, &source, &err);
    bgi_call_leave(outer);
  }
  return bgi_filter_guarded_finish(f, call, &err, source);
}

BG_API int bg_filter_contains_many(bg_filter *f, const void *const *items, const size_t *lens, size_t n,
                                   uint8_t *present) {
  return bg_filter_contains_many_ex(f, NULL, items, lens, n, present);
}

BG_API int bg_filter_contains_ex(bg_filter *f, bg_call *call, const void *item, size_t len, int *present) {
  uint8_t p = 0;
  if (!f) return bgi_call_null_handle(call, "filter");
  if (!present) {
    bgi_err err = {0};
    bgi_err_set(&err, BG_EINVAL, "contains: present must not be NULL");
    return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
  }
  int st = bg_filter_contains_many_ex(f, call, &item, &len, 1, &p);
  *present = p;
  return st;
}

BG_API int bg_filter_contains(bg_filter *f, const void *item, size_t len, int *present) {
  return bg_filter_contains_ex(f, NULL, item, len, present);
}
