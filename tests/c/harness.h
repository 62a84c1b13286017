/*
 * Minimal test harness: checks record failures and keep going, so one run reports every broken
 * expectation; bgt_main runs the registered cases and returns non-zero if any check failed.
 */
#ifndef BG_TEST_HARNESS_H
#define BG_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <bloomguard/client.h>
#include <bloomguard/errors.h>

#include "client_open.h"   /* bgt_client_open */

extern int bgt_failures;
extern const char *bgt_current;

void bgt_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond) \
  do { if (!(cond)) bgt_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECK_MSG(cond, ...) \
  do { if (!(cond)) bgt_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define CHECK_EQ_INT(a, b) \
  do { long long _a = (long long)(a), _b = (long long)(b); \
       if (_a != _b) bgt_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b); } while (0)
#define CHECK_EQ_U64(a, b) \
  do { unsigned long long _a = (unsigned long long)(a), _b = (unsigned long long)(b); \
       if (_a != _b) bgt_fail(__FILE__, __LINE__, "%s == %s: %llu != %llu", #a, #b, _a, _b); } while (0)
#define CHECK_EQ_STR(a, b) \
  do { const char *_a = (a), *_b = (b); \
       if (!_a || !_b || strcmp(_a, _b) != 0) \
         bgt_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)
#define CHECK_CONTAINS(hay, needle) \
  do { const char *_h = (hay), *_n = (needle); \
       if (!_h || !strstr(_h, _n)) \
         bgt_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", _h ? _h : "(null)", _n); } while (0)
/* Status check that prints the status name on failure. */
#define CHECK_STATUS(expr, want) \
  do { int _s = (expr), _w = (want); \
       if (_s != _w) bgt_fail(__FILE__, __LINE__, "%s: status %d (%s), wanted %d (%s)", #expr, _s, \
                              bg_strerror(_s), _w, bg_strerror(_w)); } while (0)
#define CHECK_OK(expr) CHECK_STATUS(expr, 0)

typedef struct bgt_case { const char *name; void (*fn)(void); } bgt_case;
#define BGT_CASE(fn) { #fn, fn }

/* The exit status of a test binary that cannot run against this server (it says why first):
 * ctest counts it as skipped (SKIP_RETURN_CODE, tests/c/CMakeLists.txt). */
#define BGT_SKIP 77

/* The current case cannot run here (why: a string that outlives the case); it returns at once.
 * Counted and printed as skipped ("N passed, N failed, N skipped"); a binary whose every case
 * skipped exits BGT_SKIP. Only the documented reasons may skip in CI (CI set): a case compiled out
 * under a sanitizer (why starts with BGT_SKIP_TSAN or BGT_SKIP_SANITIZER) or a server built without
 * TLS (why contains BGT_SKIP_NO_TLS); any other skip fails the case there (docs/building.md). */
void bgt_skip_case(const char *why);
#define BGT_SKIP_TSAN "under ThreadSanitizer"
#define BGT_SKIP_SANITIZER "under a sanitizer"
#define BGT_SKIP_NO_TLS "was built without TLS"

/* Runs the cases whose name contains argv[1] (all when absent); prints "N passed, N failed". */
int bgt_main(int argc, char **argv, const bgt_case *cases, size_t n);
#define BGT_RUN(...) \
  int main(int argc, char **argv) { \
    static const bgt_case cases[] = { __VA_ARGS__ }; \
    return bgt_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
  }

/* Wall clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t bgt_now_ns(void);

#endif
