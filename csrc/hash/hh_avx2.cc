/*
 * HighwayHash-128 with Redisson's key: the AVX2 build of Google's header templates.
 *
 * Each target gets its own translation unit because the templates are compiled with that
 * target's flags. Everything the headers define is always_inline or lives in namespace
 * highwayhash::AVX2 (HH_TARGET_NAME), so no out-of-line copy compiled here can be merged by
 * the linker into another target's path; the only symbol exported from this file is
 * bgi_hh128_avx2. No C++ runtime is used (see hash.cmake for the flags).
 */
#ifndef __AVX2__
#error "hh_avx2.cc must be compiled with -mavx2 (csrc/hash/hash.cmake)"
#endif
#define HH_TARGET_NAME AVX2
#include <highwayhash/highwayhash.h>

#include "hash/hash.h"

void bgi_hh128_avx2(const void *data, size_t len, uint64_t out[2]) {
  static const highwayhash::HHKey key = BGI_HH_KEY_INIT;
  highwayhash::HHStateT<HH_TARGET> state(key);
  // HHPacket is char[32], so the packet casts inside HighwayHashT impose no alignment: any
  // byte address is fine, and the headers never read outside [data, data + len).
  highwayhash::HighwayHashT(&state, static_cast<const char *>(data), len,
                            reinterpret_cast<highwayhash::HHResult128 *>(out));
}
