# Library sources outside csrc/hash (which has its own hash.cmake for per-file SIMD flags).
target_sources(bloomguard_objects PRIVATE
  csrc/common/errors.c
  csrc/common/errbuf.c
  csrc/common/options.c
  csrc/common/version.c
  csrc/redis/url.c
  csrc/redis/keyslot.c
  csrc/redis/resp.c
  csrc/redis/reply.c
  csrc/redis/conn.c
  csrc/redis/pool.c
  csrc/redis/sha1.c
  csrc/redis/script.c
  csrc/call.c
  csrc/client.c
  csrc/filter/config.c
  csrc/filter/filter.c
  csrc/filter/query.c
  csrc/filter/add.c
  csrc/filter/admin.c
  csrc/filter/scripts.c
  csrc/rotation/bitmap.c
  csrc/rotation/lease.c
  csrc/rotation/steps.c
  csrc/rotation/rotation.c
)
