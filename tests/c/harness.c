#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

int bgt_failures;
const char *bgt_current = "";
static const char *skip_why;   /* the current case's bgt_skip_case */
void bgt_skip_case(const char *why) { skip_why = why; }

void bgt_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  bgt_failures++;
  fprintf(stderr, "FAIL [%s] %s:%d: ", bgt_current, file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* A reason docs/building.md lists as a skip CI accepts. */
static int documented_skip(const char *why) {
  return !strncmp(why, BGT_SKIP_TSAN, strlen(BGT_SKIP_TSAN)) ||
         !strncmp(why, BGT_SKIP_SANITIZER, strlen(BGT_SKIP_SANITIZER)) || strstr(why, BGT_SKIP_NO_TLS) != NULL;
}

static int in_ci(void) {
  const char *ci = getenv("CI");
  return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}

uint64_t bgt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bgt_main(int argc, char **argv, const bgt_case *cases, size_t n) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0, skipped = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (size_t i = 0; i < n; i++) {
    /* setup/teardown run whatever the filter, so one case can be run alone */
    int fixture = !strcmp(cases[i].name, "setup") || !strcmp(cases[i].name, "teardown");
    if (filter && !fixture && !strstr(cases[i].name, filter)) continue;
    int before = bgt_failures;
    bgt_current = cases[i].name;
    skip_why = NULL;
    uint64_t t0 = bgt_now_ns();
    cases[i].fn();
    double ms = (double)(bgt_now_ns() - t0) / 1e6;
    if (skip_why && bgt_failures == before && in_ci() && !documented_skip(skip_why))
      bgt_fail(__FILE__, __LINE__, "skipped in CI for a reason docs/building.md does not list: %s", skip_why);
    if (skip_why && bgt_failures == before) {
      printf("skip %s: %s\n", cases[i].name, skip_why);
      skipped++;
      continue;
    }
    if (bgt_failures == before) {
      passed++;
      printf("ok   %s (%.1f ms)\n", cases[i].name, ms);
    } else {
      failed++;
      printf("FAIL %s (%.1f ms)\n", cases[i].name, ms);
    }
  }
  if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else printf("%d passed, %d failed\n", passed, failed);
  if (passed + failed == 0 && skipped) return BGT_SKIP;
  if (passed + failed == 0) {
    fprintf(stderr, "no test case matched \"%s\"\n", filter ? filter : "");
    return 1;
  }
  return failed ? 1 : 0;
}
