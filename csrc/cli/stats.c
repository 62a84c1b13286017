/* stats.c - `bloomguard stats NAME`: measured probes, the handle's and the client's counters and
 * the latency histograms of this process (include/bloomguard/observe.h, stats.h). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* The handle's counters, by the name the JSON and the text use. */
static const struct {
  int id;
  const char *name;
} filter_stats[] = {
  {BG_STAT_QUERIES, "queries"},
  {BG_STAT_ANSWERS_REDIS, "answersRedis"},
  {BG_STAT_ANSWERS_SNAPSHOT, "answersSnapshot"},
  {BG_STAT_ANSWERS_CALLBACK, "answersCallback"},
  {BG_STAT_ANSWERS_ASSUMED_PRESENT, "answersAssumedPresent"},
  {BG_STAT_ANSWERS_ASSUMED_ABSENT, "answersAssumedAbsent"},
  {BG_STAT_QUERY_ERRORS, "queryErrors"},
  {BG_STAT_ADDS, "adds"},
  {BG_STAT_ADD_ERRORS, "addErrors"},
  {BG_STAT_RETRIES, "retries"},
  {BG_STAT_BREAKER_STATE, "breakerState"},
  {BG_STAT_BREAKER_TRIPS, "breakerTrips"},
  {BG_STAT_TRACKED_READS, "trackedReads"},
  {BG_STAT_TRACKED_STALE, "trackedStale"},
  {BG_STAT_FAIL_NOTINIT, "failNotInitialized"},
  {BG_STAT_FAIL_CONFIG, "failConfigChanged"},
  {BG_STAT_FAIL_LOCKED, "failLocked"},
  {BG_STAT_FAIL_CONNECTION, "failConnection"},
  {BG_STAT_FAIL_TIMEOUT, "failTimeout"},
  {BG_STAT_FAIL_SERVER, "failServer"},
  {BG_STAT_FAIL_CORRUPT, "failCorrupt"},
  {BG_STAT_FAIL_OTHER, "failOther"},
};

static const struct {
  int id;
  const char *name;
} client_stats[] = {
  {BG_CLIENT_STAT_CONNECTIONS, "connections"},
  {BG_CLIENT_STAT_CONNECTIONS_LOST, "connectionsLost"},
  {BG_CLIENT_STAT_TRACKING_INVALIDATIONS, "trackingInvalidations"},
  {BG_CLIENT_STAT_CLUSTER_MOVED, "clusterMoved"},
  {BG_CLIENT_STAT_CLUSTER_ASK, "clusterAsk"},
  {BG_CLIENT_STAT_CLUSTER_BUSY_RETRIES, "clusterBusyRetries"},
  {BG_CLIENT_STAT_CLUSTER_MAP_RELOADS, "clusterMapReloads"},
};

#define NELEM(a) (sizeof a / sizeof a[0])

/* The upper bound (seconds) of the bucket the q-quantile falls in; -1 past the last bound. */
static double quantile_bound(const uint64_t *counts, uint64_t total, const double *bounds, double q) {
  uint64_t want = (uint64_t)(q * (double)total + 0.999999), seen = 0;
  for (int i = 0; i < BG_HIST_BUCKETS; i++) {
    seen += counts[i];
    if (seen >= want && seen) return i < BG_HIST_BUCKETS - 1 ? bounds[i] : -1;
  }
  return -1;
}

static void print_seconds(double s) {
  if (s < 0) fputs("longer", stdout);
  else if (s < 1e-3) printf("%.0f us", s * 1e6);
  else if (s < 1) printf("%.3g ms", s * 1e3);
  else printf("%.3g s", s);
}

/* One histogram as text or JSON (first: no comma before it). */
static void print_histogram(const cli_opts *o, int op, int outcome, const double *bounds, const uint64_t *counts,
                            uint64_t n, double sum, int first) {
  if (o->json) {
    char buf[64];
    printf("%s{\"operation\":\"%s\",\"outcome\":\"%s\",\"count\":%llu,\"sumSeconds\":", first ? "" : ",",
           bg_op_name(op), bg_outcome_name(outcome), (unsigned long long)n);
    cli_fmt_double(buf, sizeof buf, sum);
    fputs(buf, stdout);
    fputs(",\"bounds\":[", stdout);
    for (int i = 0; i < BG_HIST_BUCKETS - 1; i++) {
      cli_fmt_double(buf, sizeof buf, bounds[i]);
      printf("%s%s", i ? "," : "", buf);
    }
    fputs("],\"counts\":[", stdout);
    for (int i = 0; i < BG_HIST_BUCKETS; i++) printf("%s%llu", i ? "," : "", (unsigned long long)counts[i]);
    fputs("]}", stdout);
    return;
  }
  printf("  %s %s: %llu, mean ", bg_op_name(op), bg_outcome_name(outcome), (unsigned long long)n);
  print_seconds(sum / (double)n);
  fputs(", p50 <= ", stdout);
  print_seconds(quantile_bound(counts, n, bounds, 0.5));
  fputs(", p99 <= ", stdout);
  print_seconds(quantile_bound(counts, n, bounds, 0.99));
  fputs("\n   ", stdout);
  for (int i = 0; i < BG_HIST_BUCKETS; i++) {
    if (!counts[i]) continue;
    fputs(" <=", stdout);
    print_seconds(i < BG_HIST_BUCKETS - 1 ? bounds[i] : -1);
    printf(": %llu", (unsigned long long)counts[i]);
  }
  fputs("\n", stdout);
}

int cli_cmd_stats(const cli_opts *o, bg_filter *f) {
  int64_t want = o->have_probes ? o->probes : 100, probes = 0;
  for (int64_t i = 0; i < want; i++, probes++) {
    char item[64];
    int present = 0;
    int n = snprintf(item, sizeof item, "bloomguard-stats-probe-%lld", (long long)i);
    int st = bg_filter_contains(f, item, (size_t)n, &present);
    if (st != BG_OK && st != BG_ENOTINIT) return cli_fail_filter(o->cmd, st, f);
    if (st == BG_ENOTINIT) {   /* counted and measured: the counters and the histogram say so */
      probes++;
      break;
    }
  }
  char node[300] = "";
  int32_t slot = 0;
  bg_filter_node(f, node, sizeof node, &slot);
  if (o->json) {
    fputs("{\"name\":", stdout);
    cli_json_string(stdout, o->name, strlen(o->name));
    printf(",\"probes\":%lld,\"node\":", (long long)probes);
    cli_json_string(stdout, node, strlen(node));
    printf(",\"slot\":%ld,\"stats\":{", (long)slot);
  } else {
    printf("name: %s\nnode: %s (hash slot %ld)\nprobes: %lld\ncounters:\n", o->name, node[0] ? node : "(unknown)",
           (long)slot, (long long)probes);
  }
  for (size_t i = 0; i < NELEM(filter_stats); i++) {
    int64_t v = 0;
    bg_filter_stat(f, filter_stats[i].id, &v);
    if (o->json) printf("%s\"%s\":%lld", i ? "," : "", filter_stats[i].name, (long long)v);
    else if (v) printf("  %s: %lld\n", filter_stats[i].name, (long long)v);
  }
  if (o->json) fputs("},\"client\":{", stdout);
  else fputs("client:\n", stdout);
  for (size_t i = 0; i < NELEM(client_stats); i++) {
    int64_t v = 0;
    bg_client_stat(o->client, client_stats[i].id, &v);
    if (o->json) printf("%s\"%s\":%lld", i ? "," : "", client_stats[i].name, (long long)v);
    else printf("  %s: %lld\n", client_stats[i].name, (long long)v);
  }
  if (o->json) fputs("},\"histograms\":[", stdout);
  else fputs("latency:\n", stdout);
  int first = 1;
  for (int op = 1; op <= BG_OP_MAX; op++)
    for (int outcome = 0; outcome <= BG_OUTCOME_MAX; outcome++) {
      double bounds[BG_HIST_BUCKETS - 1], sum = 0;
      uint64_t counts[BG_HIST_BUCKETS], n = 0;
      if (bg_filter_histogram(f, op, outcome, bounds, counts, BG_HIST_BUCKETS, &n, &sum) != BG_OK || !n) continue;
      print_histogram(o, op, outcome, bounds, counts, n, sum, first);
      first = 0;
    }
  if (o->json) fputs("]}\n", stdout);
  else if (first) fputs("  (none)\n", stdout);
  return CLI_EXIT_OK;
}
