#include "redis/reply.h"

#include <stdlib.h>
#include <string.h>

struct bgi_arena_block {
  bgi_arena_block *next;
  size_t used;
  size_t cap;
  _Alignas(max_align_t) unsigned char data[];
};

static void *arena_alloc(bgi_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  a->total += n;
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = a->head ? a->head->cap * 2 : a->first_cap ? a->first_cap : 64 * 1024;
    while (cap < n) cap *= 2;
    bgi_arena_block *b = malloc(sizeof *b + cap);
    if (!b) {
      a->failed = 1;
      return NULL;
    }
    b->next = a->head;
    b->used = 0;
    b->cap = cap;
    a->head = b;
  }
  void *p = a->head->data + a->head->used;
  a->head->used += n;
  return p;
}

void bgi_arena_reset(bgi_arena *a) {
  bgi_arena_block *b = a->head;
  a->failed = 0;
  if (!b) return;
  if (b->next) {
    /* the last call needed several blocks: replace them by one that holds it all */
    size_t want = a->total;
    bgi_arena_free(a);
    if (arena_alloc(a, want)) a->head->used = 0;
    a->total = 0;
    return;
  }
  b->used = 0;
  a->total = 0;
}

void bgi_arena_free(bgi_arena *a) {
  bgi_arena_block *b = a->head;
  while (b) {
    bgi_arena_block *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
  a->total = 0;
}

static bgi_reply *new_node(const redisReadTask *task, int type) {
  bgi_arena *a = task->privdata;
  bgi_reply *r = arena_alloc(a, sizeof *r);
  if (!r) return NULL;
  memset(r, 0, sizeof *r);
  r->type = type;
  if (task->parent) {
    bgi_reply *parent = task->parent->obj;
    parent->element[task->idx] = r;
  }
  return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len) {
  bgi_arena *a = task->privdata;
  char *copy = arena_alloc(a, len + 1);
  if (!copy) return NULL;
  bgi_reply *r = new_node(task, task->type);
  if (!r) return NULL;
  memcpy(copy, str, len);
  copy[len] = 0;
  r->str = copy;
  r->len = len;
  return r;
}

#if HIREDIS_MAJOR >= 1
static void *create_array(const redisReadTask *task, size_t elements) {
#else
static void *create_array(const redisReadTask *task, int elements) {
#endif
  bgi_arena *a = task->privdata;
  size_t n = (size_t)elements;
  bgi_reply **el = NULL;
  if (n && !(el = arena_alloc(a, n * sizeof *el))) return NULL;
  bgi_reply *r = new_node(task, task->type);
  if (!r) return NULL;
  r->elements = n;
  r->element = el;
  return r;
}

static void *create_integer(const redisReadTask *task, long long v) {
  bgi_reply *r = new_node(task, REDIS_REPLY_INTEGER);
  if (r) r->integer = v;
  return r;
}

static void *create_nil(const redisReadTask *task) { return new_node(task, REDIS_REPLY_NIL); }

#if HIREDIS_MAJOR >= 1
static void *create_double(const redisReadTask *task, double d, char *str, size_t len) {
  (void)d;
  return create_string(task, str, len);
}

static void *create_bool(const redisReadTask *task, int b) {
  return create_integer(task, b);
}
#endif

/* Nodes live in the arena until the next reset; hiredis' frees are no-ops. */
static void free_object(void *obj) { (void)obj; }

static redisReplyObjectFunctions arena_functions = {
  .createString = create_string,
  .createArray = create_array,
  .createInteger = create_integer,
#if HIREDIS_MAJOR >= 1
  .createDouble = create_double,
  .createBool = create_bool,
#endif
  .createNil = create_nil,
  .freeObject = free_object,
};

void bgi_reply_attach(redisContext *ctx, bgi_arena *a) {
  ctx->reader->fn = &arena_functions;
  ctx->reader->privdata = a;
}
