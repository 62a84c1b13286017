# The C worker of the cross-language race suite (tests/race, driven by pytest: see its README).
# include()d from the top-level CMakeLists.txt when BG_BUILD_TESTS is ON; links the shared
# library through the public headers only, as a downstream program would.
add_executable(bg_race_worker
  ${PROJECT_SOURCE_DIR}/tests/race/c/race_worker.c
  ${PROJECT_SOURCE_DIR}/tests/race/c/worker_kit.c
  ${PROJECT_SOURCE_DIR}/tests/race/c/fault.c)
target_link_libraries(bg_race_worker PRIVATE bloomguard Threads::Threads)
target_include_directories(bg_race_worker PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(bg_race_worker PRIVATE _GNU_SOURCE)
target_compile_options(bg_race_worker PRIVATE ${BG_WARNINGS})
set_target_properties(bg_race_worker PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/race
  BUILD_RPATH "$<TARGET_FILE_DIR:bloomguard>")

# The cluster scenarios' negative control (tests/race/c/fault.h): the same worker with --fault,
# which reaches into the client's internal layout - so it links the static library and sees csrc/.
add_executable(bg_race_worker_fault
  ${PROJECT_SOURCE_DIR}/tests/race/c/race_worker.c
  ${PROJECT_SOURCE_DIR}/tests/race/c/worker_kit.c
  ${PROJECT_SOURCE_DIR}/tests/race/c/fault.c)
target_link_libraries(bg_race_worker_fault PRIVATE bloomguard_static PkgConfig::HIREDIS Threads::Threads m)
target_include_directories(bg_race_worker_fault PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/csrc)
target_compile_definitions(bg_race_worker_fault PRIVATE _GNU_SOURCE BG_RACE_FAULT)
target_compile_options(bg_race_worker_fault PRIVATE ${BG_WARNINGS})
set_target_properties(bg_race_worker_fault PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/race)
