# The license and the third-party notices of what this build puts in its binaries (NOTICE lists
# them all): installed into share/doc/bloomguard (paths as in the repository) and compiled into
# the bloomguard command (`bloomguard licenses`, csrc/cli). BG_NOTICE_FILES: repository-relative.
# scripts/notices.py checks that both hold each one (scripts/check-install.sh runs it).
set(BG_NOTICE_FILES LICENSE NOTICE third_party/highwayhash/LICENSE)  # HighwayHash: csrc/hash
if(BG_HIREDIS_KIND STREQUAL "vendored")
  list(APPEND BG_NOTICE_FILES third_party/hiredis/COPYING)
  if(BG_HIREDIS_HAVE_SSL AND BG_OPENSSL_STATIC)
    # libssl.a / libcrypto.a linked into the shared library and the command
    list(APPEND BG_NOTICE_FILES third_party/openssl/LICENSE.txt)
  endif()
endif()
foreach(_f IN LISTS BG_NOTICE_FILES)
  get_filename_component(_d ${_f} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${_f} DESTINATION ${CMAKE_INSTALL_DOCDIR}/${_d})
endforeach()
