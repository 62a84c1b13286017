/*
 * Internal: what one connection knows about filters whose config the server tracks for it.
 *
 * With RESP3 and CLIENT TRACKING OPTIN, the server pushes an invalidation to the connection when
 * a key it read under CLIENT CACHING YES changes - and puts it ahead of the reply to any command it
 * runs afterwards. A query's full check (config, write lock, TTL) is such a read; when it finds
 * the filter usable, the connection remembers the config for that filter. Any push bumps `epoch`,
 * which forgets every verdict at once (invalidations are rare: rebuilds, lock holds, expiries),
 * so a read of the bits alone is good exactly when the epoch is the same after its reply as when
 * the verdict was taken.
 */
#ifndef BG_INTERNAL_TRACKING_H
#define BG_INTERNAL_TRACKING_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdint.h>

#include "redis/reply.h"
#include "redis/resp.h"

/* Verdicts kept per connection (a collision costs a full check). A partitioned filter keeps one
 * per partition, and a connection to one master serves a run of consecutive partitions: its ids
 * differ in their low bits only (filter/partitioned.h, bgi_ptrack_id), which bgi_track_slot maps
 * to distinct slots - with 32 slots direct-mapped, partitions I and I + 32 of one master evicted
 * each other's verdicts (a quarter of single-item queries at 128 partitions over 3 masters). */
#define BGI_TRACK_SLOTS 1024

/* The slot of a filter id: a plain filter's (small) id itself; a partition's index plus an offset
 * per filter (the bits above the index), so one filter's partitions never collide. */
static inline unsigned bgi_track_slot(uint64_t filter_id) {
  return (unsigned)((filter_id + (filter_id >> 14) * 97) % BGI_TRACK_SLOTS);
}

typedef struct bgi_track_entry {
  uint64_t filter_id;    /* 0: empty */
  uint64_t cfg;
  uint64_t epoch;
} bgi_track_entry;

/*
 * One per transport connection. A multiplexed connection (redis/mux.h) shares it among the calls
 * in flight on it and its reader thread, which bumps the epoch for each push in stream order:
 * `on` and `epoch` are atomics, the verdicts sit behind a spinlock (a zeroed struct is a valid,
 * unlocked one). The epoch only grows, across reconnects too, so a call that read it on an
 * earlier connection never mistakes a later one's count for its own.
 */
typedef struct bgi_tracking {
  atomic_int on;         /* RESP3 and CLIENT TRACKING ON OPTIN are active on this connection */
  _Atomic uint64_t epoch;   /* pushes received (and connections made) */
  atomic_int lock;       /* guards slot[] */
  bgi_track_entry slot[BGI_TRACK_SLOTS];
} bgi_tracking;

/* 1 when built against a hiredis that parses RESP3 pushes (1.0 and later). */
int bgi_tracking_supported(void);

/*
 * The handshake's part: HELLO 3, CLIENT TRACKING ON OPTIN, then a probe of the very pattern the
 * queries rely on - a key read inside MULTI after CLIENT CACHING YES must be tracked - by reading
 * a probe key that way, writing it, and expecting the push before a PING's reply. A server (or a
 * proxy, or a fork) that accepts the commands but would not push is thus never trusted. Appends
 * the commands (BG_ENOMEM if out of memory) and says how many replies they get. probe_slot < 0
 * uses a fixed probe key; a cluster node's probe key must hash to a slot it serves (elsewhere
 * the probe gets MOVED and tracking stays off), so it gets a {tag} that lands in probe_slot.
 */
#define BGI_TRACKING_HANDSHAKE_REPLIES 8
int bgi_tracking_append_handshake(bgi_buf *out, int probe_slot);
/* Reads those replies: t->on is 1 only if every step worked and the probe's push arrived (the
 * epoch moved past epoch_before, read before the handshake was sent). */
void bgi_tracking_take_handshake(bgi_tracking *t, bgi_reply *const *rep, uint64_t epoch_before);

/* Forgets every verdict and turns tracking off (a new connection). */
void bgi_tracking_reset(bgi_tracking *t);
/* A push arrived (an invalidation): every verdict is forgotten at once. */
/* CLIENT CACHING YES: with OPTIN, inside a MULTI, the server tracks for this connection the keys
 * the transaction reads after it. */
static inline void bgi_tracking_append_caching(bgi_buf *out) {
  bgi_resp_array(out, 3);
  bgi_resp_bulk(out, "CLIENT", 6);
  bgi_resp_bulk(out, "CACHING", 7);
  bgi_resp_bulk(out, "YES", 3);
}

static inline void bgi_tracking_pushed(bgi_tracking *t) { atomic_fetch_add(&t->epoch, 1); }
/* Forgets every verdict but keeps tracking on (the connection answered a redirect). */
static inline void bgi_tracking_forget(bgi_tracking *t) { atomic_fetch_add(&t->epoch, 1); }
static inline uint64_t bgi_tracking_epoch(const bgi_tracking *t) {
  return atomic_load_explicit(&((bgi_tracking *)t)->epoch, memory_order_acquire);
}
static inline int bgi_tracking_on(const bgi_tracking *t) { return atomic_load(&((bgi_tracking *)t)->on); }
/* The server refused a tracking step: queries make the full check from now on. */
static inline void bgi_tracking_off(bgi_tracking *t) { atomic_store(&t->on, 0); }

static inline void bgi_tracking_lock(bgi_tracking *t) {
  while (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire))
    ;
}
static inline void bgi_tracking_unlock(bgi_tracking *t) { atomic_store_explicit(&t->lock, 0, memory_order_release); }

/* 1 if the connection still vouches for cfg being the filter's config with no write lock held. */
static inline int bgi_tracking_fresh(const bgi_tracking *ct, uint64_t filter_id, uint64_t cfg) {
  bgi_tracking *t = (bgi_tracking *)ct;
  if (!bgi_tracking_on(t)) return 0;
  uint64_t now = bgi_tracking_epoch(t);
  bgi_tracking_lock(t);
  const bgi_track_entry *e = &t->slot[bgi_track_slot(filter_id)];
  int fresh = e->filter_id == filter_id && e->cfg == cfg && e->epoch == now;
  bgi_tracking_unlock(t);
  return fresh;
}

/* Records a full check's verdict, valid until the next push - only if no push arrived since
 * `epoch` (read when the check was sent): the server stops tracking a key once it has pushed
 * for it, so a verdict taken across a push would never be invalidated. */
static inline void bgi_tracking_remember(bgi_tracking *t, uint64_t filter_id, uint64_t cfg, uint64_t epoch) {
  bgi_tracking_lock(t);
  if (bgi_tracking_on(t) && bgi_tracking_epoch(t) == epoch) {
    bgi_track_entry *e = &t->slot[bgi_track_slot(filter_id)];
    e->filter_id = filter_id;
    e->cfg = cfg;
    e->epoch = epoch;
  }
  bgi_tracking_unlock(t);
}

#endif
