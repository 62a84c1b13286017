#include "native_fixture.h"

#include "server_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *bgt_redisbloom_path(void) {
  int rc = 0;
  const char *path = bgt_redisbloom_module(&rc);
  if (!path) {
    fprintf(stderr, "native fixture: scripts/redisbloom.sh gave no redisbloom.so (exit %d): the native tests need "
                    "it (set BG_REDISBLOOM to a module's path, or let the script install it from PyPI)\n", rc);
    exit(2);
  }
  return path;
}

void bgt_redis_start_bloom(bgt_redis *r, const char *const *extra_args) {
  const char *args[32] = {"--loadmodule", bgt_redisbloom_path()};
  size_t n = 2;
  for (size_t i = 0; extra_args && extra_args[i] && n < 31; i++) args[n++] = extra_args[i];
  args[n] = NULL;
  bgt_redis_start(r, args);
}
