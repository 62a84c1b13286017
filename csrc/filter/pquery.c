/*
 * contains on a partitioned filter (partitioned.h): per partition of a window, one lane whose
 * chunks are each one MULTI block
 *   HMGET meta size hashIterations partitions forward stage;  BITFIELD_RO bitmap GET u1 i...
 * so the partition's generation (its meta exists) and geometry are read with its bits in one
 * atomic step. With tracking (redis/tracking.h, as query.c) the block reads the bits first,
 * then CLIENT CACHING YES, the meta and PTTL meta: a meta found as expected, unlocked and without
 * a TTL leaves a verdict on the connection, and later queries of that partition send BITFIELD_RO
 * alone until a push says the meta changed (a rotation retiring the generation deletes it).
 */
#include "filter/partitioned.h"

#include <stdio.h>
#include <string.h>

#define BLOCK_REPLIES 4          /* MULTI, 2 QUEUED, EXEC */
#define TRACKED_BLOCK_REPLIES 6  /* MULTI, 4 QUEUED, EXEC */
#define PLAIN_BLOCK_REPLIES 2    /* the fault's meta and bits without MULTI */

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
  bgi_resp_array(out, 7);
  bgi_resp_bulk(out, "HMGET", 5);
  bgi_resp_pk(out, l->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META);
  bgi_resp_lit(out, BGI_CONFIG_SIZE);
  bgi_resp_lit(out, BGI_CONFIG_K);
  bgi_resp_lit(out, BGI_PCONF_PARTITIONS);
  bgi_resp_lit(out, BGI_PMETA_FORWARD);
  bgi_resp_lit(out, BGI_PMETA_STAGE);
}

static void append_block(bgi_buf *out, const bgi_plane *l, const uint64_t *idx, size_t n, int tracked) {
  if (l->plain) {
    append_meta(out, l);
    append_bits(out, l, idx, n);
    return;
  }
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

static int build_pquery(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_plane *l = ctx;
  bg_filter *f = l->f;
  uint32_t k = bgi_cfg_k(l->g.cfg);
  int st = bgi_plane_indexes(c, l, err);
  if (st != BG_OK) return st;
  size_t n = l->n, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  uint64_t id = bgi_ptrack_id(f, l->part), vcfg = bgi_ptrack_cfg(l->g.gen, l->g.parts, l->g.cfg);
  l->epoch = bgi_tracking_epoch(c->track);
  l->bits_only = c->fault_bits_only || (!c->no_verdict && bgi_tracking_fresh(c->track, id, vcfg));
  /* The cluster tests' negative control (bgi_cluster.fault_ask_bits_only), as query.c's: the meta
   * and the bits without MULTI, so a half-migrated slot answers ASK for the meta alone on any
   * server (Valkey >= 8 answers TRYAGAIN for a whole EXEC), and the bits-only read after the ASK
   * (c->fault_bits_only) finds the importing node's missing bitmap. */
  bgi_cluster *cluster = atomic_load_explicit(&f->client->cluster, memory_order_relaxed);
  l->plain = !l->bits_only && cluster && cluster->fault_ask_bits_only;
  l->tracked = !l->bits_only && !l->plain && bgi_tracking_on(c->track);
  size_t need = chunks * (96 + 4 * bgi_pk_bound(f) + bgi_resp_bound(6, 64)) + n * k * (17 + BGI_RESP_U64_MAX);
  if (bgi_buf_reserve(&c->out, need) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    if (l->bits_only) append_bits(&c->out, l, c->idx + done * k, m * k);
    else append_block(&c->out, l, c->idx + done * k, m * k, l->tracked);
  }
  *nreplies = l->bits_only ? chunks
              : chunks * (l->plain ? PLAIN_BLOCK_REPLIES : l->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES);
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

/* The meta's [size, hashIterations, partitions] say the lane's generation and geometry. */
static int meta_matches(const bgi_plane *l, const bgi_reply *const *v) {
  uint64_t size, k, parts;
  for (int i = 0; i < 3; i++)
    if (v[i]->type != REDIS_REPLY_STRING) return 0;
  return bgi_parse_u64(v[0]->str, v[0]->len, &size) == 0 && bgi_parse_u64(v[1]->str, v[1]->len, &k) == 0 &&
         bgi_parse_u64(v[2]->str, v[2]->len, &parts) == 0 && size == bgi_cfg_size(l->g.cfg) &&
         k == bgi_cfg_k(l->g.cfg) && parts == l->g.parts;
}

/* The meta's [size, hashIterations, partitions, forward, stage]: 1 when it holds the geometry the
 * lane's indexes were computed for; 0 when it is gone or holds another (the lane's outcome says
 * so: the central config tells what is live now), when a locked rotation is rewriting these bits
 * (stage: the outcome says so, pop.c waits), or on a failure (*st). A forward generation (a commit
 * under way) is noted: pop.c keeps the answer only if the central config, read after these bits,
 * still names this generation. */
static int check_meta(bgi_plane *l, const bgi_reply *fields, bgi_err *err, int *st) {
  *st = BG_OK;
  if (fields->type == REDIS_REPLY_ERROR) return (*st = bgi_reply_error(fields, "contains (partition meta)", err)), 0;
  if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 5)
    return (*st = bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to HMGET")), 0;
  if (!meta_matches(l, (const bgi_reply *const *)fields->element)) {
    l->outcome = BGI_LANE_GONE;
    return 0;
  }
  if (fields->element[4]->type == REDIS_REPLY_STRING) {
    l->outcome = BGI_LANE_LOCKED;
    return 0;
  }
  const bgi_reply *fwd = fields->element[3];
  if (fwd->type == REDIS_REPLY_STRING && bgi_parse_u64(fwd->str, fwd->len, &l->forward) != 0) l->forward = 1;
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
  size_t per = l->plain ? PLAIN_BLOCK_REPLIES : l->tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES;
  for (size_t r = 0; r < nreplies; r += per) {
    /* plain (the fault): the meta's and the bits' replies themselves */
    const bgi_reply *const *el = (const bgi_reply *const *)rep + r;
    if (!l->plain) {
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
      el = (const bgi_reply *const *)ex->element;
    }
    const bgi_reply *fields = el[l->tracked ? 2 : 0], *bits = el[l->tracked ? 0 : 1];
    if (l->tracked && el[1]->type == REDIS_REPLY_ERROR) bgi_tracking_off(c->track);
    if (!check_meta(l, fields, err, &st)) return st;
    if ((st = take_bits(l, bits, &j, err)) != BG_OK) return st;
    if (l->tracked) has_ttl |= el[3]->type != REDIS_REPLY_INTEGER || el[3]->integer != -1;
  }
  if (j != l->n) return bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
  /* no verdict for a partition a commit is moving away from: every read of it checks its meta */
  if (l->tracked && !has_ttl && !l->forward && !c->no_verdict)
    bgi_tracking_remember(c->track, bgi_ptrack_id(l->f, l->part), bgi_ptrack_cfg(l->g.gen, l->g.parts, l->g.cfg),
                          l->epoch);
  return BG_OK;
}

/* ---- the lane ------------------------------------------------------------------------------ */

enum { L_START, L_ASKED };

static int ask(bgi_plane *l) {
  l->stale = l->bits_only = l->tracked = l->plain = 0;
  l->forward = 0;
  size_t min_bytes = (size_t)l->n * bgi_cfg_k(l->g.cfg) * (GET_U1_LEN + bgi_resp_offset_min_len(bgi_cfg_size(l->g.cfg)));
  l->req = (bgi_req){.client = l->f->client, .slot = (int)bgi_pslot(l->part, l->g.parts),
                     .flags = bgi_call_flags_for_min_size(min_bytes), .deadline_ns = l->deadline_ns,
                     .build = build_pquery, .parse = parse_pquery, .ctx = l};
  l->state = L_ASKED;
  return bgi_task_call(&l->t, &l->req);
}

static int resume_lane(bgi_task *t, int st, bgi_err *err) {
  bgi_plane *l = (bgi_plane *)t;
  (void)err;
  if (l->state == L_START) return ask(l);
  if (st != BG_OK) return bgi_task_done(t, st);
  if (l->bits_only) bgi_filter_count_tracked(l->f, l->stale);
  if (l->stale) return ask(l);
  return bgi_task_done(t, BG_OK);
}

void bgi_plane_query_init(bgi_plane *l, uint8_t *present) {
  bgi_task_init(&l->t, resume_lane);
  l->present = present;
}

