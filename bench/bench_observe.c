/*
 * bench_observe: what observability costs a query - single-item bg_filter_contains on a client
 * with latency histograms and an observer set (the instrumented side) vs the same on a client
 * with BG_OPT_HISTOGRAMS 0 and no observer (the plain side), in the same run. Run by hand (see
 * bench/README.md); not a test.
 *
 * Setup: starts its own redis-server on a free 127.0.0.1 port (or --url), creates a filter
 * (1000000 items at 0.01) and adds 20000 items. Each side is its own client (defaults otherwise:
 * tracked, multiplexed connections) and queries the same sequence, alternating present and absent
 * items. The observer hears nothing in steady state (no breaker, no rotation): what the
 * instrumented side pays on the query path is two clock reads and two relaxed atomic additions
 * (the histogram) and the relaxed loads that find no event to tell.
 *
 * Every round gives each side --seconds, cut into --slices slices run in turn (plain,
 * instrumented, plain, ...; the side that starts alternates by round), so both sides see the
 * same background load. The table reports per round the calls/s of each side and their ratio,
 * then the median ratio (which decides pass / miss against 0.97) and the client CPU per call of
 * each side (getrusage), the more sensitive measure of what the instrumentation adds.
 *
 *   bench_observe [--url URL] [--rounds N (7)] [--seconds S (2.0)] [--slices N (20)]
 * Exit status: 0 target met, 3 missed, 1 or 2 on errors.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bloomguard.h"

#define N_ITEMS 20000u
#define TARGET 0.97

static atomic_long heard;

static void on_event(void *ud, int kind, const char *name, const int64_t *v, size_t nv, const char *msg) {
  (void)ud, (void)kind, (void)name, (void)v, (void)nv, (void)msg;
  atomic_fetch_add(&heard, 1);
}

typedef struct side {
  const char *what;
  bg_client *c;
  bg_filter *f;
  size_t cursor;
  uint64_t calls, present;
  double secs, cpu;
} side;

static char items[2 * N_ITEMS][32];
static size_t lens[2 * N_ITEMS];

static void open_side(side *s, const char *what, const char *url, const char *name, int instrumented) {
  bg_options *o = NULL;
  char msg[512];
  s->what = what;
  if (bg_options_new(&o) != BG_OK || bg_options_set_int(o, BG_OPT_HISTOGRAMS, instrumented) != BG_OK)
    bgb_die("options", "", "");
  if (bgt_client_open(&s->c, url, o, msg, sizeof msg) != BG_OK) bgb_die("cannot open a client: %s", msg, "");
  bg_options_free(o);
  if (instrumented && bg_client_set_observer(s->c, on_event, NULL) != BG_OK) bgb_die("set_observer", "", "");
  if (bg_filter_open(&s->f, s->c, name) != BG_OK) bgb_die("filter open", "", "");
}

/* Queries for secs (checking the clock every 64 calls). */
static void run_slice(side *s, double secs) {
  double t0 = bgb_now_s(), c0 = bgb_cpu_s(), end = t0 + secs, now = t0;
  while (now < end) {
    for (int i = 0; i < 64; i++) {
      int present = 0;
      size_t at = s->cursor;
      s->cursor = (at + 1) % (2 * N_ITEMS);
      if (bg_filter_contains(s->f, items[at], lens[at], &present) != BG_OK)
        bgb_die("contains failed: %s", bg_filter_errmsg(s->f), "");
      s->present += (uint64_t)present;
      s->calls++;
    }
    now = bgb_now_s();
  }
  s->secs += now - t0;
  s->cpu += bgb_cpu_s() - c0;
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int rounds = 7, slices = 20;
  double seconds = 2.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--slices") && i + 1 < argc) slices = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_observe [--url URL] [--rounds N] [--seconds S] [--slices N]\n");
      return 2;
    }
  }
  if (rounds < 1 || rounds > BGB_MAX_SAMPLES || slices < 1 || seconds <= 0) bgb_die("bad arguments", "", "");
  bgb_server srv;
  url = bgb_server_or(url, &srv);
  for (size_t i = 0; i < 2 * N_ITEMS; i++)
    lens[i] = (size_t)snprintf(items[i], sizeof items[i], "%s:%zu", i % 2 ? "absent" : "present", i / 2);

  side plain = {0}, inst = {0};
  const char *name = "bench-observe";
  open_side(&plain, "plain", url, name, 0);
  open_side(&inst, "instrumented", url, name, 1);
  bg_filter_delete(plain.f, NULL);
  if (bg_filter_init(plain.f, 1000000, 0.01, NULL) != BG_OK) bgb_die("init", "", "");
  for (size_t i = 0; i < 2 * N_ITEMS; i += 2)
    if (bg_filter_add(plain.f, items[i], lens[i], NULL) != BG_OK) bgb_die("add", "", "");
  run_slice(&plain, 0.3);   /* warm-up: connections, tracking verdicts */
  run_slice(&inst, 0.3);

  double ratios[BGB_MAX_SAMPLES];
  printf("bench_observe: single-item contains, instrumented (histograms + observer) vs plain, %d rounds of "
         "%.1f s per side in %d slices\n", rounds, seconds, slices);
  printf("%6s %14s %14s %8s\n", "round", "plain calls/s", "instr calls/s", "ratio");
  double p_cpu = 0, i_cpu = 0;
  uint64_t p_calls = 0, i_calls = 0;
  for (int r = 0; r < rounds; r++) {
    side *order[2] = {r % 2 ? &inst : &plain, r % 2 ? &plain : &inst};
    uint64_t pc = plain.calls, ic = inst.calls;
    double ps = plain.secs, is = inst.secs, pcpu = plain.cpu, icpu = inst.cpu;
    for (int k = 0; k < slices; k++) {
      run_slice(order[k % 2], seconds / slices);
      run_slice(order[(k + 1) % 2], seconds / slices);
    }
    double prate = (double)(plain.calls - pc) / (plain.secs - ps), irate = (double)(inst.calls - ic) / (inst.secs - is);
    ratios[r] = irate / prate;
    p_cpu += plain.cpu - pcpu, i_cpu += inst.cpu - icpu;
    p_calls += plain.calls - pc, i_calls += inst.calls - ic;
    printf("%6d %14.0f %14.0f %8.3f\n", r + 1, prate, irate, ratios[r]);
  }
  double med = bgb_median(ratios, rounds);
  uint64_t counted = 0, off = 0;
  bg_filter_histogram(inst.f, BG_OP_CONTAINS, BG_OUTCOME_OK, NULL, NULL, 0, &counted, NULL);
  bg_filter_histogram(plain.f, BG_OP_CONTAINS, BG_OUTCOME_OK, NULL, NULL, 0, &off, NULL);
  printf("median ratio instrumented / plain: %.3f (target >= %.2f: %s)\n", med, TARGET, med >= TARGET ? "met" : "MISSED");
  printf("client CPU per call: plain %.2f us, instrumented %.2f us (%+.2f us)\n", p_cpu / (double)p_calls * 1e6,
         i_cpu / (double)i_calls * 1e6, (i_cpu / (double)i_calls - p_cpu / (double)p_calls) * 1e6);
  printf("checks: the instrumented histogram counted %llu of its %llu calls; the plain one %llu; events heard %ld\n",
         (unsigned long long)counted, (unsigned long long)inst.calls, (unsigned long long)off, atomic_load(&heard));
  int sane = counted == inst.calls && off == 0 && plain.present > 0 && inst.present > 0;
  bg_filter_delete(plain.f, NULL);
  bg_filter_close(plain.f);
  bg_filter_close(inst.f);
  bg_client_close(plain.c);
  bg_client_close(inst.c);
  bgb_server_stop(&srv);
  if (!sane) {
    fprintf(stderr, "bench_observe: the checks failed\n");
    return 1;
  }
  return med >= TARGET ? 0 : 3;
}
