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

#include <stdlib.h>
#include <string.h>

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
} download;

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

static int parse_download(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  download *d = ctx;
  bg_filter *f = d->f;
  uint64_t cfg;
  int64_t ms = 0;
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
  for (size_t off = 0; off < len; off += d->chunk) {
    size_t m = len - off < d->chunk ? len - off : d->chunk;
    bgi_reply *r[1];
    if (d->stop && atomic_load(d->stop)) st = bgi_err_set(err, BG_EABORTED, "snapshot: stopped");
    else if ((st = wait_ms(d, &ms, err)) == BG_OK) {
      bgi_buf_reset(&c->out);
      if (bgi_buf_reserve(&c->out, bgi_resp_bound(4, f->name.len + 48)) != BG_OK) st = nomem(err);
    }
    if (st == BG_OK) {
      bgi_resp_array(&c->out, 4);
      bgi_resp_bulk(&c->out, "GETRANGE", 8);
      bgi_resp_key(&c->out, &f->name);
      bgi_resp_u64(&c->out, off);
      bgi_resp_u64(&c->out, off + m - 1);
      st = bgi_conn_roundtrip(c, r, 1, bgi_deadline_in_ms(ms), err);
    }
    if (st == BG_OK && r[0]->type == REDIS_REPLY_ERROR) st = bgi_reply_error(r[0], "snapshot (bitmap)", err);
    else if (st == BG_OK && r[0]->type != REDIS_REPLY_STRING)
      st = bgi_err_set(err, BG_EPROTO, "snapshot: unexpected reply to GETRANGE");
    if (st != BG_OK) {
      bgi_snapshot_unref(s);
      return unwatch(c, d, st);
    }
    /* shorter only if the bitmap alone was cut by someone else: the rest stays zero, like in Redis */
    memcpy(s->bits + off, r[0]->str, r[0]->len < m ? r[0]->len : m);
  }
  /* the end: EXEC is nil if the config or the lease was written since WATCH */
  bgi_reply *r[3];
  if ((st = wait_ms(d, &ms, err)) == BG_OK) {
    bgi_buf_reset(&c->out);
    if (bgi_buf_reserve(&c->out, 64 + bgi_hmget_config_bound(f)) != BG_OK) st = nomem(err);
  }
  if (st == BG_OK) {
    bgi_resp_array(&c->out, 1);
    bgi_resp_bulk(&c->out, "MULTI", 5);
    bgi_append_hmget_config(&c->out, f);
    bgi_resp_array(&c->out, 1);
    bgi_resp_bulk(&c->out, "EXEC", 4);
    st = bgi_conn_roundtrip(c, r, 3, bgi_deadline_in_ms(ms), err);   /* EXEC ends the WATCH, whatever it answers */
  }
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

int bgi_filter_download(void *fp, uint64_t deadline_ns, int64_t chunk_bytes, atomic_int *stop, bgi_snapshot **out,
                        bgi_err *err) {
  bg_filter *f = fp;
  download d = {.f = f, .deadline_ns = deadline_ns, .chunk = (size_t)chunk_bytes, .stop = stop};
  *out = NULL;
  for (int attempt = 0; attempt < DOWNLOAD_ATTEMPTS; attempt++) {
    d.changed = 0;
    d.snap = NULL;
    /* bulk: it WATCHes and reads chunks in parse, so it needs a pooled connection; said before
     * the build, which would otherwise be made on a multiplexed workspace first (client.h) */
    int st = bgi_client_call_ex(f->client, f->slot, deadline_ns, BGI_CALL_BULK, build_watch, parse_download, &d, err);
    if (st == BG_ENOTINIT) {
      /* no Redisson config: a partitioned filter's is of another kind, which this download cannot read */
      bgi_err first = *err;
      if (bgi_filter_refuse_partitioned(f, "snapshot", err) == BG_ENOTSUP) return BG_ENOTSUP;
      *err = first;
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
