# Cross build for linux-aarch64 (glibc) with Debian's cross compilers (gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu: the HighwayHash units are C++). OpenSSL (and anything else found with
# find_package/find_library) comes from an arm64 root of Debian packages - the environment's
# BG_ARM64_ROOT, made by scripts/lib/arm64-root.sh (libssl-dev holds libssl.a and libcrypto.a for
# -DBG_OPENSSL_STATIC=ON). An environment variable, not a -D, because CMake re-reads this file in
# its try_compile projects, which see the environment but not the cache.
#   BG_ARM64_ROOT=/path/root cmake -S . -B build-aarch64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DBG_HIREDIS=vendored ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
if(NOT DEFINED ENV{BG_ARM64_ROOT} OR NOT IS_DIRECTORY "$ENV{BG_ARM64_ROOT}")
  message(FATAL_ERROR "aarch64-linux-gnu.cmake: set BG_ARM64_ROOT to an arm64 package root "
                      "(bindings/java/cross-aarch64.sh makes one with scripts/lib/arm64-root.sh)")
endif()
set(CMAKE_FIND_ROOT_PATH "$ENV{BG_ARM64_ROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # build tools are this machine's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian puts OpenSSL's configuration.h under the multiarch folder
set(CMAKE_C_FLAGS_INIT "-isystem $ENV{BG_ARM64_ROOT}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem $ENV{BG_ARM64_ROOT}/usr/include/aarch64-linux-gnu")
set(ENV{PKG_CONFIG_LIBDIR} "$ENV{BG_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "$ENV{BG_ARM64_ROOT}")
