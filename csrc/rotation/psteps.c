/*
 * A partitioned filter's rotation, its server steps (pswap.c tells the order; docs/layout.md the
 * keys). Every step is a Lua script on one slot - the central config's, or one partition's - so
 * the check that the rotation still holds what it writes under happens in the same atomic step as
 * the write:
 *  - central (the filter's slot): begin (the lease, the next generation's number and record),
 *    flip (the next generation made live, the old one listed to delete), release (an abort),
 *    forget (a deleted generation's record);
 *  - a live partition: mark (adds record their hashes in its delta from now on), drain (the
 *    delta taken and the mark replaced by the forward generation, at once), unmark (an abort);
 *  - a partition of the next generation: stage (made empty, tagged with the token, with a TTL),
 *    write (a chunk, only into our stage, only while its bitmap is whole), persist.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/hash.h"
#include "client/step.h"
#include "filter/scripts.h"
#include "hash/hash.h"
#include "redis/layout.h"
#include "redis/names.h"
#include "rotation/rotation.h"

#define GEOMETRY_MATCHES(meta) \
  "local m = redis.call('HMGET', " meta ", '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_PCONF_PARTITIONS "')\n" \
  "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] or m[3] ~= ARGV[3] then return {0} end\n"

/* KEYS config, lease. ARGV token, owner, lease ms, mark TTL, P, partition size, total, k, n, fpp,
 * in place ("1": a locked rotation, which rewrites the live generation and builds none).
 * {1, live, next}; {0, owner, pttl}: another rotation holds the lease; {2}: not a (live)
 * partitioned filter. A generation a dead rotation left (bgNext) joins the list to delete. */
static bgi_script begin_script = {
  .name = "partitioned rotation begin",
  .body =
    "if redis.call('EXISTS', KEYS[2]) == 1 then\n"
    "  return {0, redis.call('HGET', KEYS[2], '" BGI_LEASE_OWNER "') or '', redis.call('PTTL', KEYS[2])}\n"
    "end\n"
    "if redis.call('HGET', KEYS[1], '" BGI_PCONF_KIND "') ~= '" BGI_PCONF_KIND_PARTITIONED "' then return {2} end\n"
    "local live = tonumber(redis.call('HGET', KEYS[1], '" BGI_PCONF_LIVE "') or '0')\n"
    "if live == 0 then return {2} end\n"
    "local last = math.max(live, tonumber(redis.call('HGET', KEYS[1], '" BGI_PCONF_GENS "') or '0'))\n"
    "local sweep = redis.call('HGET', KEYS[1], '" BGI_PCONF_SWEEP "') or ''\n"
    "local dead = redis.call('HGET', KEYS[1], '" BGI_PCONF_NEXT "')\n"
    "if dead and tonumber(dead) ~= live then sweep = sweep .. ' ' .. dead end\n"
    "for g in string.gmatch(sweep, '%d+') do last = math.max(last, tonumber(g)) end\n"
    "local nxt = live\n"
    "if ARGV[11] ~= '1' then\n"
    "  nxt = last + 1\n"
    "  local p = '" BGI_PCONF_GEN_PREFIX "' .. nxt .. ':'\n"
    "  redis.call('HSET', KEYS[1], '" BGI_PCONF_GENS "', nxt, '" BGI_PCONF_NEXT "', nxt,\n"
    "    p .. '" BGI_PCONF_PARTITIONS "', ARGV[5], p .. '" BGI_PCONF_PSIZE "', ARGV[6], p .. '" BGI_PCONF_TOTAL "', ARGV[7],\n"
    "    p .. '" BGI_CONFIG_K "', ARGV[8], p .. '" BGI_CONFIG_N "', ARGV[9], p .. '" BGI_CONFIG_FPP "', ARGV[10])\n"
    "elseif dead and tonumber(dead) ~= live then\n"
    "  redis.call('HDEL', KEYS[1], '" BGI_PCONF_NEXT "')\n"
    "end\n"
    "sweep = string.gsub(sweep, '^ +', '')\n"
    "if sweep ~= '' then redis.call('HSET', KEYS[1], '" BGI_PCONF_SWEEP "', sweep) end\n"
    "redis.call('HSET', KEYS[2], '" BGI_LEASE_TOKEN "', ARGV[1], '" BGI_LEASE_OWNER "', ARGV[2], '" BGI_LEASE_GEN "', nxt,\n"
    "  '" BGI_LEASE_TTL "', ARGV[4])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[3])\n"
    "return {1, live, nxt}\n",
};

/* KEYS meta, mark, delta (a live partition). ARGV size, k, P (its geometry), mark, mark TTL.
 * {1}; {0}: the partition holds another geometry or is gone (the filter changed under us). A
 * forward a dead rotation left goes: only this rotation's commit may set one. */
static bgi_script mark_script = {
  .name = "partitioned rotation mark",
  .body =
    GEOMETRY_MATCHES("KEYS[1]")
    "redis.call('HDEL', KEYS[1], '" BGI_PMETA_FORWARD "')\n"
    "redis.call('DEL', KEYS[3])\n"
    "redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])\n"
    "return {1}\n",
};

/* KEYS mark, delta. ARGV mark, TTL. {1}; {0}: the mark is gone (it expired: adds went unrecorded). */
static bgi_script renew_mark_script = {
  .name = "partitioned rotation renew",
  .body =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[2])\n"
    "return {1}\n",
};

/* KEYS meta, bitmap, mark, delta (a partition of the next generation). ARGV token, TTL, size, k, P. */
static bgi_script stage_script = {
  .name = "partitioned rotation stage",
  .body =
    "redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_SIZE "', ARGV[3], '" BGI_CONFIG_K "', ARGV[4], '" BGI_PCONF_PARTITIONS "',\n"
    "  ARGV[5], '" BGI_PMETA_STAGE "', ARGV[1])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return {1}\n",
};

/* KEYS meta, bitmap. ARGV token, TTL, offset, bytes, the length the bitmap must have already.
 * {1}; {0}: not our stage (it expired, or was deleted); {3}: its bitmap lost bytes written. With
 * no bytes it is the stage's renewal. */
static bgi_script write_script = {
  .name = "partitioned rotation write",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_PMETA_STAGE "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('STRLEN', KEYS[2]) < tonumber(ARGV[5]) then return {3} end\n"
    "if #ARGV[4] > 0 then redis.call('SETRANGE', KEYS[2], ARGV[3], ARGV[4]) end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[2])\n"
    "return {1}\n",
};

/* KEYS meta, bitmap. ARGV token, the length its bitmap must have. {1}; {0}; {3}: as write. */
static bgi_script persist_script = {
  .name = "partitioned rotation persist",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_PMETA_STAGE "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('STRLEN', KEYS[2]) < tonumber(ARGV[2]) then return {3} end\n"
    "redis.call('HDEL', KEYS[1], '" BGI_PMETA_STAGE "')\n"
    "redis.call('PERSIST', KEYS[1])\n"
    "redis.call('PERSIST', KEYS[2])\n"
    "return {1}\n",
};

/* KEYS meta, mark, delta (a live partition). ARGV mark, the next generation. {1, hashes}: the
 * delta, and from this step on adds name the next generation instead of recording; {0}: the mark
 * is gone (it expired: adds may have gone unrecorded). */
static bgi_script drain_script = {
  .name = "partitioned rotation drain",
  .body =
    "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {0} end\n"
    "local d = redis.call('LRANGE', KEYS[3], 0, -1)\n"
    "redis.call('DEL', KEYS[2], KEYS[3])\n"
    "redis.call('HSET', KEYS[1], '" BGI_PMETA_FORWARD "', ARGV[2])\n"
    "return {1, d}\n",
};

/* KEYS meta, mark, delta (a live partition). ARGV mark, the next generation. Undoes mark and drain. */
static bgi_script unmark_script = {
  .name = "partitioned rotation unmark",
  .body =
    "if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2], KEYS[3]) end\n"
    "if redis.call('HGET', KEYS[1], '" BGI_PMETA_FORWARD "') == ARGV[2] then\n"
    "  redis.call('HDEL', KEYS[1], '" BGI_PMETA_FORWARD "')\n"
    "end\n"
    "return {1}\n",
};

/* KEYS config, lease. ARGV token, live, next. {1, config PTTL}; {0}: the lease is not ours; {2}:
 * the live generation is not the one rotated from (the filter was made again). */
static bgi_script flip_script = {
  .name = "partitioned rotation commit",
  .body =
    "if redis.call('HGET', KEYS[2], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('HGET', KEYS[1], '" BGI_PCONF_LIVE "') ~= ARGV[2] then return {2} end\n"
    "local sweep = redis.call('HGET', KEYS[1], '" BGI_PCONF_SWEEP "')\n"
    "redis.call('HSET', KEYS[1], '" BGI_PCONF_LIVE "', ARGV[3], '" BGI_PCONF_SWEEP "', sweep and (sweep .. ' ' .. ARGV[2]) or ARGV[2])\n"
    "redis.call('HDEL', KEYS[1], '" BGI_PCONF_NEXT "')\n"
    "redis.call('DEL', KEYS[2])\n"
    "return {1, redis.call('PTTL', KEYS[1])}\n",
};

/* KEYS meta, bitmap, mark (a live partition). ARGV size, k, P, mark, token. {1, the bitmap's bytes}:
 * the rewrite begins (from here queries of the partition wait, pop.c); {0}: the mark is gone
 * (the lease was lost); {2}: the partition holds another geometry. */
static bgi_script rewrite_start_script = {
  .name = "partitioned locked rotation start",
  .body =
    "if redis.call('GET', KEYS[3]) ~= ARGV[4] then return {0} end\n"
    "local m = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_PCONF_PARTITIONS "')\n"
    "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] or m[3] ~= ARGV[3] then return {2} end\n"
    "redis.call('HSET', KEYS[1], '" BGI_PMETA_STAGE "', ARGV[5])\n"
    "return {1, redis.call('STRLEN', KEYS[2])}\n",
};

/* KEYS mark, delta. ARGV mark. {1, hashes}: the delta so far, taken (the mark stays); {0}: the
 * mark is gone. */
static bgi_script rewrite_take_script = {
  .name = "partitioned locked rotation take",
  .body =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end\n"
    "local d = redis.call('LRANGE', KEYS[2], 0, -1)\n"
    "redis.call('DEL', KEYS[2])\n"
    "return {1, d}\n",
};

/* KEYS meta, bitmap, mark, delta. ARGV mark, token, bytes written, k, then k indexes per item
 * taken. {1}: the bits set, and with no add left the partition is live again (stage, mark and
 * delta gone); {2}: the bits set, more adds arrived (take them); {0}: the mark is gone; {3}: not
 * our rewrite, or its bitmap lost bytes written. */
static bgi_script rewrite_finish_script = {
  .name = "partitioned locked rotation finish",
  .body =
    BGI_LUA_SETBITS
    "if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {0} end\n"
    "if redis.call('HGET', KEYS[1], '" BGI_PMETA_STAGE "') ~= ARGV[2] then return {3} end\n"
    "if redis.call('STRLEN', KEYS[2]) < tonumber(ARGV[3]) then return {3} end\n"
    "if #ARGV > 4 then setbits(KEYS[2], 5, #ARGV, tonumber(ARGV[4])) end\n"
    "if redis.call('LLEN', KEYS[4]) > 0 then return {2} end\n"
    "redis.call('DEL', KEYS[3], KEYS[4])\n"
    "redis.call('HDEL', KEYS[1], '" BGI_PMETA_STAGE "')\n"
    "return {1}\n",
};

/* KEYS config, lease. ARGV token, gen, n, fpp. {1}; {0}: the lease is not ours. */
static bgi_script rewrite_done_script = {
  .name = "partitioned locked rotation commit",
  .body =
    "if redis.call('HGET', KEYS[2], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "local p = '" BGI_PCONF_GEN_PREFIX "' .. ARGV[2] .. ':'\n"
    "redis.call('HSET', KEYS[1], p .. '" BGI_CONFIG_N "', ARGV[3], p .. '" BGI_CONFIG_FPP "', ARGV[4])\n"
    "redis.call('DEL', KEYS[2])\n"
    "return {1}\n",
};

#define FORGET_GEN \
  "local function forget(g)\n" \
  "  local p = '" BGI_PCONF_GEN_PREFIX "' .. g .. ':'\n" \
  "  redis.call('HDEL', KEYS[1], p .. '" BGI_PCONF_PARTITIONS "', p .. '" BGI_PCONF_PSIZE "', p .. '" BGI_PCONF_TOTAL "',\n" \
  "    p .. '" BGI_CONFIG_K "', p .. '" BGI_CONFIG_N "', p .. '" BGI_CONFIG_FPP "')\n" \
  "end\n"

/* KEYS config, lease. ARGV token, next, in place ("1": a locked rotation, whose next is the
 * live one). The lease given back if ours; the next generation's record dropped if the config
 * still names it as being built. {1}; {2}: it is live (the flip happened, its answer was lost):
 * nothing is touched. */
static bgi_script release_script = {
  .name = "partitioned rotation abort",
  .body =
    FORGET_GEN
    "if ARGV[3] ~= '1' and redis.call('HGET', KEYS[1], '" BGI_PCONF_LIVE "') == ARGV[2] then return {2} end\n"
    "if redis.call('HGET', KEYS[2], '" BGI_LEASE_TOKEN "') == ARGV[1] then redis.call('DEL', KEYS[2]) end\n"
    "if redis.call('HGET', KEYS[1], '" BGI_PCONF_NEXT "') == ARGV[2] then\n"
    "  redis.call('HDEL', KEYS[1], '" BGI_PCONF_NEXT "')\n"
    "  forget(ARGV[2])\n"
    "end\n"
    "return {1}\n",
};

/* KEYS config. ARGV gen (its keys are deleted): its record and its place in the list go. */
static bgi_script forget_script = {
  .name = "partitioned generation forget",
  .body =
    FORGET_GEN
    "if redis.call('HGET', KEYS[1], '" BGI_PCONF_LIVE "') == ARGV[1] or "
    "redis.call('HGET', KEYS[1], '" BGI_PCONF_NEXT "') == ARGV[1] then return {0} end\n"
    "forget(ARGV[1])\n"
    "local left = {}\n"
    "for g in string.gmatch(redis.call('HGET', KEYS[1], '" BGI_PCONF_SWEEP "') or '', '%d+') do\n"
    "  if g ~= ARGV[1] then left[#left + 1] = g end\n"
    "end\n"
    "if #left > 0 then redis.call('HSET', KEYS[1], '" BGI_PCONF_SWEEP "', table.concat(left, ' '))\n"
    "elseif redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HDEL', KEYS[1], '" BGI_PCONF_SWEEP "') end\n"
    "return {1}\n",
};

/* ---- running them ---------------------------------------------------------------------------- */

/* A step on partition part of generation g: its keys (the letters of `what`, redis/layout.h), then
 * nargs arguments. */
typedef struct pstep {
  const char *argv[16];
  size_t lens[16];
  size_t nkeys;
  char nums[8][24];
} pstep;

static const char *num(pstep *p, size_t i, uint64_t v) {
  snprintf(p->nums[i], sizeof p->nums[i], "%llu", (unsigned long long)v);
  return p->nums[i];
}

/* The keys go to the rotation's room for them: the first four for the committing thread, the
 * next four for the lease keeper's (keeper), which runs beside it. */
static void pkeys_in(bg_rotation *r, pstep *p, int keeper, const bgi_pgen *g, uint32_t part, const char *what) {
  bgi_prot *pr = r->part;
  size_t room = BGI_PKEY_MAX(r->f->name.len);
  p->nkeys = strlen(what);
  for (size_t i = 0; i < p->nkeys; i++) {
    char *key = pr->keybuf + (keeper ? 4 + i : i) * room;
    p->lens[i] = bgi_pkey_write(key, &r->f->name, bgi_pslot(part, g->parts), g->gen, part, what[i]);
    p->argv[i] = key;
  }
}

static void pkeys(bg_rotation *r, pstep *p, const bgi_pgen *g, uint32_t part, const char *what) {
  pkeys_in(r, p, 0, g, part, what);
}

static void arg(pstep *p, size_t i, const char *s, size_t len) {
  p->argv[p->nkeys + i] = s;
  p->lens[p->nkeys + i] = len;
}

static void sarg(pstep *p, size_t i, const char *s) { arg(p, i, s, strlen(s)); }

static int run(bg_rotation *r, pstep *p, bgi_script *script, size_t nargs, int slot, uint64_t deadline_ns,
               bgi_step *s, bgi_err *err) {
  s->script = script;
  s->nkeys = p->nkeys;
  s->nargs = nargs;
  s->argv = p->argv;
  s->lens = p->lens;
  return bgi_step_run(r->f->client, slot, deadline_ns, s, err);
}

static int lost(bg_rotation *r, const char *what, bgi_err *err) {
  return bgi_err_set(err, BG_EROTATING, "%s: this rotation of \"%s\" lost its lease (it expired, or another rotator "
                     "took over); the live filter is unchanged", what, r->f->name.s);
}

static int vanished(bg_rotation *r, const bgi_pgen *g, uint32_t part, const char *what, bgi_err *err) {
  char key[160];
  if (r->part->in_place)
    return bgi_err_set(err, BG_ESERVER, "%s refused: the partition %s of \"%s\" lost bytes during its rewrite in place "
                       "(it expired, was evicted or deleted); it stays marked as being rewritten (its queries fail "
                       "with BG_ELOCKED) until the next rotation: rotate again", what,
                       bgi_pk_text(r->f, g->gen, part, g->parts, BGI_PKEY_BITMAP, key, sizeof key), r->f->name.s);
  return bgi_err_set(err, BG_ESERVER, "%s refused: the staged partition %s of \"%s\" is not all there (it expired, was "
                     "evicted or deleted during the rotation); the live filter is unchanged: rotate again", what,
                     bgi_pk_text(r->f, g->gen, part, g->parts, BGI_PKEY_BITMAP, key, sizeof key), r->f->name.s);
}

/* A live partition's keys (`what`), then its geometry and the marks' value: ARGV 1..4. */
static void live_geometry(bg_rotation *r, pstep *p, uint32_t part, const char *what) {
  bgi_prot *pr = r->part;
  pkeys(r, p, &pr->live, part, what);
  sarg(p, 0, num(p, 0, bgi_cfg_size(pr->live.cfg)));
  sarg(p, 1, num(p, 1, bgi_cfg_k(pr->live.cfg)));
  sarg(p, 2, num(p, 2, pr->live.parts));
  sarg(p, 3, pr->mark);
}

static int changed_under_it(bg_rotation *r, bgi_err *err) {
  return bgi_err_set(err, BG_ECONFIG, "rotation: the partitioned filter \"%s\" changed under it (deleted, or made "
                     "again with other parameters); rotate again", r->f->name.s);
}

static void central_keys(bg_rotation *r, pstep *p) {
  p->nkeys = 2;
  p->argv[0] = r->f->config_key.s, p->lens[0] = r->f->config_key.len;
  p->argv[1] = r->f->rotation_key.s, p->lens[1] = r->f->rotation_key.len;
}

int bgi_prot_step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err) {
  bgi_prot *pr = r->part;
  const bgi_pgen *n = &pr->next;
  pstep p;
  bgi_step s = {0};
  central_keys(r, &p);
  sarg(&p, 0, r->token);
  sarg(&p, 1, r->owner);
  sarg(&p, 2, num(&p, 0, (uint64_t)r->opts.rotate_lease_ms));
  sarg(&p, 3, num(&p, 1, (uint64_t)r->guarded_ttl_ms));
  sarg(&p, 4, num(&p, 2, n->parts));
  sarg(&p, 5, num(&p, 3, bgi_cfg_size(n->cfg)));
  sarg(&p, 6, num(&p, 4, bgi_cfg_size(n->cfg) * n->parts));
  sarg(&p, 7, num(&p, 5, bgi_cfg_k(n->cfg)));
  sarg(&p, 8, num(&p, 6, (uint64_t)n->n));
  sarg(&p, 9, r->fpp);
  sarg(&p, 10, pr->in_place ? "1" : "0");
  int st = run(r, &p, &begin_script, 11, r->f->slot, 0, &s, err);
  if (st != BG_OK) return st;
  if (s.ints[0] == 1 && s.nints >= 3) {
    pr->live.gen = (uint64_t)s.ints[1];
    pr->next.gen = (uint64_t)s.ints[2];
    return BG_OK;
  }
  if (s.ints[0] == 2)
    return bgi_err_set(err, BG_ENOTINIT, "rotation: \"%s\" is no longer an initialized partitioned filter", r->f->name.s);
  *busy_pttl = s.nints > 1 ? s.ints[1] : 0;
  snprintf(busy_owner, owner_cap, "%s", s.str[0]);
  return bgi_err_set(err, BG_EROTATING, "a rotation of \"%s\" is in progress (by %s; its lease expires in %lld ms "
                     "unless renewed)", r->f->name.s, s.str[0][0] ? s.str[0] : "?", (long long)*busy_pttl);
}

int bgi_prot_step_mark(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  live_geometry(r, &p, part, (char[]){BGI_PKEY_META, BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 4, num(&p, 3, (uint64_t)r->guarded_ttl_ms));
  int st = run(r, &p, &mark_script, 5, (int)bgi_pslot(part, pr->live.parts), 0, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return changed_under_it(r, err);
  return st;
}

/* The renewal of one live partition's mark, or of one staged partition. */
static int renew_mark(bg_rotation *r, uint32_t part, uint64_t deadline_ns, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  pkeys_in(r, &p, 1, &pr->live, part, (char[]){BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 0, pr->mark);
  sarg(&p, 1, num(&p, 0, (uint64_t)r->guarded_ttl_ms));
  int st = run(r, &p, &renew_mark_script, 2, (int)bgi_pslot(part, pr->live.parts), deadline_ns, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lost(r, "lease renewal (a partition's mark expired)", err);
  return st;
}

/* One run of the write script on staged partition `part` (the keeper's key room when keeper): its
 * reply's code in *code. */
static int stage_write(bg_rotation *r, int keeper, uint32_t part, size_t offset, const uint8_t *data, size_t len,
                       uint64_t must_have, uint64_t deadline_ns, long long *code, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {.flags = bgi_call_flags_for_payload(len)};
  pkeys_in(r, &p, keeper, &pr->next, part, (char[]){BGI_PKEY_META, BGI_PKEY_BITMAP, 0});
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, (uint64_t)r->guarded_ttl_ms));
  sarg(&p, 2, num(&p, 1, offset));
  arg(&p, 3, (const char *)data, len);
  sarg(&p, 4, num(&p, 2, must_have));
  int st = run(r, &p, &write_script, 5, (int)bgi_pslot(part, pr->next.parts), deadline_ns, &s, err);
  *code = s.ints[0];
  return st;
}

int bgi_prot_step_write(bg_rotation *r, uint32_t part, size_t offset, const uint8_t *data, size_t len, bgi_err *err) {
  bgi_prot *pr = r->part;
  long long code = 0;
  int st = stage_write(r, 0, part, offset, data, len, pr->written[part], 0, &code, err);
  if (st == BG_OK && code != 1) return vanished(r, &pr->next, part, "upload", err);
  if (st == BG_OK && len && offset + len > pr->written[part]) pr->written[part] = offset + len;
  return st;
}

int bgi_prot_renew(bg_rotation *r, uint64_t deadline_ns, bgi_err *err) {
  bgi_prot *pr = r->part;
  int phase = atomic_load(&pr->phase), st = BG_OK;
  /* a locked rotation's rewritten partitions have no mark left */
  for (uint32_t i = atomic_load(&pr->done); phase < BGI_PROT_DRAINING && i < pr->live.parts && st == BG_OK; i++)
    st = renew_mark(r, i, deadline_ns, err);
  /* the renewal of a stage is a write of no bytes that checks nothing of its length (written[] is
   * the committing thread's) */
  for (uint32_t i = 0; phase < BGI_PROT_PERSISTED && i < pr->next.parts && st == BG_OK; i++) {
    long long code = 0;
    st = stage_write(r, 1, i, 0, (const uint8_t *)"", 0, 0, deadline_ns, &code, err);
    if (st == BG_OK && code != 1) st = lost(r, "lease renewal (a staged partition expired)", err);
  }
  return st;
}

int bgi_prot_step_stage(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  pkeys(r, &p, &pr->next, part, (char[]){BGI_PKEY_META, BGI_PKEY_BITMAP, BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, (uint64_t)r->guarded_ttl_ms));
  sarg(&p, 2, num(&p, 1, bgi_cfg_size(pr->next.cfg)));
  sarg(&p, 3, num(&p, 2, bgi_cfg_k(pr->next.cfg)));
  sarg(&p, 4, num(&p, 3, pr->next.parts));
  return run(r, &p, &stage_script, 5, (int)bgi_pslot(part, pr->next.parts), 0, &s, err);
}

int bgi_prot_step_persist(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  pkeys(r, &p, &pr->next, part, (char[]){BGI_PKEY_META, BGI_PKEY_BITMAP, 0});
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, pr->written[part]));
  int st = run(r, &p, &persist_script, 2, (int)bgi_pslot(part, pr->next.parts), 0, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return vanished(r, &pr->next, part, "commit", err);
  return st;
}

/* The drained list: h1, h2, h1, h2, ... as decimals. */
static int take_delta(void *ctx, const bgi_reply *list, bgi_err *err) {
  bgi_prot *pr = ctx;
  size_t n = list->elements / 2;
  if (pr->ndelta + n > pr->cap) {
    size_t cap = pr->cap ? pr->cap : 1024;
    while (cap < pr->ndelta + n) cap *= 2;
    uint64_t(*d)[2] = realloc(pr->delta, cap * sizeof *d);
    if (!d) return bgi_err_set(err, BG_ENOMEM, "out of memory for the rotation's delta");
    pr->delta = d, pr->cap = cap;
  }
  for (size_t i = 0; i < n; i++) {
    const bgi_reply *a = list->element[2 * i], *b = list->element[2 * i + 1];
    if (a->type != REDIS_REPLY_STRING || b->type != REDIS_REPLY_STRING ||
        bgi_parse_u64(a->str, a->len, &pr->delta[pr->ndelta][0]) != 0 ||
        bgi_parse_u64(b->str, b->len, &pr->delta[pr->ndelta][1]) != 0)
      return bgi_err_set(err, BG_ECORRUPT, "rotation: a partition's delta holds something other than item hashes");
    pr->ndelta++;
  }
  return BG_OK;
}

int bgi_prot_step_drain(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {.take_list = take_delta, .take_ctx = pr};
  pkeys(r, &p, &pr->live, part, (char[]){BGI_PKEY_META, BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 0, pr->mark);
  sarg(&p, 1, num(&p, 0, pr->next.gen));
  int st = run(r, &p, &drain_script, 2, (int)bgi_pslot(part, pr->live.parts), 0, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lost(r, "commit (a partition's mark expired)", err);
  return st;
}

int bgi_prot_step_unmark(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  pkeys(r, &p, &pr->live, part, (char[]){BGI_PKEY_META, BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 0, pr->mark);
  sarg(&p, 1, num(&p, 0, pr->next.gen));
  return run(r, &p, &unmark_script, 2, (int)bgi_pslot(part, pr->live.parts), 0, &s, err);
}

int bgi_prot_step_flip(bg_rotation *r, int64_t *config_ttl_ms, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {.durable = 1};
  central_keys(r, &p);
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, pr->live.gen));
  sarg(&p, 2, num(&p, 1, pr->next.gen));
  int st = run(r, &p, &flip_script, 3, r->f->slot, 0, &s, err);
  if (st == BG_OK && s.ints[0] == 2)
    return bgi_err_set(err, BG_ECONFIG, "commit: the partitioned filter \"%s\" was made again during the rotation; "
                       "this rotation's generation was not made live", r->f->name.s);
  if (st == BG_OK && s.ints[0] != 1) return lost(r, "commit", err);
  if (st == BG_OK) *config_ttl_ms = s.nints > 1 ? s.ints[1] : -1;
  return st;
}

int bgi_prot_step_release(bg_rotation *r, int *live, bgi_err *err) {
  pstep p;
  bgi_step s = {0};
  central_keys(r, &p);
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, r->part->next.gen));
  sarg(&p, 2, r->part->in_place ? "1" : "0");
  int st = run(r, &p, &release_script, 3, r->f->slot, 0, &s, err);
  *live = st == BG_OK && s.ints[0] == 2;
  return st;
}

int bgi_prot_sweep(bg_filter *f, const bgi_pgen *g, int op, int64_t ttl_ms, bgi_err *err) {
  bgi_psweep *sw = malloc(sizeof *sw);   /* a round's lanes: too big for a stack */
  if (!sw) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_psweep_init(sw, f, g, op, ttl_ms, 0);
  int st = bgi_task_run_with(&sw->t, &bgi_req_executor, err);
  free(sw);
  return st;
}

int bgi_prot_delete_gen(bg_filter *f, const bgi_pgen *g, bgi_err *err) {
  int st = bgi_prot_sweep(f, g, BGI_PSWEEP_DELETE, 0, err);
  if (st != BG_OK) return st;
  char gen[24];
  snprintf(gen, sizeof gen, "%llu", (unsigned long long)g->gen);
  const char *argv[] = {f->config_key.s, gen};
  size_t lens[] = {f->config_key.len, strlen(gen)};
  bgi_step s = {.script = &forget_script, .nkeys = 1, .nargs = 1, .argv = argv, .lens = lens};
  return bgi_step_run(f->client, f->slot, 0, &s, err);
}

/* ---- a locked rotation: the live partitions rewritten in place, one at a time ---------------- */

int bgi_prot_step_rewrite_start(bg_rotation *r, uint32_t part, uint64_t *old_len, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {0};
  live_geometry(r, &p, part, (char[]){BGI_PKEY_META, BGI_PKEY_BITMAP, BGI_PKEY_MARK, 0});
  sarg(&p, 4, r->token);
  int st = run(r, &p, &rewrite_start_script, 5, (int)bgi_pslot(part, pr->live.parts), 0, &s, err);
  if (st == BG_OK && s.ints[0] == 2) return changed_under_it(r, err);
  if (st == BG_OK && s.ints[0] != 1) return lost(r, "commit (a partition's mark expired)", err);
  if (st == BG_OK) *old_len = s.nints > 1 && s.ints[1] > 0 ? (uint64_t)s.ints[1] : 0;
  return st;
}

/* One finish step with the indexes of the hashes taken so far (pr->delta). */
static int rewrite_finish(bg_rotation *r, uint32_t part, bgi_step *s, bgi_err *err) {
  bgi_prot *pr = r->part;
  uint32_t k = bgi_cfg_k(pr->live.cfg);
  uint64_t size = bgi_cfg_size(pr->live.cfg);
  size_t n = pr->ndelta * k, nkeys = 4, nargs = 4 + n;
  const char **argv = malloc((nkeys + nargs) * sizeof *argv);
  size_t *lens = malloc((nkeys + nargs) * sizeof *lens);
  char *nums = malloc(n * 21 + 1);
  uint64_t idx[BG_MAX_HASH_ITERATIONS];
  pstep p;
  int st;
  if (!argv || !lens || !nums) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto cleanup;
  }
  pkeys(r, &p, &pr->live, part, (char[]){BGI_PKEY_META, BGI_PKEY_BITMAP, BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
  sarg(&p, 0, pr->mark);
  sarg(&p, 1, r->token);
  sarg(&p, 2, num(&p, 0, pr->written[part]));
  sarg(&p, 3, num(&p, 1, k));
  memcpy(argv, p.argv, (nkeys + 4) * sizeof *argv);
  memcpy(lens, p.lens, (nkeys + 4) * sizeof *lens);
  char *at = nums;
  for (size_t i = 0, a = nkeys + 4; i < pr->ndelta; i++) {
    bgi_indexes_from_hash(pr->delta[i][0], pr->delta[i][1], size, k, idx);
    for (uint32_t j = 0; j < k; j++, a++) {
      int len = snprintf(at, 21, "%llu", (unsigned long long)idx[j]);
      argv[a] = at, lens[a] = (size_t)len;
      at += len;
    }
  }
  *s = (bgi_step){.script = &rewrite_finish_script, .nkeys = nkeys, .nargs = nargs, .argv = argv, .lens = lens,
                  .durable = 1};
  st = bgi_step_run(r->f->client, (int)bgi_pslot(part, pr->live.parts), 0, s, err);
  if (st == BG_OK && s->ints[0] == 3) st = vanished(r, &pr->live, part, "commit", err);
  else if (st == BG_OK && s->ints[0] == 0) st = lost(r, "commit (a partition's mark expired)", err);
cleanup:
  free(argv);
  free(lens);
  free(nums);
  return st;
}

int bgi_prot_step_rewrite_finish(bg_rotation *r, uint32_t part, bgi_err *err) {
  bgi_prot *pr = r->part;
  /* bounded: adds arriving faster than this loop takes them fail the rotation (nothing is lost:
   * the partition stays being rewritten, its queries wait, until the next rotation) */
  for (int i = 0; i < 64; i++) {
    pstep p;
    bgi_step take = {.take_list = take_delta, .take_ctx = pr};
    pr->ndelta = 0;
    pkeys(r, &p, &pr->live, part, (char[]){BGI_PKEY_MARK, BGI_PKEY_DELTA, 0});
    sarg(&p, 0, pr->mark);
    int st = run(r, &p, &rewrite_take_script, 1, (int)bgi_pslot(part, pr->live.parts), 0, &take, err);
    if (st == BG_OK && take.ints[0] != 1) st = lost(r, "commit (a partition's mark expired)", err);
    bgi_step fin;
    /* under the keeper's lock: the step that deletes the mark, and the count that stops its renewal */
    pthread_mutex_lock(&pr->mu);
    if (st == BG_OK) st = rewrite_finish(r, part, &fin, err);
    int done = st == BG_OK && fin.ints[0] == 1;
    if (done) atomic_store(&pr->done, part + 1);
    pthread_mutex_unlock(&pr->mu);
    if (st != BG_OK || done) return st;
  }
  return bgi_err_set(err, BG_EROTATING, "commit: adds to \"%s\" kept arriving faster than the locked rotation could "
                     "take them; rotate again", r->f->name.s);
}

int bgi_prot_step_rewrite_done(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  pstep p;
  bgi_step s = {.durable = 1};
  central_keys(r, &p);
  sarg(&p, 0, r->token);
  sarg(&p, 1, num(&p, 0, pr->live.gen));
  sarg(&p, 2, num(&p, 1, (uint64_t)r->n));
  sarg(&p, 3, r->fpp);
  int st = run(r, &p, &rewrite_done_script, 4, r->f->slot, 0, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lost(r, "commit", err);
  return st;
}
