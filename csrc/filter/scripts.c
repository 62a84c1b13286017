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
    "local function setbits(key, first, last, width)\n"
    "  local added = 0\n"
    "  local per = math.max(1, math.floor(1024 / width)) * width\n"
    "  local i = first\n"
    "  while i <= last do\n"
    "    local stop = math.min(i + per - 1, last)\n"
    "    local ops = {}\n"
    "    for j = i, stop do\n"
    "      local o = (j - i) * 4\n"
    "      ops[o + 1] = 'SET'; ops[o + 2] = 'u1'; ops[o + 3] = ARGV[j]; ops[o + 4] = '1'\n"
    "    end\n"
    "    local old = redis.call('BITFIELD', key, unpack(ops))\n"
    "    for j = 1, #old, width do\n"
    "      for b = j, j + width - 1 do\n"
    "        if old[b] == 0 then added = added + 1; break end\n"
    "      end\n"
    "    end\n"
    "    i = stop + 1\n"
    "  end\n"
    "  return added\n"
    "end\n"
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
