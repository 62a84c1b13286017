/* Internal: the Lua steps of a filter (one atomic server-side step each). */
#ifndef BG_INTERNAL_FILTER_SCRIPTS_H
#define BG_INTERNAL_FILTER_SCRIPTS_H

#include "redis/script.h"

/*
 * add: KEYS = config, bitmap; ARGV = size, hashIterations, then k indexes per item.
 * Returns {1, items_with_a_new_bit}, {0} when not initialized, or {2, size, hashIterations}
 * when the config differs from ARGV (nothing is written then).
 */
extern bgi_script bgi_script_add;
/*
 * init (Redisson's tryInit): KEYS = config, bitmap; ARGV = size, hashIterations,
 * expectedInsertions, falseProbability. Returns {1} if it wrote the config, else
 * {0, size, hashIterations} of the existing one.
 */
extern bgi_script bgi_script_init;

#endif
