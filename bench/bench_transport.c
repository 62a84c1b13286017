/*
 * bench_transport: what a transport option costs, as a ratio to the same calls without it, same
 * server, same run, interleaved slices (A, B, A, B, ...; the side that starts alternates):
 *   --tls-url rediss://... --tls-ca FILE : single-item bg_filter_contains over TLS vs plain TCP
 *                                          (--url: the same server's plain port)
 *   --wait N                             : single-item bg_filter_add with BG_OPT_WAIT_REPLICAS N vs 0
 *                                          (--url: a master with at least N replicas)
 * Not a test: run by hand against servers you started (bench/README.md has the commands).
 *
 *   bench_transport --url redis://127.0.0.1:P [--tls-url rediss://127.0.0.1:T --tls-ca ca.crt]
 *                   [--wait N] [--rounds R (5)] [--seconds S (1.0)] [--slices K (10)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define N_ITEMS 100000
#define MAX_ROUNDS 21

static char items[2 * N_ITEMS][16];
static size_t lens[2 * N_ITEMS];

typedef int (*op_fn)(bg_filter *f, size_t i);

static int op_contains(bg_filter *f, size_t i) {
  int present;
  return bg_filter_contains(f, items[i % (2 * N_ITEMS)], lens[i % (2 * N_ITEMS)], &present);
}

static int op_add(bg_filter *f, size_t i) {
  int added;
  char item[32];
  int n = snprintf(item, sizeof item, "w:%zu", i);
  return bg_filter_add(f, item, (size_t)n, &added);
}

/* Calls per second of op on f for seconds; *cursor walks on. */
static double run(bg_filter *f, op_fn op, double seconds, size_t *cursor) {
  double t0 = bgb_now_s(), end = t0 + seconds;
  uint64_t n = 0;
  while (bgb_now_s() < end)
    for (int j = 0; j < 32; j++, n++)
      if (op(f, (*cursor)++) != BG_OK) bgb_die("a call failed: %s%s", bg_filter_errmsg(f), NULL);
  return (double)n / (bgb_now_s() - t0);
}

static bg_client *open_client(const char *url, const char *ca, int wait) {
  bg_options *o = NULL;
  bg_client *c = NULL;
  char err[512];
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_POOL_SIZE, 1);
  if (ca) bg_options_set_str(o, BG_OPT_TLS_CA_FILE, ca);
  if (wait) bg_options_set_int(o, BG_OPT_WAIT_REPLICAS, wait);
  if (bgt_client_open(&c, url, o, err, sizeof err) != BG_OK) bgb_die("open %s: %s", url, err);
  bg_options_free(o);
  return c;
}

/* Interleaved rounds of side a vs side b; prints the table line and returns the median ratio b/a. */
static double compare(const char *what, const char *a_name, bg_filter *a, const char *b_name, bg_filter *b, op_fn op,
                      int rounds, double seconds, int slices) {
  double ra[MAX_ROUNDS], rb[MAX_ROUNDS], ratio[MAX_ROUNDS];
  size_t ca = 0, cb = 0;
  run(a, op, 0.2, &ca);
  run(b, op, 0.2, &cb);
  for (int r = 0; r < rounds; r++) {
    double sa = 0, sb = 0;
    for (int s = 0; s < slices; s++) {
      if ((r + s) % 2 == 0) {
        sa += run(a, op, seconds / slices, &ca);
        sb += run(b, op, seconds / slices, &cb);
      } else {
        sb += run(b, op, seconds / slices, &cb);
        sa += run(a, op, seconds / slices, &ca);
      }
    }
    ra[r] = sa / slices, rb[r] = sb / slices, ratio[r] = rb[r] / ra[r];
    fprintf(stderr, "  %s round %d: %s %.0f/s, %s %.0f/s (%.3fx)\n", what, r + 1, a_name, ra[r], b_name, rb[r], ratio[r]);
  }
  double m = bgb_median(ratio, rounds);
  printf("| %s | %s %.0f/s | %s %.0f/s | %.3fx |\n", what, a_name, bgb_median(ra, rounds), b_name, bgb_median(rb, rounds),
         m);
  return m;
}

int main(int argc, char **argv) {
  const char *url = NULL, *tls_url = NULL, *ca = NULL;
  int wait = 0, rounds = 5, slices = 10;
  double seconds = 1.0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--tls-url") && i + 1 < argc) tls_url = argv[++i];
    else if (!strcmp(argv[i], "--tls-ca") && i + 1 < argc) ca = argv[++i];
    else if (!strcmp(argv[i], "--wait") && i + 1 < argc) wait = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--slices") && i + 1 < argc) slices = atoi(argv[++i]);
    else url = NULL, i = argc;
  }
  if (!url || (!tls_url && !wait) || rounds < 1 || rounds > MAX_ROUNDS || slices < 1 || !(seconds > 0.05)) {
    fprintf(stderr, "usage: %s --url redis://host:port [--tls-url rediss://host:tlsport --tls-ca FILE] [--wait N] "
                    "[--rounds R] [--seconds S] [--slices K]\n", argv[0]);
    return 1;
  }
  for (int i = 0; i < 2 * N_ITEMS; i++) lens[i] = (size_t)snprintf(items[i], sizeof items[i], "%c:%08d", i % 2 ? 'a' : 'p', i / 2);
  char name[64];
  snprintf(name, sizeof name, "bloomguard-bench:transport:%ld", (long)getpid());
  bg_client *plain = open_client(url, NULL, 0);
  bg_filter *fp = NULL;
  bg_filter_open(&fp, plain, name);
  bg_filter_delete(fp, NULL);
  if (bg_filter_init(fp, 1000000, 0.01, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(fp), NULL);
  for (size_t from = 0; from < N_ITEMS; from += 1000) {
    const void *p[1000];
    size_t l[1000];
    for (size_t j = 0; j < 1000; j++) p[j] = items[2 * (from + j)], l[j] = lens[2 * (from + j)];
    if (bg_filter_add_many(fp, p, l, 1000, NULL) != BG_OK) bgb_die("add: %s%s", bg_filter_errmsg(fp), NULL);
  }
  printf("bench_transport: %d rounds x %.1f s per side in %d interleaved slices, one connection per side\n\n"
         "| comparison | baseline | with the option | ratio |\n|---|---:|---:|---:|\n", rounds, seconds, slices);
  if (tls_url) {
    bg_client *tls = open_client(tls_url, ca, 0);
    bg_filter *ft = NULL;
    bg_filter_open(&ft, tls, name);
    compare("contains, 1 item: TLS vs plain TCP", "plain", fp, "TLS", ft, op_contains, rounds, seconds, slices);
    bg_filter_close(ft);
    bg_client_close(tls);
  }
  if (wait) {
    bg_client *w = open_client(url, NULL, wait);
    bg_filter *fw = NULL;
    bg_filter_open(&fw, w, name);
    char what[64];
    snprintf(what, sizeof what, "add, 1 item: WAIT %d vs none", wait);
    compare(what, "no WAIT", fp, "WAIT", fw, op_add, rounds, seconds, slices);
    bg_filter_close(fw);
    bg_client_close(w);
  }
  bg_filter_delete(fp, NULL);
  bg_filter_close(fp);
  bg_client_close(plain);
  return 0;
}
