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

/* Austin Appleby's MurmurHash64A (little-endian reads on every host). data may be NULL when len is 0. */
uint64_t bgi_murmur64a(const void *data, size_t len, uint64_t seed);

/* The first link's size in bits (a multiple of 64) and its k, for BF.RESERVE capacity error_rate. */
void bgi_rbloom_geometry(uint64_t capacity, double error_rate, uint64_t *bits, uint32_t *k);

/* Sets the item's k bits in bytes (bits / 8 of them); 1 if one of them was 0. */
int bgi_rbloom_add(uint8_t *bytes, uint64_t bits, uint32_t k, const void *item, size_t len);

#endif
