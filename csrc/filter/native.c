/*
 * Native filters: adds and whole-filter operations are one EVALSHA of one script that reads the
 * key's TYPE and then runs its BF command, so what the key is and what it answers come from the
 * same instant. A query makes that check without Lua - MULTI, TYPE, BF.MEXISTS, EXEC, the script
 * only when TYPE names no native filter - and with tracking sends BF.MEXISTS alone while the
 * server tracks the key for the connection (build_read, below, says why that holds).
 */
#include "filter/native.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/jdouble.h"
#include "filter/filter.h"
#include "filter/partitioned.h"
#include "redis/layout.h"

#define NOMEM(err) bgi_err_set(err, BG_ENOMEM, "out of memory")

/*
 * KEYS = NAME, the Redisson config key of NAME, the rotation lease, the delta; ARGV = op, then its
 * arguments. While a native rotation runs (rotation/nswap.c: its lease hash has the native field),
 * an add also records its items in the delta (RPUSH, the lease's TTL), in the same step as it adds
 * them to the live filter, so the next generation gets them: the commit replays the delta. Returns
 *   {1, the BF command's reply}            done
 *   {0}                                    NAME does not exist (no BF command run)
 *   {2}                                    reserve: a native filter is already there (kept)
 *   {-1, type}                             NAME holds another type (a Redisson bitmap is a string)
 *   {-2}                                   NAME is a Redisson-layout filter (its config hash exists)
 *   {-3, error}                            the server has no BF commands (the missing-key path
 *                                          asks BF.CARD, which neither creates nor costs anything)
 * TYPE names RedisBloom's keys MBbloom-- and valkey-bloom's bloomfltr. add is BF.INSERT NOCREATE:
 * BF.MADD would create a missing key with the server's default capacity.
 */
bgi_script bgi_script_native = {
    "native",
    "local op = ARGV[1]\n"
    "local t = redis.call('TYPE', KEYS[1])['ok']\n"
    "if t == 'none' then\n"
    "  if redis.call('EXISTS', KEYS[2]) == 1 then return {-2} end\n"
    "  local probe = redis.pcall('BF.CARD', KEYS[1])\n"
    "  if type(probe) == 'table' and probe.err then return {-3, probe.err} end\n"
    "  if op == 'reserve' then return {1, redis.call('BF.RESERVE', KEYS[1], unpack(ARGV, 2))} end\n"
    "  if op == 'del' or op == 'pexpire' or op == 'persist' then return {1, 0} end\n"
    "  return {0}\n"
    "end\n"
    "if t ~= 'MBbloom--' and t ~= 'bloomfltr' then return {-1, t} end\n"
    "if op == 'exists' then return {1, redis.call('BF.MEXISTS', KEYS[1], unpack(ARGV, 2))} end\n"
    "if op == 'insert' then\n"
    "  local ttl = redis.call('HGET', KEYS[3], '" BGI_LEASE_TTL "')\n"
    "  if ttl and redis.call('HEXISTS', KEYS[3], '" BGI_LEASE_NATIVE "') == 1 then\n"
    "    redis.call('RPUSH', KEYS[4], unpack(ARGV, 2))\n"
    "    redis.call('PEXPIRE', KEYS[4], ttl)\n"
    "  end\n"
    /* {1, answers, index of the first refused item (-1: none), its error}: RedisBloom on Redis
     * puts an error element in the reply and stops; on Valkey the whole reply becomes the error,
     * so the items are then inserted one by one, and how many were new is BF.CARD's growth (the
     * items the failed batch added answer 0 again) */
    "  local before = redis.call('BF.CARD', KEYS[1])\n"
    "  local r = redis.pcall('BF.INSERT', KEYS[1], 'NOCREATE', 'ITEMS', unpack(ARGV, 2))\n"
    "  if r.err then\n"
    "    if not string.find(r.err, 'full') then return r end\n"
    "    r = {}\n"
    "    local refused, why = -1, ''\n"
    "    for i = 2, #ARGV do\n"
    "      local one = redis.pcall('BF.INSERT', KEYS[1], 'NOCREATE', 'ITEMS', ARGV[i])\n"
    "      if one.err then refused, why = i - 2, one.err; break end\n"
    "      r[i - 1] = one[1]\n"
    "    end\n"
    "    return {1, r, refused, why, redis.call('BF.CARD', KEYS[1]) - before}\n"
    "  end\n"
    "  local ok = {}\n"
    "  for i = 1, #r do\n"
    "    if type(r[i]) == 'table' then return {1, ok, i - 1, r[i].err} end\n"
    "    ok[i] = r[i]\n"
    "  end\n"
    "  if #r < #ARGV - 1 then return {1, ok, #r, 'ERR the server stopped the batch'} end\n"
    "  return {1, ok, -1, ''}\n"
    "end\n"
    "if op == 'reserve' then return {2} end\n"
    "if op == 'card' then return {1, redis.call('BF.CARD', KEYS[1])} end\n"
    "if op == 'info' then return {1, redis.call('BF.INFO', KEYS[1])} end\n"
    "if op == 'del' then return {1, redis.call('DEL', KEYS[1])} end\n"
    "if op == 'pexpire' then return {1, redis.call('PEXPIRE', KEYS[1], ARGV[2])} end\n"
    "if op == 'persist' then return {1, redis.call('PERSIST', KEYS[1])} end\n"
    "return redis.error_reply('ERR bloomguard native step: unknown op ' .. op)\n",
    {0},
    0};

/* A server error of the script, told apart: the module missing is BG_ENOTSUP naming it. */
static int script_error(const bgi_reply *x, const bg_filter *f, const char *what, bgi_err *err) {
  if (x->str && (strstr(x->str, "nknown") && strstr(x->str, "ommand")))
    return bgi_err_set(err, BG_ENOTSUP, "%s: the server has no Bloom filter module (BF.* commands unknown): native "
                       "filter \"%s\" needs RedisBloom (built into Redis 8; --loadmodule redisbloom.so on Redis 7 or "
                       "Valkey) or valkey-bloom, or use the Redisson layout (bg_filter_open)", what, f->name.s);
  return bgi_reply_error(x, what, err);
}

/* The script's verdict on the key, for every code but 1 (done): the status and its message. */
static int verdict(const bgi_reply *x, const bg_filter *f, const char *what, bgi_err *err) {
  if (x->type == REDIS_REPLY_ERROR) return script_error(x, f, what, err);
  if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 || x->element[0]->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply from the native script", what);
  switch (x->element[0]->integer) {
    case 1:
    case 2:
      return x->elements >= 1 ? BG_OK : BG_EPROTO;
    case 0:
      return bgi_err_set(err, BG_ENOTINIT, "native Bloom filter \"%s\" is not initialized: the key does not exist "
                         "(call init first)", f->name.s);
    case -1: {
      const bgi_reply *t = x->elements > 1 ? x->element[1] : NULL;
      int is_str = t && t->type == REDIS_REPLY_STRING;
      return bgi_err_set(err, BG_EWRONGTYPE, "%s: key \"%s\" holds a Redis %.40s, not a native Bloom filter "
                         "(TYPE MBbloom--)%s", what, f->name.s, is_str ? t->str : "value",
                         is_str && !strcmp(t->str, "string") ? ": a Redisson-layout bitmap? open it with bg_filter_open" : "");
    }
    case -2:
      return bgi_err_set(err, BG_EWRONGTYPE, "%s: \"%s\" is a Redisson-layout filter (its config hash %s exists), not "
                         "a native one: open it with bg_filter_open", what, f->name.s, f->config_key.s);
    case -3: {
      const bgi_reply *e = x->elements > 1 ? x->element[1] : NULL;
      bgi_reply fake = {.type = REDIS_REPLY_ERROR, .str = e && e->str ? e->str : (char *)"unknown command", .len = 0};
      if (e && e->str) fake.len = e->len;
      int st = script_error(&fake, f, what, err);
      return st;
    }
    default:
      return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply from the native script", what);
  }
}

/* The script's keys (all in the filter's slot: named by the suffix rule). */
static size_t native_keys_len(const bg_filter *f) {
  return f->name.len + f->config_key.len + f->rotation_key.len + f->delta_key.len;
}

static void append_keys(bgi_buf *b, const bg_filter *f) {
  bgi_resp_key(b, &f->name);
  bgi_resp_key(b, &f->config_key);
  bgi_resp_key(b, &f->rotation_key);
  bgi_resp_key(b, &f->delta_key);
}

/* ---- add and contains ---------------------------------------------------------------------- */

/* The script's calls: one per chunk of the window. */
static int build_script(bgi_conn *c, bgi_nwin *w, size_t *nreplies, bgi_err *err) {
  const bg_filter *f = w->f;
  size_t n = w->to - w->from, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS;
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS, bytes = 0;
    for (size_t i = 0; i < m; i++) bytes += w->lens[w->from + done + i];
    if (bgi_script_begin(&c->out, &bgi_script_native, w->run.use_body, 4, 1 + m) != BG_OK ||
        bgi_buf_reserve(&c->out, bgi_resp_bound(5 + m, native_keys_len(f) + 8 + bytes)) != BG_OK)
      return NOMEM(err);
    append_keys(&c->out, f);
    bgi_resp_cstr(&c->out, w->is_add ? "insert" : "exists");
    for (size_t i = 0; i < m; i++) bgi_resp_bulk(&c->out, w->items[w->from + done + i], w->lens[w->from + done + i]);
  }
  c->durable = w->is_add;
  *nreplies = chunks;
  return BG_OK;
}

/* ---- the query: the check without Lua, and the tracked read ------------------------------------ */

/*
 * A query's check is, per chunk, MULTI TYPE NAME; BF.MEXISTS NAME items...; EXEC - what the script
 * does for a native filter, as native commands (a third of the script's server time). Anything but
 * TYPE naming a native filter (missing, another type, a server without the module: BF.MEXISTS
 * refused when queued) sends the window again through the script, whose verdict says which.
 *
 * With tracking (redis/tracking.h) the block says CLIENT CACHING YES before TYPE and ends with
 * PTTL NAME, so the server tracks NAME for the connection; a block that finds a native filter with
 * no TTL leaves a verdict (the filter's id, NATIVE_TRACKED), and while it holds the next
 * queries send BF.MEXISTS NAME items... alone. Whatever changes NAME after the verdict (DEL, a
 * rotation's RENAME onto it, FLUSHALL, an expiry the server carries out, an add, a PEXPIRE) makes
 * the server push an invalidation to the connection ahead of the reply to any later command, so an
 * answer that arrives with the epoch unchanged was read from the native filter the check saw; one
 * after a push is dropped and the window asked again with the block. A key with a TTL gets no
 * verdict: BF.MEXISTS of a key past its TTL deletes it and answers 0s, and the server defers the
 * invalidation of a key the current command deleted until after that command's reply - the push
 * would come too late to stop a 0.
 */
#define NATIVE_TRACKED UINT64_MAX   /* the "config" of a native filter's verdict (bgi_tracking_remember) */
/* replies per chunk: MULTI's +OK, a QUEUED per command, EXEC's array */
#define BLOCK_REPLIES 4
#define TRACKED_BLOCK_REPLIES 6

static atomic_int fault;
void bgi_native_fault(int mask) { atomic_store(&fault, mask); }

static void append_cmd(bgi_buf *b, const char *cmd, const bg_filter *f) {
  bgi_resp_array(b, f ? 2 : 1);
  bgi_resp_cstr(b, cmd);
  if (f) bgi_resp_key(b, &f->name);
}

static int build_read(bgi_conn *c, bgi_nwin *w, size_t *nreplies, bgi_err *err) {
  const bg_filter *f = w->f;
  size_t n = w->to - w->from, chunks = (n + BGI_CHUNK_ITEMS - 1) / BGI_CHUNK_ITEMS, bytes = 0;
  /* the epoch first: a push between the two reads then marks this answer stale, never the reverse */
  w->epoch = bgi_tracking_epoch(c->track);
  if (w->want_script) w->how = BGI_NREAD_SCRIPT;
  else if (!w->no_fast && !c->no_verdict && bgi_tracking_fresh(c->track, f->id, NATIVE_TRACKED)) w->how = BGI_NREAD_FAST;
  else w->how = bgi_tracking_on(c->track) ? BGI_NREAD_TRACKED_BLOCK : BGI_NREAD_BLOCK;
  if (w->how == BGI_NREAD_SCRIPT) return build_script(c, w, nreplies, err);
  for (size_t i = w->from; i < w->to; i++) bytes += w->lens[i];
  /* per chunk: BF.MEXISTS's m + 2 arguments, and up to six more commands of up to 3 arguments */
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(n + chunks * 22, bytes + chunks * (3 * f->name.len + 96))) != BG_OK)
    return NOMEM(err);
  for (size_t done = 0; done < n; done += BGI_CHUNK_ITEMS) {
    size_t m = n - done < BGI_CHUNK_ITEMS ? n - done : BGI_CHUNK_ITEMS;
    if (w->how != BGI_NREAD_FAST) {
      append_cmd(&c->out, "MULTI", NULL);
      if (w->how == BGI_NREAD_TRACKED_BLOCK) {
        bgi_tracking_append_caching(&c->out);   /* NAME, read next, is tracked */
      }
      append_cmd(&c->out, "TYPE", f);
    }
    bgi_resp_array(&c->out, 2 + m);
    bgi_resp_cstr(&c->out, "BF.MEXISTS");
    bgi_resp_key(&c->out, &f->name);
    for (size_t i = 0; i < m; i++) bgi_resp_bulk(&c->out, w->items[w->from + done + i], w->lens[w->from + done + i]);
    if (w->how == BGI_NREAD_TRACKED_BLOCK) append_cmd(&c->out, "PTTL", f);
    if (w->how != BGI_NREAD_FAST) append_cmd(&c->out, "EXEC", NULL);
  }
  c->durable = 0;
  *nreplies = chunks * (w->how == BGI_NREAD_FAST ? 1 : w->how == BGI_NREAD_TRACKED_BLOCK ? TRACKED_BLOCK_REPLIES
                                                                                        : BLOCK_REPLIES);
  return BG_OK;
}

static int build_win(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_nwin *w = ctx;
  return w->is_add ? build_script(c, w, nreplies, err) : build_read(c, w, nreplies, err);
}

static int is_native_type(const bgi_reply *t) {
  return (t->type == REDIS_REPLY_STATUS || t->type == REDIS_REPLY_STRING) && t->str &&
         (!strcmp(t->str, "MBbloom--") || !strcmp(t->str, "bloomfltr"));
}

/* present[first..first+m) from BF.MEXISTS's reply. */
static int take_answers(bgi_nwin *w, const bgi_reply *a, size_t first, size_t m, bgi_err *err) {
  if (a->type == REDIS_REPLY_ERROR) return script_error(a, w->f, "contains", err);
  if (a->type != REDIS_REPLY_ARRAY) return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to BF.MEXISTS");
  if (a->elements != m)
    return bgi_err_set(err, BG_EPROTO, "contains: the server answered %zu of %zu items", a->elements, m);
  for (size_t i = 0; i < m; i++) {
    const bgi_reply *e = a->element[i];
    if (e->type == REDIS_REPLY_ERROR) return script_error(e, w->f, "contains", err);
    if (e->type != REDIS_REPLY_INTEGER) return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply element");
    w->present[first + i] = e->integer == 1;
  }
  return BG_OK;
}

/* Ask the window again: through the script (the block found no native filter), or with the block. */
static int again(bgi_nwin *w, int script) {
  w->again = 1;
  w->no_fast = 1;
  w->want_script |= script;
  return BG_OK;
}

static int parse_read(bgi_conn *c, bgi_reply **rep, size_t nreplies, bgi_nwin *w, bgi_err *err) {
  int tracked = w->how == BGI_NREAD_TRACKED_BLOCK, fast = w->how == BGI_NREAD_FAST, has_ttl = 0;
  size_t per = fast ? 1 : tracked ? TRACKED_BLOCK_REPLIES : BLOCK_REPLIES;
  if (fast) {
    /* a push came first: NAME may have changed before (some of) these answers were read */
    int stale = bgi_tracking_epoch(c->track) != w->epoch;
    bgi_filter_count_tracked(w->f, stale);
    if (stale && !(atomic_load(&fault) & BGI_NFAULT_IGNORE_PUSH)) return again(w, 0);
  }
  for (size_t r = 0; r < nreplies; r += per) {
    size_t first = w->from + r / per * BGI_CHUNK_ITEMS, m = w->to - first < BGI_CHUNK_ITEMS ? w->to - first : BGI_CHUNK_ITEMS;
    const bgi_reply *answers = rep[r];
    if (!fast) {
      /* CLIENT CACHING refused when queued (an ACL changed since the handshake): EXEC aborted;
       * stop tracking on this connection and ask again with the plain block */
      if (tracked && rep[r + 1]->type == REDIS_REPLY_ERROR) {
        bgi_tracking_off(c->track);
        return again(w, 0);
      }
      /* a command refused when queued (BF.MEXISTS unknown: no module): the script says what */
      for (size_t i = 0; i + 1 < per; i++)
        if (rep[r + i]->type == REDIS_REPLY_ERROR) return again(w, 1);
      const bgi_reply *ex = rep[r + per - 1];
      if (ex->type == REDIS_REPLY_ERROR) return bgi_reply_error(ex, "contains", err);
      if (ex->type != REDIS_REPLY_ARRAY || ex->elements != per - 2)
        return bgi_err_set(err, BG_EPROTO, "contains: unexpected reply to EXEC");
      const bgi_reply *const *el = (const bgi_reply *const *)ex->element + tracked;
      /* CLIENT CACHING failed when run: answer, stop asking */
      if (tracked && ex->element[0]->type == REDIS_REPLY_ERROR) bgi_tracking_off(c->track);
      if (!is_native_type(el[0])) return again(w, 1);
      answers = el[1];
      if (tracked) has_ttl |= el[2]->type != REDIS_REPLY_INTEGER || el[2]->integer != -1;
    }
    int st = take_answers(w, answers, first, m, err);
    if (st != BG_OK) return st;
  }
  /* no verdict from a round trip a push crossed (tracking.h), nor after a redirect */
  if (atomic_load(&fault) & BGI_NFAULT_IGNORE_TTL) has_ttl = 0;
  if (tracked && !has_ttl && !c->no_verdict) bgi_tracking_remember(c->track, w->f->id, NATIVE_TRACKED, w->epoch);
  return BG_OK;
}

static int parse_win(bgi_conn *c, bgi_reply **rep, size_t nreplies, void *ctx, bgi_err *err) {
  bgi_nwin *w = ctx;
  const char *what = w->is_add ? "add" : "contains";
  w->added = 0;
  if (!w->is_add && w->how != BGI_NREAD_SCRIPT) return parse_read(c, rep, nreplies, w, err);
  w->full_at = SIZE_MAX;
  for (size_t r = 0; r < nreplies; r++) {
    if (bgi_reply_is_error(rep[r], "NOSCRIPT")) {
      w->run.noscript = 1;
      return BG_OK;
    }
  }
  for (size_t r = 0; r < nreplies; r++) {
    const bgi_reply *x = rep[r];
    int st = verdict(x, w->f, what, err);
    if (st != BG_OK) return st;
    size_t first = w->from + r * BGI_CHUNK_ITEMS, m = w->to - first < BGI_CHUNK_ITEMS ? w->to - first : BGI_CHUNK_ITEMS;
    const bgi_reply *a = x->elements >= 2 ? x->element[1] : NULL;
    /* an add's refused item: its index in the chunk (the answers before it are in a) */
    if (w->is_add && x->elements >= 4 && x->element[2]->type == REDIS_REPLY_INTEGER && x->element[2]->integer >= 0 &&
        w->full_at == SIZE_MAX) {
      if (x->elements == 5 && x->element[4]->type == REDIS_REPLY_INTEGER) w->added += (size_t)x->element[4]->integer;
      else
        for (size_t i = 0; a && a->type == REDIS_REPLY_ARRAY && i < a->elements; i++)
          if (a->element[i]->type == REDIS_REPLY_INTEGER) w->added += a->element[i]->integer == 1;
      w->full_at = first + (size_t)x->element[2]->integer;
      continue;
    }
    if (w->is_add && x->elements == 5 && x->element[4]->type == REDIS_REPLY_INTEGER) {
      /* refused as a whole and then item by item, none refused: the growth is the count */
      if (w->full_at == SIZE_MAX) w->added += (size_t)x->element[4]->integer;
      continue;
    }
    if (!a || a->type != REDIS_REPLY_ARRAY || a->elements > m)
      return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply from the native script", what);
    for (size_t i = 0; i < a->elements; i++) {
      const bgi_reply *e = a->element[i];
      if (e->type == REDIS_REPLY_ERROR) {
        /* a full NONSCALING filter: the server stops the batch at the first item it refuses */
        if (w->is_add && w->full_at == SIZE_MAX) w->full_at = first + i;
        if (!w->is_add) return script_error(e, w->f, what, err);
        break;
      }
      if (e->type != REDIS_REPLY_INTEGER) return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply element", what);
      if (w->is_add) {
        if (w->full_at == SIZE_MAX) w->added += e->integer == 1;
      }
      else w->present[first + i] = e->integer == 1;
    }
    if (a->elements < m && w->full_at == SIZE_MAX) {
      if (!w->is_add) return bgi_err_set(err, BG_EPROTO, "%s: the server answered %zu of %zu items", what, a->elements, m);
      w->full_at = first + a->elements;
    }
  }
  if (w->full_at != SIZE_MAX)
    return bgi_err_set(err, BG_EFULL, "add: native filter \"%s\" is full (NONSCALING, its capacity reached): item %zu "
                       "of this call and the %zu after it were not added; %zu before it were new (init it again with "
                       "a larger capacity, or with an expansion)", w->f->name.s, w->full_at, w->to - w->full_at - 1,
                       w->added);
  return BG_OK;
}

enum { N_START, N_SENT };

static int next_window(bgi_native_task *nt) {
  bgi_nwin *w = &nt->w;
  if (w->to >= nt->n) {
    *nt->done = nt->n;
    return bgi_task_done(&nt->t, BG_OK);
  }
  w->from = w->to;
  w->to = nt->n - w->from < BGI_WINDOW_ITEMS ? nt->n : w->from + BGI_WINDOW_ITEMS;
  *nt->done = w->from;
  size_t bytes = 0;
  for (size_t i = w->from; i < w->to; i++) bytes += w->lens[i];
  nt->req = (bgi_req){.client = w->f->client, .slot = w->f->slot, .flags = bgi_call_flags_for_min_size(bytes),
                      .deadline_ns = nt->deadline_ns, .build = build_win, .parse = parse_win, .ctx = w,
                      .run = &w->run, .what = w->is_add ? "add" : "contains"};
  w->want_script = w->no_fast = w->again = 0;
  nt->state = N_SENT;
  return bgi_task_call(&nt->t, &nt->req);
}

static int resume_native(bgi_task *t, int st, bgi_err *err) {
  bgi_native_task *nt = (bgi_native_task *)t;
  (void)err;
  if (nt->state == N_START) return next_window(nt);
  if (nt->w.is_add && (st == BG_OK || st == BG_EFULL)) *nt->added += nt->w.added;
  if (st != BG_OK) return bgi_task_done(t, st);
  if (nt->w.again) {
    /* bounded: each time moves down the tracked read, the tracked block, the block, the script
     * (parse_read), and the script always answers */
    nt->w.again = 0;
    return bgi_task_call(t, &nt->req);
  }
  return next_window(nt);
}

void bgi_native_task_init(bgi_native_task *nt, bg_filter *f, int is_add, uint64_t deadline_ns,
                          const void *const *items, const size_t *lens, size_t n, uint8_t *present, size_t *added,
                          size_t *done) {
  bgi_task_init(&nt->t, resume_native);
  memset(&nt->w, 0, sizeof nt->w);
  nt->w.f = f;
  nt->w.is_add = is_add;
  nt->w.items = items;
  nt->w.lens = lens;
  nt->w.present = present;
  nt->n = n;
  nt->added = added;
  nt->done = done;
  nt->deadline_ns = deadline_ns;
  nt->state = N_START;
  if (added) *added = 0;
  *done = 0;
}

/* ---- whole-filter operations -------------------------------------------------------------- */

static const char *admin_op_name(int kind) {
  switch (kind) {
    case BGI_ADMIN_INIT: return "reserve";
    case BGI_ADMIN_COUNT: return "card";
    case BGI_ADMIN_INFO: return "info";
    case BGI_ADMIN_EXPIRE: return "pexpire";
    case BGI_ADMIN_PERSIST: return "persist";
    default: return "del";
  }
}

static const char *admin_what(int kind) {
  switch (kind) {
    case BGI_ADMIN_INIT: return "init";
    case BGI_ADMIN_COUNT: return "count";
    case BGI_ADMIN_INFO: return "info";
    case BGI_ADMIN_EXPIRE: return "expire";
    case BGI_ADMIN_PERSIST: return "persist";
    default: return "delete";
  }
}

static int build_admin(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_nadmin *na = ctx;
  const bg_filter *f = na->f;
  size_t nargs = 1;
  if (na->kind == BGI_ADMIN_INIT) nargs += 2 + (na->expansion > 0 ? 2 : na->expansion == 0 ? 1 : 0);
  if (na->kind == BGI_ADMIN_EXPIRE) nargs += 1;
  if (bgi_script_begin(&c->out, &bgi_script_native, na->run.use_body, 4, nargs) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(4 + nargs, native_keys_len(f) + 128)) != BG_OK)
    return NOMEM(err);
  append_keys(&c->out, f);
  bgi_resp_cstr(&c->out, admin_op_name(na->kind));
  if (na->kind == BGI_ADMIN_INIT) {
    bgi_resp_cstr(&c->out, na->error_rate);
    bgi_resp_u64(&c->out, (uint64_t)na->capacity);
    if (na->expansion > 0) {
      bgi_resp_cstr(&c->out, "EXPANSION");
      bgi_resp_u64(&c->out, (uint64_t)na->expansion);
    }
    else if (na->expansion == 0) bgi_resp_cstr(&c->out, "NONSCALING");
  }
  if (na->kind == BGI_ADMIN_EXPIRE) bgi_resp_u64(&c->out, (uint64_t)na->ttl_ms);
  c->durable = na->kind != BGI_ADMIN_COUNT && na->kind != BGI_ADMIN_INFO;
  *nreplies = 1;
  return BG_OK;
}

/* BF.INFO's flat [name, value, ...]: the integer of `name`, or 0 (nil: expansion of a NONSCALING filter). */
static int64_t info_field(const bgi_reply *a, const char *name) {
  for (size_t i = 0; i + 1 < a->elements; i += 2) {
    const bgi_reply *k = a->element[i], *v = a->element[i + 1];
    /* the names come back through Lua as status replies */
    if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) && k->str && !strcmp(k->str, name)) return v->type == REDIS_REPLY_INTEGER ? v->integer : 0;
  }
  return 0;
}

static int parse_admin(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_nadmin *na = ctx;
  const bgi_reply *x = rep[0];
  const char *what = admin_what(na->kind);
  (void)c, (void)n;
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    na->run.noscript = 1;
    return BG_OK;
  }
  int st = verdict(x, na->f, what, err);
  if (st != BG_OK) return st;
  if (x->element[0]->integer == 2) {   /* reserve: one is there, kept */
    na->result = 0;
    return BG_OK;
  }
  const bgi_reply *v = x->elements == 2 ? x->element[1] : NULL;
  if (!v) return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply from the native script", what);
  if (v->type == REDIS_REPLY_ERROR) return script_error(v, na->f, what, err);
  switch (na->kind) {
    case BGI_ADMIN_INIT:
      na->result = 1;
      return BG_OK;
    case BGI_ADMIN_INFO:
      if (v->type != REDIS_REPLY_ARRAY) return bgi_err_set(err, BG_EPROTO, "info: unexpected reply to BF.INFO");
      na->cap = info_field(v, "Capacity");
      na->bytes = info_field(v, "Size");
      na->filters = info_field(v, "Number of filters");
      na->items = info_field(v, "Number of items inserted");
      na->exp = info_field(v, "Expansion rate");
      return BG_OK;
    default:
      if (v->type != REDIS_REPLY_INTEGER) return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", what);
      na->result = na->kind == BGI_ADMIN_COUNT ? v->integer : v->integer > 0;
      return BG_OK;
  }
}

/* RedisBloom's first link: error rate tightened by half, bits = -n ln(e) / ln(2)^2. */
int bgi_native_check_size(const bg_filter *f, int64_t capacity, double error_rate, int32_t expansion, bgi_err *err) {
  if (capacity < 1 || capacity > (INT64_C(1) << 53))
    return bgi_err_set(err, BG_EBADPARAMS, "init: capacity must be 1..2^53 (got %lld)", (long long)capacity);
  if (!(error_rate > 0 && error_rate < 1))
    return bgi_err_set(err, BG_EBADPARAMS, "init: error rate must be between 0 and 1, both excluded (got %g)",
                       error_rate);
  if (expansion < -1 || expansion > 32768)
    return bgi_err_set(err, BG_EBADPARAMS, "init: expansion must be -1 (the server's default), 0 (NONSCALING) or "
                       "1..32768 (got %d)", (int)expansion);
  double bits = -(double)capacity * log(error_rate * 0.5) / (M_LN2 * M_LN2), bytes = ceil(bits / 64) * 8;
  double max = (double)f->client->opts.native_max_bytes;
  if (bytes > max)
    return bgi_err_set(err, BG_EBADPARAMS, "init: a native filter of capacity %lld at error rate %g needs %.0f bytes "
                       "for its first link, more than BG_OPT_NATIVE_MAX_BYTES (%.0f): the server would try to "
                       "allocate it; lower the capacity or raise the option", (long long)capacity, error_rate, bytes,
                       max);
  return BG_OK;
}

int bgi_nadmin_prepare(bgi_nadmin *na, bgi_req *req, bg_filter *f, int kind, int64_t arg, double fpp,
                       int32_t expansion, bgi_err *err) {
  memset(na, 0, sizeof *na);
  na->f = f;
  na->kind = kind;
  if (kind == BGI_ADMIN_INIT) {
    int st = bgi_native_check_size(f, arg, fpp, expansion, err);
    if (st != BG_OK) return st;
    na->capacity = arg;
    na->expansion = expansion;
    snprintf(na->error_rate, sizeof na->error_rate, "%.17g", fpp);
  }
  if (kind == BGI_ADMIN_EXPIRE) na->ttl_ms = arg;
  req->build = build_admin;
  req->parse = parse_admin;
  req->ctx = na;
  req->run = &na->run;
  req->what = admin_what(kind);
  return BG_OK;
}

/* ---- a Redisson-layout handle meeting a native key ------------------------------------------ */

static int build_type(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  const bg_filter *f = ctx;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(2, f->name.len + 8)) != BG_OK) return NOMEM(err);
  append_cmd(&c->out, "TYPE", f);
  *nreplies = 1;
  return BG_OK;
}

static int parse_type(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  const bg_filter *f = ctx;
  const bgi_reply *x = rep[0];
  (void)c, (void)n;
  if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, "type", err);
  if ((x->type == REDIS_REPLY_STATUS || x->type == REDIS_REPLY_STRING) && x->str &&
      (!strcmp(x->str, "MBbloom--") || !strcmp(x->str, "bloomfltr")))
    return bgi_err_set(err, BG_EWRONGTYPE, "\"%s\" is a native Bloom filter (TYPE %s), not a Redisson-layout one: "
                       "open it with bg_filter_open_native", f->name.s, x->str);
  return BG_OK;
}

void bgi_native_type_req(bgi_req *r, bg_filter *f, uint64_t deadline_ns) {
  *r = (bgi_req){.client = f->client, .slot = f->slot, .deadline_ns = deadline_ns, .build = build_type,
                 .parse = parse_type, .ctx = f, .what = "type"};
}

/* ---- ABI -------------------------------------------------------------------------------------- */

BG_API int bg_filter_open_native_ex(bg_filter **out, bg_call *call, bg_client *c, const char *name) {
  int st = bg_filter_open_ex(out, call, c, name);
  if (st == BG_OK) {
    (*out)->native = 1;
    atomic_store(&(*out)->kind, BGI_KIND_NATIVE);
  }
  return st;
}

BG_API int bg_filter_open_native(bg_filter **out, bg_client *c, const char *name) {
  return bg_filter_open_native_ex(out, NULL, c, name);
}

BG_API int32_t bg_filter_is_native(const bg_filter *f) { return f && f->native; }

static int not_native(bg_filter *f, bg_call *call, const char *fn) {
  bgi_err err = {0};
  bgi_err_set(&err, BG_EINVAL, "%s: \"%s\" was not opened as a native filter (bg_filter_open_native)", fn, f->name.s);
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_init_native_ex(bg_filter *f, bg_call *call, int64_t capacity, double error_rate,
                                    int32_t expansion, int *created) {
  bgi_err err = {0};
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  if (!f->native) return not_native(f, call, "init_native");
  BGI_WITH_CALL(call, {
    err.status = bgi_admin_prepare_native_init(&a, f, bgi_call_deadline(call), capacity, error_rate, expansion, &err);
    if (err.status == BG_OK) err.status = bgi_admin_run(&a, &err);
  });
  if (err.status == BG_OK && created) *created = (int)bgi_admin_value(&a);
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_init_native(bg_filter *f, int64_t capacity, double error_rate, int32_t expansion, int *created) {
  return bg_filter_init_native_ex(f, NULL, capacity, error_rate, expansion, created);
}

BG_API int bg_filter_info_native_ex(bg_filter *f, bg_call *call, int64_t *capacity, int64_t *bytes, int64_t *filters,
                                    int64_t *items, int64_t *expansion) {
  bgi_err err = {0};
  bgi_admin a;
  if (!f) return bgi_call_null_handle(call, "filter");
  if (!f->native) return not_native(f, call, "info_native");
  BGI_WITH_CALL(call, {
    err.status = bgi_admin_prepare(&a, f, bgi_call_deadline(call), BGI_ADMIN_INFO, 0, 0, &err);
    if (err.status == BG_OK) err.status = bgi_admin_run(&a, &err);
  });
  if (err.status == BG_OK) {
    const bgi_nadmin *na = &a.u.native;
    if (capacity) *capacity = na->cap;
    if (bytes) *bytes = na->bytes;
    if (filters) *filters = na->filters;
    if (items) *items = na->items;
    if (expansion) *expansion = na->exp;
  }
  return bgi_filter_finish(f, call, &err);
}

BG_API int bg_filter_info_native(bg_filter *f, int64_t *capacity, int64_t *bytes, int64_t *filters, int64_t *items,
                                 int64_t *expansion) {
  return bg_filter_info_native_ex(f, NULL, capacity, bytes, filters, items, expansion);
}
