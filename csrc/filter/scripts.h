/* Internal: the Lua steps of a filter (one atomic server-side step each). */
#ifndef BG_INTERNAL_FILTER_SCRIPTS_H
#define BG_INTERNAL_FILTER_SCRIPTS_H

#include "redis/script.h"

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

#endif
