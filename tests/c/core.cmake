# Core tests: client, filter operations, bad input, Redisson's bitmap example (real redis-server).
bg_add_test(test_filter SOURCES test_filter.c LABELS redis)
bg_add_test(test_url SOURCES test_url.c INTERNAL)
bg_add_test(test_url_fuzz SOURCES test_url_fuzz.c INTERNAL)
bg_add_test(test_resp SOURCES test_resp.c INTERNAL)
bg_add_test(test_bad_input SOURCES test_bad_input.c LABELS redis)
bg_add_test(test_bitmap_example SOURCES test_bitmap_example.c LABELS redis)
bg_add_test(test_tracking SOURCES test_tracking.c INTERNAL LABELS redis)
bg_add_test(test_pipeline SOURCES test_pipeline.c INTERNAL LABELS redis)
# the same cases on pooled connections (BG_OPT_PIPELINE 0)
add_test(NAME test_tracking_nopipe COMMAND test_tracking)
set_tests_properties(test_tracking_nopipe PROPERTIES TIMEOUT 300 LABELS redis ENVIRONMENT BG_TEST_PIPELINE=0)

# Runs a command with its own redis-server ("@URL@" in the arguments becomes its URL).
add_executable(with_redis with_redis.c)
target_link_libraries(with_redis PRIVATE bg_test_support)

# The C example in README.md, extracted at configure time, compiled and run against a real server:
# the README cannot drift from code that works.
file(READ ${PROJECT_SOURCE_DIR}/README.md _readme)
string(REGEX MATCH "<!-- example: quickstart.c -->[\r\n]+```c[\r\n]+(.*)```[\r\n]+<!-- end example -->" _m "${_readme}")
if(NOT CMAKE_MATCH_1)
  message(FATAL_ERROR "README.md lost its quickstart.c example block")
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/readme_quickstart.c "${CMAKE_MATCH_1}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md)
add_executable(readme_quickstart ${CMAKE_CURRENT_BINARY_DIR}/readme_quickstart.c)
target_link_libraries(readme_quickstart PRIVATE bloomguard)
add_test(NAME readme_quickstart COMMAND with_redis $<TARGET_FILE:readme_quickstart> @URL@)
set_tests_properties(readme_quickstart PROPERTIES TIMEOUT 60 LABELS redis)

# The bloomguard command's tests (tests/cli/run.sh BINARY URL).
if(BG_BUILD_CLI)
  add_test(NAME cli COMMAND with_redis bash ${PROJECT_SOURCE_DIR}/tests/cli/run.sh $<TARGET_FILE:bloomguard_cli> @URL@)
  set_tests_properties(cli PROPERTIES TIMEOUT 300 LABELS "redis;cli")
  # issue 11: mutated argv holding a password; no output may contain it (no server: port 1)
  find_program(BG_PYTHON3 python3)
  if(BG_PYTHON3)
    add_test(NAME cli_argv_fuzz COMMAND ${BG_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/cli/argv_fuzz.py
             $<TARGET_FILE:bloomguard_cli> 400)
    set_tests_properties(cli_argv_fuzz PROPERTIES TIMEOUT 300 LABELS cli)
  endif()
endif()
# BG_OPT_WAIT_REPLICAS against a master alone and with a real replica.
bg_add_test(test_durability SOURCES test_durability.c LABELS redis)
