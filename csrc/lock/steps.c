/*
 * The lock's server-side steps: each is one Lua script (EVALSHA, re-sent with EVAL on NOSCRIPT),
 * so the holder check and the write it guards are one atomic step.
 *
 * Keys: K = NAME:lock (hash), F = suffix(K, "fence") (counter), R = suffix(K, "readers") (zset:
 * reader -> lease end, server ms), W = suffix(K, "writers") (zset: waiting writer -> intent end).
 *
 * The exclusive layout and messages are Redisson 3.45.1's RedissonLock (tryLockInnerAsync,
 * unlockInnerAsync, renewal in renewal/LockTask): K = {holder: count} with PEXPIRE lease; the
 * last release deletes K and publishes 0 on the lock channel. Replays: bgi_client_call may send a
 * step twice when the connection dies around it; every step here gives the same end state when
 * repeated: a first acquire ("fresh") sets the count to 1 rather than adding, a release that is
 * not the last never takes the count below 1, and the last one deletes the holder whatever its
 * count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock.h"
#include "redis/script.h"
#include "client/step.h"

#define LUA_PRELUDE \
  "if redis.replicate_commands then redis.replicate_commands() end\n" \
  /* wakes waiters of both kinds: SUBSCRIBE (standalone Redisson, bloomguard) and, on Redis >= 7, \
   * SSUBSCRIBE (Redisson and bloomguard in a cluster); pcall: a server without SPUBLISH is fine */ \
  "local function wake(channel)\n" \
  "  redis.call('PUBLISH', channel, " BGI_LOCK_UNLOCK_MESSAGE ")\n" \
  "  redis.pcall('SPUBLISH', channel, " BGI_LOCK_UNLOCK_MESSAGE ")\n" \
  "end\n" \
  "local function now_ms()\n" \
  "  local t = redis.call('TIME')\n" \
  "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "end\n" \
  /* readers whose lease ran out leave; the key goes when no reader is left. Returns the mode. */ \
  "local function prune(K, R, now)\n" \
  "  local mode = redis.call('HGET', K, '" BGI_LOCK_MODE "')\n" \
  "  if mode ~= '" BGI_LOCK_MODE_READ "' then return mode end\n" \
  "  local dead = redis.call('ZRANGEBYSCORE', R, '-inf', now)\n" \
  "  for i = 1, #dead, 1000 do redis.call('HDEL', K, unpack(dead, i, math.min(i + 999, #dead))) end\n" \
  "  if #dead > 0 then redis.call('ZREMRANGEBYSCORE', R, '-inf', now) end\n" \
  "  if redis.call('HLEN', K) <= 1 then\n" \
  "    redis.call('DEL', K, R)\n" \
  "    return false\n" \
  "  end\n" \
  "  return mode\n" \
  "end\n" \
  /* a read-held key lives as long as its longest reader lease */ \
  "local function reader_ttl(K, R, now)\n" \
  "  local last = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')\n" \
  "  local ttl = 1\n" \
  "  if #last == 2 then ttl = math.max(1, math.floor(tonumber(last[2]) - now)) end\n" \
  "  redis.call('PEXPIRE', K, ttl)\n" \
  "  redis.call('PEXPIRE', R, ttl)\n" \
  "end\n"

/*
 * KEYS K F R W; ARGV lease, holder, kind ('x'|'r'), fresh ('1': the thread holds nothing
 * locally), intent ms (0: record none), write ('1': a BG_LOCK_WRITE acquire - a hold it starts
 * carries the field mode = "write", which filter queries check to wait for in-place rebuilds;
 * Redisson's RLock scripts ignore the extra field: they look at EXISTS and their holder's field).
 * {1, token}: acquired (token 0: re-entered); {0, pttl, who, n, mode}: held by n others;
 * {2, ms, writer, n}: n writers wait (reads only); {3}: our hold is gone (fresh = '0').
 */
static bgi_script acquire_script = {
  .name = "lock acquire",
  .body = LUA_PRELUDE
    "local K, F, R, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]\n"
    "local lease, holder, kind, fresh, intent = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])\n"
    "local write = ARGV[6] == '1'\n"
    "local now = now_ms()\n"
    "local mode = prune(K, R, now)\n"
    "local exists = redis.call('EXISTS', K) == 1\n"
    "local mine = exists and redis.call('HEXISTS', K, holder) == 1\n"
    "if kind == 'x' then\n"
    "  if mine and mode ~= '" BGI_LOCK_MODE_READ "' then\n"
    "    local token = 0\n"
    "    if fresh == '1' then\n"
    "      redis.call('HSET', K, holder, 1)\n"
    "      token = redis.call('INCR', F)\n"
    "    else\n"
    "      redis.call('HINCRBY', K, holder, 1)\n"
    "    end\n"
    "    redis.call('PEXPIRE', K, lease)\n"
    "    return {1, token}\n"
    "  end\n"
    "  if fresh == '0' then return {3} end\n"
    "  if not exists then\n"
    "    redis.call('HSET', K, holder, 1)\n"
    "    if write then redis.call('HSET', K, '" BGI_LOCK_MODE "', '" BGI_LOCK_MODE_WRITE "') end\n"
    "    redis.call('PEXPIRE', K, lease)\n"
    "    redis.call('ZREM', W, holder)\n"
    "    return {1, redis.call('INCR', F)}\n"
    "  end\n"
    "  if intent > 0 then\n"
    "    redis.call('ZADD', W, now + intent, holder)\n"
    "    if redis.call('PTTL', W) < intent then redis.call('PEXPIRE', W, intent) end\n"
    "  end\n"
    "else\n"
    "  if mine and mode == '" BGI_LOCK_MODE_READ "' then\n"
    "    local token = 0\n"
    "    if fresh == '1' then\n"
    "      redis.call('HSET', K, holder, 1)\n"
    "      token = redis.call('INCR', F)\n"
    "    else\n"
    "      redis.call('HINCRBY', K, holder, 1)\n"
    "    end\n"
    "    redis.call('ZADD', R, now + lease, holder)\n"
    "    reader_ttl(K, R, now)\n"
    "    return {1, token}\n"
    "  end\n"
    "  if fresh == '0' then return {3} end\n"
    "  if not exists or mode == '" BGI_LOCK_MODE_READ "' then\n"
    "    redis.call('ZREMRANGEBYSCORE', W, '-inf', now)\n"
    "    local w = redis.call('ZRANGE', W, 0, 0, 'WITHSCORES')\n"
    "    if #w == 2 then return {2, math.floor(tonumber(w[2]) - now), w[1], redis.call('ZCARD', W)} end\n"
    "    if not exists then redis.call('HSET', K, '" BGI_LOCK_MODE "', '" BGI_LOCK_MODE_READ "') end\n"
    "    redis.call('HSET', K, holder, 1)\n"
    "    redis.call('ZADD', R, now + lease, holder)\n"
    "    reader_ttl(K, R, now)\n"
    "    return {1, redis.call('INCR', F)}\n"
    "  end\n"
    "end\n"
    "local n = redis.call('HLEN', K)\n"
    "if mode then n = n - 1 end\n"
    "local who = ''\n"
    "local scan = redis.call('HSCAN', K, 0, 'COUNT', 8)[2]\n"
    "for i = 1, #scan, 2 do if scan[i] ~= '" BGI_LOCK_MODE "' then who = scan[i]; break end end\n"
    "return {0, redis.call('PTTL', K), who, n, mode or ''}\n",
};

/*
 * KEYS K R; ARGV holder, lease, kind, final ('1': the thread's last release), channel.
 * {0}: the hold is not there; {1, ended}.
 */
static bgi_script release_script = {
  .name = "lock release",
  .body = LUA_PRELUDE
    "local K, R = KEYS[1], KEYS[2]\n"
    "local holder, lease, kind, final, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]\n"
    "local mode = redis.call('HGET', K, '" BGI_LOCK_MODE "')\n"
    "local c = redis.call('HGET', K, holder)\n"
    "if not c or ((kind == 'x') == (mode == '" BGI_LOCK_MODE_READ "')) then return {0} end\n"
    "local now = now_ms()\n"
    "if final == '0' then\n"
    "  if tonumber(c) > 1 then redis.call('HINCRBY', K, holder, -1) end\n"
    "  if kind == 'x' then\n"
    "    redis.call('PEXPIRE', K, lease)\n"
    "  else\n"
    "    redis.call('ZADD', R, now + lease, holder)\n"
    "    reader_ttl(K, R, now)\n"
    "  end\n"
    "  return {1, 0}\n"
    "end\n"
    "if kind == 'x' then\n"
    "  redis.call('DEL', K)\n"
    "  wake(channel)\n"
    "  return {1, 1}\n"
    "end\n"
    "redis.call('HDEL', K, holder)\n"
    "redis.call('ZREM', R, holder)\n"
    "if prune(K, R, now) then\n"
    "  reader_ttl(K, R, now)\n"
    "  return {1, 1}\n"
    "end\n"
    "wake(channel)\n"
    "return {1, 1}\n",
};

/*
 * KEYS K R; ARGV lease, then (holder, kind) pairs: up to BGI_RENEW_BATCH holds of one handle (the
 * renewal thread sends the steps of every handle of a server in one round trip). {1, flags}: flags[i] '1' renewed, '0' the
 * i-th hold is gone.
 */
static bgi_script renew_script = {
  .name = "lock renew",
  .body = LUA_PRELUDE
    "local K, R = KEYS[1], KEYS[2]\n"
    "local lease = tonumber(ARGV[1])\n"
    "local mode = redis.call('HGET', K, '" BGI_LOCK_MODE "')\n"
    "local now = false\n"
    "local out = {}\n"
    "for i = 2, #ARGV - 1, 2 do\n"
    "  local holder, kind = ARGV[i], ARGV[i + 1]\n"
    "  if redis.call('HEXISTS', K, holder) == 0 or ((kind == 'x') == (mode == '" BGI_LOCK_MODE_READ "')) then\n"
    "    out[#out + 1] = '0'\n"
    "  else\n"
    "    if kind == 'x' then\n"
    "      redis.call('PEXPIRE', K, lease)\n"
    "    else\n"
    "      now = now or now_ms()\n"
    "      redis.call('ZADD', R, now + lease, holder)\n"
    "    end\n"
    "    out[#out + 1] = '1'\n"
    "  end\n"
    "end\n"
    "if now then reader_ttl(K, R, now) end\n"
    "return {1, table.concat(out)}\n",
};

/* KEYS W; ARGV holder, channel. Readers held back by the last waiting writer are woken. */
static bgi_script cancel_script = {
  .name = "lock cancel intent",
  .body = LUA_PRELUDE
    "local W = KEYS[1]\n"
    "if redis.call('ZREM', W, ARGV[1]) == 0 then return {0} end\n"
    "redis.call('ZREMRANGEBYSCORE', W, '-inf', now_ms())\n"
    "if redis.call('ZCARD', W) == 0 then wake(ARGV[2]) end\n"
    "return {1}\n",
};

/*
 * KEYS K F R W. Retires the lock's keys - the fence counter too - only when nobody holds the
 * lock (bloomguard or Redisson: K does not exist once expired readers are pruned) and no writer
 * waits for it, all in this one step: no acquire can slip in between the check and the DEL.
 * {1, fence key existed}: retired; {0, pttl, who, n, mode}: held (as acquire's); {2, ms, writer,
 * n}: writers wait.
 */
static bgi_script retire_script = {
  .name = "lock retire",
  .body = LUA_PRELUDE
    "local K, F, R, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4]\n"
    "local now = now_ms()\n"
    "local mode = prune(K, R, now)\n"
    "if redis.call('EXISTS', K) == 1 then\n"
    "  local n = redis.call('HLEN', K)\n"
    "  if mode then n = n - 1 end\n"
    "  local who = ''\n"
    "  local scan = redis.call('HSCAN', K, 0, 'COUNT', 8)[2]\n"
    "  for i = 1, #scan, 2 do if scan[i] ~= '" BGI_LOCK_MODE "' then who = scan[i]; break end end\n"
    "  return {0, redis.call('PTTL', K), who, n, mode or ''}\n"
    "end\n"
    "redis.call('ZREMRANGEBYSCORE', W, '-inf', now)\n"
    "local w = redis.call('ZRANGE', W, 0, 0, 'WITHSCORES')\n"
    "if #w == 2 then return {2, math.floor(tonumber(w[2]) - now), w[1], redis.call('ZCARD', W)} end\n"
    "local existed = redis.call('DEL', F)\n"
    "redis.call('DEL', R, W)\n"
    "return {1, existed}\n",
};

/* Who holds the lock, from an acquire's or a retire's refusal: {status, pttl, holders} and {who, mode}. */
static void held_by(const bgi_step *s, bgi_acq *out) {
  out->pttl = s->nints > 1 ? s->ints[1] : -2;
  out->holders = s->nints > 2 ? s->ints[2] : 0;
  snprintf(out->who, sizeof out->who, "%s", s->str[0]);
  snprintf(out->mode, sizeof out->mode, "%.15s", s->str[1]);
}

static int run_step(bg_lock *l, uint64_t deadline_ns, bgi_step *s, bgi_err *err) {
  int st = bgi_step_run(l->client, l->slot, deadline_ns, s, err);
  if (st == BG_OK && s->nints == 0) st = bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", s->script->name);
  return st;
}

int bgi_lock_step_acquire(bg_lock *l, uint64_t deadline_ns, uint64_t seq, int kind, int write, int fresh,
                          int64_t intent_ms, bgi_acq *out, bgi_err *err) {
  char holder[96], lease[24], intent[24];
  const char *k = kind == BGI_KIND_X ? "x" : "r", *f = fresh ? "1" : "0";
  size_t hlen = bgi_lock_holder(l, seq, holder, sizeof holder);
  snprintf(lease, sizeof lease, "%lld", (long long)l->lease_ms);
  snprintf(intent, sizeof intent, "%lld", (long long)intent_ms);
  const char *argv[] = {l->key.s, l->fence_key.s, l->readers_key.s, l->writers_key.s, lease, holder, k, f, intent,
                        write ? "1" : "0"};
  size_t lens[] = {l->key.len, l->fence_key.len, l->readers_key.len, l->writers_key.len, strlen(lease), hlen,
                   1, 1, strlen(intent), 1};
  bgi_step s = {.script = &acquire_script, .nkeys = 4, .nargs = 6, .argv = argv, .lens = lens, .durable = 1};
  int st = run_step(l, deadline_ns, &s, err);
  if (st != BG_OK) return st;
  memset(out, 0, sizeof *out);
  out->status = (int)s.ints[0];
  switch (out->status) {
    case 1:
      if (s.nints < 2) return bgi_err_set(err, BG_EPROTO, "lock acquire: unexpected reply");
      out->token = (uint64_t)s.ints[1];
      break;
    case 0:
    case 2:
      held_by(&s, out);
      break;
    case 3:
      break;
    default:
      return bgi_err_set(err, BG_EPROTO, "lock acquire: unexpected status %lld", s.ints[0]);
  }
  return BG_OK;
}

int bgi_lock_step_release(bg_lock *l, uint64_t deadline_ns, uint64_t seq, int kind, int final, int *held, bgi_err *err) {
  char holder[96], lease[24];
  const char *k = kind == BGI_KIND_X ? "x" : "r", *f = final ? "1" : "0";
  size_t hlen = bgi_lock_holder(l, seq, holder, sizeof holder);
  snprintf(lease, sizeof lease, "%lld", (long long)l->lease_ms);
  const char *argv[] = {l->key.s, l->readers_key.s, holder, lease, k, f, l->channel.s};
  size_t lens[] = {l->key.len, l->readers_key.len, hlen, strlen(lease), 1, 1, l->channel.len};
  bgi_step s = {.script = &release_script, .nkeys = 2, .nargs = 5, .argv = argv, .lens = lens, .durable = 1};
  int st = run_step(l, deadline_ns, &s, err);
  if (st != BG_OK) return st;
  *held = s.ints[0] == 1;
  return BG_OK;
}

int bgi_lock_step_renew(bgi_renew_part *parts, size_t n, uint64_t deadline_ns, bgi_err *err) {
  enum { HOLDER_MAX = 96 };
  if (n == 0) return BG_OK;
  if (n > BGI_STEPS_MAX) return bgi_err_set(err, BG_EINVAL, "lock renew: %zu parts in one round trip", n);
  size_t args = 0;
  for (size_t i = 0; i < n; i++) {
    if (parts[i].n == 0 || parts[i].n > BGI_RENEW_BATCH)
      return bgi_err_set(err, BG_EINVAL, "lock renew: a part of %zu holds", parts[i].n);
    args += 3 + 2 * parts[i].n;
  }
  int st = BG_OK;
  bgi_step *steps = calloc(n, sizeof *steps);
  bgi_step **ptrs = calloc(n, sizeof *ptrs);
  const char **argv = malloc(args * sizeof *argv);
  size_t *lens = malloc(args * sizeof *lens);
  char *holders = malloc((args / 2) * HOLDER_MAX), (*leases)[24] = malloc(n * sizeof *leases);
  if (!steps || !ptrs || !argv || !lens || !holders || !leases) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto cleanup;
  }
  size_t a = 0, hn = 0;
  for (size_t i = 0; i < n; i++) {
    const bgi_renew_part *p = &parts[i];
    bg_lock *l = p->l;
    const char **av = argv + a;
    size_t *ln = lens + a;
    snprintf(leases[i], sizeof leases[i], "%lld", (long long)l->lease_ms);
    av[0] = l->key.s, ln[0] = l->key.len;
    av[1] = l->readers_key.s, ln[1] = l->readers_key.len;
    av[2] = leases[i], ln[2] = strlen(leases[i]);
    for (size_t j = 0; j < p->n; j++) {
      char *h = holders + (hn++) * HOLDER_MAX;
      ln[3 + 2 * j] = bgi_lock_holder(l, p->seqs[j], h, HOLDER_MAX);
      av[3 + 2 * j] = h;
      av[4 + 2 * j] = p->kinds[j] == BGI_KIND_X ? "x" : "r";
      ln[4 + 2 * j] = 1;
    }
    steps[i] = (bgi_step){.script = &renew_script, .nkeys = 2, .nargs = 1 + 2 * p->n, .argv = av, .lens = ln,
                          .slot = l->slot};
    ptrs[i] = &steps[i];
    a += 3 + 2 * p->n;
  }
  /* the node of the first part's slot: the caller groups parts by the node that serves them */
  st = bgi_steps_run(parts[0].l->client, parts[0].l->slot, deadline_ns, ptrs, n, err);
  for (size_t i = 0; i < n; i++) {
    bgi_renew_part *p = &parts[i];
    p->status = st != BG_OK ? st : steps[i].status;
    if (p->status == BG_OK && (steps[i].nstrs < 1 || strlen(steps[i].str[0]) != p->n)) p->status = BG_EPROTO;
    for (size_t j = 0; j < p->n; j++) p->held[j] = p->status == BG_OK && steps[i].str[0][j] == '1';
  }
cleanup:
  free(steps);
  free(ptrs);
  free(argv);
  free(lens);
  free(holders);
  free(leases);
  return st;
}

int bgi_lock_step_cancel_intent(bg_lock *l, uint64_t seq, bgi_err *err) {
  char holder[96];
  size_t hlen = bgi_lock_holder(l, seq, holder, sizeof holder);
  const char *argv[] = {l->writers_key.s, holder, l->channel.s};
  size_t lens[] = {l->writers_key.len, hlen, l->channel.len};
  bgi_step s = {.script = &cancel_script, .nkeys = 1, .nargs = 2, .argv = argv, .lens = lens};
  return run_step(l, 0, &s, err);
}

int bgi_lock_step_retire(bg_lock *l, uint64_t deadline_ns, bgi_acq *out, bgi_err *err) {
  const char *argv[] = {l->key.s, l->fence_key.s, l->readers_key.s, l->writers_key.s};
  size_t lens[] = {l->key.len, l->fence_key.len, l->readers_key.len, l->writers_key.len};
  bgi_step s = {.script = &retire_script, .nkeys = 4, .nargs = 0, .argv = argv, .lens = lens};
  int st = run_step(l, deadline_ns, &s, err);
  if (st != BG_OK) return st;
  memset(out, 0, sizeof *out);
  out->status = (int)s.ints[0];
  switch (out->status) {
    case 1:
      out->token = s.nints > 1 ? (uint64_t)s.ints[1] : 0; /* here: 1 if the fence key existed */
      break;
    case 0:
    case 2:
      held_by(&s, out);
      break;
    default:
      return bgi_err_set(err, BG_EPROTO, "lock retire: unexpected status %lld", s.ints[0]);
  }
  return BG_OK;
}
