/* The sizing of a partitioned filter (partition.h). */
#include "filter/partition.h"

#include <math.h>

#include "bloomguard/errors.h"
#include "bloomguard/hash.h"
#include "hash/hash.h"

double bgi_bloom_fpr(double x, double m, uint32_t k) {
  if (x <= 0) return 0;
  return pow(-expm1(-(double)k * x / m), (double)k);
}

/* Deviations below this are summed over the binomial itself; above it the normal shape is exact
 * enough (skew ~ 1 / sd) and its integral takes a fixed number of points. */
#define EXACT_SD 40.0
#define NORMAL_POINTS 800

double bgi_partitioned_fpr(uint64_t n, uint32_t parts, uint64_t psize, uint32_t k) {
  double m = (double)psize;
  if (parts <= 1) return bgi_bloom_fpr((double)n, m, k);
  double q = 1.0 / parts, mu = (double)n * q, sd = sqrt((double)n * q * (1 - q)), sum = 0;
  if (sd < EXACT_SD) {
    double lo = floor(mu - 12 * sd - 20), hi = ceil(mu + 12 * sd + 20);
    if (lo < 0) lo = 0;
    if (hi > (double)n) hi = (double)n;
    double ln_n1 = lgamma((double)n + 1), lq = log(q), l1q = log1p(-q);
    for (double x = lo; x <= hi; x++) {
      double lp = ln_n1 - lgamma(x + 1) - lgamma((double)n - x + 1) + x * lq + ((double)n - x) * l1q;
      sum += exp(lp) * bgi_bloom_fpr(x, m, k);
    }
    return sum;
  }
  /* Simpson's rule over mu +- 10 sd of the normal density */
  double a = mu - 10 * sd, h = 20 * sd / NORMAL_POINTS;
  for (int i = 0; i <= NORMAL_POINTS; i++) {
    double x = a + i * h, z = (x - mu) / sd;
    double w = (i == 0 || i == NORMAL_POINTS) ? 1 : (i % 2 ? 4 : 2);
    sum += w * exp(-0.5 * z * z) * bgi_bloom_fpr(x, m, k);
  }
  return sum * h / 3 / (sd * sqrt(2 * M_PI));
}

/* The largest partition: odd (below), and below Redisson's cap (a Redis string's 2^32 bits). */
#define PMAX (BG_MAX_SIZE - 1)

int bgi_partition_geometry(int64_t n, double p, int64_t parts, bgi_pgeom *out, bgi_err *err) {
  char why[256];
  uint64_t m;
  uint32_t k;
  if (parts < 1 || parts > BGI_MAX_PARTITIONS)
    return bgi_err_set(err, BG_EINVAL, "partitions must be from 1 to %d (at most one per cluster slot), got %lld",
                       BGI_MAX_PARTITIONS, (long long)parts);
  if (bgi_params_uncapped(n, p, &m, &k, why, sizeof why) != BG_OK) return bgi_err_set(err, BG_EBADPARAMS, "%s", why);
  uint32_t P = (uint32_t)parts;
  double target = BGI_PARTITION_FPR_TARGET * bgi_bloom_fpr((double)n, (double)m, k);
  uint64_t lo = m / P + (m % P != 0), hi = lo;
  if (lo > PMAX) {
    uint64_t need = m / PMAX + 1;
    return bgi_err_set(err, BG_EBADPARAMS, "%lld expected items at %g take %llu bits: more than %u partitions of at "
                       "most %llu bits (512 MB, a Redis string's limit) each; use at least %llu partitions%s",
                       (long long)n, p, (unsigned long long)m, P, (unsigned long long)PMAX,
                       (unsigned long long)need, need > BGI_MAX_PARTITIONS ? " (more than a cluster has slots: "
                       "lower the expected items or raise the false probability)" : "");
  }
  /* the smallest size that meets the target: double up to one that does, then bisect */
  if (bgi_partitioned_fpr((uint64_t)n, P, lo, k) > target) {
    for (;;) {
      hi = hi * 2 > PMAX ? PMAX : hi * 2;
      if (bgi_partitioned_fpr((uint64_t)n, P, hi, k) <= target) break;
      if (hi == PMAX)
        return bgi_err_set(err, BG_EBADPARAMS, "%lld expected items at %g over %u partitions: a partition would need "
                           "more than %llu bits to keep the false-positive rate within %.2fx of a plain filter's; "
                           "use more partitions", (long long)n, p, P, (unsigned long long)PMAX,
                           BGI_PARTITION_FPR_TARGET);
      lo = hi;
    }
    while (hi - lo > 1) {
      uint64_t mid = lo + (hi - lo) / 2;
      if (bgi_partitioned_fpr((uint64_t)n, P, mid, k) <= target) hi = mid;
      else lo = mid;
    }
    lo = hi;
  }
  /* Redisson's indexes, (h & INT64_MAX) % size over sums of the two hash halves, spread worse over
   * an even size: an odd one (measured: about 8 % fewer false positives) */
  lo |= 1;
  /* and over a few hundred bits an item's k indexes often coincide (k^2 / 2s of them do), which
   * the rate's formula does not count: a partition of so few bits is refused */
  if (P > 1 && lo < BGI_MIN_PARTITION_BITS) {
    uint64_t most = m / BGI_MIN_PARTITION_BITS;
    return bgi_err_set(err, BG_EBADPARAMS, "%lld expected items at %g over %u partitions would leave %llu bits per "
                       "partition, fewer than the %d that keep the false-positive rate near a plain filter's; use "
                       "at most %llu partitions%s", (long long)n, p, P, (unsigned long long)lo, BGI_MIN_PARTITION_BITS,
                       (unsigned long long)(most ? most : 1), most ? "" : " (1: this filter is small)");
  }
  *out = (bgi_pgeom){.parts = P, .psize = lo, .k = k, .m = m};
  return BG_OK;
}
