/*
 * Doubles in the text forms of Redisson's config hash (falseProbability).
 *
 * The C library's number functions follow LC_NUMERIC, which an application may have set to a
 * locale whose radix is ','. We never hand them a radix character: digits are formatted with
 * %e and read back digit by digit, and what we give strtod is "<digits>e<exponent>", which
 * reads the same in every locale. So the library never needs setlocale or a locale object.
 */
#include "common/jdouble.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads "[sign]<digits>e<exp10>" back: no radix character, so no locale can change it. */
static double read_digits(const char *digits, size_t ndigits, long exp10) {
  char buf[1100];
  int n = snprintf(buf, sizeof buf, "%.*se%ld", (int)ndigits, digits, exp10);
  if (n < 0 || (size_t)n >= sizeof buf) return NAN;
  return strtod(buf, NULL);
}

/* v (finite, > 0) correctly rounded to prec significant digits: the digits (no point) and the
   exponent of the first one (v ~ d1.d2d3... x 10^exp10). */
static size_t digits_at(double v, int prec, char digits[20], int *exp10) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
  size_t nd = 0;
  const char *s = buf;
  /* Digits until 'e'; whatever radix character the locale printed is skipped. */
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9' && nd < 20) digits[nd++] = *s;
  *exp10 = (int)strtol(*s ? s + 1 : s, NULL, 10);
  return nd;
}

static int round_trips(double v, int prec) {
  char d[20];
  int e;
  size_t nd = digits_at(v, prec, d, &e);
  return read_digits(d, nd, e - (long)(nd - 1)) == v;
}

/*
 * Shortest decimal digits that read back as v (v finite, > 0), trailing zeros removed.
 *
 * %.*e rounds correctly, so at each precision it yields the closest decimal of that length, and
 * if one length reads back so does every longer one: a binary search finds the shortest.
 * Java (JDK 19+ spec, which the older FloatingDecimal matches on ordinary values) picks among
 * two-digit decimals when a one-digit one exists: Double.MIN_VALUE is "4.9E-324", not
 * "5.0E-324". Hence the search starts at two digits. 17 digits always read back.
 */
static size_t shortest_digits(double v, char digits[20], int *exp10) {
  int lo = 2, hi = 17;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (round_trips(v, mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  size_t nd = digits_at(v, lo, digits, exp10);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  return nd;
}

size_t bgi_format_java_double(double v, char *buf, size_t cap) {
  char out[48];
  size_t n = 0;

  if (isnan(v)) {
    n = (size_t)snprintf(out, sizeof out, "NaN");
  } else if (isinf(v)) {
    n = (size_t)snprintf(out, sizeof out, "%sInfinity", v < 0 ? "-" : "");
  } else if (v == 0) {
    n = (size_t)snprintf(out, sizeof out, "%s0.0", signbit(v) ? "-" : "");
  } else {
    char d[20];
    int e;
    size_t nd = shortest_digits(fabs(v), d, &e);
    if (signbit(v)) out[n++] = '-';
    if (e >= -3 && e < 7) {
      /* Plain: 10^-3 <= |v| < 10^7, at least one digit on each side of the point. */
      if (e < 0) {
        out[n++] = '0';
        out[n++] = '.';
        for (int z = -1; z > e; z--) out[n++] = '0';
        for (size_t i = 0; i < nd; i++) out[n++] = d[i];
      } else {
        for (int i = 0; i <= e; i++) out[n++] = (size_t)i < nd ? d[i] : '0';
        out[n++] = '.';
        if ((size_t)e + 1 < nd)
          for (size_t i = (size_t)e + 1; i < nd; i++) out[n++] = d[i];
        else
          out[n++] = '0';
      }
    } else {
      /* Computerized scientific: "d.ddd" + "E" + exponent, e.g. 1.0E-4, 1.2345E7. */
      out[n++] = d[0];
      out[n++] = '.';
      if (nd > 1)
        for (size_t i = 1; i < nd; i++) out[n++] = d[i];
      else
        out[n++] = '0';
      n += (size_t)snprintf(out + n, sizeof out - n, "E%d", e);
    }
    out[n] = '\0';
  }

  if (!buf || cap == 0) return 0;
  if (n >= cap) n = cap - 1;
  memcpy(buf, out, n);
  buf[n] = '\0';
  return n;
}

/* Longest field we parse; no real falseProbability comes anywhere near it. */
#define PARSE_MAX 1024

int bgi_parse_double(const char *s, size_t len, double *out) {
  if (!s || !out || len == 0 || len > PARSE_MAX) return -1;

  /* Grammar: [+-] digits [. digits] [(e|E) [+-] digits], at least one mantissa digit
     (so "1.", ".5" are numbers, as for Java's Double.valueOf; no spaces, NaN, Infinity,
     hex or the d/f suffixes). */
  char digits[PARSE_MAX + 2];
  size_t nd = 0, i = 0;
  long frac = 0; /* digits after the point */
  int neg = 0;

  if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
  digits[nd++] = neg ? '-' : '+';
  size_t mant_start = nd;
  while (i < len && s[i] >= '0' && s[i] <= '9') digits[nd++] = s[i++];
  if (i < len && s[i] == '.') {
    i++;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      digits[nd++] = s[i++];
      frac++;
    }
  }
  if (nd == mant_start) return -1;

  long exp10 = 0;
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    int eneg = 0;
    if (i < len && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    size_t estart = i;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      /* Saturate: beyond +-100000 the value is 0 or infinite whatever the mantissa. */
      if (exp10 < 100000) exp10 = exp10 * 10 + (s[i] - '0');
      i++;
    }
    if (i == estart) return -1;
    if (eneg) exp10 = -exp10;
  }
  if (i != len) return -1;

  double v = read_digits(digits, nd, exp10 - frac);
  if (!isfinite(v)) return -1;
  *out = v;
  return 0;
}

int64_t bgi_java_d2l(double d) {
  /* out of range is UB in C, hence the explicit tests */
  if (isnan(d)) return 0;
  if (d >= 0x1p63) return INT64_MAX;
  if (d <= -0x1p63) return INT64_MIN;
  return (int64_t)d;
}

int64_t bgi_java_round(double x) {
  if (isnan(x)) return 0;
  double f = floor(x);
  /* x - floor(x) is exact for every finite double */
  if (x - f >= 0.5) f += 1.0;
  return bgi_java_d2l(f);
}
