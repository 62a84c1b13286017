#include "filter/scripts.h"

/*
 * Compared as strings, like Redisson's own scripts do: size and hashIterations are always
 * written as plain decimals, so equal numbers are equal strings. Bits are set with BITFIELD in
 * slices (one command per ~1024 bits, not one SETBIT per bit) small enough for Lua's unpack.
 */
bgi_script bgi_script_add = {
  .name = "add",
  .body =
    "local cfg = redis.call('HMGET', KEYS[1], 'size', 'hashIterations')\n"
    "if not cfg[1] or not cfg[2] then return {0} end\n"
    "if cfg[1] ~= ARGV[1] or cfg[2] ~= ARGV[2] then return {2, cfg[1], cfg[2]} end\n"
    "local k = tonumber(ARGV[2])\n"
    "local per = math.max(1, math.floor(1024 / k)) * k\n"
    "local added = 0\n"
    "local i = 3\n"
    "while i <= #ARGV do\n"
    "  local last = math.min(i + per - 1, #ARGV)\n"
    "  local ops = {}\n"
    "  for j = i, last do\n"
    "    local o = (j - i) * 4\n"
    "    ops[o + 1] = 'SET'; ops[o + 2] = 'u1'; ops[o + 3] = ARGV[j]; ops[o + 4] = '1'\n"
    "  end\n"
    "  local old = redis.call('BITFIELD', KEYS[2], unpack(ops))\n"
    "  for j = 1, #old, k do\n"
    "    for b = j, j + k - 1 do\n"
    "      if old[b] == 0 then added = added + 1; break end\n"
    "    end\n"
    "  end\n"
    "  i = last + 1\n"
    "end\n"
    "return {1, added}\n",
};

bgi_script bgi_script_init = {
  .name = "init",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
    "  local cfg = redis.call('HMGET', KEYS[1], 'size', 'hashIterations')\n"
    "  return {0, cfg[1], cfg[2]}\n"
    "end\n"
    "local t = redis.call('TYPE', KEYS[2])['ok']\n"
    "if t ~= 'none' and t ~= 'string' then\n"
    "  return redis.error_reply('WRONGTYPE the bitmap key ' .. KEYS[2] .. ' holds a ' .. t)\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'size', ARGV[1])\n"
    "redis.call('HSET', KEYS[1], 'hashIterations', ARGV[2])\n"
    "redis.call('HSET', KEYS[1], 'expectedInsertions', ARGV[3])\n"
    "redis.call('HSET', KEYS[1], 'falseProbability', ARGV[4])\n"
    "return {1}\n",
};
