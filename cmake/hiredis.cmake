# Which hiredis libbloomguard is built with: BG_HIREDIS = auto | system | vendored.
#   auto      a system hiredis >= 1.0 (pkg-config) if there is one, else vendored (the default)
#   system    the hiredis pkg-config finds, whatever its version: Debian 12's 0.14 works, but it
#             parses no RESP3, so queries never take the tracked path, and it has no TLS
#   vendored  hiredis 1.x built here from third_party/hiredis (in the repository: no download), TLS
#             part included
# Either way the rest of the build links the target PkgConfig::HIREDIS (the name pkg-config gives a
# system hiredis), and PkgConfig::HIREDIS_SSL when hiredis's TLS part (hiredis_ssl) is available;
# BG_HIREDIS_KIND is system or vendored, BG_HIREDIS_VERSION its version, BG_HIREDIS_HAVE_SSL ON/OFF.
# A vendored hiredis is compiled with hidden visibility and linked into libbloomguard.so and
# libbloomguard.a: neither exports any of its symbols, so nothing downstream needs a hiredis package.

option(BG_TLS "Build the vendored hiredis's TLS part (needs OpenSSL); OFF: no TLS, OpenSSL not looked for (cross builds)" ON)
option(BG_OPENSSL_STATIC "Link OpenSSL statically (libssl.a, libcrypto.a) into the vendored hiredis's TLS part" OFF)
set(BG_HIREDIS auto CACHE STRING "hiredis: auto (system >= 1.0, else vendored), system, vendored")
set_property(CACHE BG_HIREDIS PROPERTY STRINGS auto system vendored)
if(NOT BG_HIREDIS MATCHES "^(auto|system|vendored)$")
  message(FATAL_ERROR "BG_HIREDIS is '${BG_HIREDIS}': it must be auto, system or vendored")
endif()

set(BG_HIREDIS_KIND "")
if(NOT BG_HIREDIS STREQUAL "vendored")
  # probe under another prefix first: PkgConfig::HIREDIS must only exist if the system one is used
  pkg_check_modules(_BG_SYS_HIREDIS QUIET hiredis)
  if(_BG_SYS_HIREDIS_FOUND AND (BG_HIREDIS STREQUAL "system" OR
                                 _BG_SYS_HIREDIS_VERSION VERSION_GREATER_EQUAL 1.0))
    set(BG_HIREDIS_KIND system)
  elseif(BG_HIREDIS STREQUAL "system")
    message(FATAL_ERROR "BG_HIREDIS=system but pkg-config finds no hiredis (Debian: apt-get install "
                        "libhiredis-dev, or set PKG_CONFIG_PATH); BG_HIREDIS=auto or vendored builds "
                        "the vendored hiredis 1.x (third_party/hiredis) instead")
  else()
    if(_BG_SYS_HIREDIS_FOUND)
      set(_bg_why "the system hiredis is ${_BG_SYS_HIREDIS_VERSION} (< 1.0: no RESP3, no TLS)")
    else()
      set(_bg_why "pkg-config finds no system hiredis")
    endif()
    message(STATUS "hiredis: ${_bg_why}: building the vendored hiredis 1.x "
                   "(-DBG_HIREDIS=system to use the system one anyway)")
    set(BG_HIREDIS_KIND vendored)
  endif()
else()
  set(BG_HIREDIS_KIND vendored)
endif()

if(BG_HIREDIS_KIND STREQUAL "system")
  pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
  set(BG_HIREDIS_VERSION ${HIREDIS_VERSION})
  set(BG_HIREDIS_HAVE_SSL OFF)
  if(HIREDIS_VERSION VERSION_GREATER_EQUAL 1.0)
    pkg_check_modules(HIREDIS_SSL QUIET IMPORTED_TARGET hiredis_ssl)
    if(HIREDIS_SSL_FOUND)
      set(BG_HIREDIS_HAVE_SSL ON)
    endif()
  endif()
  if(HIREDIS_VERSION VERSION_LESS 1.0)
    message(STATUS "hiredis: system ${HIREDIS_VERSION}: queries cannot use tracking (RESP3), no TLS")
  else()
    message(STATUS "hiredis: system ${HIREDIS_VERSION}, TLS part (hiredis_ssl): ${BG_HIREDIS_HAVE_SSL}")
  endif()
else()
  # hiredis's headers are included as <hiredis/hiredis.h> (as with a system hiredis) and as
  # "hiredis.h" (hiredis's own sources): both directories go on the include path.
  set(_bg_hiredis_root ${PROJECT_SOURCE_DIR}/third_party)
  set(_bg_hiredis_src ${_bg_hiredis_root}/hiredis)
  file(STRINGS ${_bg_hiredis_src}/hiredis.h _bg_hv REGEX "#define HIREDIS_(MAJOR|MINOR|PATCH) ")
  set(BG_HIREDIS_VERSION "")
  foreach(_l IN LISTS _bg_hv)
    string(REGEX MATCH "HIREDIS_[A-Z]+ ([0-9]+)" _m "${_l}")
    string(APPEND BG_HIREDIS_VERSION "${_bg_dot}${CMAKE_MATCH_1}")
    set(_bg_dot ".")
  endforeach()

  # hiredis's own sources: no project warnings, the project's sanitizers (global options) apply.
  # async.c #includes dict.c.
  add_library(bg_hiredis_objects OBJECT)
  foreach(_f alloc async hiredis net read sds sockcompat)
    target_sources(bg_hiredis_objects PRIVATE ${_bg_hiredis_src}/${_f}.c)
  endforeach()
  target_include_directories(bg_hiredis_objects SYSTEM PUBLIC ${_bg_hiredis_root} ${_bg_hiredis_src})
  set_target_properties(bg_hiredis_objects PROPERTIES C_STANDARD 99 C_EXTENSIONS ON)
  add_library(bg_hiredis STATIC $<TARGET_OBJECTS:bg_hiredis_objects>)
  target_include_directories(bg_hiredis SYSTEM INTERFACE ${_bg_hiredis_root} ${_bg_hiredis_src})
  add_library(PkgConfig::HIREDIS ALIAS bg_hiredis)

  # BG_OPENSSL_STATIC: libssl.a/libcrypto.a instead of the shared libraries (the Python wheel and its
  # bloomguard command: they must run on systems with another OpenSSL, or none)
  if(NOT BG_TLS)
    set(OPENSSL_FOUND FALSE)   # BG_TLS=OFF: not even the host's OpenSSL (a cross build would take it)
  elseif(BG_OPENSSL_STATIC)
    set(OPENSSL_USE_STATIC_LIBS TRUE)
    find_package(OpenSSL 1.1 REQUIRED COMPONENTS SSL Crypto)
  else()
    find_package(OpenSSL 1.1 COMPONENTS SSL Crypto)
  endif()
  set(BG_HIREDIS_HAVE_SSL OFF)
  if(OPENSSL_FOUND)
    set(BG_HIREDIS_HAVE_SSL ON)
    add_library(bg_hiredis_ssl_objects OBJECT ${_bg_hiredis_src}/ssl.c)
    target_include_directories(bg_hiredis_ssl_objects SYSTEM PUBLIC ${_bg_hiredis_root} ${_bg_hiredis_src})
    target_link_libraries(bg_hiredis_ssl_objects PUBLIC OpenSSL::SSL OpenSSL::Crypto)
    set_target_properties(bg_hiredis_ssl_objects PROPERTIES C_STANDARD 99 C_EXTENSIONS ON)
    add_library(bg_hiredis_ssl STATIC $<TARGET_OBJECTS:bg_hiredis_ssl_objects>)
    target_link_libraries(bg_hiredis_ssl INTERFACE bg_hiredis OpenSSL::SSL OpenSSL::Crypto)
    add_library(PkgConfig::HIREDIS_SSL ALIAS bg_hiredis_ssl)
  elseif(NOT BG_TLS)
    message(STATUS "hiredis: BG_TLS=OFF: building the vendored hiredis without its TLS part")
  else()
    message(WARNING "hiredis: OpenSSL development files not found (Debian: apt-get install libssl-dev): "
                    "building the vendored hiredis without its TLS part")
  endif()
  message(STATUS "hiredis: vendored ${BG_HIREDIS_VERSION} (from ${_bg_hiredis_src}), "
                 "TLS part (ssl.c): ${BG_HIREDIS_HAVE_SSL}")
endif()
set(BG_HIREDIS_VERSION ${BG_HIREDIS_VERSION} CACHE INTERNAL "hiredis version libbloomguard is built with")
set(BG_HIREDIS_KIND ${BG_HIREDIS_KIND} CACHE INTERNAL "system or vendored")

# What a program linking libbloomguard.a needs besides it: the installed bloomguard.pc's
# Requires.private.
if(BG_HIREDIS_KIND STREQUAL "system")
  set(_bg_pc_requires "hiredis")
  if(BG_HIREDIS_HAVE_SSL)
    string(APPEND _bg_pc_requires " hiredis_ssl")
  endif()
elseif(BG_HIREDIS_HAVE_SSL)
  set(_bg_pc_requires "libssl libcrypto")
else()
  set(_bg_pc_requires "")
endif()
set(BG_PC_REQUIRES_PRIVATE "${_bg_pc_requires}")
