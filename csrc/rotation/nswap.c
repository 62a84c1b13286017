/*
 * A native filter's SWAP rotation (filter/native.h): the next generation is built by the server,
 * in a staging key of this rotation's own (NAME's "next:TOKEN", the live key's hash tag), and made
 * live by one RENAME onto NAME - O(1) for a module key, and atomic, so a reader's step (which
 * reads the key's TYPE in the same script as its BF.MEXISTS) sees the old filter or the new one,
 * never none. The lease, its keeper and its give-back, the delta and the abort are the rotation
 * machinery's (leased.c, lease.c, giveback.c, steps.c); what differs is what the delta holds (the
 * items themselves: an add made while the lease hash carries the native field RPUSHes them, in the
 * same step as it adds them to the live filter) and how it is applied (BF.INSERT into the staging
 * key, in lease-checked steps, the rest inside the commit script beside its RENAME).
 *
 * Leftovers of a rotator that died: its staging key is named in the filter's "stagings" set from
 * its begin to its commit or abort, and the next begin (which holds the lease: no other rotation
 * runs) deletes every key the set names, with the delta; its staging key also carries the staging
 * TTL, renewed with the lease, so it goes on its own if no rotation follows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/step.h"
#include "redis/layout.h"
#include "rotation/rotation.h"

/* Items per lease-checked BF.INSERT step of the build and of the drain, and steps per round trip. */
#define NSWAP_BATCH 1000
#define NSWAP_PIPELINE 16

/*
 * begin. KEYS: rotation, staging, delta, spare, live, config, stagings. ARGV: token, owner, lease
 * ms, guarded TTL, error rate, capacity, expansion ("" the live filter's, or the server's default
 * when there is none; "0" NONSCALING; else EXPANSION n). {1} begun; {0, owner, pttl} busy; {3}
 * the name holds a Redisson-layout filter or another type; {4, error} BF.RESERVE failed.
 */
static bgi_script nbegin_script = {
  .name = "native rotation begin",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
    "  return {0, redis.call('HGET', KEYS[1], '" BGI_LEASE_OWNER "') or '', redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "local lt = redis.call('TYPE', KEYS[5])['ok']\n"
    "if redis.call('EXISTS', KEYS[6]) == 1 or (lt ~= 'none' and lt ~= 'MBbloom--' and lt ~= 'bloomfltr') then\n"
    "  return {3, lt}\n"
    "end\n"
    /* what a rotator that died left: its staging keys, the delta, a spare its abort made */
    "for _, k in ipairs(redis.call('SMEMBERS', KEYS[7])) do redis.call('DEL', k) end\n"
    "redis.call('DEL', KEYS[7], KEYS[3], KEYS[4], KEYS[2])\n"
    "local args = {KEYS[2], ARGV[5], ARGV[6]}\n"
    "local exp = ARGV[7]\n"
    "if exp == '' and lt ~= 'none' then\n"
    "  local info = redis.call('BF.INFO', KEYS[5])\n"
    "  exp = '0'\n"
    "  for i = 1, #info - 1, 2 do\n"
    "    local name = info[i]\n"
    "    if type(name) == 'table' then name = name['ok'] end\n"
    "    if name == 'Expansion rate' and info[i + 1] then exp = tostring(info[i + 1]) end\n"
    "  end\n"
    "end\n"
    "if exp == '0' then table.insert(args, 'NONSCALING')\n"
    "elseif exp ~= '' then table.insert(args, 'EXPANSION'); table.insert(args, exp) end\n"
    "local ok = redis.pcall('BF.RESERVE', unpack(args))\n"
    "if type(ok) == 'table' and ok.err then return {4, ok.err} end\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[4])\n"
    "redis.call('SADD', KEYS[7], KEYS[2])\n"
    "redis.call('PEXPIRE', KEYS[7], ARGV[4])\n"
    "redis.call('HSET', KEYS[1], '" BGI_LEASE_TOKEN "', ARGV[1], '" BGI_LEASE_OWNER "', ARGV[2], '" BGI_LEASE_TTL
    "', ARGV[4], '" BGI_LEASE_NATIVE "', '1')\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "return {1}\n",
};

/*
 * The delta's replay, shared by the drain and the commit: bgi_native_drain(target, delta, limit)
 * BF.INSERTs the listed items into target in slices of 1000 (LRANGE + LTRIM), up to about limit
 * (nil: all); returns the error of the first item refused (a full NONSCALING target), else nil.
 */
#define LUA_NATIVE_DRAIN                                                                     \
  "local function bgi_native_drain(target, delta, limit)\n"                                 \
  "  local applied = 0\n"                                                                    \
  "  while not limit or applied < limit do\n"                                                \
  "    local items = redis.call('LRANGE', delta, 0, 999)\n"                                  \
  "    if #items == 0 then break end\n"                                                      \
  "    local r = redis.pcall('BF.INSERT', target, 'NOCREATE', 'ITEMS', unpack(items))\n"     \
  "    if r.err then return r.err end\n"                                                   \
  "    for i = 1, #r do if type(r[i]) == 'table' and r[i].err then return r[i].err end end\n" \
  "    if #r < #items then return 'ERR the server stopped the batch' end\n"                 \
  "    redis.call('LTRIM', delta, #items, -1)\n"                                             \
  "    applied = applied + #items\n"                                                         \
  "  end\n"                                                                                  \
  "  return nil\n"                                                                           \
  "end\n"

/* The rotation's own items. KEYS: rotation, staging. ARGV: token, items... {1, new} added; {0}
 * the lease is gone; {2} the staging key vanished; {5, new before, index, error} refused (full). */
static bgi_script nadd_script = {
  .name = "native rotation add",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then return {2} end\n"
    "local r = redis.pcall('BF.INSERT', KEYS[2], 'NOCREATE', 'ITEMS', unpack(ARGV, 2))\n"
    /* Valkey makes the whole reply the error: which item is not known */
    "if r.err then return {5, -1, -1, r.err} end\n"
    "local new = 0\n"
    "for i = 1, #r do\n"
    "  if type(r[i]) == 'table' then return {5, new, i - 1, r[i].err} end\n"
    "  new = new + r[i]\n"
    "end\n"
    "if #r < #ARGV - 1 then return {5, new, #r, 'ERR the server stopped the batch'} end\n"
    "return {1, new}\n",
};

/* KEYS: rotation, staging, delta. ARGV: token, limit. {1, items left}; {0} lease gone; {2} staging
 * vanished; {5, error} refused. */
static bgi_script ndrain_script = {
  .name = "native rotation drain",
  .body =
    LUA_NATIVE_DRAIN
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then return {2} end\n"
    "local e = bgi_native_drain(KEYS[2], KEYS[3], tonumber(ARGV[2]))\n"
    "if e then return {5, e} end\n"
    "return {1, redis.call('LLEN', KEYS[3])}\n",
};

/*
 * The swap. KEYS: rotation, staging, delta, live, config, stagings. ARGV: token. The rest of the
 * delta replayed into the staging filter and the RENAME onto the live name, in this one step; a
 * time to live the owner put on the live filter carries over. {1} swapped; {0} lease gone; {2}
 * staging vanished; {3, type} the name meanwhile holds another kind; {5, error} refused.
 */
static bgi_script ncommit_script = {
  .name = "native rotation commit",
  .body =
    LUA_NATIVE_DRAIN
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then return {2} end\n"
    "local lt = redis.call('TYPE', KEYS[4])['ok']\n"
    "if redis.call('EXISTS', KEYS[5]) == 1 or (lt ~= 'none' and lt ~= 'MBbloom--' and lt ~= 'bloomfltr') then\n"
    "  return {3, lt}\n"
    "end\n"
    "local e = bgi_native_drain(KEYS[2], KEYS[3])\n"
    "if e then return {5, e} end\n"
    "local ttl = redis.call('PTTL', KEYS[4])\n"
    "redis.call('RENAME', KEYS[2], KEYS[4])\n"
    "if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) else redis.call('PERSIST', KEYS[4]) end\n"
    "redis.call('SREM', KEYS[6], KEYS[2])\n"
    "redis.call('DEL', KEYS[3], KEYS[1])\n"
    "return {1}\n",
};

static int lease_lost(bg_rotation *r, const char *what, bgi_err *err) {
  return bgi_err_set(err, BG_EROTATING, "%s: this rotation of native filter \"%s\" lost its lease (it expired, or "
                     "another rotator took over); nothing more was written", what, r->f->name.s);
}

/* A reply code other than 1 of the steps above, as a status. */
static int step_failed(bg_rotation *r, const char *what, const bgi_step *s, bgi_err *err) {
  switch (s->ints[0]) {
    case 0: return lease_lost(r, what, err);
    case 2: return bgi_rot_vanished(r, what, r->staging_key.s, err);
    case 3:
      return bgi_err_set(err, BG_EWRONGTYPE, "%s: \"%s\" holds a Redisson-layout filter or a Redis %s, not a native "
                         "filter: rotate it with a handle from bg_filter_open", what, r->f->name.s, s->str[0]);
    case 4:
      if (strstr(s->str[0], "nknown") && strstr(s->str[0], "ommand"))
        return bgi_err_set(err, BG_ENOTSUP, "%s: the server has no Bloom filter module (BF.* commands unknown): native "
                           "filter \"%s\" needs RedisBloom or valkey-bloom", what, r->f->name.s);
      return bgi_err_set(err, BG_ESERVER, "%s: BF.RESERVE of the next generation of \"%s\" failed: %s", what,
                         r->f->name.s, s->str[0]);
    case 5:
      return bgi_err_set(err, BG_EFULL, "%s: the next generation of native filter \"%s\" refused an item: %s (a "
                         "NONSCALING filter at its capacity: rotate with a larger capacity)", what, r->f->name.s,
                         s->str[s->nstrs > 1 ? 1 : 0]);
    default: return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply from the native rotation step", what);
  }
}

static int run_step(bg_rotation *r, bgi_step *s, bgi_err *err) { return bgi_step_run(r->f->client, r->f->slot, 0, s, err); }

static int step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err) {
  const bg_filter *f = r->f;
  char lease[24], ttl[24], rate[32], cap[24], exp[16] = "";
  snprintf(lease, sizeof lease, "%lld", (long long)r->opts.rotate_lease_ms);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->guarded_ttl_ms);
  snprintf(rate, sizeof rate, "%.17g", r->fpp_value);
  snprintf(cap, sizeof cap, "%lld", (long long)r->n);
  const char *argv[] = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, f->spare_key.s, f->name.s,
                        f->config_key.s, r->native_reg.s, r->token, r->owner, lease, ttl, rate, cap, exp};
  size_t lens[] = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, f->spare_key.len, f->name.len,
                   f->config_key.len, r->native_reg.len, 32, strlen(r->owner), strlen(lease), strlen(ttl),
                   strlen(rate), strlen(cap), strlen(exp)};
  bgi_step s = {.script = &nbegin_script, .nkeys = 7, .nargs = 7, .argv = argv, .lens = lens, .durable = 1};
  int st = run_step(r, &s, err);
  if (st != BG_OK || s.ints[0] == 1) return st;
  if (s.ints[0] == 0) {
    *busy_pttl = s.ints[1];
    snprintf(busy_owner, owner_cap, "%s", s.str[0]);
    return bgi_err_set(err, BG_EROTATING, "rotation of \"%s\" already in progress by %s (lease expires in %lld ms)",
                       f->name.s, s.str[0], (long long)s.ints[1]);
  }
  return step_failed(r, "rotation begin", &s, err);
}

static int begin(bg_rotation *r, bgi_err *err) {
  int st = bgi_leased_wait(r, step_begin, err);
  if (st != BG_OK) return st;
  if ((st = bgi_nload_begin(r, err)) != BG_OK) {
    bgi_rot_step_abort(r, &(bgi_err){0});
    return st;
  }
  if (bgi_lease_start(r) != BG_OK) {
    bgi_rot_step_abort(r, &(bgi_err){0});
    return bgi_err_set(err, BG_ENOMEM, "cannot start the lease renewal thread");
  }
  return BG_OK;
}

/* The rotation's items into the staging filter: lease-checked steps of NSWAP_BATCH items, up to
 * NSWAP_PIPELINE of them per round trip. */
static int add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err) {
  const bg_filter *f = r->f;
  if (r->nload.on) {
    size_t took = bgi_nload_add(r, items, lens, n);
    r->items += took;
    if (took == n) return bgi_rot_report(r, BG_PHASE_BUILDING, 0, err);
    /* the first link is at its capacity: what was built goes up, the rest to the server */
    int st = bgi_nload_upload(r, err);
    if (st != BG_OK) return st;
    items += took, lens += took, n -= took;
  }
  typedef const char *argv_row[3 + NSWAP_BATCH];
  typedef size_t len_row[3 + NSWAP_BATCH];
  bgi_step steps[NSWAP_PIPELINE], *ptrs[NSWAP_PIPELINE];
  /* one allocation per call (about 200 KB: too big for a stack), none per item */
  argv_row *argv = malloc(NSWAP_PIPELINE * sizeof *argv);
  len_row *alen = malloc(NSWAP_PIPELINE * sizeof *alen);
  int st = BG_OK;
  if (!argv || !alen) st = bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t done = 0; done < n && st == BG_OK;) {
    size_t nsteps = 0, first = done;
    for (; nsteps < NSWAP_PIPELINE && done < n; nsteps++) {
      size_t m = n - done < NSWAP_BATCH ? n - done : NSWAP_BATCH;
      argv[nsteps][0] = f->rotation_key.s, alen[nsteps][0] = f->rotation_key.len;
      argv[nsteps][1] = r->staging_key.s, alen[nsteps][1] = r->staging_key.len;
      argv[nsteps][2] = r->token, alen[nsteps][2] = 32;
      for (size_t i = 0; i < m; i++) {
        /* an empty item is a valid item: any non-NULL pointer for it */
        argv[nsteps][3 + i] = lens[done + i] ? items[done + i] : "";
        alen[nsteps][3 + i] = lens[done + i];
      }
      steps[nsteps] = (bgi_step){.script = &nadd_script, .nkeys = 2, .nargs = 1 + m, .argv = argv[nsteps],
                                 .lens = alen[nsteps], .durable = 1, .slot = f->slot};
      ptrs[nsteps] = &steps[nsteps];
      done += m;
    }
    st = bgi_steps_run(f->client, f->slot, 0, ptrs, nsteps, err);
    for (size_t i = 0; i < nsteps && st == BG_OK; i++) {
      if (steps[i].status != BG_OK) st = err->status = steps[i].status;
      else if (steps[i].ints[0] != 1) {
        st = step_failed(r, "rotation add", &steps[i], err);
        if (st == BG_EFULL && steps[i].ints[2] >= 0) {
          size_t at = first + i * NSWAP_BATCH + (size_t)steps[i].ints[2];
          size_t m = strlen(err->msg);
          snprintf(err->msg + m, sizeof err->msg - m, "; item %zu of this call and those after it were not added", at);
        }
      }
    }
    if (st == BG_OK) r->items += done - first;
    if (st == BG_OK) st = bgi_rot_check_active(r, "rotation add", err);
    if (st == BG_OK) st = bgi_rot_report(r, BG_PHASE_BUILDING, 0, err);
  }
  free(argv);
  free(alen);
  return st;
}

static int commit(bg_rotation *r, bgi_err *err) {
  const bg_filter *f = r->f;
  int st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);
  /* the delta in short steps (each checks the lease), until what is left fits the final step;
   * the first (limit 0) only checks the lease, before an upload replaces the staging key */
  char limit[24] = "0";
  for (int first = 1;; first = 0) {
    if (!first) snprintf(limit, sizeof limit, "%d", NSWAP_BATCH * 8);
    if (st != BG_OK) return st;
    const char *argv[] = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, r->token, limit};
    size_t lens[] = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, 32, strlen(limit)};
    bgi_step s = {.script = &ndrain_script, .nkeys = 3, .nargs = 2, .argv = argv, .lens = lens, .durable = 1};
    if ((st = run_step(r, &s, err)) != BG_OK) return st;
    if (s.ints[0] != 1) return step_failed(r, "rotation drain", &s, err);
    if (first) {
      if ((st = bgi_nload_upload(r, err)) != BG_OK) return st;
      continue;
    }
    if (s.ints[1] <= NSWAP_BATCH) break;
    st = bgi_rot_check_active(r, "rotation drain", err);
  }
  if ((st = bgi_rot_report(r, BG_PHASE_COMMITTING, 1, err)) != BG_OK) return st;
  const char *argv[] = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, f->name.s, f->config_key.s,
                        r->native_reg.s, r->token};
  size_t lens[] = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, f->name.len, f->config_key.len,
                   r->native_reg.len, 32};
  bgi_step s = {.script = &ncommit_script, .nkeys = 6, .nargs = 1, .argv = argv, .lens = lens, .durable = 1};
  if ((st = run_step(r, &s, err)) != BG_OK) return st;
  if (s.ints[0] != 1) return step_failed(r, "rotation commit", &s, err);
  bgi_lease_stop(r);
  return BG_OK;
}

static void abort_(bg_rotation *r, bgi_err *err) {
  bgi_nload_free(r);
  bgi_leased_abort(r, err);
}

const bgi_rot_ops bgi_rot_nswap = {.name = "swap", .begin = begin, .add = add, .commit = commit, .abort = abort_};
