/*
 * HighwayHash-128 with Redisson's key through Google's portable C implementation
 * (third_party/highwayhash/c): the build without a C++ compiler, i.e. the Go binding's (cgo compiles
 * no C++ there). It defines the same bgi_hh128_portable as hh_portable.cc, which the CMake build
 * compiles instead, next to the SIMD targets; bindings/go/vectors_test.go checks it gives Redisson's
 * hashes.
 */
#include "hash/hash.h"

#include "c/highwayhash.h"

void bgi_hh128_portable(const void *data, size_t len, uint64_t out[2]) {
  static const uint64_t key[4] = BGI_HH_KEY_INIT;
  /* data may be NULL when len is 0: the C code reads nothing then */
  HighwayHash128((const uint8_t *)data, len, key, out);
}
