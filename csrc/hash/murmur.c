/* RedisBloom's hashing (hash/murmur.h): MurmurHash64A, written from its published description. */
#include "hash/murmur.h"

#include <math.h>
#include <string.h>

#define MURMUR_M 0xc6a4a7935bd1e995ULL
#define MURMUR_R 47

uint64_t bgi_murmur64a(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = seed ^ ((uint64_t)len * MURMUR_M);
  size_t blocks = len / 8;
  for (size_t i = 0; i < blocks; i++, p += 8) {
    uint64_t k = 0;
    for (int b = 7; b >= 0; b--) k = k << 8 | p[b];   /* little-endian, whatever the host */
    k *= MURMUR_M;
    k ^= k >> MURMUR_R;
    k *= MURMUR_M;
    h ^= k;
    h *= MURMUR_M;
  }
  switch (len & 7) {
    case 7: h ^= (uint64_t)p[6] << 48; /* fall through */
    case 6: h ^= (uint64_t)p[5] << 40; /* fall through */
    case 5: h ^= (uint64_t)p[4] << 32; /* fall through */
    case 4: h ^= (uint64_t)p[3] << 24; /* fall through */
    case 3: h ^= (uint64_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint64_t)p[1] << 8;  /* fall through */
    case 1:
      h ^= (uint64_t)p[0];
      h *= MURMUR_M;
  }
  h ^= h >> MURMUR_R;
  h *= MURMUR_M;
  h ^= h >> MURMUR_R;
  return h;
}

/* RedisBloom's own constants, not M_LN2: with those its k is ceil(2.0000000000000004) = 3 where
 * the server's is 2 (capacity 3 at 0.5 was such a case in the vectors) */
#define RB_LN2 0.693147180559945
#define RB_LN2_SQUARED 0.480453013918201

void bgi_rbloom_geometry(uint64_t capacity, double error_rate, uint64_t *bits, uint32_t *k) {
  double bpe = -(log(error_rate * 0.5) / RB_LN2_SQUARED);
  uint64_t b = (uint64_t)((double)capacity * bpe);
  if (b % 64) b += 64 - b % 64;
  *bits = b;
  *k = (uint32_t)ceil(RB_LN2 * bpe);
}

void bgi_rbloom_indexes(const void *item, size_t len, const bgi_fastmod *bits, uint32_t k, uint64_t *out) {
  static const unsigned char none;
  if (!item) item = &none;
  uint64_t a = bgi_murmur64a(item, len, MURMUR_M), b = bgi_murmur64a(item, len, a);
  /* a + i * b wraps at 2^64 before the remainder, as the server's does: no incremental mod */
  for (uint32_t i = 0; i < k; i++) out[i] = bgi_fastmod_rem(bits, a + i * b);
}

int bgi_rbloom_set(uint8_t *bytes, const uint64_t *idx, uint32_t k) {
  int added = 0;
  for (uint32_t i = 0; i < k; i++) {
    uint8_t mask = (uint8_t)(1u << (idx[i] % 8));
    added |= !(bytes[idx[i] / 8] & mask);
    bytes[idx[i] / 8] |= mask;
  }
  return added;
}

int bgi_rbloom_add(uint8_t *bytes, uint64_t bits, uint32_t k, const void *item, size_t len) {
  bgi_fastmod mod;
  uint64_t idx[BGI_RBLOOM_MAX_K];
  bgi_fastmod_init(&mod, bits);
  bgi_rbloom_indexes(item, len, &mod, k, idx);
  return bgi_rbloom_set(bytes, idx, k);
}
