/*
 * Internal: the geometry of a partitioned filter - one filter spread over P bitmap keys, each in
 * its own cluster slot (docs/layout.md, "Partitioned filter"). No I/O here.
 *
 * An item goes to ONE partition, chosen from its hash: all its k bits lie there, so a single-item
 * query or add touches one key on one node. Inside its partition an item's bits are Redisson's
 * (bgi_indexes_from_hash over the partition's size), so each partition is a Redisson-shaped bitmap.
 *
 * Sizes. m and k are Redisson's for (n, p) without its 2^32 cap (hash.h, bgi_params_uncapped).
 * The items per partition X are Binomial(n, 1/P): mean n/P, variance n (1/P)(1 - 1/P). A query
 * of an absent item lands in a partition at random, so the filter's false-positive rate at
 * capacity is E[f(X)] with f(x) = (1 - exp(-k x / s))^k for partitions of s bits, above the plain
 * filter's f_plain = (1 - exp(-k n / m))^k (f is convex there: the variance costs). s is the
 * smallest size from ceil(m / P) up with E[f(X)] <= BGI_PARTITION_FPR_TARGET * f_plain (computed:
 * the binomial sum while the deviation is small, a normal approximation beyond), made odd. For
 * partitions of thousands of items and more that is about ceil(m / P) itself; small filters over
 * many partitions get more bits. Every partition is below 2^32 bits (a Redis string holds 512 MB)
 * and, in a filter of more than one, at least BGI_MIN_PARTITION_BITS (docs/layout.md says why).
 */
#ifndef BG_INTERNAL_PARTITION_H
#define BG_INTERNAL_PARTITION_H

#include <stdint.h>

#include "common/err.h"
#include "hash/hash.h"

/* Most partitions: one per cluster slot. */
#define BGI_MAX_PARTITIONS 16384
/* The fewest bits of a partition of a filter of more than one. */
#define BGI_MIN_PARTITION_BITS 2048
/* The false-positive rate the sizing aims at, relative to a plain filter's at capacity: below the
 * 1.05 promised, so a measurement has room for its own noise. */
#define BGI_PARTITION_FPR_TARGET 1.02

/* A generation's geometry. */
typedef struct bgi_pgeom {
  uint32_t parts;        /* P */
  uint64_t psize;        /* bits per partition, 1..BG_MAX_SIZE */
  uint32_t k;
  uint64_t m;            /* Redisson's size for (n, p), uncapped: what a plain filter would take */
} bgi_pgeom;

/*
 * The geometry for n expected items at false probability p over `parts` partitions, or
 * a message saying what to change: BG_EINVAL for P outside 1..16384, BG_EBADPARAMS for n and p
 * (Redisson's messages) and for a partition that would need 2^32 bits or more (the fewest
 * partitions that fit).
 */
int bgi_partition_geometry(int64_t n, double p, int64_t parts, bgi_pgeom *out, bgi_err *err);

/* The false-positive rate of a filter of m bits and k hashes holding x items (the usual estimate). */
double bgi_bloom_fpr(double x, double m, uint32_t k);
/* E[f(X)], X ~ Binomial(n, 1/parts): the partitioned filter's rate at n items. */
double bgi_partitioned_fpr(uint64_t n, uint32_t parts, uint64_t psize, uint32_t k);

/* One generation: its number (0: none), partitions, partition geometry, and what it was sized for. */
typedef struct bgi_pgen {
  uint64_t gen;
  uint32_t parts;
  uint64_t cfg;          /* partition size << 32 | k (hash/hash.h, bgi_cfg_pack) */
  int64_t n;
  double fpp;
} bgi_pgen;

/* Generations whose keys wait to be deleted (the central config's list; longer lists are cut). */
#define BGI_PSWEEP_GENS 4

/* What the central config says: the live generation, the one a rotation builds (gen 0: none),
 * and those whose keys are to be deleted. */
typedef struct bgi_pconf {
  bgi_pgen live;
  bgi_pgen next;
  bgi_pgen sweep[BGI_PSWEEP_GENS];
  uint32_t nsweep;
} bgi_pconf;

/* The partition of an item: bgi_partition_of (hash/hash.h, beside Redisson's index sequence: the
 * policy's snapshot answers from it too). */

/* The cluster slot of partition i of P: the middle of its 1/P share of the slots, so the masters
 * hold partitions in proportion to the slots they serve. */
static inline unsigned bgi_partition_slot(uint32_t i, uint32_t parts) {
  return (unsigned)(((2ULL * i + 1) * 16384ULL) / (2ULL * parts));
}

#endif
