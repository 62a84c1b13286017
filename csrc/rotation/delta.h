/*
 * The delta: what adds made during a rotation record for the next generation, and how a commit
 * applies it. Shared by every strategy's commit script, so they all apply it the same way.
 *
 * Recording (the add script, csrc/filter/scripts.c): while a rotation's lease hash exists, each
 * add RPUSHes its next-generation bit offsets (k' decimal strings per item) to the filter's
 * "delta" key (a list, same cluster slot) and PEXPIREs it with the rotation's staging TTL. The
 * cost grows with the adds, not with the bitmap: no zero-filled 12 MB value, no BITOP over it.
 *
 * BGI_LUA_MERGE_DELTA defines, for the script it is pasted in front of, the Lua function
 *
 *   bgi_merge_delta(target, delta[, limit]) -> number of offsets applied
 *
 *   target: a string key (the bitmap to complete; created if missing, grown as SETBIT would);
 *   delta:  a list key of bit offsets as decimal strings (missing = empty).
 *   Sets every listed bit of target to 1 with BITFIELD SET u1 (1024 offsets per command, so
 *   unpack stays far below Lua's stack limit) and consumes the list as it goes: LRANGE + LTRIM
 *   of 1024 from the head, O(total), any Redis version; the delta key no longer exists after.
 *   limit (a number): stop after about that many offsets (whole slices of 1024), leaving the
 *   rest - how a rotation drains a long delta in short steps before its final one.
 *   Both keys must be among the script's KEYS (same slot). It neither checks a lease nor sets a
 *   TTL: the calling commit script does both, in the same atomic step as its swap.
 *
 * Usage: static bgi_script s = {.body = BGI_LUA_MERGE_DELTA "... bgi_merge_delta(KEYS[2], KEYS[3]) ..."};
 *
 * Draining (bgi_rot_drain_delta, steps.c): a delta of many adds would make the final step long
 * (BITFIELD over every offset, the server blocked meanwhile), so once the bitmap is in place
 * the rotation applies it in steps of BGI_DRAIN_SLICE offsets, each checking the lease, until
 * what is left is short; the final step applies the rest, atomically with the swap.
 */
#ifndef BG_INTERNAL_ROTATION_DELTA_H
#define BG_INTERNAL_ROTATION_DELTA_H

#define BGI_LUA_MERGE_DELTA                                                          \
  "local function bgi_merge_delta(target, delta, limit)\n"                           \
  "  local applied = 0\n"                                                            \
  "  while not limit or applied < limit do\n"                                        \
  "    local idx = redis.call('LRANGE', delta, 0, 1023)\n"                           \
  "    if #idx == 0 then break end\n"                                                \
  "    local ops = {}\n"                                                             \
  "    for j = 1, #idx do\n"                                                         \
  "      local o = (j - 1) * 4\n"                                                    \
  "      ops[o + 1] = 'SET'; ops[o + 2] = 'u1'; ops[o + 3] = idx[j]; ops[o + 4] = '1'\n" \
  "    end\n"                                                                        \
  "    redis.call('BITFIELD', target, unpack(ops))\n"                                \
  "    redis.call('LTRIM', delta, #idx, -1)\n"                                       \
  "    applied = applied + #idx\n"                                                   \
  "  end\n"                                                                          \
  "  return applied\n"                                                               \
  "end\n"

/* Offsets per drain step: 8 BITFIELD commands, about a millisecond of server time. */
#define BGI_DRAIN_SLICE 8192

/*
 * The commit scripts' first step: read the lease hash KEYS[3] into r (r[1] the token; r[2..5] the
 * next generation's size, k, n and fpp) and return {0} - the lease is gone or another's - unless
 * its token is ARGV[1]. Needs the lease field names (redis/layout.h) where it is pasted.
 */
#define BGI_LUA_READ_LEASE                                                                            \
  "local r = redis.call('HMGET', KEYS[3], '" BGI_LEASE_TOKEN "', '" BGI_LEASE_NEXT_SIZE "', '"         \
  BGI_LEASE_NEXT_K "', '" BGI_LEASE_NEXT_N "', '" BGI_LEASE_NEXT_FPP "')\n"                            \
  "if r[1] ~= ARGV[1] then return {0} end\n"

#endif
