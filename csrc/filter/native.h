/*
 * Internal: native filters (include/bloomguard/filter.h, "Native filters"): the server's own BF.*
 * key at NAME. Adds and whole-filter operations are one call of one Lua script (native.c) that
 * looks at the key's TYPE before it runs its BF command, so a missing key, a key of another kind
 * and a server without the module are each told apart from an answer in the same atomic step.
 * Queries make the same check without Lua (MULTI, TYPE, BF.MEXISTS, EXEC; the script only when
 * TYPE does not name a native filter), and on a connection with tracking, once that check has
 * seen NAME be a native filter with no TTL, send BF.MEXISTS alone (native.c says why that holds).
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
  /* a query: how this attempt asks (BGI_NREAD_*), chosen when it is built */
  int how;
  int want_script;     /* the block did not find a native filter: the next attempt runs the script */
  int no_fast;         /* an answer was dropped: the next attempt makes the full check */
  int again;           /* the answer was not used: ask the window again (the mode says how) */
  uint64_t epoch;      /* the connection's tracking epoch when this attempt was built */
} bgi_nwin;

enum { BGI_NREAD_SCRIPT, BGI_NREAD_BLOCK, BGI_NREAD_TRACKED_BLOCK, BGI_NREAD_FAST };

/* Tests only, the negative controls of the tracked read (a mask): IGNORE_PUSH uses a BF.MEXISTS-
 * alone answer even when an invalidation arrived before it (a key deleted meanwhile answers 0);
 * IGNORE_TTL takes a verdict from a key with a TTL (one past its TTL then answers 0). */
#define BGI_NFAULT_IGNORE_PUSH 1
#define BGI_NFAULT_IGNORE_TTL 2
void bgi_native_fault(int mask);

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
