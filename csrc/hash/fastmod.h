/*
 * Internal: x mod d for a fixed 64-bit divisor without a division (Lemire, Kaser, Kurz, "Faster
 * Remainder by Direct Computation", 2019): with the 128-bit reciprocal m = floor((2^128 - 1) / d) + 1,
 * the fractional part of x / d is the low 128 bits of m * x, and the remainder is those bits times d,
 * shifted right by 128. Exact for every 64-bit x and every d > 0 (d = 1: m wraps to 0, the answer
 * 0); tests/c/test_fastmod.c checks it against % on edge and random values. A hot loop that takes a
 * remainder per bit (a native filter's k bit indexes, rotation/bitmap.c) does three or four
 * multiplications where a 64-bit division costs tens of cycles.
 *
 * Compilers without a 128-bit integer type get the plain %: the same results, at its cost.
 */
#ifndef BG_INTERNAL_FASTMOD_H
#define BG_INTERNAL_FASTMOD_H

#include <stdint.h>

#if defined(__SIZEOF_INT128__) && !defined(BGI_FASTMOD_PORTABLE)
#define BGI_FASTMOD_U128 1
#endif

typedef struct bgi_fastmod {
  uint64_t d;
#ifdef BGI_FASTMOD_U128
  unsigned __int128 m;
#endif
} bgi_fastmod;

/* d must be > 0. */
static inline void bgi_fastmod_init(bgi_fastmod *f, uint64_t d) {
  f->d = d;
#ifdef BGI_FASTMOD_U128
  f->m = ~(unsigned __int128)0 / d + 1;
#endif
}

static inline uint64_t bgi_fastmod_rem(const bgi_fastmod *f, uint64_t x) {
#ifdef BGI_FASTMOD_U128
  unsigned __int128 low = f->m * x;   /* the fraction x / d, in 128 bits */
  /* (low * d) >> 128 without a 256-bit product: the two 64-bit halves of low times d */
  unsigned __int128 bottom = ((low & UINT64_MAX) * f->d) >> 64;
  unsigned __int128 top = (low >> 64) * f->d;
  return (uint64_t)((bottom + top) >> 64);
#else
  return x % f->d;
#endif
}

#endif
