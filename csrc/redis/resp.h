/*
 * Internal: building RESP commands straight into a reusable buffer.
 *
 * hiredis' argv formatting allocates per argument; a query sends k indexes per item, so the hot
 * path writes the protocol itself into a buffer that lives on the pooled connection and only
 * grows. The append functions never fail: call bgi_buf_reserve with an upper bound first.
 */
#ifndef BG_INTERNAL_RESP_H
#define BG_INTERNAL_RESP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct bgi_buf {
  char *data;
  size_t len;
  size_t cap;
} bgi_buf;

/* Longest encoding of one decimal argument: "$20\r\n" + 20 digits + "\r\n". */
#define BGI_RESP_U64_MAX 27
/* Header of a bulk string: "$" + up to 20 digits + "\r\n". */
#define BGI_RESP_BULK_OVERHEAD 25

/* Ensures room for `extra` more bytes; BG_OK or BG_ENOMEM. */
int bgi_buf_reserve(bgi_buf *b, size_t extra);
void bgi_buf_free(bgi_buf *b);
static inline void bgi_buf_reset(bgi_buf *b) { b->len = 0; }

/* Writes v in decimal at p; returns the digit count (at most 20). */
size_t bgi_u64_to_dec(uint64_t v, char *p);

/* The bytes bgi_resp_u64(b, v) writes. */
size_t bgi_resp_u64_len(uint64_t v);
/* About the least one bit offset below size takes encoded (nearly all such offsets have at least
 * the digits of size / 10): to tell, before building, that many of them cannot be multiplexed. */
static inline size_t bgi_resp_offset_min_len(uint64_t size) { return bgi_resp_u64_len(size / 10); }

void bgi_resp_array(bgi_buf *b, size_t n);              /* "*n\r\n" */
void bgi_resp_bulk(bgi_buf *b, const void *s, size_t n);
void bgi_resp_u64(bgi_buf *b, uint64_t v);
static inline void bgi_resp_cstr(bgi_buf *b, const char *s) { bgi_resp_bulk(b, s, strlen(s)); }
/* A string literal (or a macro of one, redis/layout.h), its length known at compile time. */
#define bgi_resp_lit(b, lit) bgi_resp_bulk((b), "" lit, sizeof(lit) - 1)

/* Room needed for an array header plus bulks of these total payload bytes. */
static inline size_t bgi_resp_bound(size_t nargs, size_t payload) {
  return 24 + nargs * BGI_RESP_BULK_OVERHEAD + payload;
}

#endif
