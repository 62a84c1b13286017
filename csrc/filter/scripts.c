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
    "  local cfg = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "')\n"
    "  return {0, cfg[1], cfg[2]}\n"
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

/*
 * While a rotation's marker is on the partition and its delta not yet drained (no forward), each
 * item's hash is appended to the delta: the rotation adds it to the next generation, whatever
 * partition it lands in there. A locked partition (rewritten in place for another geometry) gets
 * no bits: the delta alone carries the item in. The delta lives as long as the marker, and at
 * least the TTL the marker names (the rotation's staging TTL).
 */
bgi_script bgi_script_padd = {
  .name = "partition add",
  .body =
    "local m = redis.call('HMGET', KEYS[1], '" BGI_CONFIG_SIZE "', '" BGI_CONFIG_K "', '" BGI_PCONF_PARTITIONS "', '"
    BGI_PMETA_MODE "', '" BGI_PMETA_FORWARD "')\n"
    "if not m[1] then return {0} end\n"
    "if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] or m[3] ~= ARGV[3] then return {2, m[1], m[2], m[3]} end\n"
    "local ttl = redis.call('HGET', KEYS[3], '" BGI_LEASE_TTL "')\n"
    "local rotating = ttl ~= false\n"
    "local record = rotating and not m[5]\n"
    "if record and ARGV[4] ~= '1' then return {3} end\n"
    "local k = tonumber(ARGV[2])\n"
    "local per = k\n"
    "if ARGV[4] == '1' then per = k + 2 end\n"
    "local n = (#ARGV - 4) / per\n"
    BGI_LUA_SETBITS
    "local added = n\n"
    "if not (rotating and m[4] == '" BGI_PMETA_MODE_LOCKED "') then added = setbits(KEYS[2], 5, 4 + n * k, k) end\n"
    "if record and n > 0 then\n"
    "  local last = 4 + n * per\n"
    "  for i = 5 + n * k, last, 1024 do\n"
    "    redis.call('RPUSH', KEYS[4], unpack(ARGV, i, math.min(i + 1023, last)))\n"
    "  end\n"
    "  local t = tonumber(ttl) or 0\n"
    "  local lease = redis.call('PTTL', KEYS[3])\n"
    "  if lease > t then t = lease end\n"
    "  if t > 0 then redis.call('PEXPIRE', KEYS[4], t) end\n"
    "end\n"
    "local rec = 0\n"
    "if record then rec = 1 end\n"
    "return {1, added, rec, m[5] or '0'}\n",
};
