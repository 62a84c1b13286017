#include "redis/resp.h"

#include <stddef.h>
#include <stdlib.h>

#include "bloomguard/errors.h"

int bgi_buf_reserve(bgi_buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return BG_OK;
  /* no size past PTRDIFF_MAX can be allocated; the doubling stops before it would wrap */
  if (extra > (size_t)PTRDIFF_MAX - b->len) return BG_ENOMEM;
  size_t need = b->len + extra;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < need) cap = cap > (size_t)PTRDIFF_MAX / 2 ? need : cap * 2;
  char *p = realloc(b->data, cap);
  if (!p) return BG_ENOMEM;
  b->data = p;
  b->cap = cap;
  return BG_OK;
}

void bgi_buf_free(bgi_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* Decimal digits of v (1..20). */
static inline size_t dec_len(uint64_t v) {
  size_t n = 1;
  while (v >= 10000) v /= 10000, n += 4;
  return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* Writes the n digits of v ending at p + n, two at a time from a table: this runs k times per
 * item on every query, so it avoids the reverse-and-copy of the naive loop. */
static inline void dec_fill(uint64_t v, char *p, size_t n) {
  static const char pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
  char *q = p + n;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    *--q = pairs[2 * r + 1];
    *--q = pairs[2 * r];
  }
  if (v >= 10) {
    *--q = pairs[2 * v + 1];
    *--q = pairs[2 * v];
  } else {
    *--q = (char)('0' + v);
  }
}

size_t bgi_resp_u64_len(uint64_t v) {
  size_t d = dec_len(v);
  return 1 + dec_len(d) + 2 + d + 2;
}

size_t bgi_u64_to_dec(uint64_t v, char *p) {
  size_t n = dec_len(v);
  dec_fill(v, p, n);
  return n;
}

static inline void put(bgi_buf *b, const void *s, size_t n) {
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

void bgi_resp_array(bgi_buf *b, size_t n) {
  b->data[b->len++] = '*';
  b->len += bgi_u64_to_dec(n, b->data + b->len);
  put(b, "\r\n", 2);
}

void bgi_resp_bulk(bgi_buf *b, const void *s, size_t n) {
  b->data[b->len++] = '$';
  b->len += bgi_u64_to_dec(n, b->data + b->len);
  put(b, "\r\n", 2);
  if (n) put(b, s, n);
  put(b, "\r\n", 2);
}

void bgi_resp_u64(bgi_buf *b, uint64_t v) {
  size_t n = dec_len(v);
  char *p = b->data + b->len;
  *p++ = '$';
  if (n >= 10) *p++ = (char)('0' + n / 10);
  *p++ = (char)('0' + n % 10);
  *p++ = '\r';
  *p++ = '\n';
  dec_fill(v, p, n);
  p += n;
  *p++ = '\r';
  *p++ = '\n';
  b->len = (size_t)(p - b->data);
}
