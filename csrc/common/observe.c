/* The observer hub (common/observe.h): setting the observer, delivering events, sampling. */
#include "common/observe.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "bloomguard/policy.h"
#include "common/err.h"

void bgi_obs_init(bgi_obs *o, int64_t degraded_per_s) {
  atomic_init(&o->sink, NULL);
  pthread_mutex_init(&o->mu, NULL);
  o->all = NULL;
  o->degraded_per_s = degraded_per_s;
  for (int i = 0; i < BGI_OBS_NCOUNTERS; i++) atomic_init(&o->n[i], 0);
}

void bgi_obs_destroy(bgi_obs *o) {
  for (bgi_obs_sink *s = o->all, *next; s; s = next) {
    next = s->next;
    free(s);
  }
  o->all = NULL;
  pthread_mutex_destroy(&o->mu);
}

int bgi_obs_set(bgi_obs *o, bg_observer_fn fn, void *userdata) {
  bgi_obs_sink *s = NULL;
  pthread_mutex_lock(&o->mu);
  if (fn) {
    /* the same observer set again reuses its sink: a program that toggles it leaks nothing */
    for (s = o->all; s && !(s->fn == fn && s->userdata == userdata); s = s->next) {}
    if (!s) {
      if (!(s = malloc(sizeof *s))) {
        pthread_mutex_unlock(&o->mu);
        return BG_ENOMEM;
      }
      s->fn = fn;
      s->userdata = userdata;
      s->next = o->all;
      o->all = s;
    }
  }
  atomic_store_explicit(&o->sink, s, memory_order_release);
  pthread_mutex_unlock(&o->mu);
  return BG_OK;
}

void bgi_obs_emit(bgi_obs *o, int kind, const char *name, const int64_t *v, const char *fmt, ...) {
  if (!o) return;
  atomic_fetch_add_explicit(&o->n[BGI_OBS_EMITS], 1, memory_order_relaxed);
  bgi_obs_sink *s = atomic_load_explicit(&o->sink, memory_order_acquire);
  if (!s) return;
  char msg[BGI_ERRMSG_MAX];
  int64_t zero[BG_EVENT_NVALUES] = {0};
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  atomic_fetch_add_explicit(&o->n[BGI_OBS_EVENTS], 1, memory_order_relaxed);
  s->fn(s->userdata, kind, name ? name : "", v ? v : zero, BG_EVENT_NVALUES, msg);
}

int bgi_sampler_hit(bgi_sampler *s, int64_t per_s, uint64_t now_ns, int64_t *count) {
  atomic_fetch_add_explicit(&s->pending, 1, memory_order_relaxed);
  if (per_s <= 0) return 0;
  uint64_t sec = (now_ns / 1000000000u) & 0xffffffffu;
  /* the atomic's own type (observe.h): clang rejects a pointer to another 64-bit type in the
   * compare-exchange below */
  uint64_t w = atomic_load_explicit(&s->window, memory_order_relaxed);
  for (;;) {
    uint64_t taken = (w >> 32) == sec ? (w & 0xffffffffu) : 0;
    if (taken >= (uint64_t)per_s) return 0;
    if (atomic_compare_exchange_weak_explicit(&s->window, &w, sec << 32 | (taken + 1), memory_order_relaxed,
                                              memory_order_relaxed))
      break;
  }
  *count = atomic_exchange_explicit(&s->pending, 0, memory_order_relaxed);
  /* a report racing this one took the count first: still report this one */
  if (*count < 1) *count = 1;
  return 1;
}

/* ---- names (observe.h) ------------------------------------------------------------------------ */

#define NAME_OF(table, i) ((i) >= 0 && (size_t)(i) < sizeof table / sizeof table[0] ? table[i] : NULL)

BG_API const char *bg_event_name(int kind) {
  static const char *const names[] = {
    [BG_EVENT_BREAKER_OPEN] = "breaker_open",         [BG_EVENT_BREAKER_HALF_OPEN] = "breaker_half_open",
    [BG_EVENT_BREAKER_CLOSED] = "breaker_closed",     [BG_EVENT_DEGRADED] = "degraded",
    [BG_EVENT_ROTATION_BEGIN] = "rotation_begin",     [BG_EVENT_ROTATION_COMMIT] = "rotation_commit",
    [BG_EVENT_ROTATION_ABORT] = "rotation_abort",     [BG_EVENT_FAILOVER] = "failover",
    [BG_EVENT_CLUSTER_MAP] = "cluster_map",           [BG_EVENT_CONNECTION_LOST] = "connection_lost",
    [BG_EVENT_LOCK_LOST] = "lock_lost",
  };
  return NAME_OF(names, kind);
}

BG_API const char *bg_op_name(int op) {
  static const char *const names[] = {
    [BG_OP_CONTAINS] = "contains", [BG_OP_ADD] = "add",         [BG_OP_INIT] = "init",
    [BG_OP_COUNT] = "count",       [BG_OP_INFO] = "info",       [BG_OP_DELETE] = "delete",
    [BG_OP_EXPIRE] = "expire",     [BG_OP_PERSIST] = "persist", [BG_OP_ROTATE_SWAP] = "rotate_swap",
    [BG_OP_ROTATE_NAIVE] = "rotate_naive", [BG_OP_ROTATE_LOCKED] = "rotate_locked",
  };
  return NAME_OF(names, op);
}

BG_API const char *bg_outcome_name(int outcome) {
  static const char *const names[] = {
    [BG_OUTCOME_OK] = "ok",          [BG_FAIL_NOTINIT] = "not_initialized", [BG_FAIL_CONFIG] = "config_changed",
    [BG_FAIL_LOCKED] = "locked",     [BG_FAIL_CONNECTION] = "connection",   [BG_FAIL_TIMEOUT] = "timeout",
    [BG_FAIL_SERVER] = "server",     [BG_FAIL_CORRUPT] = "corrupt",         [BG_FAIL_OTHER] = "other",
    [BG_OUTCOME_CANCELLED] = "cancelled", [BG_OUTCOME_ABORTED] = "aborted",
  };
  return NAME_OF(names, outcome);
}
