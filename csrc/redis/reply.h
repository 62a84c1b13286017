/*
 * Internal: replies parsed by hiredis' reader into a per-connection arena.
 *
 * hiredis allocates one redisReply per element; a batch query answers k bits per item, so the
 * connection plugs its own object functions into the reader and bump-allocates every node in an
 * arena that is reset before each call and only grows: no allocation per item once warm.
 */
#ifndef BG_INTERNAL_REPLY_H
#define BG_INTERNAL_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <string.h>

typedef struct bgi_reply {
  int type;                      /* REDIS_REPLY_*; first, like redisReply, which hiredis may peek at */
  long long integer;
  const char *str;               /* strings, status and errors (NUL-terminated copy) */
  size_t len;
  size_t elements;
  struct bgi_reply **element;
} bgi_reply;

typedef struct bgi_arena_block bgi_arena_block;

typedef struct bgi_arena {
  bgi_arena_block *head;         /* block being filled; older blocks follow */
  size_t total;                  /* bytes handed out since the last reset */
  int failed;                    /* an allocation failed while parsing the current reply */
  size_t first_cap;              /* the first block's size (0: 64 KiB); a workspace of many small
                                    requests in flight (a submission queue's) starts small */
} bgi_arena;

/* An array, or (RESP3, hiredis >= 1.0) a map: both hold key, value, key, value, ... */
static inline int bgi_reply_is_pairs(const bgi_reply *r) {
#ifdef REDIS_REPLY_MAP
  if (r->type == REDIS_REPLY_MAP) return 1;
#endif
  return r->type == REDIS_REPLY_ARRAY;
}

/* The value of field `name` (len bytes) in a pairs reply (HGETALL), or NULL. */
static inline const bgi_reply *bgi_reply_field(const bgi_reply *h, const char *name, size_t len) {
  for (size_t i = 0; i + 1 < h->elements; i += 2)
    if (h->element[i]->len == len && memcmp(h->element[i]->str, name, len) == 0) return h->element[i + 1];
  return NULL;
}

/* 1 when r is a bulk string equal to the literal lit (redis/layout.h's values). */
#define bgi_reply_is_lit(r, lit) \
  ((r)->type == REDIS_REPLY_STRING && (r)->len == sizeof(lit) - 1 && \
   memcmp((r)->str, "" lit, sizeof(lit) - 1) == 0)

/* Installs the arena's object functions on a connected context's reader. */
void bgi_reply_attach(redisContext *ctx, bgi_arena *a);
/* Forgets every reply; keeps (only) one block big enough for what the last call needed. */
void bgi_arena_reset(bgi_arena *a);
void bgi_arena_free(bgi_arena *a);

#endif
