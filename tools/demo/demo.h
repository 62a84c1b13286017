/*
 * demo.h - bloomguard-demo: shared declarations of its small units.
 *
 *   main.c      options, the scenario list, the table and the JSON summary
 *   scenario.c  one scenario: load the catalogue, query threads, the rotator's timeline
 *   latency.c   per-thread latency histograms per time bucket, preallocated
 *   svg.c       the plot, written by hand (no dependencies)
 *   events.c    the library's events, printed as they come
 *
 * Its private redis-server comes from the launcher the tests and benchmarks use too
 * (tools/server_proc). Like the CLI it uses only the public API (bloomguard.h), and the CLI's
 * output and password helpers (csrc/cli/cli.h, bg_cli_kit).
 */
#ifndef BG_CLI_DEMO_H
#define BG_CLI_DEMO_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "bloomguard.h"
#include "server_proc.h"

#define DEMO_MAX_THREADS   64
#define DEMO_MAX_MARKS     32     /* rotations and outages drawn in one panel */
#define DEMO_ITEM_MAX      32     /* bytes of one product id, NUL included */

/* ---- events.c ------------------------------------------------------------------- */
/* What one client's events are printed with; must outlive the client. */
typedef struct demo_events {
  const char *scenario;   /* "swap", ... */
  const char *who;        /* "readers", "rotator" */
  uint64_t t0_ns;         /* times are printed from here */
} demo_events;

/* Prints c's events on stderr from now on (bg_client_set_observer). */
void demo_events_attach(demo_events *e, bg_client *c, const char *scenario, const char *who);

/* ---- latency.c ------------------------------------------------------------------ */
/*
 * Latency bins: 8 per power of two (each about 9 % wide) from 0.25 us up to 2^25 us (33 s);
 * a quantile is read as the geometric middle of its bin, so figures are good to about 5 %.
 */
#define DEMO_LAT_BINS 216

typedef struct demo_bucket {
  uint64_t queries;
  uint64_t errors;        /* the call failed */
  uint64_t false_neg;     /* the call answered "absent" for an item that is in the catalogue */
  uint64_t degraded;      /* answered by the policy engine, not by Redis */
  uint32_t bins[DEMO_LAT_BINS];
} demo_bucket;

/* One time series: nbuckets buckets of bucket_us each, allocated once. One per query thread
 * (no sharing, no atomics), merged when the scenario ends. */
typedef struct demo_series {
  int nbuckets;
  int64_t bucket_us;
  demo_bucket *b;
} demo_series;

int  demo_series_init(demo_series *s, int nbuckets, int64_t bucket_us);
void demo_series_free(demo_series *s);
void demo_series_reset(demo_series *s);
/* Outcomes of demo_series_record. */
#define DEMO_OUT_OK        0
#define DEMO_OUT_ERROR     1
#define DEMO_OUT_FALSE_NEG 2
/* Records one query that started at t_us (since the scenario began) and took lat_us. No allocation. */
void demo_series_record(demo_series *s, int64_t t_us, double lat_us, int outcome, int degraded);
/* dst += src (same shape). */
void demo_series_merge(demo_series *dst, const demo_series *src);
/* All buckets' bins summed into out[DEMO_LAT_BINS]; returns the number of samples. */
uint64_t demo_series_total(const demo_series *s, uint32_t *out);
/* The q-quantile (0..1) of the bins in microseconds; 0 when there are no samples. */
double demo_bins_quantile(const uint32_t *bins, double q);
/* The largest latency seen (upper edge of the highest non-empty bin), microseconds. */
double demo_bins_max(const uint32_t *bins);

/* ---- scenario.c ----------------------------------------------------------------- */
/* Scenarios (demo_result.kind). */
#define DEMO_NAIVE    0
#define DEMO_SWAP     1
#define DEMO_LOCKED   2
#define DEMO_DEGRADE  3
#define DEMO_NKINDS   4

#define DEMO_MARK_ROTATION 1
#define DEMO_MARK_OUTAGE   2

typedef struct demo_mark {
  int kind;           /* DEMO_MARK_* */
  int ok;             /* rotation committed / server restarted */
  double t0, t1;      /* seconds since the scenario began: rotation begin and commit, outage */
} demo_mark;

typedef struct demo_config {
  const char *url;          /* server the scenarios run against */
  bgt_server *server;       /* the demo's own server, or NULL with --url (degrade is skipped) */
  int64_t items;            /* catalogue size */
  double fpp;
  double seconds;           /* per scenario */
  int threads;              /* query threads */
  double rate;              /* queries per second, all threads together; 0 = as fast as they can */
  int64_t timeout_ms;       /* client's connect and command timeout; 0 = library defaults */
  const char *prefix;       /* filter names: PREFIX + scenario name */
  volatile sig_atomic_t *stop;  /* set by SIGINT / SIGTERM */
} demo_config;

typedef struct demo_result {
  int kind;
  const char *name;         /* "naive", "swap", "locked", "degrade" */
  int ran;                  /* 0: skipped, see note */
  int harness_failed;       /* the demo itself could not run it (not the strategy's fault) */
  char note[256];           /* why skipped / what failed, or "" */
  char first_error[256];    /* the first failed query's status and message */
  double load_s;            /* loading the catalogue before the run (a SWAP rotation) */
  double duration_s;        /* queries ran this long: --seconds, or until the last rebuild ended */
  uint64_t queries, errors, false_neg, degraded;
  double p50_us, p99_us, max_us;
  int rotations_ok, rotations_failed;
  double rebuild_mean_s, rebuild_max_s;
  int64_t answers[6];       /* by BG_SOURCE_*: from the filter's BG_STAT_ANSWERS_* counters */
  int64_t retries, breaker_trips, breaker_rejected;
  demo_mark marks[DEMO_MAX_MARKS];
  int nmarks;
  demo_series series;       /* all threads merged */
} demo_result;

const char *demo_kind_name(int kind);
/* Runs one scenario into r (r->kind set by the caller). Returns 0, or -1 when the harness failed
 * (r->note says why; r->harness_failed set). A strategy misbehaving is not a failure: it is the
 * result. */
int demo_run_scenario(const demo_config *cfg, demo_result *r);
void demo_result_free(demo_result *r);

/* ---- svg.c ---------------------------------------------------------------------- */
/* Writes the plot: one panel per result that ran. 0, or -1 with errno set. */
int demo_write_svg(const char *path, const demo_result *results, int n, const demo_config *cfg);

#endif
