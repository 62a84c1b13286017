# bench_rotate: (1) rebuild of N items (default 10M, p = 0.01) with a SWAP rotation vs a Redisson-style
# population (DEL + tryInit + one EVALSHA of Redisson's add script per 1,000 items), measured in the same
# run, bitmaps compared byte for byte; (2) single-item contains latency (p50/p99/p999/max) while SWAP
# rotations of the same filter run back to back, against the same load idle, with the server-side time
# of every rotation step (SLOWLOG). Public API plus hiredis; starts its own redis-server unless --url.
# bg_bench_util is defined in contains.cmake (the glob includes the *.cmake files in alphabetical order).
add_executable(bench_rotate ${CMAKE_CURRENT_LIST_DIR}/bench_rotate.c)
target_compile_options(bench_rotate PRIVATE -Wall -Wextra)
target_link_libraries(bench_rotate PRIVATE bg_bench_util bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
