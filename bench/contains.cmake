# bench_contains: contains throughput on one connection (batches 1/100/1000) vs a raw hiredis
# pipeline of hand-built BITFIELD_RO commands, measured in the same run (see bench_contains.c).
# bench_roundtrip: the cost of one single-item round trip by command shape (PING, BITFIELD_RO,
# hand-built MULTI/HMGET/BITFIELD_RO/EXEC, EVALSHA, bg_filter_contains).
# Both use the public API plus hiredis and start their own redis-server unless --url is given.
# bench_cluster: T threads on one client, their filters on one master vs on T masters of a Redis
# Cluster (--url of a cluster; scripts/cluster.sh starts one).
# bench_transport: contains over TLS vs plain TCP, adds with BG_OPT_WAIT_REPLICAS vs without.
# bench_threads: T threads on one shared client (BG_OPT_PIPELINE) vs T raw hiredis connections, one
# BITFIELD_RO round trip per item each.
add_library(bg_bench_util STATIC ${CMAKE_CURRENT_LIST_DIR}/bench_util.c ${PROJECT_SOURCE_DIR}/csrc/cli/demo_server.c)
target_include_directories(bg_bench_util PUBLIC ${PROJECT_SOURCE_DIR}/csrc)
target_compile_options(bg_bench_util PRIVATE -Wall -Wextra)
target_link_libraries(bg_bench_util PUBLIC PkgConfig::HIREDIS)

foreach(_b bench_contains bench_roundtrip bench_cluster bench_transport bench_threads)
  add_executable(${_b} ${CMAKE_CURRENT_LIST_DIR}/${_b}.c)
  target_compile_options(${_b} PRIVATE -Wall -Wextra)
  target_link_libraries(${_b} PRIVATE bg_bench_util bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
endforeach()
