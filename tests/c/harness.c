#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

int bgt_failures;
const char *bgt_current = "";
static const char *known_why;   /* the current case's bgt_known_failure */

void bgt_known_failure(const char *why) { known_why = why; }

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

uint64_t bgt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bgt_main(int argc, char **argv, const bgt_case *cases, size_t n) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0, known = 0, skipped = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (size_t i = 0; i < n; i++) {
    /* setup/teardown run whatever the filter, so one case can be run alone */
    int fixture = !strcmp(cases[i].name, "setup") || !strcmp(cases[i].name, "teardown");
    if (filter && !fixture && !strstr(cases[i].name, filter)) continue;
    int before = bgt_failures;
    bgt_current = cases[i].name;
    known_why = skip_why = NULL;
    uint64_t t0 = bgt_now_ns();
    cases[i].fn();
    double ms = (double)(bgt_now_ns() - t0) / 1e6;
    if (skip_why && bgt_failures == before) {
      printf("skip %s: %s\n", cases[i].name, skip_why);
      skipped++;
      continue;
    }
    if (known_why) {
      printf("%s %s (%.1f ms): known failure on this server: %s\n",
             bgt_failures == before ? "ok (known failure did not happen: the mark may go)" : "KNOWN FAILURE",
             cases[i].name, ms, known_why);
      known += bgt_failures != before;
      bgt_failures = before;
      passed++;
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
  printf("%d passed, %d failed\n", passed, failed);
  if (skipped) printf("(%d case(s) skipped on this server, see above)\n", skipped);
  if (known) printf("(%d of the passed: a known failure on this server, see above)\n", known);
  if (passed + failed == 0 && skipped) return BGT_SKIP;
  if (passed + failed == 0) {
    fprintf(stderr, "no test case matched \"%s\"\n", filter ? filter : "");
    return 1;
  }
  return failed ? 1 : 0;
}
