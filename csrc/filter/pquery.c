/*
 * contains on a partitioned filter (partitioned.h): per partition of a window, one lane whose
 * chunks are each one MULTI block
 *   HMGET meta size hashIterations partitions mode;  BITFIELD_RO bitmap GET u1 i...
 * so the partition's generation (its meta exists), geometry and lock are read with its bits in
 * one atomic step. With tracking (redis/tracking.h, as query.c) the block reads the bits first,
 * then CLIENT CACHING YES, the meta and PTTL meta: a meta found as expected, unlocked and without
 * a TTL leaves a verdict on the connection, and later queries of that partition send BITFIELD_RO
 * alone until a push says the meta changed (a rotation retiring the generation deletes it).
 */
#include "filter/partitioned.h"

#include <stdio.h>
#include <string.h>

#define BLOCK_REPLIES 4          /* MULTI, 2 QUEUED, EXEC */
#define TRACKED_BLOCK_REPLIES 6  /* MULTI, 4 QUEUED, EXEC */

#define GET_U1 "$3\r\nGET\r\n$2\r\nu1\r\n"
#define GET_U1_LEN (sizeof GET_U1 - 1)

static void append_bits(bgi_buf *out, const bgi_plane *l, const uint64_t *idx, size_t n) {
  bgi_resp_array(out, 2 + n * 3);
  bgi_resp_bulk(out, "BITFIELD_RO", 11);
  bgi_resp_pk(out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_BITMAP);
  for (size_t j = 0; j < n; j++) {
    memcpy(out->data + out->len, GET_U1, GET_U1_LEN);
    out->len += GET_U1_LEN;
    bgi_resp_u64(out, idx[j]);
  }
}

static void append_meta(bgi_buf *out, const bgi_plane *l) {
  bgi_resp_array(out, 6);
  bgi_resp_bulk(out, "HMGET", 5);
  bgi_resp_pk(out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META);
  bgi_resp_lit(out, BGI_CONFIG_SIZE);
  bgi_resp_lit(out, BGI_CONFIG_K);
  bgi_resp_lit(out, BGI_PCONF_PARTITIONS);
  bgi_resp_lit(out, BGI_PMETA_MODE);
}

static void append_block(bgi_buf *out, const bgi_plane *l, const uint64_t *idx, size_t n, int tracked) {
  bgi_resp_array(out, 1);
  bgi_resp_bulk(out, "MULTI", 5);
  if (tracked) {
    append_bits(out, l, idx, n);
    bgi_resp_array(out, 3);
    bgi_resp_bulk(out, "CLIENT", 6);
    bgi_resp_bulk(out, "CACHING", 7);
    bgi_resp_bulk(out, "YES", 3);
    append_meta(out, l);
    bgi_resp_array(out, 2);
    bgi_resp_bulk(out, "PTTL", 4);
    bgi_resp_pk(out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META);
  } else {
    append_meta(out, l);
    append_bits(out, l, idx, n);
  }
  bgi_resp_array(out, 1);
  bgi_resp_bulk(out, "EXEC", 4);
}

/* The lane's items' bit indexes into c->idx (k per item). */
static int lane_indexes(bgi_conn *c, const bgi_plane *l, bgi_err *err) {
  uint64_t size = bgi_cfg_size(l->g.cfg);
  uint32_t k = bgi_cfg_k(l->g.cfg);
  if (bgi_conn_idx_reserve(c, (size_t)l->n * k) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (uint32_t j = 0; j < l->n; j++) {
    const uint64_t *h = l->w->h[l->items[j]];
    bgi_indexes_from_hash(h[0], h[1], size, k, c->idx + (size_t)j * k);
  }
  return BG_OK;
}

static int build_pquery(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_plane *l = ctx;
  bg_filter *f = l->f;
  uint32_t k = bgi_cfg_k(l->g.cfg);
  int st = lane_indexes(c, l, err);
  if (st != BG_OK) return st;
  size_t n = l->n, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  uint64_t id = bgi_ptrack_id(f, l->part), vcfg = bgi_ptrack_cfg(l->g.gen, l->g.parts, l->g.cfg);
  l->epoch = bgi_tracking_epoch(c->track);
  l->bits_only = c->fault_bits_only || (!c->no_verdict && bgi_tracking_fresh(c->track, id, vcfg));
  l->tracked = !l->bits_only && bgi_tracking_on(c->track);
  size_t need = chunks * (96 + 4 * bgi_pk_bound(f) + bgi_resp_bound(6, 64)) + n * k * (17 + BGI_RESP_U64_MAX);
  if (bgi_buf_reserve(&c->out, need) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    if (l->bits_only) append_bits(&c->out, l, c->idx + done * k, m * k);
    else append_block(&c->out, l, c->idx + done * k, m * k, l->tracked);
  }
  *nreplies = l->bits_only ? chunks : chunks * (l->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES);
  return BG_OK;
}

/* present[] of the lane's items from one BITFIELD_RO reply; *j moves past them. */
static int take_bits(bgi_plane *l, const bgi_reply *bits, uint32_t *j, bgi_err *err) {
  uint32_t k = bgi_cfg_k(l->g.cfg);
  if (bits->type == REDIS_REPLY_ERROR) return bgi_reply_error(bits, "contains (bitmap)", err);
  size_t m = bits->elements / k;
  if (bits->type != REDIS_REPLY_ARRAY || bits->elements % k || *j + m > l->n)
    return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to BITFIELD_RO");
  for (size_t i = 0; i < m; i++, (*j)++) {
    uint8_t all = 1;
    for (uint32_t b = 0; b < k; b++) all &= bits->element[i * k + b]->integer == 1;
    l->present[l->items[*j]] = all;
  }
  return BG_OK;
}

/* The meta's [size, hashIterations, partitions, mode]: what the block found. 1: the bits may be
 * taken; 0: the lane's outcome or retry fields say why not. */
static int check_meta(bgi_plane *l, const bgi_reply *fields, bgi_err *err, int *st) {
  *st = BG_OK;
  if (fields->type == REDIS_REPLY_ERROR) return (*st = bgi_reply_error(fields, "contains (partition meta)", err)), 0;
  if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 4)
    return (*st = bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to HMGET")), 0;
  const bgi_reply *const *v = (const bgi_reply *const *)fields->element;
  if (v[0]->type == REDIS_REPLY_NIL) {
    l->outcome = BGI_LANE_GONE;
    return 0;
  }
  uint64_t cfg, parts;
  if ((*st = bgi_cfg_from_pair(l->f, v[0], v[1], &cfg, err)) != BG_OK) return 0;
  if (v[2]->type != REDIS_REPLY_STRING || bgi_parse_u64(v[2]->str, v[2]->len, &parts) != 0 || parts != l->g.parts) {
    /* another number of partitions: the items' partitions were computed for a generation that
     * is not this one (deleted and made again): the central config says which is */
    l->outcome = BGI_LANE_GONE;
    return 0;
  }
  if (bgi_reply_is_lit(v[3], BGI_PMETA_MODE_LOCKED)) {
    l->locked = 1;
    return 0;
  }
  if (cfg != l->g.cfg) {
    l->seen_cfg = cfg;
    return 0;
  }
  return 1;
}

static int parse_pquery(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  bgi_plane *l = ctx;
  uint32_t j = 0;
  int has_ttl = 0, st;
  if (l->bits_only) {
    /* a push came first: the meta changed before (some of) these bits were read */
    if (bgi_tracking_epoch(c->track) != l->epoch) {
      l->stale = 1;
      return BG_OK;
    }
    for (size_t r = 0; r < nreplies; r++)
      if ((st = take_bits(l, rep[r], &j, err)) != BG_OK) return st;
    return j == l->n ? BG_OK : bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
  }
  size_t per = l->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES;
  for (size_t r = 0; r < nreplies; r += per) {
    /* CLIENT CACHING refused when queued: EXEC aborted; plain blocks from now on */
    if (l->tracked && rep[r + 2]->type == REDIS_REPLY_ERROR) {
      bgi_tracking_off(c->track);
      l->stale = 1;
      return BG_OK;
    }
    for (size_t i = 0; i + 1 < per; i++)
      if (rep[r + i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[r + i], "contains", err);
    const bgi_reply *ex = rep[r + per - 1];
    if (ex->type == REDIS_REPLY_ERROR) return bgi_reply_error(ex, "contains", err);
    if (ex->type != REDIS_REPLY_ARRAY || ex->elements != per - 2)
      return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to EXEC");
    const bgi_reply *fields = ex->element[l->tracked ? 2 : 0], *bits = ex->element[l->tracked ? 0 : 1];
    if (l->tracked && ex->element[1]->type == REDIS_REPLY_ERROR) bgi_tracking_off(c->track);
    if (!check_meta(l, fields, err, &st)) return st;
    if ((st = take_bits(l, bits, &j, err)) != BG_OK) return st;
    if (l->tracked) has_ttl |= ex->element[3]->type != REDIS_REPLY_INTEGER || ex->element[3]->integer != -1;
  }
  if (j != l->n) return bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
  if (l->tracked && !has_ttl && !c->no_verdict)
    bgi_tracking_remember(c->track, bgi_ptrack_id(l->f, l->part), bgi_ptrack_cfg(l->g.gen, l->g.parts, l->g.cfg),
                          l->epoch);
  return BG_OK;
}

/* ---- the lane ------------------------------------------------------------------------------ */

enum { L_START, L_ASKED, L_LOCK_LOOKED, L_NAPPED };

static int ask(bgi_plane *l) {
  l->seen_cfg = 0;
  l->locked = l->interrupted = l->stale = l->bits_only = l->tracked = 0;
  l->look_started = bgi_now_ns();
  size_t min_bytes = (size_t)l->n * bgi_cfg_k(l->g.cfg) * (GET_U1_LEN + bgi_resp_offset_min_len(bgi_cfg_size(l->g.cfg)));
  l->req = (bgi_req){.client = l->f->client, .slot = (int)bgi_pslot(l->part, l->g.parts),
                     .flags = bgi_call_flags_for_min_size(min_bytes), .deadline_ns = l->deadline_ns,
                     .build = build_pquery, .parse = parse_pquery, .ctx = l};
  l->state = L_ASKED;
  return bgi_task_call(&l->t, &l->req);
}

/* Is the rotation that locked the partition still there (its marker)? 1: waiting is right. */
static int build_marker(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_plane *l = ctx;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(2, 0) + bgi_pk_bound(l->f)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "EXISTS", 6);
  bgi_resp_pk(&c->out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_ROTATING);
  *nreplies = 1;
  return BG_OK;
}

static int parse_marker(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_plane *l = ctx;
  (void)c, (void)n;
  if (rep[0]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[0], "contains (rotation marker)", err);
  l->interrupted = rep[0]->type == REDIS_REPLY_INTEGER && rep[0]->integer == 0;
  return BG_OK;
}

static int locked_too_long(bgi_plane *l, bgi_err *err) {
  char key[300];
  return bgi_err_set(err, BG_ELOCKED, "contains: partition %u of \"%s\" is being rewritten by a locked rotation "
                     "(%s says %s) and stayed so for as long as this call may wait (BG_OPT_WRITE_LOCK_WAIT_MS = %lld, "
                     "or the call's deadline)", l->part, l->f->name.s,
                     bgi_pk_text(l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META, key, sizeof key),
                     BGI_PMETA_MODE_LOCKED, (long long)l->lw.wait_ms);
}

static int resume_lane(bgi_task *t, int st, bgi_err *err) {
  bgi_plane *l = (bgi_plane *)t;
  switch (l->state) {
    case L_START:
      return ask(l);
    case L_NAPPED:
      if (st == BG_ECANCELED) return bgi_task_done(t, bgi_cancel_err(err, "contains (waiting out a locked partition)"));
      if (st != BG_OK) return bgi_task_done(t, st);
      return ask(l);
    case L_LOCK_LOOKED: {
      if (st != BG_OK) return bgi_task_done(t, st);
      if (l->interrupted) {
        char key[300];
        return bgi_task_done(t, bgi_err_set(err, BG_ELOCKED, "contains: a locked rotation of \"%s\" stopped half-way "
                                            "in partition %u (%s still says %s, the rotation's marker is gone); the "
                                            "partition is incomplete until the next rotation", l->f->name.s, l->part,
                                            bgi_pk_text(l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META, key,
                                                        sizeof key), BGI_PMETA_MODE_LOCKED));
      }
      uint64_t until = 0;
      uint64_t now = bgi_now_ns();
      bgi_lock_wait *w = &l->lw;
      if (!w->until_ns) {
        w->until_ns = bgi_after_ms(now, w->wait_ms);
        if (w->deadline_ns && w->deadline_ns < w->until_ns) w->until_ns = w->deadline_ns;
        w->nap_ns = 500000u;
      }
      if (now >= w->until_ns) return bgi_task_done(t, locked_too_long(l, err));
      until = now + (w->nap_ns < w->until_ns - now ? w->nap_ns : w->until_ns - now);
      w->nap_ns = w->nap_ns * 2 < 20000000u ? w->nap_ns * 2 : 20000000u;
      l->state = L_NAPPED;
      return bgi_task_sleep(t, until);
    }
    case L_ASKED:
    default:
      break;
  }
  if (st != BG_OK) return bgi_task_done(t, st);
  l->lw.look_ns = bgi_now_ns() - l->look_started;
  if (l->bits_only) bgi_filter_count_tracked(l->f, l->stale);
  if (l->stale) return ask(l);
  if (l->outcome == BGI_LANE_GONE) return bgi_task_done(t, BG_OK);
  if (l->locked) {
    l->req = (bgi_req){.client = l->f->client, .slot = (int)bgi_pslot(l->part, l->g.parts),
                       .deadline_ns = l->deadline_ns, .build = build_marker, .parse = parse_marker, .ctx = l};
    l->state = L_LOCK_LOOKED;
    return bgi_task_call(t, &l->req);
  }
  if (!l->seen_cfg) return bgi_task_done(t, BG_OK);
  /* rewritten in place with another geometry: ask again with it */
  l->g.cfg = l->seen_cfg;
  if (l->attempt++ >= l->retries)
    return bgi_task_done(t, bgi_err_set(err, BG_ECONFIG, "contains: the geometry of partition %u of \"%s\" changed on "
                                        "each of %lld attempts", l->part, l->f->name.s, (long long)l->attempt));
  return ask(l);
}

void bgi_plane_query_init(bgi_plane *l, bg_filter *f, const bgi_pwin *w, const uint32_t *items, uint32_t n,
                          uint32_t part, const bgi_pgen *g, uint64_t deadline_ns, uint8_t *present) {
  memset(l, 0, sizeof *l);
  bgi_task_init(&l->t, resume_lane);
  l->f = f;
  l->w = w;
  l->items = items;
  l->n = n;
  l->part = part;
  l->g = *g;
  l->deadline_ns = deadline_ns;
  l->retries = f->client->opts.config_retries;
  l->present = present;
  l->lw = (bgi_lock_wait){.wait_ms = f->client->opts.lock_wait_ms, .deadline_ns = deadline_ns};
  l->state = L_START;
  l->outcome = BGI_LANE_DONE;
}

/* ---- the operation: window by window, a round of lanes at a time ------------------------------ */

enum { C_START, C_CONFIG, C_ROUND, C_RELOADED };

static void init_query_lane(bgi_plane *l, const uint32_t *items, uint32_t n, uint32_t part, void *ctx) {
  bgi_pcontains_task *pt = ctx;
  bgi_plane_query_init(l, pt->f, &pt->win, items, n, part, &pt->g, pt->deadline_ns, pt->present + pt->from);
}

static int finish(bgi_pcontains_task *pt, int st) {
  bgi_pcontains_task_free(pt);
  return bgi_task_done(&pt->t, st);
}

static int reload(bgi_pcontains_task *pt, int state) {
  pt->state = state;
  bgi_pconf_req(&pt->req, &pt->ld, pt->f, pt->deadline_ns);
  return bgi_task_call(&pt->t, &pt->req);
}

/* The next round of the window's grouping, or the end of the grouping. */
static int next_round(bgi_pcontains_task *pt, bgi_err *err);

/* Groups the window's items to do by the live generation's partitions, and starts the rounds. */
static int group(bgi_pcontains_task *pt, bgi_err *err) {
  bgi_pconf conf;
  bgi_pconf_get(pt->f, &conf);
  pt->g = conf.live;
  if (!pt->g.gen) return reload(pt, C_CONFIG);
  int st = bgi_pwin_group(&pt->win, pt->g.parts, err);
  if (st != BG_OK) return finish(pt, st);
  pt->cursor = 0;
  return next_round(pt, err);
}

static int next_window(bgi_pcontains_task *pt, bgi_err *err) {
  pt->from += pt->win.n;
  *pt->done = pt->from;
  if (pt->from >= pt->n) return finish(pt, BG_OK);
  size_t m = pt->n - pt->from < BGI_WINDOW_ITEMS ? pt->n - pt->from : BGI_WINDOW_ITEMS;
  int st = bgi_pwin_reserve(&pt->win, m, err);
  if (st != BG_OK) return finish(pt, st);
  bgi_pwin_hash(&pt->win, pt->items + pt->from, pt->lens + pt->from, m);
  pt->attempt = 0;
  return group(pt, err);
}

static int next_round(bgi_pcontains_task *pt, bgi_err *err) {
  pt->nlanes = bgi_pwin_lanes(&pt->win, pt->g.parts, &pt->cursor, &pt->one, init_query_lane, pt);
  if (pt->nlanes) {
    pt->state = C_ROUND;
    return bgi_pwin_run(&pt->t, &pt->win, &pt->one, pt->nlanes);
  }
  if (!pt->win.n_redo) return next_window(pt, err);
  /* some partitions' generation is gone: the central config says which one is live now */
  if (pt->attempt++ >= pt->retries)
    return finish(pt, bgi_err_set(err, BG_ECONFIG, "contains: the generation of \"%s\" changed on each of %lld attempts",
                                  pt->f->name.s, (long long)pt->attempt));
  bgi_pwin_take_redo(&pt->win);
  return reload(pt, C_RELOADED);
}

static int resume_pcontains(bgi_task *t, int st, bgi_err *err) {
  bgi_pcontains_task *pt = (bgi_pcontains_task *)t;
  switch (pt->state) {
    case C_START:
      pt->win.n = 0;
      return next_window(pt, err);
    case C_CONFIG:
    case C_RELOADED:
      if (st != BG_OK) return finish(pt, st);
      /* the filter became a plain one (deleted and made again): its own steps answer */
      if (pt->ld.kind != BGI_KIND_PARTITIONED) return finish(pt, bgi_err_set(err, BG_ENOTINIT, "contains: \"%s\" is "
                                                                              "no longer a partitioned filter",
                                                                              pt->f->name.s));
      return group(pt, err);
    case C_ROUND:
    default:
      break;
  }
  for (uint32_t i = 0; i < pt->nlanes; i++) {
    bgi_plane *l = bgi_pwin_lane(&pt->win, &pt->one, i);
    int ls = bgi_pwin_lane_status(&pt->win, pt->nlanes, i, st, err);
    if (ls != BG_OK) return finish(pt, ls);
    if (l->outcome == BGI_LANE_GONE) {
      memcpy(pt->win.redo + pt->win.n_redo, l->items, l->n * sizeof *l->items);
      pt->win.n_redo += l->n;
    }
  }
  return next_round(pt, err);
}

void bgi_pcontains_task_init(bgi_pcontains_task *pt, bg_filter *f, uint64_t deadline_ns, const void *const *items,
                             const size_t *lens, size_t n, uint8_t *present, size_t *done) {
  bgi_task_init(&pt->t, resume_pcontains);
  pt->f = f;
  pt->items = items;
  pt->lens = lens;
  pt->n = n;
  pt->done = done;
  pt->present = present;
  pt->deadline_ns = deadline_ns;
  pt->retries = f->client->opts.config_retries;
  pt->attempt = 0;
  pt->state = C_START;
  pt->from = 0;
  bgi_pwin_init(&pt->win);
  *done = 0;
}

void bgi_pcontains_task_free(bgi_pcontains_task *pt) { bgi_pwin_free(&pt->win); }
