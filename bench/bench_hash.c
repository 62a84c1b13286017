/*
 * bench_hash: HighwayHash-128 (Redisson's key) nanoseconds per item, for 16- and 64-byte items,
 * for each implementation this CPU can run and for the automatic choice (bg_hash128, i.e. the
 * public entry point with its argument checks), each with its speedup over portable measured in
 * the same run (portable ns / its ns). One thread; best of several rounds to shed scheduler noise.
 *
 *   bench_hash [items_per_round (default 1000000)] [rounds (default 7)]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomguard/hash.h"
#include "hash/hash.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Keeps the results alive so the hashing cannot be optimized away. */
static volatile uint64_t sink;

/* n distinct random items of len bytes, packed back to back after `skew` bytes (skew 1 makes
   every item start misaligned, the case hh_sse41.cc hashes through an aligned copy). */
static unsigned char *make_items(size_t n, size_t len, size_t skew) {
  unsigned char *buf = malloc(n * len + skew);
  if (!buf) {
    perror("malloc");
    exit(1);
  }
  uint64_t x = 0x243f6a8885a308d3ULL;
  for (size_t i = 0; i < n * len + skew; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (unsigned char)x;
  }
  return buf;
}

/* Best-of-rounds ns per item; use_public selects bg_hash128 instead of bgi_hash128. */
static double measure(const unsigned char *items, size_t n, size_t len, int rounds, int use_public) {
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    uint64_t acc = 0;
    uint64_t t0 = now_ns();
    if (use_public) {
      for (size_t i = 0; i < n; i++) {
        uint64_t h1, h2;
        bg_hash128(items + i * len, len, &h1, &h2);
        acc += h1 ^ h2;
      }
    } else {
      for (size_t i = 0; i < n; i++) {
        uint64_t h[2];
        bgi_hash128(items + i * len, len, h);
        acc += h[0] ^ h[1];
      }
    }
    double ns = (double)(now_ns() - t0) / (double)n;
    sink += acc;
    if (ns < best) best = ns;
  }
  return best;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
  int rounds = argc > 2 ? atoi(argv[2]) : 7;
  if (n == 0 || rounds <= 0) {
    fprintf(stderr, "usage: %s [items_per_round] [rounds]\n", argv[0]);
    return 2;
  }
  static const char *const names[] = {"portable", "sse41", "avx2"};
  static const struct {
    size_t len, skew;
  } shapes[] = {{16, 0}, {16, 1}, {64, 0}};

  bgi_hash_force("auto");
  printf("bench_hash: HighwayHash-128, %zu items x best of %d rounds, 1 thread; dispatched = %s\n", n,
         rounds, bg_hash_impl());
  printf("%-22s %6s %5s %10s %10s %8s\n", "implementation", "bytes", "skew", "ns/item", "Mitems/s",
         "speedup");
  for (size_t l = 0; l < sizeof shapes / sizeof shapes[0]; l++) {
    size_t len = shapes[l].len, skew = shapes[l].skew;
    unsigned char *buf = make_items(n, len, skew), *items = buf + skew;
    double portable = 0;
    for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
      if (bgi_hash_force(names[m]) != 0) {
        printf("%-22s %6zu %5zu %10s\n", names[m], len, skew, "n/a");
        continue;
      }
      double ns = measure(items, n, len, rounds, 0);
      if (m == 0) portable = ns;
      printf("%-22s %6zu %5zu %10.2f %10.1f %7.2fx\n", names[m], len, skew, ns, 1e3 / ns, portable / ns);
    }
    bgi_hash_force("auto");
    char label[48];
    snprintf(label, sizeof label, "bg_hash128 (%s)", bg_hash_impl());
    double ns = measure(items, n, len, rounds, 1);
    printf("%-22s %6zu %5zu %10.2f %10.1f %7.2fx\n", label, len, skew, ns, 1e3 / ns, portable / ns);
    free(buf);
  }
  return 0;
}
