/*
 * HighwayHash-128 with Redisson's key: the SSE4.1 build of Google's header templates.
 *
 * Each target gets its own translation unit because the templates are compiled with that
 * target's flags. Everything the headers define is always_inline or lives in namespace
 * highwayhash::SSE41 (HH_TARGET_NAME), so no out-of-line copy compiled here can be merged by
 * the linker into another target's path; the only symbol exported from this file is
 * bgi_hh128_sse41. No C++ runtime is used (see hash.cmake for the flags).
 */
#ifndef __SSE4_1__
#error "hh_sse41.cc must be compiled with -msse4.1 (csrc/hash/hash.cmake)"
#endif
#define HH_TARGET_NAME SSE41
#include <highwayhash/highwayhash.h>

#include "hash/hash.h"

void bgi_hh128_sse41(const void *data, size_t len, uint64_t out[2]) {
  static const highwayhash::HHKey key = BGI_HH_KEY_INIT;
  highwayhash::HHStateT<HH_TARGET> state(key);
  const char *bytes = static_cast<const char *>(data);

  // HighwayHashT's loop, except for the tail: HHStateSSE41::LoadMultipleOfFour reads the last
  // 4-byte word through a plain uint32_t*, undefined (and reported by UBSan) when the tail is
  // not 4-aligned. Such tails (< 32 bytes) are hashed from an aligned stack copy instead; the
  // full packets go through unaligned SIMD loads and need nothing.
  const size_t truncated = len & ~static_cast<size_t>(31);
  for (size_t off = 0; off < truncated; off += sizeof(highwayhash::HHPacket))
    state.Update(*reinterpret_cast<const highwayhash::HHPacket *>(bytes + off));
  const size_t rest = len - truncated;
  if (rest != 0) {
    const char *tail = bytes + truncated;
    alignas(16) char copy[sizeof(highwayhash::HHPacket)];
    if (reinterpret_cast<uintptr_t>(tail) & 3) {
      __builtin_memcpy(copy, tail, rest);
      tail = copy;
    }
    state.UpdateRemainder(tail, rest);
  }
  state.Finalize(reinterpret_cast<highwayhash::HHResult128 *>(out));
}
