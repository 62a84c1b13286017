# Library sources outside csrc/hash (which has its own hash.cmake for per-file SIMD flags).
target_sources(bloomguard_objects PRIVATE
  csrc/common/errors.c
  csrc/common/options.c
  csrc/common/version.c
  csrc/common/errbuf.c
  csrc/redis/url.c
  csrc/redis/keyslot.c
  csrc/redis/resp.c
  csrc/redis/reply.c
  csrc/redis/conn.c
  csrc/redis/pool.c
  csrc/client.c
  csrc/filter/config.c
  csrc/filter/filter.c
  csrc/filter/ops.c
)
