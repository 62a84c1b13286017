/*
 * bench_c_batch: the C side of bench_python.py. It holds ONE connection (a bg_client with
 * BG_OPT_POOL_SIZE 1) to an existing filter and calls bg_filter_contains_many on one fixed batch,
 * for as long as the driver asks, so the driver can interleave C slices with its own Python slices
 * under the same load. Not meant to be run by hand (see bench/README.md, bench_python).
 *
 *   bench_c_batch --url URL --filter NAME
 * stdin:  a line with the batch size N, then N lines, one item each (no newlines inside items);
 *         then commands, one a line:
 *           check       -> one line of N '0'/'1': the answers (the driver compares them with Python's)
 *           run SECONDS -> "CALLS WALL_S CPU_S": calls made in a slice of SECONDS (at least one call),
 *                          its wall-clock and this process' CPU seconds
 *           quit        -> exits 0
 * Any failure prints "error ..." on stdout and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bloomguard.h"

#define MAX_BATCH 16384
#define LINE_MAX_BYTES 4096

static void fail(const char *what, const char *msg) {
  printf("error %s: %s\n", what, msg ? msg : "");
  exit(1);
}

static char *read_line(char *buf) {
  if (!fgets(buf, LINE_MAX_BYTES, stdin)) return NULL;
  buf[strcspn(buf, "\n")] = 0;
  return buf;
}

int main(int argc, char **argv) {
  const char *url = NULL, *name = NULL;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--url")) url = argv[i + 1];
    else if (!strcmp(argv[i], "--filter")) name = argv[i + 1];
  }
  if (!url || !name) {
    fprintf(stderr, "usage: %s --url URL --filter NAME (driven by bench/bench_python.py)\n", argv[0]);
    return 2;
  }
  static char line[LINE_MAX_BYTES];
  if (!read_line(line)) fail("input", "no batch size");
  size_t n = strtoul(line, NULL, 10);
  if (n < 1 || n > MAX_BATCH) fail("input", "batch size out of range");
  char **items = calloc(n, sizeof *items);
  size_t *lens = calloc(n, sizeof *lens);
  uint8_t *present = calloc(n, 1);
  char *answers = calloc(n + 1, 1);
  if (!items || !lens || !present || !answers) fail("memory", "out of memory");
  for (size_t i = 0; i < n; i++) {
    if (!read_line(line)) fail("input", "fewer items than announced");
    lens[i] = strlen(line);
    if (!(items[i] = malloc(lens[i] + 1))) fail("memory", "out of memory");
    memcpy(items[i], line, lens[i] + 1);
  }

  bg_options *o;
  bg_client *cl;
  bg_filter *f;
  char err[512];
  if (bg_options_new(&o) != BG_OK) fail("options", "out of memory");
  bg_options_set_int(o, BG_OPT_POOL_SIZE, 1);
  if (bgt_client_open(&cl, url, o, err, sizeof err) != BG_OK) fail("bg_client_open", err);
  bg_options_free(o);
  if (bg_filter_open(&f, cl, name) != BG_OK) fail("bg_filter_open", bg_client_errmsg(cl));

  const void *const *ptrs = (const void *const *)items;
  uint64_t sink = 0;
  while (read_line(line)) {
    if (!strcmp(line, "quit")) break;
    if (!strcmp(line, "check")) {
      if (bg_filter_contains_many(f, ptrs, lens, n, present) != BG_OK) fail("contains_many", bg_filter_errmsg(f));
      for (size_t i = 0; i < n; i++) answers[i] = present[i] ? '1' : '0';
      printf("%s\n", answers);
    } else if (!strncmp(line, "run ", 4)) {
      double seconds = strtod(line + 4, NULL), c0 = bgb_cpu_s(), t0 = bgb_now_s(), t1;
      long calls = 0;
      do {
        if (bg_filter_contains_many(f, ptrs, lens, n, present) != BG_OK) fail("contains_many", bg_filter_errmsg(f));
        sink += present[0];
        calls++;
      } while ((t1 = bgb_now_s()) - t0 < seconds);
      printf("%ld %.9f %.9f\n", calls, t1 - t0, bgb_cpu_s() - c0);
    } else {
      fail("input", line);
    }
  }
  bg_filter_close(f);
  bg_client_close(cl);
  for (size_t i = 0; i < n; i++) free(items[i]);
  free(items), free(lens), free(present), free(answers);
  return sink == UINT64_MAX; /* keeps the calls' results live */
}
