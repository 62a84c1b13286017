# The bloomguard command (csrc/cli). include()d from the top-level CMakeLists.txt when
# BG_BUILD_CLI is ON; links the shared library and uses only the public headers.
add_executable(bloomguard_cli
  ${PROJECT_SOURCE_DIR}/csrc/cli/main.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/commands.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/items.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/output.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/secret.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/library.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/rotate.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/lock_cmd.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/demo_main.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/demo_server.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/demo_scenario.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/demo_latency.c
  ${PROJECT_SOURCE_DIR}/csrc/cli/demo_svg.c)
# Threads: the demo's query threads
target_link_libraries(bloomguard_cli PRIVATE bloomguard m Threads::Threads)
target_include_directories(bloomguard_cli PRIVATE ${PROJECT_SOURCE_DIR}/include)
# getline() is POSIX 2008; the project builds strict C11 (no GNU extensions).
target_compile_definitions(bloomguard_cli PRIVATE _POSIX_C_SOURCE=200809L)
target_compile_options(bloomguard_cli PRIVATE ${BG_WARNINGS})
set_target_properties(bloomguard_cli PROPERTIES
  OUTPUT_NAME bloomguard
  # find libbloomguard.so next to it in the build tree, and in ../lib once installed
  BUILD_RPATH "$<TARGET_FILE_DIR:bloomguard>"
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS bloomguard_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
