#include "filter/scripts.h"

#include "filter/filter.h"

/*
 * Compared as strings, like Redisson's own scripts do: size and hashIterations are always
 * written as plain decimals, so equal numbers are equal strings. Bits are set with BITFIELD in
 * slices (one command per ~1024 bits, not one SETBIT per bit) small enough for Lua's unpack.
 * While a SWAP rotation runs (its lease hash exists), the item's bit offsets for the next
 * generation are appended to the delta list too, in the same step: the rotation sets them inside
 * its atomic swap (csrc/rotation/delta.h). A list, not a bitmap: its cost follows the adds, where
 * a bitmap's first SETBIT zero-filled up to 12 MB and the commit's BITOP went over all of it.
 * While a LOCKED rotation rewrites the live bitmap (its mark is in the config), the add goes to
 * the delta only, and counts as newly added.
 */
bgi_script bgi_script_add = {
  .name = "add",
  .body =
    "local cfg = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_REBUILD_FIELD "')\n"
    "if not cfg[1] or not cfg[2] then return {0} end\n"
    "local rot = redis.call('HMGET', KEYS[3], '" BGI_LEASE_NEXT_SIZE "', '" BGI_LEASE_NEXT_K "', '" BGI_LEASE_TTL "')\n"
    /* a changed config comes with the rotation's state, so one round trip learns both */
    "if cfg[1] ~= ARGV[1] or cfg[2] ~= ARGV[2] then return {2, cfg[1], cfg[2], rot[1], rot[2]} end\n"
    "local active = rot[1] and 1 or 0\n"
    "if active == 1 and (rot[1] ~= ARGV[3] or rot[2] ~= ARGV[4]) then return {3, rot[1], rot[2]} end\n"
    "local k = tonumber(ARGV[2])\n"
    "local nk = tonumber(ARGV[4])\n"
    "local n = (#ARGV - 4) / (k + nk)\n"
    BGI_LUA_SETBITS
    /* an in-place rebuild is rewriting the live bitmap for the next parameters: bits for the
     * current ones would stay in it as noise; the delta alone carries the item into it */
    "local rewriting = cfg[3] and active == 1\n"
    "local added = n\n"
    "if not rewriting then added = setbits(KEYS[2], 5, 4 + n * k, k) end\n"
    "if active == 1 and n > 0 then\n"
    "  local last = 4 + n * (k + nk)\n"
    "  for i = 5 + n * k, last, 1024 do\n"
    "    redis.call('RPUSH', KEYS[4], unpack(ARGV, i, math.min(i + 1023, last)))\n"
    "  end\n"
    /* never shorter than the lease still has to run: the rotation it guards needs the delta
     * until it commits (issue 11: a 1 s staging TTL under a 30 s lease lost an add) */
    "  local ttl = tonumber(rot[3]) or 0\n"
    "  local lease = redis.call('PTTL', KEYS[3])\n"
    "  if lease > ttl then ttl = lease end\n"
    "  if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end\n"
    "end\n"
    "return {1, added, active}\n",
};

bgi_script bgi_script_init = {
  .name = "init",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
    "  local cfg = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_PCONF_KIND "')\n"
    "  return {0, cfg[1], cfg[2], cfg[3]}\n"
    "end\n"
    "local t = redis.call('TYPE', KEYS[2])['ok']\n"
    "if t ~= 'none' and t ~= 'string' then\n"
    "  return redis.error_reply('WRONGTYPE the bitmap key ' .. KEYS[2] .. ' holds a ' .. t)\n"
    "end\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_SIZE "', ARGV[1])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_K "', ARGV[2])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_N "', ARGV[3])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_FPP "', ARGV[4])\n"
    "return {1}\n",
};

/* The partition's meta checked and its bits set in one step: a generation deleted (or made again
 * with another geometry) is never written to, and no key of it is made again. While a rotation's
 * mark is there the items' hashes go to the delta in the same step (the rotation drains it into
 * the generation it builds); once a commit set the meta's forward generation, the answer names it
 * and the caller adds the items there too before it acknowledges them. */
bgi_script bgi_script_padd = {
  .name = "partition add",
  .body =
    "local m = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_PCONF_PARTITIONS "', "
    "'" BGI_PMETA_FORWARD "')\n"
    "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] or m[3] ~= ARGV[3] then return {0, 0, 0} end\n"
    BGI_LUA_SETBITS
    "local k = tonumber(ARGV[2])\n"
    "local n = tonumber(ARGV[4])\n"
    "local added = setbits(KEYS[2], 5 + 2 * n, #ARGV, k)\n"
    "if m[4] then return {2, added, tonumber(m[4])} end\n"
    "local mark = redis.call('GET', KEYS[3])\n"
    "if mark then\n"
    "  redis.call('RPUSH', KEYS[4], unpack(ARGV, 5, 4 + 2 * n))\n"
    "  redis.call('PEXPIRE', KEYS[4], string.match(mark, ':(%d+)$'))\n"
    "end\n"
    "return {1, added, 0}\n",
};

/* claim: KEYS = config; ARGV = token, claim ms, gen, P, partition size, total size, k, n, fpp */
bgi_script bgi_script_pinit_claim = {
  .name = "partitioned init (claim)",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end\n"
    "local g = '" BGI_PCONF_GEN_PREFIX "' .. ARGV[3] .. ':'\n"
    "redis.call('HSET', KEYS[1], '" BGI_PCONF_KIND "', '" BGI_PCONF_KIND_PARTITIONED "', '" BGI_PCONF_CLAIM "', ARGV[1],\n"
    "  g .. '" BGI_PCONF_PARTITIONS "', ARGV[4], g .. '" BGI_PCONF_PSIZE "', ARGV[5], g .. '" BGI_PCONF_TOTAL "', ARGV[6],\n"
    "  g .. '" BGI_CONFIG_K "', ARGV[7], g .. '" BGI_CONFIG_N "', ARGV[8], g .. '" BGI_CONFIG_FPP "', ARGV[9])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return {1}\n",
};

/* commit: KEYS = config; ARGV = token, gen */
bgi_script bgi_script_pinit_commit = {
  .name = "partitioned init (commit)",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_PCONF_CLAIM "') ~= ARGV[1] then return {0} end\n"
    "redis.call('HSET', KEYS[1], '" BGI_PCONF_LIVE "', ARGV[2])\n"
    "redis.call('HDEL', KEYS[1], '" BGI_PCONF_CLAIM "')\n"
    "redis.call('PERSIST', KEYS[1])\n"
    "return {1}\n",
};
