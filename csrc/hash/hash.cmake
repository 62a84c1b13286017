# The hashing unit: HighwayHash targets + dispatch, public hash API, Redisson sizing, and the
# Java double text forms. Included from the top-level CMakeLists (same directory scope).

set(_bg_hash_dir ${CMAKE_CURRENT_LIST_DIR})

target_sources(bloomguard_objects PRIVATE
  ${_bg_hash_dir}/hash.c
  ${_bg_hash_dir}/api.c
  ${_bg_hash_dir}/params.c
  ${_bg_hash_dir}/hh_portable.cc
  ${PROJECT_SOURCE_DIR}/csrc/common/jdouble.c
)

# C++ only for Google's header templates, and without any of its runtime: no exceptions, RTTI
# or guarded statics, so the .so needs neither libstdc++ nor __cxa_* (the library links as C).
# -fno-strict-aliasing: the packaged headers (2020 snapshot) rotate uint64_t lanes through a
# uint32_t* in HHStatePortable::UpdateRemainder; at -O2 GCC then reorders those accesses and the
# portable hash is wrong for every length > 32 that is not a multiple of 32 (upstream later
# rewrote Rotate32By). The SIMD headers have similar casts, so all three TUs get the flag.
# -O3 (except in Debug builds): roughly twice as fast for portable (~320 -> ~160 ns per 16-byte
# item on the dev box), the SIMD ones about unchanged.
set(_bg_hh_cxx_flags -fno-exceptions -fno-rtti -fno-threadsafe-statics -fno-strict-aliasing
    -Wall -Wextra $<$<NOT:$<CONFIG:Debug>>:-O3>)
if(BG_SANITIZE MATCHES "undefined")
  # -fsanitize=vptr needs RTTI; it has nothing to check here anyway (no polymorphic types).
  list(APPEND _bg_hh_cxx_flags -fno-sanitize=vptr)
endif()
set_source_files_properties(${_bg_hash_dir}/hh_portable.cc PROPERTIES
  COMPILE_OPTIONS "${_bg_hh_cxx_flags}")

# The SIMD targets exist for x86-64 only; elsewhere the portable one is all there is.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  target_sources(bloomguard_objects PRIVATE
    ${_bg_hash_dir}/hh_sse41.cc
    ${_bg_hash_dir}/hh_avx2.cc)
  set_source_files_properties(${_bg_hash_dir}/hh_sse41.cc PROPERTIES
    COMPILE_OPTIONS "${_bg_hh_cxx_flags};-msse4.1")
  set_source_files_properties(${_bg_hash_dir}/hh_avx2.cc PROPERTIES
    COMPILE_OPTIONS "${_bg_hh_cxx_flags};-mavx2")
  set_source_files_properties(${_bg_hash_dir}/hash.c PROPERTIES
    COMPILE_DEFINITIONS BGI_HH_X86)
endif()

# The .cc files above need no C++ runtime, but CMake still puts the C++ compiler's implicit
# libraries (-lstdc++ -lgcc_s ...) on the link line of every target holding C++ objects, even
# with LINKER_LANGUAGE C. Debian's gcc links --as-needed so nothing is recorded, but elsewhere the
# .so would gain a useless DT_NEEDED on libstdc++. Nothing in this directory links C++ code that
# needs them; a future unit that does would have to bring them back.
set(CMAKE_CXX_IMPLICIT_LINK_LIBRARIES "")
set(CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES "")
