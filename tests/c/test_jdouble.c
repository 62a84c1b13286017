/*
 * falseProbability text forms: Java's Double.toString for writing, a strict parser for reading
 * both that and the plain decimals older Redisson wrote (tests/vectors/redisson_bitmap_example.json).
 */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jdouble.h"
#include "harness.h"
#include "vectors.h"

static void check_format(double v, const char *want) {
  char buf[64];
  size_t n = bgi_format_java_double(v, buf, sizeof buf);
  CHECK_MSG(strcmp(buf, want) == 0 && n == strlen(want), "format(%.17g) = \"%s\" (%zu), want \"%s\"", v,
            buf, n, want);
}

static void check_parse(const char *s, double want) {
  double v = -12345;
  int rc = bgi_parse_double(s, strlen(s), &v);
  CHECK_MSG(rc == 0 && memcmp(&v, &want, sizeof v) == 0, "parse(\"%s\") = %d, %.17g, want %.17g", s, rc,
            v, want);
}

static void check_reject(const char *s, size_t len) {
  double v = -12345;
  CHECK_MSG(bgi_parse_double(s, len, &v) == -1, "parse(\"%.*s\") accepted: %.17g", (int)len, s, v);
  CHECK(v == -12345); /* untouched */
}

static void test_redisson_table(void) {
  cJSON *root = bgt_vectors_load("redisson_bitmap_example.json");
  const cJSON *tab = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config_hash"), "falseProbability_formatting");
  int rows = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, tab) {
    rows++;
    const char *p = cJSON_GetObjectItem(row, "p")->valuestring;
    const char *java = cJSON_GetObjectItem(row, "Double_toString_redisson_ge_3_30_0")->valuestring;
    const char *plain = cJSON_GetObjectItem(row, "BigDecimal_valueOf_toPlainString_redisson_lt_3_30_0")->valuestring;
    const char *valueof = cJSON_GetObjectItem(row, "String_valueOf")->valuestring;
    double v = strtod(p, NULL); /* the test runs in the "C" locale */
    check_format(v, java);
    check_format(v, valueof);
    check_parse(java, v);
    check_parse(plain, v);
    check_parse(p, v);
  }
  CHECK(rows >= 10);
  cJSON_Delete(root);
}

static void test_java_layout(void) {
  check_format(0.0, "0.0");
  check_format(-0.0, "-0.0");
  check_format(NAN, "NaN");
  check_format(INFINITY, "Infinity");
  check_format(-INFINITY, "-Infinity");
  check_format(1.0, "1.0");
  check_format(-1.5, "-1.5");
  check_format(100.0, "100.0");
  check_format(123.5, "123.5");
  check_format(1234567.0, "1234567.0");
  check_format(9999999.0, "9999999.0");
  check_format(1e7, "1.0E7");
  check_format(12345678.0, "1.2345678E7");
  check_format(1e21, "1.0E21");
  check_format(1e23, "1.0E23");
  check_format(9223372036854775808.0, "9.223372036854776E18");
  check_format(0.001, "0.001");
  check_format(0.002, "0.002"); /* JDK <= 18 printed "0.0020" here; both read back the same */
  check_format(9e-4, "9.0E-4");
  check_format(1e-5, "1.0E-5");
  check_format(0.1 + 0.2, "0.30000000000000004");
  check_format(1.0 / 3, "0.3333333333333333");
  check_format(100.0 / 3, "33.333333333333336");
  check_format(3.141592653589793, "3.141592653589793");
  check_format(DBL_MAX, "1.7976931348623157E308");
  check_format(DBL_MIN, "2.2250738585072014E-308");
  check_format(DBL_TRUE_MIN, "4.9E-324"); /* two digits when one would do, as Java */
  check_format(-DBL_TRUE_MIN, "-4.9E-324");
}

static void test_format_small_buffers(void) {
  char buf[8];
  memset(buf, 'x', sizeof buf);
  CHECK_EQ_INT(bgi_format_java_double(1.0e-4, buf, 4), 3);
  CHECK_EQ_STR(buf, "1.0");
  CHECK_EQ_INT(bgi_format_java_double(1.0e-4, buf, 0), 0);
  CHECK_EQ_INT(bgi_format_java_double(1.0e-4, NULL, 0), 0);
  /* The longest forms fit the documented 32. */
  char big[32];
  CHECK(bgi_format_java_double(-DBL_MIN, big, sizeof big) < sizeof big);
  CHECK_EQ_STR(big, "-2.2250738585072014E-308");
}

static void test_parse_accepts(void) {
  check_parse("1.0E-4", 1e-4);
  check_parse("1e-4", 1e-4);
  check_parse("1E-4", 1e-4);
  check_parse("0.00010", 1e-4);
  check_parse("0.0000000010", 1e-9);
  check_parse("0.01", 0.01);
  check_parse("1", 1.0);
  check_parse("1.", 1.0);
  check_parse(".5", 0.5);
  check_parse("+0.5", 0.5);
  check_parse("-0.5", -0.5);
  check_parse("-0.0", -0.0);
  check_parse("1e+2", 100.0);
  check_parse("4.9E-324", DBL_TRUE_MIN);
  check_parse("1.7976931348623157E308", DBL_MAX);
  check_parse("1e-400", 0.0); /* underflows to zero, as Double.valueOf */
  check_parse("0.000000000000000000000000000000000000000000000000001e51", 1.0);
  check_parse("1e-999999999999999999999999", 0.0); /* exponent saturates, no overflow */
  /* Not NUL-terminated: only len bytes count. */
  double v = 0;
  CHECK_EQ_INT(bgi_parse_double("0.015", 4, &v), 0);
  CHECK(v == 0.01);
}

static void test_parse_rejects(void) {
  const char *bad[] = {"",     "abc",  "0.01x", " 1",     "1 ",   "nan",     "NaN",  "inf",
                       "Infinity", "-", "+",  ".",      "e5",   "1e",      "1e+",  "1e-",
                       "0x1p3", "1.0d", "1.0f", "1,0",   "--1",  "1..0",    "1.0E", "1e400",
                       "-1e400", "1.0E-4 ", "\t1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_reject(bad[i], strlen(bad[i]));
  check_reject("0.01\0", 5); /* an embedded NUL is not the end of the field */
  double v;
  CHECK_EQ_INT(bgi_parse_double(NULL, 0, &v), -1);
  CHECK_EQ_INT(bgi_parse_double("1", 1, NULL), -1);
  char huge[2000];
  memset(huge, '1', sizeof huge);
  check_reject(huge, sizeof huge); /* beyond any real field: refused, not misread */
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Random bit patterns and random probabilities: every finite double reads back bit for bit. */
static void test_round_trip(void) {
  int bad = 0;
  for (int i = 0; i < 200000 && bad < 10; i++) {
    uint64_t bits = next_rand();
    double v;
    if (i % 2) {
      memcpy(&v, &bits, sizeof v);
      if (!isfinite(v)) continue;
    } else {
      v = (double)(bits >> 11) / 9007199254740992.0; /* uniform in [0, 1): falseProbability-like */
    }
    char buf[32];
    size_t n = bgi_format_java_double(v, buf, sizeof buf);
    double back;
    if (n == 0 || n >= 26 || bgi_parse_double(buf, n, &back) != 0 || memcmp(&back, &v, sizeof v) != 0) {
      bgt_fail(__FILE__, __LINE__, "%.17g -> \"%s\" does not read back", v, buf);
      bad++;
    }
  }
}

/* A locale with ',' as radix must change nothing (the library never calls setlocale). */
static void test_comma_locale(void) {
  const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8", "de_DE"};
  const char *got = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
  if (!got) {
    printf("  (no locale with a ',' radix installed: checked the \"C\" locale only)\n");
    return;
  }
  printf("  LC_NUMERIC=%s\n", got);
  check_format(1e-4, "1.0E-4");
  check_format(0.01, "0.01");
  check_format(123.5, "123.5");
  check_parse("0.01", 0.01);
  check_parse("1.0E-4", 1e-4);
  check_reject("0,01", 4);
  setlocale(LC_NUMERIC, "C");
}

/* Math.round and the (long) cast as Java computes them (JDK 7+; values from jshell). count()
 * rounded with floor(x + 0.5), which gives 1 for the largest double below 0.5. */
static void test_java_round_and_cast(void) {
  CHECK_EQ_INT(bgi_java_round(0.49999999999999994), 0);
  CHECK_EQ_INT(bgi_java_round(0.5), 1);
  CHECK_EQ_INT(bgi_java_round(-0.5), 0);
  CHECK_EQ_INT(bgi_java_round(-1.5), -1);
  CHECK_EQ_INT(bgi_java_round(2.5), 3);
  CHECK_EQ_INT(bgi_java_round(4503599627370497.0), 4503599627370497);   /* 2^52 + 1: floor(x + 0.5) gives + 1 */
  CHECK_EQ_INT(bgi_java_round(NAN), 0);
  CHECK_EQ_INT(bgi_java_round(1e300), INT64_MAX);
  CHECK_EQ_INT(bgi_java_round(-1e300), INT64_MIN);
  CHECK_EQ_INT(bgi_java_d2l(-2.9), -2);
  CHECK_EQ_INT(bgi_java_d2l(INFINITY), INT64_MAX);
  CHECK_EQ_INT(bgi_java_d2l(NAN), 0);
}

BGT_RUN(BGT_CASE(test_redisson_table), BGT_CASE(test_java_layout), BGT_CASE(test_format_small_buffers),
        BGT_CASE(test_parse_accepts), BGT_CASE(test_parse_rejects), BGT_CASE(test_round_trip),
        BGT_CASE(test_comma_locale), BGT_CASE(test_java_round_and_cast))
