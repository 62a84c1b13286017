/*
 * The snapshot download: the filter's bitmap and config copied into a bgi_snapshot (policy/), the
 * download callback the filter gives its policy engine (bgi_guard_set_source). The in-memory
 * snapshot, its use in the chain and the background refresher are policy/snapshot.c.
 *
 * Consistency of the download. The snapshot must be one generation's bitmap with that
 * generation's config - never the config of one and bits of another (that would answer "absent"
 * for items that are in Redis). Reading the bitmap in one GET would block the server for the copy
 * of up to 512 MB, so it is read in chunks (GETRANGE), and what could happen between chunks is:
 *  - adds set more bits: harmless, bits are only ever set within a generation, so the chunks
 *    together hold every bit that was set when the download started (a superset of that state);
 *  - the filter is rebuilt, deleted, re-created with the same or other parameters, or a SWAP
 *    rotation begins or commits: every one of these writes the config hash (DEL/HSET, or PEXPIRE
 *    by bg_filter_expire) or the rotation lease hash (created at begin, renewed, deleted at
 *    commit) - and never touches only the bitmap.
 * So the download WATCHes the config key, the rotation lease key and the filter's lock key on one
 * connection, reads the config, the lease's existence, the bitmap's length and the write lock's
 * mode (an in-place rebuild, BG_ROTATE_LOCKED or a caller's own, rewrites only the bitmap: it is
 * seen through its lock, which it takes first and which the WATCH covers), then the chunks, and ends with
 * MULTI { HMGET config } EXEC: EXEC answers nil if a watched key was touched in between, and the
 * download starts over (3 attempts). A rotation running when the download starts (its lease
 * exists) fails it with BG_EROTATING: the next refresh comes after the swap. Comparing the config
 * before and after would not be enough: a rebuild with the same parameters keeps the same config
 * (and the lease can come and go between two chunks), WATCH sees every write.
 * The whole download runs inside one bgi_client_call, on one pooled connection, and never
 * returns that connection with a WATCH still set (UNWATCH, or the connection is dropped).
 */
#include "filter/filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter/partitioned.h"

#define DOWNLOAD_ATTEMPTS 3

/* ---- one attempt ----------------------------------------------------------------------------------- */

typedef struct download {
  bg_filter *f;
  uint64_t deadline_ns;
  size_t chunk;
  atomic_int *stop;
  uint64_t taken_ns;
  bgi_snapshot *snap;    /* result of a complete, consistent attempt */
  int changed;           /* a watched key was touched: start over */
  /* a partitioned filter's: the partition being read into snap */
  const bgi_pgen *g;
  uint32_t part;
} download;

/* A partition's bitmap, for read_chunks. */
typedef struct pkey_ref {
  const bgi_pgen *g;
  uint32_t part;
} pkey_ref;

static int nomem(bgi_err *err) { return bgi_err_set(err, BG_ENOMEM, "out of memory"); }

static int build_watch(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  download *d = ctx;
  const bg_filter *f = d->f;
  d->taken_ns = bgi_now_ns();
  if (bgi_buf_reserve(&c->out, 256 + bgi_hmget_config_bound(f) +
                                   bgi_resp_bound(13, 2 * f->config_key.len + 2 * f->rotation_key.len + f->name.len +
                                                          2 * f->lock_key.len + 64)) != BG_OK)
    return nomem(err);
  bgi_resp_array(&c->out, 4);
  bgi_resp_bulk(&c->out, "WATCH", 5);
  bgi_resp_key(&c->out, &f->config_key);
  bgi_resp_key(&c->out, &f->rotation_key);
  bgi_resp_key(&c->out, &f->lock_key);
  bgi_append_hmget_config(&c->out, f);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "EXISTS", 6);
  bgi_resp_key(&c->out, &f->rotation_key);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "STRLEN", 6);
  bgi_resp_key(&c->out, &f->name);
  bgi_resp_array(&c->out, 3);
  bgi_resp_bulk(&c->out, "HGET", 4);
  bgi_resp_key(&c->out, &f->lock_key);
  bgi_resp_lit(&c->out, BGI_LOCK_MODE);
  bgi_resp_array(&c->out, 3);
  bgi_resp_bulk(&c->out, "HEXISTS", 7);
  bgi_resp_key(&c->out, &f->config_key);
  bgi_resp_lit(&c->out, BGI_REBUILD_FIELD);
  *nreplies = 6;
  return BG_OK;
}

/* Each network wait of the download: what is left of the deadline, else the command timeout. */
static int wait_ms(const download *d, int64_t *ms, bgi_err *err) {
  if (!d->deadline_ns) {
    *ms = d->f->client->ep.command_timeout_ms;
    return BG_OK;
  }
  uint64_t now = bgi_now_ns();
  if (now >= d->deadline_ns) return bgi_err_set(err, BG_ETIMEOUT, "snapshot: the call's deadline passed");
  *ms = bgi_ms_until(d->deadline_ns, now);
  return BG_OK;
}

/* Leaves the connection without a WATCH (or broken, so the pool drops it); returns st. */
static int unwatch(bgi_conn *c, const download *d, int st) {
  bgi_reply *rep[1];
  bgi_err ignored = {0};
  int64_t ms = d->f->client->ep.command_timeout_ms;
  if (c->broken) return st;
  bgi_buf_reset(&c->out);
  if (bgi_buf_reserve(&c->out, 32) != BG_OK) {
    c->broken = 1;
    return st;
  }
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "UNWATCH", 7);
  if (bgi_conn_roundtrip(c, rep, 1, bgi_deadline_in_ms(ms), &ignored) != BG_OK) c->broken = 1;
  return st;
}

/* The bitmap's bytes [0, len) into dst, GETRANGE by GETRANGE: of the key `key`, or (key NULL) of
 * partition `part` of d's generation. */
static int read_chunks(bgi_conn *c, const download *d, const bgi_key *key, const pkey_ref *pk, uint8_t *dst,
                       size_t len, bgi_err *err) {
  const bg_filter *f = d->f;
  int64_t ms = 0;
  int st = BG_OK;
  for (size_t off = 0; off < len && st == BG_OK; off += d->chunk) {
    size_t m = len - off < d->chunk ? len - off : d->chunk;
    bgi_reply *r[1];
    if (d->stop && atomic_load(d->stop)) st = bgi_err_set(err, BG_EABORTED, "snapshot: stopped");
    else if ((st = wait_ms(d, &ms, err)) == BG_OK) {
      bgi_buf_reset(&c->out);
      if (bgi_buf_reserve(&c->out, bgi_resp_bound(4, BGI_PKEY_MAX(f->name.len) + 48)) != BG_OK) st = nomem(err);
    }
    if (st == BG_OK) {
      bgi_resp_array(&c->out, 4);
      bgi_resp_bulk(&c->out, "GETRANGE", 8);
      if (key) bgi_resp_key(&c->out, key);
      else bgi_resp_pk(&c->out, f, pk->g->gen, pk->part, pk->g->parts, BGI_PKEY_BITMAP);
      bgi_resp_u64(&c->out, off);
      bgi_resp_u64(&c->out, off + m - 1);
      st = bgi_conn_roundtrip(c, r, 1, bgi_deadline_in_ms(ms), err);
    }
    if (st == BG_OK && r[0]->type == REDIS_REPLY_ERROR) st = bgi_reply_error(r[0], "snapshot (bitmap)", err);
    else if (st == BG_OK && r[0]->type != REDIS_REPLY_STRING)
      st = bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply to GETRANGE");
    /* shorter only if the bitmap alone was cut by someone else: the rest stays zero, like in Redis */
    if (st == BG_OK) memcpy(dst + off, r[0]->str, r[0]->len < m ? r[0]->len : m);
  }
  return st;
}

static void append_config(bgi_buf *out, const download *d) { bgi_append_hmget_config(out, d->f); }

/* The download's end: MULTI, what append reads (bound: its bytes), EXEC - nil if a watched key
 * was written since the WATCH. EXEC ends the WATCH, whatever it answers. */
static int exec_read(bgi_conn *c, const download *d, void (*append)(bgi_buf *, const download *), size_t bound,
                     bgi_reply **r, bgi_err *err) {
  int64_t ms = 0;
  int st = wait_ms(d, &ms, err);
  if (st != BG_OK) return st;
  bgi_buf_reset(&c->out);
  if (bgi_buf_reserve(&c->out, 64 + bound) != BG_OK) return nomem(err);
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "MULTI", 5);
  append(&c->out, d);
  bgi_resp_array(&c->out, 1);
  bgi_resp_bulk(&c->out, "EXEC", 4);
  return bgi_conn_roundtrip(c, r, 3, bgi_deadline_in_ms(ms), err);
}

static void append_pmeta(bgi_buf *out, const download *d);

static int parse_download(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  download *d = ctx;
  bg_filter *f = d->f;
  uint64_t cfg;
  int st;
  (void)n;
  for (int i = 0; i < 6; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return unwatch(c, d, bgi_reply_error(rep[i], "snapshot", err));
  if (rep[1]->type != REDIS_REPLY_ARRAY || rep[1]->elements != 2 || rep[2]->type != REDIS_REPLY_INTEGER ||
      rep[3]->type != REDIS_REPLY_INTEGER || rep[5]->type != REDIS_REPLY_INTEGER)
    return unwatch(c, d, bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply"));
  /* an in-place rebuild is rewriting the bitmap (or died doing it): no generation to copy */
  if (bgi_reply_is_lit(rep[4], BGI_LOCK_MODE_WRITE) ||
      rep[5]->integer)
    return unwatch(c, d, bgi_err_set(err, BG_ELOCKED, "snapshot: \"%s\" is being rebuilt in place (%s); the "
                                     "snapshot is taken after it", f->name.s,
                                     rep[5]->integer ? "an interrupted rebuild's mark is in its config"
                                                     : "its write lock is held"));
  if ((st = bgi_cfg_from_pair(f, rep[1]->element[0], rep[1]->element[1], &cfg, err)) != BG_OK)
    return unwatch(c, d, st);
  if (rep[2]->integer)
    return unwatch(c, d, bgi_err_set(err, BG_EROTATING, "snapshot: a rotation of \"%s\" is in progress; the snapshot "
                                     "is taken after it", f->name.s));
  uint64_t strlen_ = rep[3]->integer > 0 ? (uint64_t)rep[3]->integer : 0;
  /* rep[] is gone after the next round trip: everything needed is copied above */
  bgi_snapshot *s = bgi_snapshot_new(cfg, d->taken_ns);
  if (!s) return unwatch(c, d, nomem(err));
  size_t len = strlen_ < s->nbytes ? (size_t)strlen_ : s->nbytes;  /* bytes past size / 8 are not the filter's */
  if ((st = read_chunks(c, d, &f->name, NULL, s->bits, len, err)) != BG_OK) {
    bgi_snapshot_unref(s);
    return unwatch(c, d, st);
  }
  /* the end: EXEC is nil if the config or the lease was written since WATCH */
  bgi_reply *r[3];
  st = exec_read(c, d, append_config, 64 + bgi_hmget_config_bound(f), r, err);
  if (st == BG_OK) {
    const bgi_reply *ex = r[2];
    if (r[0]->type == REDIS_REPLY_ERROR || r[1]->type == REDIS_REPLY_ERROR)
      st = bgi_reply_error(r[0]->type == REDIS_REPLY_ERROR ? r[0] : r[1], "snapshot", err);
    else if (ex->type == REDIS_REPLY_NIL)
      d->changed = 1;
    else if (ex->type == REDIS_REPLY_ERROR)
      st = bgi_reply_error(ex, "snapshot", err);
    else if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 1 || ex->element[0]->type != REDIS_REPLY_ARRAY ||
             ex->element[0]->elements != 2)
      st = bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply to EXEC");
    else {
      uint64_t now_cfg;
      st = bgi_cfg_from_pair(f, ex->element[0]->element[0], ex->element[0]->element[1], &now_cfg, err);
      if (st == BG_OK && now_cfg != cfg) d->changed = 1;   /* cannot be, with the WATCH; cheap to check */
    }
  }
  if (st != BG_OK || d->changed) {
    bgi_snapshot_unref(s);
    return st;
  }
  d->snap = s;
  return BG_OK;
}

/* ---- a partitioned filter: partition by partition ------------------------------------------ */

static atomic_int fault_unchecked;

void bgi_download_fault_unchecked(int on) { atomic_store(&fault_unchecked, on); }

/* WATCH meta; HMGET meta size hashIterations partitions forward stage; STRLEN bitmap. */
static void append_pmeta(bgi_buf *out, const download *d) {
  bgi_resp_array(out, 7);
  bgi_resp_bulk(out, "HMGET", 5);
  bgi_resp_pk(out, d->f, d->g->gen, d->part, d->g->parts, BGI_PKEY_META);
  bgi_resp_lit(out, BGI_CONFIG_SIZE);
  bgi_resp_lit(out, BGI_CONFIG_K);
  bgi_resp_lit(out, BGI_PCONF_PARTITIONS);
  bgi_resp_lit(out, BGI_PMETA_FORWARD);
  bgi_resp_lit(out, BGI_PMETA_STAGE);
}

static int build_pwatch(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  download *d = ctx;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(16, 3 * BGI_PKEY_MAX(d->f->name.len) + 128)) != BG_OK) return nomem(err);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "WATCH", 5);
  bgi_resp_pk(&c->out, d->f, d->g->gen, d->part, d->g->parts, BGI_PKEY_META);
  append_pmeta(&c->out, d);
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "STRLEN", 6);
  bgi_resp_pk(&c->out, d->f, d->g->gen, d->part, d->g->parts, BGI_PKEY_BITMAP);
  *nreplies = 3;
  return BG_OK;
}

/* The meta's [size, hashIterations, partitions, forward, stage] names d's generation, usable. */
static int pmeta_usable(const download *d, const bgi_reply *m, bgi_err *err) {
  uint64_t size, k, parts;
  if (m->type != REDIS_REPLY_ARRAY || m->elements != 5) return bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply");
  const bgi_reply *const *v = (const bgi_reply *const *)m->element;
  if (v[4]->type == REDIS_REPLY_STRING)
    return bgi_err_set(err, BG_ELOCKED, "snapshot: a partition of \"%s\" is being rewritten in place (a locked "
                       "rotation); the snapshot is taken after it", d->f->name.s);
  if (v[3]->type == REDIS_REPLY_STRING)
    return bgi_err_set(err, BG_EROTATING, "snapshot: a rotation of \"%s\" is committing; the snapshot is taken after "
                       "it", d->f->name.s);
  for (int i = 0; i < 3; i++)
    if (v[i]->type != REDIS_REPLY_STRING) return BG_ECONFIG;
  if (bgi_parse_u64(v[0]->str, v[0]->len, &size) != 0 || bgi_parse_u64(v[1]->str, v[1]->len, &k) != 0 ||
      bgi_parse_u64(v[2]->str, v[2]->len, &parts) != 0 || size != bgi_cfg_size(d->g->cfg) || k != bgi_cfg_k(d->g->cfg) ||
      parts != d->g->parts)
    return BG_ECONFIG;
  return BG_OK;
}

static int parse_pdownload(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  download *d = ctx;
  bgi_snapshot *s = d->snap;
  (void)n;
  for (int i = 0; i < 3; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return unwatch(c, d, bgi_reply_error(rep[i], "snapshot", err));
  int unchecked = atomic_load(&fault_unchecked);
  int st = unchecked ? BG_OK : pmeta_usable(d, rep[1], err);
  if (st == BG_ECONFIG) d->changed = 1;   /* the generation is gone: the config says what is live */
  if (st != BG_OK) return unwatch(c, d, d->changed ? BG_OK : st);
  if (rep[2]->type != REDIS_REPLY_INTEGER) return unwatch(c, d, bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply"));
  size_t len = rep[2]->integer > 0 ? (size_t)rep[2]->integer : 0;
  if (len > s->pbytes) len = s->pbytes;
  pkey_ref pk = {d->g, d->part};
  uint8_t *dst = s->bits + (size_t)d->part * s->pbytes;
  if ((st = read_chunks(c, d, NULL, &pk, dst, len, err)) != BG_OK) return unwatch(c, d, st);
  /* EXEC is nil if the meta was written since WATCH (a rotation's drain, a locked rewrite, a delete) */
  bgi_reply *r[3];
  if ((st = exec_read(c, d, append_pmeta, bgi_resp_bound(9, BGI_PKEY_MAX(d->f->name.len) + 128), r, err)) != BG_OK)
    return st;
  if (r[0]->type == REDIS_REPLY_ERROR || r[1]->type == REDIS_REPLY_ERROR)
    return bgi_reply_error(r[0]->type == REDIS_REPLY_ERROR ? r[0] : r[1], "snapshot", err);
  if (unchecked) return BG_OK;
  if (r[2]->type == REDIS_REPLY_NIL) {
    d->changed = 1;
    return BG_OK;
  }
  if (r[2]->type == REDIS_REPLY_ERROR) return bgi_reply_error(r[2], "snapshot", err);
  if (r[2]->type != REDIS_REPLY_ARRAY || r[2]->elements != 1) return bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply to EXEC");
  st = pmeta_usable(d, r[2]->element[0], err);
  if (st == BG_ECONFIG) d->changed = 1, st = BG_OK;
  return st;
}

/* The live generation as the config says now (BG_ENOTINIT: none, or not partitioned). */
static int live_gen(bg_filter *f, bgi_pgen *g, bgi_err *err) {
  bgi_pconf_load ld;
  int st = bgi_pconf_read(f, &ld, err);
  if (st == BG_OK && ld.kind != BGI_KIND_PARTITIONED)
    st = bgi_err_set(err, BG_ENOTINIT, "snapshot: \"%s\" is not a partitioned filter any more", f->name.s);
  if (st == BG_OK) *g = ld.conf.live;
  return st;
}

/*
 * One attempt: the live generation read from the config, each partition copied as the plain
 * download copies a bitmap (WATCH its meta, read it and the bits, EXEC ends it: nil when the meta
 * was written meanwhile), then the config read again. A rotation's commit sets every partition's
 * forward before it makes another generation live, and a locked one marks each partition it
 * rewrites: a partition so marked refuses the download, one marked during its copy makes EXEC
 * nil, and a generation made live after every partition was copied shows in the last read. So a
 * snapshot is one generation's partitions, each holding every bit set when its copy began.
 */
static int pdownload_once(download *d, bgi_err *err) {
  bg_filter *f = d->f;
  bgi_pgen g, after;
  int st = live_gen(f, &g, err);
  if (st != BG_OK) return st;
  bgi_snapshot *s = bgi_snapshot_new_parts(g.cfg, g.parts, d->taken_ns = bgi_now_ns());
  if (!s) return nomem(err);
  d->snap = s;
  d->g = &g;
  for (uint32_t i = 0; i < g.parts && st == BG_OK && !d->changed; i++) {
    d->part = i;
    st = bgi_client_call_ex(f->client, (int)bgi_pslot(i, g.parts), d->deadline_ns, BGI_CALL_BULK, build_pwatch,
                            parse_pdownload, d, err);
  }
  if (st == BG_OK && !d->changed && !atomic_load(&fault_unchecked) && (st = live_gen(f, &after, err)) == BG_OK &&
      after.gen != g.gen)
    d->changed = 1;
  d->g = NULL;
  if (st != BG_OK || d->changed) {
    bgi_snapshot_unref(s);
    d->snap = NULL;
  }
  return st;
}

int bgi_filter_download(void *fp, uint64_t deadline_ns, int64_t chunk_bytes, atomic_int *stop, bgi_snapshot **out,
                        bgi_err *err) {
  bg_filter *f = fp;
  download d = {.f = f, .deadline_ns = deadline_ns, .chunk = (size_t)chunk_bytes, .stop = stop};
  int partitioned = atomic_load(&f->kind) == BGI_KIND_PARTITIONED;
  *out = NULL;
  if (f->native)
    return bgi_err_set(err, BG_ENOTSUP, "snapshot: native filter \"%s\" has none: its bits are in the server's own "
                       "format (use the fallback callback or an assumed answer in its policy)", f->name.s);
  for (int attempt = 0; attempt < DOWNLOAD_ATTEMPTS; attempt++) {
    d.changed = 0;
    d.snap = NULL;
    int st;
    if (partitioned) {
      st = pdownload_once(&d, err);
    } else {
      /* bulk: it WATCHes and reads chunks in parse, so it needs a pooled connection; said before
       * the build, which would otherwise be made on a multiplexed workspace first (client.h) */
      st = bgi_client_call_ex(f->client, f->slot, deadline_ns, BGI_CALL_BULK, build_watch, parse_download, &d, err);
      if (st == BG_ENOTINIT) {
        /* no Redisson config: a partitioned filter's is of another kind, read partition by partition */
        bgi_err first = *err;
        bgi_pgen g;
        if (live_gen(f, &g, err) == BG_OK) {
          partitioned = 1;
          attempt--;
          continue;
        }
        *err = first;
      }
    }
    if (st != BG_OK) return st;
    if (!d.changed) {
      *out = d.snap;
      return BG_OK;
    }
  }
  return bgi_err_set(err, BG_ECONFIG, "snapshot: \"%s\" was rebuilt or rotated during each of %d downloads", f->name.s,
                     DOWNLOAD_ATTEMPTS);
}

BG_API int bg_filter_snapshot_refresh_ex(bg_filter *f, bg_call *call) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  BGI_WITH_CALL(call, err.status = bgi_guard_refresh(&f->guard, bgi_call_deadline(call), NULL, &err));
  return bgi_call_finish(call, &f->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_filter_snapshot_refresh(bg_filter *f) { return bg_filter_snapshot_refresh_ex(f, NULL); }
