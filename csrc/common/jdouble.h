/* Internal: Java's double semantics that Redisson's numbers depend on - the text forms of its
 * config hash, and the conversions and rounding its arithmetic uses. */
#ifndef BG_INTERNAL_JDOUBLE_H
#define BG_INTERNAL_JDOUBLE_H

#include <stddef.h>
#include <stdint.h>

/* Java's (long) cast: NaN -> 0, saturating at the limits, else truncation. */
int64_t bgi_java_d2l(double d);
/* Java's Math.round(double) (JDK 7+): nearest long, ties toward +infinity, exact for all inputs
 * (unlike floor(x + 0.5), which rounds 0.49999999999999994 up), saturating; NaN -> 0. */
int64_t bgi_java_round(double x);

/*
 * Java's Double.toString(v): the shortest decimal that reads back as v; plain notation
 * ("0.01", "1.0", "123.5") when 1e-3 <= |v| < 1e7, else computerized scientific ("1.0E-4",
 * "1.2345E7"). Returns the length written (NUL-terminated; cap >= 32 always suffices).
 */
size_t bgi_format_java_double(double v, char *buf, size_t cap);

/*
 * Strict parse of a whole field: Java's forms ("1.0E-4") and plain decimals ("0.00010").
 * Returns 0 and sets *out, or -1 if s[0..len) is not entirely a finite number.
 */
int bgi_parse_double(const char *s, size_t len, double *out);

#endif
