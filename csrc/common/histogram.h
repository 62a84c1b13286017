/*
 * Internal: a latency histogram with fixed buckets (include/bloomguard/observe.h): bucket i counts
 * durations d with 2^(i-1) us < d <= 2^i us (bucket 0: d <= 1 us; the last: longer than
 * 2^(BG_HIST_BUCKETS-2) us). Recording is two relaxed atomic additions: no lock, no allocation.
 */
#ifndef BG_INTERNAL_HISTOGRAM_H
#define BG_INTERNAL_HISTOGRAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/observe.h"

typedef struct bgi_hist {
  atomic_ullong b[BG_HIST_BUCKETS];
  atomic_ullong sum_ns;
} bgi_hist;

static inline unsigned bgi_hist_bucket(uint64_t ns) {
  uint64_t us = ns / 1000u + (ns % 1000u != 0);   /* rounded up: d <= 2^i us exactly */
  if (us <= 1) return 0;
  unsigned i = 64u - (unsigned)__builtin_clzll(us - 1);   /* ceil(log2(us)) */
  return i < BG_HIST_BUCKETS - 1 ? i : BG_HIST_BUCKETS - 1;
}

static inline void bgi_hist_record(bgi_hist *h, uint64_t ns) {
  atomic_fetch_add_explicit(&h->b[bgi_hist_bucket(ns)], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* Bound i in seconds (i < BG_HIST_BUCKETS - 1). */
static inline double bgi_hist_bound_s(unsigned i) { return (double)(1ull << i) / 1e6; }

#endif
