/*
 * Internal: the observer hub of a client (include/bloomguard/observe.h) - where events go, the
 * client's own counters, and the sampler of degraded answers.
 *
 * Every layer that has an event holds a pointer to its client's hub (a filter's guard, a node's
 * endpoint, the cluster table, a lock, a rotation) and emits as
 *   if (bgi_obs_on(o)) { ...build the values...; bgi_obs_emit(o, kind, name, v, "fmt", ...); }
 * so without an observer an event costs the one relaxed load of bgi_obs_on. The sink a setter
 * replaces is kept until the hub is destroyed: a thread that loaded it may still be calling it.
 */
#ifndef BG_INTERNAL_OBSERVE_H
#define BG_INTERNAL_OBSERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/observe.h"

typedef struct bgi_obs_sink {
  bg_observer_fn fn;
  void *userdata;
  struct bgi_obs_sink *next;   /* every sink the hub ever had */
} bgi_obs_sink;

/* The hub's counters (bgi_obs.n). */
enum {
  BGI_OBS_CONNS = 0,        /* open now */
  BGI_OBS_CONNS_LOST,
  BGI_OBS_INVALIDATIONS,
  BGI_OBS_MAP_CHANGES,
  BGI_OBS_FAILOVERS,
  BGI_OBS_EVENTS,           /* handed to an observer */
  BGI_OBS_EMITS,            /* calls of bgi_obs_emit (with or without a sink): the tests count that
                               call sites look at bgi_obs_on first (none without an observer) */
  BGI_OBS_NCOUNTERS
};

typedef struct bgi_obs {
  _Atomic(bgi_obs_sink *) sink;   /* NULL: no observer */
  pthread_mutex_t mu;             /* setters */
  bgi_obs_sink *all;
  int64_t degraded_per_s;         /* BG_OPT_DEGRADED_EVENTS_PER_S */
  atomic_llong n[BGI_OBS_NCOUNTERS];
} bgi_obs;

void bgi_obs_init(bgi_obs *o, int64_t degraded_per_s);
void bgi_obs_destroy(bgi_obs *o);
/* Sets or (fn NULL) removes the observer: BG_OK or BG_ENOMEM. */
int bgi_obs_set(bgi_obs *o, bg_observer_fn fn, void *userdata);

static inline int bgi_obs_on(const bgi_obs *o) {
  return o && atomic_load_explicit(&((bgi_obs *)o)->sink, memory_order_relaxed) != NULL;
}

/* Delivers an event to the observer, if any (name NULL: ""; v NULL: all 0). */
void bgi_obs_emit(bgi_obs *o, int kind, const char *name, const int64_t *v, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline void bgi_obs_add(bgi_obs *o, int which, int64_t d) {
  if (o) atomic_fetch_add_explicit(&o->n[which], d, memory_order_relaxed);
}
static inline int64_t bgi_obs_get(const bgi_obs *o, int which) {
  return atomic_load_explicit(&((bgi_obs *)o)->n[which], memory_order_relaxed);
}

/* At most `per_s` samples a second of something that happens often (degraded answers), each
 * telling how many happened since the previous sample. */
typedef struct bgi_sampler {
  _Atomic uint64_t window; /* second << 32 | samples taken in it (as a uint64_t: clang wants the CAS's types equal) */
  atomic_llong pending;    /* happened since the last sample */
} bgi_sampler;

/* One more happened at now_ns: 1 when this one is to be reported, with *count the number since
 * the last report (this one included); 0 otherwise. */
int bgi_sampler_hit(bgi_sampler *s, int64_t per_s, uint64_t now_ns, int64_t *count);

#endif
