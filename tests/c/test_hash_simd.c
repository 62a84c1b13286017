/*
 * The SIMD HighwayHash implementations, and the Go build's portable C one (csrc/hash/hh_portable_c.c
 * over Google's C code, compiled in here as bgi_hh128_portable_c), against the portable C++ one
 * (which test_hash_vectors checks against Redisson's vectors): random bytes, every length
 * 0..300 (all packet remainders, several packets), random alignments. The items sit at the
 * very end of their allocation (ASan sees any over-read) and, separately, against PROT_NONE
 * pages on both sides (any build faults on a read outside the item).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bloomguard/errors.h"
#include "hash/hash.h"
#include "harness.h"

typedef void (*hh_fn)(const void *, size_t, uint64_t[2]);

void bgi_hh128_portable_c(const void *data, size_t len, uint64_t out[2]);

static const struct {
  const char *name;
  hh_fn fn;
  int dispatched;  /* one of bgi_hash_force's (the CPU may lack it); else plain C, runs anywhere */
} simd[] = {
#if defined(__x86_64__)
  {"avx2", bgi_hh128_avx2, 1},
  {"sse41", bgi_hh128_sse41, 1},
#endif
  {"portable_c", bgi_hh128_portable_c, 0},
  {"portable", bgi_hh128_portable, 1}, /* against itself: checks the harness, runs everywhere */
};
#define NSIMD (sizeof simd / sizeof simd[0])

#define MAXLEN 300

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t next_rand(void) { /* splitmix64: reproducible from the seed above */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)next_rand();
}

/* Compares every available implementation with portable on data[0..len). */
static int compare_all(const unsigned char *data, size_t len, const char *where) {
  uint64_t ref[2], got[2];
  int bad = 0;
  bgi_hh128_portable(data, len, ref);
  for (size_t m = 0; m < NSIMD; m++) {
    if (simd[m].dispatched && bgi_hash_force(simd[m].name) != 0) continue;
    simd[m].fn(data, len, got);
    if (got[0] != ref[0] || got[1] != ref[1]) {
      bgt_fail(__FILE__, __LINE__, "%s len %zu (%s): %016llx %016llx != portable %016llx %016llx",
               simd[m].name, len, where, (unsigned long long)got[0], (unsigned long long)got[1],
               (unsigned long long)ref[0], (unsigned long long)ref[1]);
      bad = 1;
    }
  }
  return bad;
}

static void test_available(void) {
  for (size_t m = 0; m < NSIMD; m++)
    printf("  %s: %s\n", simd[m].name,
           !simd[m].dispatched || bgi_hash_force(simd[m].name) == 0 ? "tested" : "not on this CPU");
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
}

static void test_random_lengths_and_alignments(void) {
  int bad = 0;
  for (size_t len = 0; len <= MAXLEN && bad < 10; len++) {
    for (int rep = 0; rep < 8; rep++) {
      size_t off = rep == 0 ? 0 : (size_t)(next_rand() % 64);
      unsigned char *buf = malloc(off + len + (off + len == 0));
      fill(buf, off + len);
      bad += compare_all(buf + off, len, "heap, ends at allocation end");
      free(buf);
    }
  }
  /* Structured inputs random bytes rarely produce. */
  unsigned char pat[MAXLEN];
  for (int byte = 0; byte < 256; byte += 255) {
    memset(pat, byte, sizeof pat);
    for (size_t len = 0; len <= MAXLEN; len++) bad += compare_all(pat, len, "constant bytes");
  }
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
}

static void test_guard_pages(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *map = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(map != MAP_FAILED);
  if (map == MAP_FAILED) return;
  unsigned char *mid = map + page;
  CHECK_EQ_INT(mprotect(map, page, PROT_NONE), 0);
  CHECK_EQ_INT(mprotect(mid + page, page, PROT_NONE), 0);
  fill(mid, page);
  for (size_t len = 0; len <= MAXLEN; len++) {
    compare_all(mid, len, "starts at a page after PROT_NONE");
    compare_all(mid + page - len, len, "ends at a page before PROT_NONE");
  }
  munmap(map, 3 * page);
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
}

BGT_RUN(BGT_CASE(test_available), BGT_CASE(test_random_lengths_and_alignments),
        BGT_CASE(test_guard_pages))
