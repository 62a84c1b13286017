# bench_policy: the degrade policy layer's cost on the happy path - the same filter queried through a
# handle without a policy and one with the default policy (+ callback and snapshot in the chains),
# interleaved in the same run; plus the layer alone in ns per call (it includes csrc/ for that).
add_executable(bench_policy ${CMAKE_CURRENT_LIST_DIR}/bench_policy.c)
target_compile_options(bench_policy PRIVATE -Wall -Wextra)
target_include_directories(bench_policy PRIVATE ${PROJECT_SOURCE_DIR}/csrc)
target_link_libraries(bench_policy PRIVATE bg_bench_util bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
