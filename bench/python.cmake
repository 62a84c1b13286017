# bench_c_batch: the C side of bench_python.py (Python contains_many vs the same call from C, one
# connection each, interleaved slices). It is driven over stdin/stdout by the Python script.
add_executable(bench_c_batch ${CMAKE_CURRENT_LIST_DIR}/bench_c_batch.c)
target_compile_options(bench_c_batch PRIVATE -Wall -Wextra)
target_link_libraries(bench_c_batch PRIVATE bg_bench_util bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
