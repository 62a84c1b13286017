#include "redis/resp.h"

#include <stdlib.h>

#include "bloomguard/errors.h"

int bgi_buf_reserve(bgi_buf *b, size_t extra) {
  if (b->cap - b->len >= extra) return BG_OK;
  size_t need = b->len + extra;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < need) cap *= 2;
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

size_t bgi_u64_to_dec(uint64_t v, char *p) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
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
  char digits[20];
  size_t n = bgi_u64_to_dec(v, digits);
  b->data[b->len++] = '$';
  if (n >= 10) b->data[b->len++] = (char)('0' + n / 10);
  b->data[b->len++] = (char)('0' + n % 10);
  put(b, "\r\n", 2);
  put(b, digits, n);
  put(b, "\r\n", 2);
}
