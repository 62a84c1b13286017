/*
 * Internal hashing interface (not part of the ABI).
 *
 * bgi_hash128 is HighwayHash-128 with Redisson's key, dispatched once to the fastest
 * implementation this CPU supports (AVX2, SSE4.1, portable).
 */
#ifndef BG_INTERNAL_HASH_H
#define BG_INTERNAL_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {  /* the per-target .cc files include this for the declarations below */
#endif

/* out[0] = h1 (Redisson's hash1), out[1] = h2. data may be NULL when len is 0. */
void bgi_hash128(const void *data, size_t len, uint64_t out[2]);
/* "avx2", "sse41" or "portable": the implementation bgi_hash128 uses. */
const char *bgi_hash_impl_name(void);
/* Tests and benchmarks: use the named implementation from now on; -1 if this CPU lacks it.
   "auto" goes back to the choice by CPU. */
int bgi_hash_force(const char *name);

/* Redisson's HighwayHash key (org.redisson.misc.Hash.KEY). */
#define BGI_HH_KEY_INIT \
  { 0x9e3779b97f4a7c15ULL, 0xf39cc0605cedc834ULL, 0x1082276bf3a27251ULL, 0xf86c6a11d0c18e95ULL }

/* One per compiled target (csrc/hash/hh_*.cc); same contract as bgi_hash128. The SIMD ones may
   only be called when the CPU has the extension (hash.c checks), and exist on x86-64 only. */
void bgi_hh128_portable(const void *data, size_t len, uint64_t out[2]);
void bgi_hh128_sse41(const void *data, size_t len, uint64_t out[2]);
void bgi_hh128_avx2(const void *data, size_t len, uint64_t out[2]);

/* Redisson's index sequence: h = h1; idx[i] = (h & INT64_MAX) % size; h += (i even) ? h2 : h1. */
static inline void bgi_indexes_from_hash(uint64_t h1, uint64_t h2, uint64_t size, uint32_t k,
                                         uint64_t *out) {
  uint64_t h = h1;
  for (uint32_t i = 0; i < k; i++) {
    out[i] = (h & INT64_MAX) % size;
    h += (i % 2 == 0) ? h2 : h1;
  }
}

/* A partitioned filter's partition of an item with hash (h1, h2) (filter/partition.h): a
 * multiply-shift of a mix of both halves, so it does not follow the bits the item sets inside its
 * partition (those come from h1 and h2 mod the partition's size). */
static inline uint32_t bgi_partition_of(uint64_t h1, uint64_t h2, uint32_t parts) {
  uint64_t x = h1 ^ (h2 * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)(((unsigned __int128)x * parts) >> 64);
}

/*
 * A filter's geometry packed as size << 32 | k, so it is read and written with one atomic word
 * (size <= BG_MAX_SIZE < 2^32, k <= BG_MAX_HASH_ITERATIONS). 0 means "not read yet".
 */
static inline uint64_t bgi_cfg_pack(uint64_t size, uint32_t k) { return size << 32 | k; }
static inline uint64_t bgi_cfg_size(uint64_t cfg) { return cfg >> 32; }
static inline uint32_t bgi_cfg_k(uint64_t cfg) { return (uint32_t)cfg; }

/*
 * Redisson's optimalNumOfBits / optimalNumOfHashFunctions with tryInit's checks, bit for bit
 * (Java's saturating double->long cast, Math.round). On rejection returns BG_EBADPARAMS and
 * writes Redisson's IllegalArgumentException message (or ours for n <= 0) to err.
 */
int bgi_params(int64_t n, double p, uint64_t *size, uint32_t *k, char *err, size_t err_size);
/* The same without the cap at BG_MAX_SIZE (a partitioned filter's total: filter/partition.h). */
int bgi_params_uncapped(int64_t n, double p, uint64_t *size, uint32_t *k, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif
