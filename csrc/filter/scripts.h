/* Internal: the Lua steps of a filter (one atomic server-side step each). */
#ifndef BG_INTERNAL_FILTER_SCRIPTS_H
#define BG_INTERNAL_FILTER_SCRIPTS_H

#include "redis/script.h"

/*
 * setbits(key, first, last, width): sets the bits at offsets ARGV[first..last] with BITFIELD, in
 * slices (one command per ~1024 bits, small enough for Lua's unpack); returns how many groups of
 * `width` consecutive offsets (an item's k) had a bit that was 0.
 */
#define BGI_LUA_SETBITS \
    "local function setbits(key, first, last, width)\n"\
    "  local added = 0\n"\
    "  local per = math.max(1, math.floor(1024 / width)) * width\n"\
    "  local i = first\n"\
    "  while i <= last do\n"\
    "    local stop = math.min(i + per - 1, last)\n"\
    "    local ops = {}\n"\
    "    for j = i, stop do\n"\
    "      local o = (j - i) * 4\n"\
    "      ops[o + 1] = 'SET'; ops[o + 2] = 'u1'; ops[o + 3] = ARGV[j]; ops[o + 4] = '1'\n"\
    "    end\n"\
    "    local old = redis.call('BITFIELD', key, unpack(ops))\n"\
    "    for j = 1, #old, width do\n"\
    "      for b = j, j + width - 1 do\n"\
    "        if old[b] == 0 then added = added + 1; break end\n"\
    "      end\n"\
    "    end\n"\
    "    i = stop + 1\n"\
    "  end\n"\
    "  return added\n"\
    "end\n"

/*
 * add: KEYS = config, bitmap, rotation lease, delta; ARGV = size, hashIterations, next_size,
 * next_k (both "0" when no rotation is known), then k live indexes per item, then next_k next
 * indexes per item. Returns {1, items_with_a_new_bit, rotation_active}, {0} when not initialized,
 * {2, size, hashIterations, next_size, next_k} when the config differs from ARGV (the next pair is
 * nil when no rotation runs), or {3, next_size, next_k} when a
 * rotation runs to another config than ARGV's (nothing is written in those cases).
 */
extern bgi_script bgi_script_add;
/*
 * init (Redisson's tryInit): KEYS = config, bitmap; ARGV = size, hashIterations,
 * expectedInsertions, falseProbability. Returns {1} if it wrote the config, else
 * {0, size, hashIterations, bgKind} of the existing one (bgKind: a partitioned filter's).
 */
extern bgi_script bgi_script_init;

/*
 * A partitioned filter's add, on one partition (filter/padd.c): KEYS = meta, bitmap, mark, delta;
 * ARGV = size, hashIterations, partitions (the geometry the indexes are for), the item count n,
 * then h1, h2 of each item, then k indexes per item. Returns {0, 0, 0} when the meta is gone or
 * holds another geometry (nothing written), {1, items_with_a_new_bit, 0}, or
 * {2, items_with_a_new_bit, G}: written, and a commit moves the filter to generation G.
 */
extern bgi_script bgi_script_padd;

/*
 * A partitioned filter's init (filter/psweep.c), both on the central config. claim: KEYS = config;
 * ARGV = token, claim TTL ms, generation, P, partition size, total size, k, n, fpp: when no config
 * exists, writes the kind, the token and the generation's record with that TTL and returns {1},
 * else {0}. commit: KEYS = config; ARGV = token, generation: when the token is still there, makes
 * the generation live, drops the token and the TTL and returns {1}, else {0}.
 */
extern bgi_script bgi_script_pinit_claim;
extern bgi_script bgi_script_pinit_commit;

#endif
