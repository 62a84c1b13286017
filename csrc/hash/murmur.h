/*
 * Internal: the hashing and sizing of a RedisBloom filter's first link (a filter made by
 * BF.RESERVE), so that a bit array built here sets exactly the bits the server sets for the same
 * items (tests/c/test_native_vectors.c checks it against BF.SCANDUMP of server-built filters).
 *
 *   a = MurmurHash64A(item, seed 0xc6a4a7935bd1e995), b = MurmurHash64A(item, seed a)
 *   bit i of k: (a + i * b) mod bits (wrapping 64-bit arithmetic), byte bit/8, mask 1 << bit%8
 *   first link: error rate e/2 (the chain's tightening), bits per entry -ln(e/2)/ln(2)^2,
 *   bits = capacity * bpe truncated, rounded up to a multiple of 64; k = ceil(ln(2) * bpe)
 */
#ifndef BG_INTERNAL_MURMUR_H
#define BG_INTERNAL_MURMUR_H

#include <stddef.h>
#include <stdint.h>

#include "hash/fastmod.h"

/* k of a first link is ceil(log2(2 / error)): at most 1076, for the smallest positive double. */
#define BGI_RBLOOM_MAX_K 1100

/* Austin Appleby's MurmurHash64A (little-endian reads on every host). data may be NULL when len is 0. */
uint64_t bgi_murmur64a(const void *data, size_t len, uint64_t seed);

/* The first link's size in bits (a multiple of 64) and its k, for BF.RESERVE capacity error_rate. */
void bgi_rbloom_geometry(uint64_t capacity, double error_rate, uint64_t *bits, uint32_t *k);

/* The item's k bit indexes (k <= BGI_RBLOOM_MAX_K) into out, bits the link's size as a divisor. */
void bgi_rbloom_indexes(const void *item, size_t len, const bgi_fastmod *bits, uint32_t k, uint64_t *out);
/* Sets k bits (indexes from bgi_rbloom_indexes) in bytes; 1 if one of them was 0 (the server
 * counts such an item as added). */
int bgi_rbloom_set(uint8_t *bytes, const uint64_t *idx, uint32_t k);
/* Both, for one item, k <= BGI_RBLOOM_MAX_K (the divisor's reciprocal computed per call: tests). */
int bgi_rbloom_add(uint8_t *bytes, uint64_t bits, uint32_t k, const void *item, size_t len);

#endif
