/*
 * Redisson's Bloom sizing (RedissonBloomFilter.optimalNumOfBits / optimalNumOfHashFunctions and
 * tryInit's checks), reproduced operation for operation so that our size and k equal the ones a
 * Java client computes: the Lua scripts compare them with the config hash as strings, and a
 * size off by one bit would make every Redisson client see "config has been changed".
 */
#include "hash/hash.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "bloomguard/errors.h"
#include "bloomguard/hash.h"
#include "common/jdouble.h"

/* Java's Math.log(2): 0x3fe62e42fefa39ef. A literal, so no libm rounding can move it. */
static const double JAVA_LN2 = 0x1.62e42fefa39efp-1;

/* Java's (int) of a long: keeps the low 32 bits. */
static int32_t java_l2i(int64_t v) {
  uint32_t low = (uint32_t)v;
  return low <= INT32_MAX ? (int32_t)low : (int32_t)(low - 0x80000000u) + INT32_MIN;
}

static void set_err(char *err, size_t err_size, const char *fmt, long long v) {
  if (err && err_size) snprintf(err, err_size, fmt, v);
}

int bgi_params_uncapped(int64_t n, double p, uint64_t *size, uint32_t *k, char *err, size_t err_size) {
  /* tryInit's order. A NaN p passes both comparisons, as in Java, and ends at "size is 0". */
  if (p > 1) {
    set_err(err, err_size, "Bloom filter false probability can't be greater than 1", 0);
    return BG_EBADPARAMS;
  }
  if (p < 0) {
    set_err(err, err_size, "Bloom filter false probability can't be negative", 0);
    return BG_EBADPARAMS;
  }
  /* Ours: Redisson would store a size of 0 (n == 0) or a negative one (n < 0). */
  if (n <= 0) {
    set_err(err, err_size, "Bloom filter expected insertions must be positive, got %lld",
            (long long)n);
    return BG_EBADPARAMS;
  }

  /* optimalNumOfBits: -n is a long (no overflow, n > 0), widened to double for the product. */
  if (p == 0) p = DBL_TRUE_MIN; /* Double.MIN_VALUE */
  int64_t bits = bgi_java_d2l((double)-n * log(p) / (JAVA_LN2 * JAVA_LN2));
  if (bits == 0) {
    set_err(err, err_size, "Bloom filter calculated size is 0", 0);
    return BG_EBADPARAMS;
  }
  /* n > 0 and p <= 1 make bits >= 0 */

  /* optimalNumOfHashFunctions: ((double) m / n) * Math.log(2), left to right. */
  int32_t hashes = java_l2i(bgi_java_round((double)bits / (double)n * JAVA_LN2));
  if (hashes < 1) hashes = 1;

  *size = (uint64_t)bits;
  *k = (uint32_t)hashes;
  return BG_OK;
}

int bgi_params(int64_t n, double p, uint64_t *size, uint32_t *k, char *err, size_t err_size) {
  uint64_t bits;
  uint32_t hashes;
  int st = bgi_params_uncapped(n, p, &bits, &hashes, err, err_size);
  if (st != BG_OK) return st;
  if (bits > BG_MAX_SIZE) {
    set_err(err, err_size,
            "Bloom filter size can't be greater than 4294967294. But calculated size is %lld",
            (long long)bits);
    return BG_EBADPARAMS;
  }
  *size = bits;
  *k = hashes;
  return BG_OK;
}
