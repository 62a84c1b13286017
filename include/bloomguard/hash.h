/*
 * bloomguard/hash.h - Redisson's hashing and sizing, with no server involved.
 *
 * Pure functions, safe from any thread.
 */
#ifndef BLOOMGUARD_HASH_H
#define BLOOMGUARD_HASH_H

#include "call.h"
#include "common.h"

BG_BEGIN_DECLS

/* Largest bitmap Redisson accepts (Integer.MAX_VALUE * 2). */
#define BG_MAX_SIZE 4294967294ULL
/* Largest hash-iteration count accepted from a config hash (Redisson's optimum never exceeds 1075). */
#define BG_MAX_HASH_ITERATIONS 4096

/* HighwayHash-128 with Redisson's key over len bytes (data may be NULL when len is 0). BG_EINVAL for
 * NULL outputs and for len > PTRDIFF_MAX (no object is that big: a wrong length). */
BG_API int bg_hash128(const void *data, size_t len, uint64_t *h1, uint64_t *h2);

/* The k bit indexes Redisson sets for an item in a bitmap of size bits; out holds k values. */
BG_API int bg_indexes(const void *data, size_t len, uint64_t size, uint32_t k, uint64_t *out);

/*
 * Redisson's optimal bitmap size and hash-iteration count for n expected insertions at false
 * probability fpp. BG_EBADPARAMS, as Redisson's tryInit rejects them: fpp < 0, fpp > 1 (or NaN),
 * computed size 0, or size > BG_MAX_SIZE, with Redisson's messages. Also BG_EBADPARAMS for
 * n <= 0, with bloomguard's own message ("expected insertions must be positive"): Redisson does
 * not check n - for n = 0 it fails later with "calculated size is 0", and it accepts n < 0,
 * writing a negative size into the config hash.
 */
BG_API int bg_optimal_params(int64_t expected_insertions, double fpp, uint64_t *size, uint32_t *k);
/* The same, with Redisson's rejection message on the call (bg_call_errmsg); call may be NULL. No
 * handle: the call comes first (call.h, "The _ex rule"). */
BG_API int bg_optimal_params_ex(bg_call *call, int64_t expected_insertions, double fpp, uint64_t *size,
                                uint32_t *k);

/* Name of the HighwayHash implementation picked for this CPU: "avx2", "sse41" or "portable". */
BG_API const char *bg_hash_impl(void);

BG_END_DECLS

#endif
