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
 * {0, size, hashIterations} of the existing one.
 */
extern bgi_script bgi_script_init;

/*
 * A partitioned filter's add, on one partition (filter/padd.c): KEYS = meta, bitmap, rotation
 * marker, delta; ARGV = size, hashIterations, partitions (the geometry the indexes are for),
 * with_hashes ("1": each item's h1 and h2 follow its indexes' block), then k indexes per item,
 * then (with_hashes) h1, h2 per item. Returns {0} when the meta is gone (the generation was
 * retired), {2, size, hashIterations, partitions} when the geometry differs, {3} when a rotation
 * records the items and the hashes were not sent (nothing is written in those cases), else
 * {1, items_with_a_new_bit, recorded (1: in the delta), forward generation or "0"}.
 */
extern bgi_script bgi_script_padd;

#endif
