/*
 * contains / contains_many: per chunk of items, one MULTI block
 *   HMGET config size hashIterations bgRebuilding;  HGET lock mode;  BITFIELD_RO bitmap GET u1 i...
 * so the config, the write lock and the bits are read in one atomic step: an answer is never
 * computed from a bitmap that an in-place rebuild (BG_ROTATE_LOCKED) is rewriting.
 */
#include "filter/filter.h"

#include <string.h>
#include <time.h>

/* replies per chunk: +OK to MULTI, three QUEUED, then EXEC's array */
#define BLOCK_REPLIES 5

typedef struct query {
  bg_filter *f;
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  uint64_t cfg;        /* the config the indexes were computed with */
  uint64_t seen_cfg;   /* the server's config when it differed, else 0 */
  uint8_t *present;
  int locked;          /* the write lock was held */
  int interrupted;     /* an in-place rebuild's mark without its lock: it died half-way */
} query;

static int build_query(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  query *q = ctx;
  const bg_filter *f = q->f;
  uint32_t k = bgi_cfg_k(q->cfg);
  int st = bgi_compute_indexes(c, q->items, q->lens, q->from, q->to, q->cfg, 0, err);
  if (st != BG_OK) return st;
  size_t n = q->to - q->from, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  /* per index: "$3\r\nGET\r\n" + "$2\r\nu1\r\n" + the offset */
  size_t need = chunks * (64 + bgi_resp_bound(5, f->config_key_len + 32) + bgi_resp_bound(3, f->lock_key_len + 8) +
                          bgi_resp_bound(2, f->name_len + 16)) + n * k * (17 + BGI_RESP_U64_MAX);
  if (bgi_buf_reserve(&c->out, need) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  const uint64_t *idx = c->idx;
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    bgi_resp_array(&c->out, 1);
    bgi_resp_bulk(&c->out, "MULTI", 5);
    bgi_resp_array(&c->out, 5);
    bgi_resp_bulk(&c->out, "HMGET", 5);
    bgi_resp_bulk(&c->out, f->config_key, f->config_key_len);
    bgi_resp_bulk(&c->out, "size", 4);
    bgi_resp_bulk(&c->out, "hashIterations", 14);
    bgi_resp_bulk(&c->out, BGI_REBUILD_FIELD, sizeof BGI_REBUILD_FIELD - 1);
    bgi_resp_array(&c->out, 3);
    bgi_resp_bulk(&c->out, "HGET", 4);
    bgi_resp_bulk(&c->out, f->lock_key, f->lock_key_len);
    bgi_resp_bulk(&c->out, "mode", 4);
    bgi_resp_array(&c->out, 2 + m * k * 3);
    bgi_resp_bulk(&c->out, "BITFIELD_RO", 11);
    bgi_resp_bulk(&c->out, f->name, f->name_len);
    for (size_t j = 0; j < m * k; j++) {
      memcpy(c->out.data + c->out.len, "$3\r\nGET\r\n$2\r\nu1\r\n", 17);
      c->out.len += 17;
      bgi_resp_u64(&c->out, *idx++);
    }
    bgi_resp_array(&c->out, 1);
    bgi_resp_bulk(&c->out, "EXEC", 4);
  }
  *nreplies = chunks * BLOCK_REPLIES;
  return BG_OK;
}

/* The queued replies of a MULTI block: errors there mean EXEC will abort; report the cause. */
static int check_queued(bgi_reply **rep, const char *what, bgi_err *err) {
  for (int i = 0; i < BLOCK_REPLIES - 1; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[i], what, err);
  return BG_OK;
}

static int parse_query(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  query *q = ctx;
  uint32_t k = bgi_cfg_k(q->cfg);
  size_t item = q->from;
  (void)c;
  for (size_t r = 0; r < nreplies; r += BLOCK_REPLIES) {
    int st = check_queued(rep + r, "contains", err);
    if (st != BG_OK) return st;
    const bgi_reply *ex = rep[r + BLOCK_REPLIES - 1];
    if (ex->type == REDIS_REPLY_ERROR) return bgi_reply_error(ex, "contains", err);
    if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 3)
      return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to EXEC");
    const bgi_reply *fields = ex->element[0], *mode = ex->element[1], *bits = ex->element[2];
    if (fields->type == REDIS_REPLY_ERROR) return bgi_reply_error(fields, "contains (config)", err);
    if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 3)
      return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to HMGET");
    if (mode->type == REDIS_REPLY_ERROR) return bgi_reply_error(mode, "contains (write lock)", err);
    if (mode->type == REDIS_REPLY_STRING && mode->len == 5 && memcmp(mode->str, "write", 5) == 0) {
      q->locked = 1;
      return BG_OK;
    }
    if (fields->element[2]->type != REDIS_REPLY_NIL) {
      q->interrupted = 1;
      return BG_OK;
    }
    uint64_t cfg;
    st = bgi_cfg_from_pair(q->f, fields->element[0], fields->element[1], &cfg, err);
    if (st != BG_OK) return st;
    if (cfg != q->cfg) {
      q->seen_cfg = cfg;
      return BG_OK;
    }
    if (bits->type == REDIS_REPLY_ERROR) return bgi_reply_error(bits, "contains (bitmap)", err);
    size_t m = bits->elements / k;
    if (bits->type != REDIS_REPLY_ARRAY || bits->elements % k || item + m > q->to)
      return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to BITFIELD_RO");
    for (size_t i = 0; i < m; i++, item++) {
      uint8_t all = 1;
      for (uint32_t b = 0; b < k; b++) all &= bits->element[i * k + b]->integer == 1;
      q->present[item] = all;
    }
  }
  return item == q->to ? BG_OK : bgi_err_set(err, BG_EPROTO, "contains: fewer answers than items");
}

/* The wait of one call for the filter's write lock to go: polled, the first waits short. */
typedef struct lock_wait {
  int64_t wait_ms;
  uint64_t deadline_ns;  /* the call's, 0 for none */
  uint64_t until_ns;     /* set at the first sight of the lock */
  uint64_t nap_ns;
} lock_wait;

#define LOCK_POLL_FIRST_NS 500000u
#define LOCK_POLL_MAX_NS 20000000u

static int locked_too_long(const bg_filter *f, const lock_wait *w, bgi_err *err) {
  return bgi_err_set(err, BG_ELOCKED, "contains: \"%s\" is write-locked (an in-place rebuild holds %s) and "
                     "stayed so for as long as this call may wait (BG_OPT_LOCK_WAIT_MS = %lld, or the call's "
                     "deadline)", f->name, f->lock_key, (long long)w->wait_ms);
}

static int wait_for_lock(const bg_filter *f, lock_wait *w, bgi_err *err) {
  uint64_t now = bgi_now_ns();
  if (!w->until_ns) {
    w->until_ns = now + (uint64_t)w->wait_ms * 1000000u;
    if (w->deadline_ns && w->deadline_ns < w->until_ns) w->until_ns = w->deadline_ns;
    w->nap_ns = LOCK_POLL_FIRST_NS;
  }
  if (now >= w->until_ns) return locked_too_long(f, w, err);
  uint64_t nap = w->nap_ns < w->until_ns - now ? w->nap_ns : w->until_ns - now;
  /* the call's deadline leaves no time for one more look after this nap: say why now */
  if (w->until_ns == w->deadline_ns && now + nap >= w->until_ns) return locked_too_long(f, w, err);
  struct timespec ts = {(time_t)(nap / 1000000000u), (long)(nap % 1000000000u)};
  nanosleep(&ts, NULL);
  w->nap_ns = w->nap_ns * 2 < LOCK_POLL_MAX_NS ? w->nap_ns * 2 : LOCK_POLL_MAX_NS;
  return BG_OK;
}

int bgi_filter_contains_raw(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                            size_t n, uint8_t *present, size_t *done, bgi_err *err) {
  query q = {.f = f, .items = items, .lens = lens, .present = present};
  int64_t retries = f->client->opts.config_retries;
  lock_wait w = {.wait_ms = f->client->opts.lock_wait_ms, .deadline_ns = deadline_ns};
  for (size_t from = 0; from < n; from += BGI_WINDOW_ITEMS) {
    q.from = from;
    q.to = n - from < BGI_WINDOW_ITEMS ? n : from + BGI_WINDOW_ITEMS;
    *done = from;
    for (int64_t attempt = 0;; attempt++) {
      int st = bgi_filter_config(f, deadline_ns, &q.cfg, err);
      if (st != BG_OK) return st;
      q.seen_cfg = 0;
      q.locked = q.interrupted = 0;
      st = bgi_client_call(f->client, deadline_ns, build_query, parse_query, &q, err);
      if (st != BG_OK) return st;
      if (q.interrupted)
        return bgi_err_set(err, BG_ELOCKED, "contains: an in-place rebuild of \"%s\" stopped half-way (its "
                           "rotator died or gave up: the config hash still has %s, the write lock is gone); "
                           "the bitmap is incomplete until the next rotation", f->name, BGI_REBUILD_FIELD);
      if (q.locked) {
        if ((st = wait_for_lock(f, &w, err)) != BG_OK) return st;
        attempt--;   /* waiting is not a config change: it has its own budget */
        continue;
      }
      if (!q.seen_cfg) break;
      /* the filter was rebuilt with other parameters: recompute with the new config and ask again */
      atomic_store(&f->cfg, q.seen_cfg);
      if (attempt >= retries)
        return bgi_err_set(err, BG_ECONFIG, "contains: the config of \"%s\" changed on each of %lld attempts",
                           f->name, (long long)attempt + 1);
    }
  }
  *done = n;
  return BG_OK;
}

BG_API int bg_filter_contains_many_ex(bg_filter *f, bg_call *call, const void *const *items, const size_t *lens,
                                      size_t n, uint8_t *present) {
  bgi_err err = {0};
  int source = BG_SOURCE_NONE;
  if (!f) return bgi_call_null_handle(call, "filter");
  /* the degrade policy (policy/guard.c) answers when Redis cannot */
  if (bgi_check_items("contains", items, lens, n, present, &err) == BG_OK)
    err.status = bgi_guard_contains(f, bgi_call_deadline(call), items, lens, n, present, &source, &err);
  return bgi_guard_finish(f, call, &err, source);
}

BG_API int bg_filter_contains_many(bg_filter *f, const void *const *items, const size_t *lens, size_t n,
                                   uint8_t *present) {
  return bg_filter_contains_many_ex(f, NULL, items, lens, n, present);
}

BG_API int bg_filter_contains(bg_filter *f, const void *item, size_t len, int *present) {
  uint8_t p = 0;
  if (!f) return BG_EINVAL;
  if (!present) return bgi_errslot_set(&f->err, BG_EINVAL, "contains: present must not be NULL");
  int st = bg_filter_contains_many_ex(f, NULL, &item, &len, 1, &p);
  *present = p;
  return st;
}
