# bench_hash: HighwayHash ns/item per implementation (see bench_hash.c). Sees csrc/ for bgi_*.
add_executable(bench_hash ${CMAKE_CURRENT_LIST_DIR}/bench_hash.c)
target_include_directories(bench_hash PRIVATE ${PROJECT_SOURCE_DIR}/csrc)
target_compile_options(bench_hash PRIVATE -Wall -Wextra)
target_link_libraries(bench_hash PRIVATE bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
