/*
 * hash/fastmod.h against %: the remainder by a precomputed reciprocal must be the remainder, for
 * every 64-bit numerator - a native filter's bit index is (a + i * b) mod bits with a + i * b
 * wrapped at 2^64, so the numerators span the whole range. Edge numerators (0, 1, d - 1, d, d + 1,
 * multiples of d and their neighbours, 2^63, UINT64_MAX) and random ones, for edge divisors (1,
 * powers of two and their neighbours, UINT64_MAX) and the sizes of real links; then the index
 * sequences themselves with wraparound. The control: a reciprocal one too small is caught.
 */
#include <stdint.h>
#include <stdio.h>

#include "harness.h"
#include "hash/fastmod.h"
#include "hash/murmur.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void) {   /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

typedef uint64_t (*rem_fn)(const bgi_fastmod *f, uint64_t x);

static uint64_t rem_real(const bgi_fastmod *f, uint64_t x) { return bgi_fastmod_rem(f, x); }

/* Numerators of every kind for divisor d; the count of wrong remainders. */
/* 1 if rem gets x mod d wrong (the first five reported when report is set). */
static int wrong_at(const bgi_fastmod *f, rem_fn rem, uint64_t x, uint64_t d, int report, uint64_t wrong) {
  uint64_t got = rem(f, x), want = x % d;
  if (got != want && report && wrong < 5)
    CHECK_MSG(0, "%llu mod %llu: %llu, want %llu", (unsigned long long)x, (unsigned long long)d,
              (unsigned long long)got, (unsigned long long)want);
  return got != want;
}

static uint64_t sweep(uint64_t d, rem_fn rem, int report) {
  bgi_fastmod f;
  bgi_fastmod_init(&f, d);
  uint64_t wrong = 0;
  uint64_t top = UINT64_MAX / d * d;   /* the largest multiple of d */
  uint64_t xs[] = {0, 1, 2, d - 1, d, d + 1, 2 * d - 1, 2 * d, 2 * d + 1, top, top - 1, top + (UINT64_MAX - top),
                   top - d, top - d + 1, top - 1 - (d > 1 ? d - 1 : 0), UINT64_C(1) << 63, (UINT64_C(1) << 63) - 1,
                   (UINT64_C(1) << 63) + 1, UINT64_MAX, UINT64_MAX - 1, UINT64_C(1) << 32, (UINT64_C(1) << 32) - 1};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) wrong += wrong_at(&f, rem, xs[i], d, report, wrong);
  for (int i = 0; i < 2000; i++) {
    uint64_t x = next();
    /* random multiples of d and their neighbours too */
    uint64_t m = d == 1 ? x : (x % (UINT64_MAX / d + 1)) * d;
    uint64_t cases[] = {x, x >> (x & 63), m, m - 1, m + 1};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) wrong += wrong_at(&f, rem, cases[c], d, report, wrong);
  }
  return wrong;
}

static void divisors(rem_fn rem, uint64_t *wrong, int report) {
  uint64_t ds[] = {1, 2, 3, 7, 63, 64, 65, 127, 128, 192, 1000, 4096, 9586, 95851968, (UINT64_C(1) << 32) - 1,
                   UINT64_C(1) << 32, (UINT64_C(1) << 32) + 1, (UINT64_C(1) << 32) + 64, (UINT64_C(1) << 63) - 1,
                   UINT64_C(1) << 63, (UINT64_C(1) << 63) + 1, UINT64_MAX - 1, UINT64_MAX};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) *wrong += sweep(ds[i], rem, report);
  /* the sizes of real links (multiples of 64), and random divisors of every magnitude */
  static const struct { uint64_t cap; double err; } links[] = {
    {100, 0.01}, {1000, 0.001}, {3, 0.5}, {10000000, 0.01}, {123457, 0.003}, {1000000000, 1e-6}};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    uint64_t bits;
    uint32_t k;
    bgi_rbloom_geometry(links[i].cap, links[i].err, &bits, &k);
    *wrong += sweep(bits, rem, report);
  }
  for (int i = 0; i < 200; i++) {
    uint64_t d = next() >> (next() & 63);
    *wrong += sweep(d ? d : 1, rem, report);
    if (d / 64 * 64 + 64 != 0) *wrong += sweep(d / 64 * 64 + 64, rem, report);
  }
}

static void test_matches_remainder(void) {
  uint64_t wrong = 0;
  divisors(rem_real, &wrong, 1);
  CHECK_EQ_U64(wrong, 0);
}

/* The index sequence as RedisBloom computes it, wraparound and all, for random hashes. */
static void test_index_sequences(void) {
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry(10000000, 0.0001, &bits, &k);
  bgi_fastmod f;
  bgi_fastmod_init(&f, bits);
  uint64_t wrong = 0, wrapped = 0;
  for (int n = 0; n < 200000; n++) {
    uint64_t a = next(), b = next();
    if (n % 4 == 1) a = UINT64_MAX - (b & 0xff);   /* a + b wraps at once */
    for (uint32_t i = 0; i < k; i++) {
      uint64_t x = a + i * b;
      wrapped += i > 0 && x < a + (i - 1) * b;
      wrong += bgi_fastmod_rem(&f, x) != x % bits;
    }
  }
  CHECK_EQ_U64(wrong, 0);
  CHECK(wrapped > 1000);   /* the wrapped sums were there */
}

/* This build takes the 128-bit path (the one to prove); % is the fallback elsewhere. */
static void test_fast_path_compiled(void) {
#if defined(__SIZEOF_INT128__)
#ifndef BGI_FASTMOD_U128
  CHECK_MSG(0, "a compiler with __int128 got the portable %% fallback");
#endif
#endif
}

/* The control: a reciprocal one less than Lemire's (floor((2^128 - 1) / d), no + 1) is wrong for
 * some numerators, and the sweep finds them. */
#ifdef BGI_FASTMOD_U128
static uint64_t rem_short(const bgi_fastmod *f, uint64_t x) {
  bgi_fastmod g = *f;
  g.m -= 1;
  return bgi_fastmod_rem(&g, x);
}
#endif

static void test_control_short_reciprocal(void) {
#ifdef BGI_FASTMOD_U128
  uint64_t wrong = 0;
  divisors(rem_short, &wrong, 0);
  CHECK_MSG(wrong > 0, "a wrong reciprocal passed the sweep");
  printf("  control: %llu wrong remainders found\n", (unsigned long long)wrong);
#endif
}

BGT_RUN(BGT_CASE(test_matches_remainder), BGT_CASE(test_index_sequences), BGT_CASE(test_fast_path_compiled),
        BGT_CASE(test_control_short_reciprocal))
