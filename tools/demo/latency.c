/*
 * latency.c - the demo's latency recorder: per time bucket, counts of outcomes and a
 * log-scale histogram of latencies. Each query thread owns one series, allocated before the run,
 * so recording a query is a few increments (no allocation, no lock, no shared cache line).
 */
#include "demo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* bin i covers [2^((i-16)/8), 2^((i-15)/8)) microseconds: bin 0 starts at 0.25 us */
#define BINS_PER_OCTAVE 8
#define BIN_OFFSET      16

static int bin_of(double us) {
  if (!(us > 0.25)) return 0;
  int i = (int)(log2(us) * BINS_PER_OCTAVE) + BIN_OFFSET;
  return i < 0 ? 0 : i >= DEMO_LAT_BINS ? DEMO_LAT_BINS - 1 : i;
}

static double bin_low(int i) { return exp2((double)(i - BIN_OFFSET) / BINS_PER_OCTAVE); }

int demo_series_init(demo_series *s, int nbuckets, int64_t bucket_us) {
  s->nbuckets = nbuckets;
  s->bucket_us = bucket_us;
  s->b = calloc((size_t)nbuckets, sizeof *s->b);
  return s->b ? 0 : -1;
}

void demo_series_free(demo_series *s) {
  free(s->b);
  s->b = NULL;
  s->nbuckets = 0;
}

void demo_series_reset(demo_series *s) {
  if (s->b) memset(s->b, 0, (size_t)s->nbuckets * sizeof *s->b);
}

void demo_series_record(demo_series *s, int64_t t_us, double lat_us, int outcome, int degraded) {
  int64_t k = t_us / s->bucket_us;
  if (k < 0) k = 0;
  if (k >= s->nbuckets) k = s->nbuckets - 1; /* a query that ended past the deadline */
  demo_bucket *b = &s->b[k];
  b->queries++;
  if (outcome == DEMO_OUT_ERROR) b->errors++;
  else if (outcome == DEMO_OUT_FALSE_NEG) b->false_neg++;
  if (degraded) b->degraded++;
  b->bins[bin_of(lat_us)]++;
}

void demo_series_merge(demo_series *dst, const demo_series *src) {
  for (int k = 0; k < dst->nbuckets && k < src->nbuckets; k++) {
    demo_bucket *d = &dst->b[k];
    const demo_bucket *o = &src->b[k];
    d->queries += o->queries;
    d->errors += o->errors;
    d->false_neg += o->false_neg;
    d->degraded += o->degraded;
    for (int i = 0; i < DEMO_LAT_BINS; i++) d->bins[i] += o->bins[i];
  }
}

uint64_t demo_series_total(const demo_series *s, uint32_t *out) {
  uint64_t n = 0;
  memset(out, 0, DEMO_LAT_BINS * sizeof *out);
  for (int k = 0; k < s->nbuckets; k++)
    for (int i = 0; i < DEMO_LAT_BINS; i++) {
      out[i] += s->b[k].bins[i];
      n += s->b[k].bins[i];
    }
  return n;
}

double demo_bins_quantile(const uint32_t *bins, double q) {
  uint64_t n = 0, seen = 0;
  for (int i = 0; i < DEMO_LAT_BINS; i++) n += bins[i];
  if (n == 0) return 0;
  /* the smallest bin holding at least ceil(q * n) samples */
  uint64_t rank = (uint64_t)ceil(q * (double)n);
  if (rank < 1) rank = 1;
  for (int i = 0; i < DEMO_LAT_BINS; i++) {
    seen += bins[i];
    if (seen >= rank) return bin_low(i) * exp2(0.5 / BINS_PER_OCTAVE);
  }
  return bin_low(DEMO_LAT_BINS - 1);
}

double demo_bins_max(const uint32_t *bins) {
  for (int i = DEMO_LAT_BINS - 1; i >= 0; i--)
    if (bins[i]) return bin_low(i + 1);
  return 0;
}
