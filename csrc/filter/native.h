/*
 * Internal: native filters (include/bloomguard/filter.h, "Native filters"): the server's own BF.*
 * key at NAME. Every step is one call of one Lua script (native.c) that looks at the key's TYPE
 * before it runs its BF command, so a missing key, a key of another kind and a server without the
 * module are each told apart from an answer in the same atomic step.
 */
#ifndef BG_INTERNAL_NATIVE_H
#define BG_INTERNAL_NATIVE_H

#include <stdint.h>

#include "common/task.h"
#include "client/client.h"
#include "redis/script.h"

struct bg_filter;

/* One window of a native add or query: its build and parse context. */
typedef struct bgi_nwin {
  struct bg_filter *f;
  int is_add;
  const void *const *items;
  const size_t *lens;
  size_t from, to;
  uint8_t *present;
  size_t added;
  size_t full_at;      /* add: the first item a full NONSCALING filter refused (SIZE_MAX: none) */
  bgi_script_run run;
} bgi_nwin;

/* A native add or query of items[0..n), as a task (common/task.h): window by window, each window's
 * chunks in one round trip. *added (adds) and *done as bgi_add_task's. */
typedef struct bgi_native_task {
  bgi_task t;
  bgi_nwin w;
  bgi_req req;
  size_t n, *added, *done;
  uint64_t deadline_ns;
  int state;
} bgi_native_task;

void bgi_native_task_init(bgi_native_task *nt, struct bg_filter *f, int is_add, uint64_t deadline_ns,
                          const void *const *items, const size_t *lens, size_t n, uint8_t *present, size_t *added,
                          size_t *done);

/* A whole-filter operation of a native filter (an admin kind of filter.h, BGI_ADMIN_*). */
typedef struct bgi_nadmin {
  struct bg_filter *f;
  int kind;
  int64_t capacity, ttl_ms;
  int32_t expansion;   /* -1 the server's default, 0 NONSCALING */
  char error_rate[32];
  bgi_script_run run;
  int64_t result;      /* init: created; count: BF.CARD; delete / expire / persist: applied */
  int64_t cap, bytes, filters, items, exp;   /* info */
} bgi_nadmin;

/* Checks the arguments (BG_EBADPARAMS for a size the options refuse) and fills the request. */
int bgi_nadmin_prepare(bgi_nadmin *na, bgi_req *req, struct bg_filter *f, int kind, int64_t arg, double fpp,
                       int32_t expansion, bgi_err *err);

/* TYPE of a Redisson-layout handle's name, after its steps found no config: BG_EWRONGTYPE naming
 * a native filter there, else BG_OK. */
void bgi_native_type_req(bgi_req *r, struct bg_filter *f, uint64_t deadline_ns);

/* BG_EBADPARAMS (the message says why) for a capacity, error rate or expansion (-1 .. 32768) a
 * BF.RESERVE must not get: out of range, or a first link past BG_OPT_NATIVE_MAX_BYTES. */
int bgi_native_check_size(const struct bg_filter *f, int64_t capacity, double error_rate, int32_t expansion,
                          bgi_err *err);

/* The one Lua step of every native operation. */
extern bgi_script bgi_script_native;

#endif
