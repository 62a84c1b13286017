/*
 * The local snapshot: the filter's bitmap and config held in memory, answering queries when the
 * policy's chain says BG_ACT_SNAPSHOT; refreshed on request (bg_filter_snapshot_refresh) or by a
 * background thread every BG_POLICY_SNAPSHOT_INTERVAL_MS, each time through the download callback
 * the handle gave (bgi_guard_set_source; the filter's consistent download is filter/download.c).
 * Calls only policy.c (the policy's chunk size) and the breaker's state: nothing in guard.c.
 */
#include "policy/guard.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fork.h"
#include "common/wait.h"
#include "hash/hash.h"


bgi_snapshot *bgi_snapshot_new_parts(uint64_t cfg, uint32_t parts, uint64_t taken_ns) {
  size_t pbytes = (size_t)((bgi_cfg_size(cfg) + 7) / 8), nbytes = pbytes * (parts ? parts : 1);
  bgi_snapshot *s = calloc(1, sizeof *s + nbytes);
  if (!s) return NULL;
  atomic_init(&s->refs, 1);
  s->cfg = cfg;
  s->taken_ns = taken_ns;
  s->parts = parts;
  s->pbytes = pbytes;
  s->nbytes = nbytes;
  return s;
}

bgi_snapshot *bgi_snapshot_new(uint64_t cfg, uint64_t taken_ns) { return bgi_snapshot_new_parts(cfg, 0, taken_ns); }

void bgi_snapshot_unref(bgi_snapshot *s) {
  if (s && atomic_fetch_sub(&s->refs, 1) == 1) free(s);
}

/* The bytes an item's bits index into: the whole bitmap, or its partition's. */
static uint8_t *bits_of(const bgi_snapshot *s, const uint64_t h[2]) {
  uint8_t *bits = (uint8_t *)s->bits;
  return s->parts ? bits + (size_t)bgi_partition_of(h[0], h[1], s->parts) * s->pbytes : bits;
}

void bgi_snapshot_add(bgi_snapshot *s, const void *item, size_t len) {
  uint64_t h[2], size = bgi_cfg_size(s->cfg);
  uint32_t k = bgi_cfg_k(s->cfg);
  bgi_hash128(item, len, h);
  uint8_t *bits = bits_of(s, h);
  uint64_t x = h[0];
  for (uint32_t i = 0; i < k; i++) {
    uint64_t o = (x & INT64_MAX) % size;
    bits[o >> 3] |= (uint8_t)(0x80u >> (o & 7));
    x += (i % 2 == 0) ? h[1] : h[0];
  }
}

void bgi_snapshot_query(const bgi_snapshot *s, const void *const *items, const size_t *lens, size_t n,
                        uint8_t *present) {
  uint64_t size = bgi_cfg_size(s->cfg);
  uint32_t k = bgi_cfg_k(s->cfg);
  for (size_t i = 0; i < n; i++) {
    uint64_t h[2];
    uint8_t all = 1;
    bgi_hash128(items[i], lens[i], h);
    const uint8_t *bits = bits_of(s, h);
    uint64_t x = h[0];
    /* Redisson's index sequence (hash.h), stopping at the first clear bit */
    for (uint32_t j = 0; j < k && all; j++) {
      uint64_t o = (x & INT64_MAX) % size;
      all = (bits[o >> 3] >> (7 - (o & 7))) & 1;
      x += (j % 2 == 0) ? h[1] : h[0];
    }
    present[i] = all;
  }
}

void bgi_guard_publish_snapshot(bgi_guard *g, bgi_snapshot *s) {
  pthread_mutex_lock(&g->mu);
  bgi_snapshot *old = g->snap;
  g->snap = s;
  pthread_mutex_unlock(&g->mu);
  bgi_snapshot_unref(old);
}

bgi_snapshot *bgi_guard_snapshot(bgi_guard *g) {
  pthread_mutex_lock(&g->mu);
  bgi_snapshot *s = g->snap;
  if (s) atomic_fetch_add(&s->refs, 1);
  pthread_mutex_unlock(&g->mu);
  return s;
}

/* ---- refresh ------------------------------------------------------------------------------------- */

void bgi_guard_set_source(bgi_guard *g, bgi_download_fn fn, void *ctx) {
  g->download = fn;
  g->download_ctx = fn ? ctx : NULL;
}

/* One refresh: download with the policy's chunk size, publish, count. */
int bgi_guard_refresh(bgi_guard *g, uint64_t deadline_ns, atomic_int *stop, bgi_err *err) {
  int64_t chunk = 1048576;
  bgi_snapshot *s = NULL;
  if (!g->download) return bgi_err_set(err, BG_ENOTSUP, "snapshot: this handle has nothing to download from");
  bgi_policy *p = bgi_guard_policy(g);
  if (p) chunk = p->cfg.snapshot_chunk_bytes;
  bgi_policy_unref(p);
  pthread_mutex_lock(&g->dl_mu);
  int st = g->download(g->download_ctx, deadline_ns, chunk, stop, &s, err);
  pthread_mutex_unlock(&g->dl_mu);
  if (st == BG_OK) {
    bgi_guard_publish_snapshot(g, s);
    atomic_fetch_add_explicit(&g->stats[BGI_ST_SNAP_OK], 1, memory_order_relaxed);
  } else if (st != BG_EABORTED) {
    atomic_fetch_add_explicit(&g->stats[BGI_ST_SNAP_FAILED], 1, memory_order_relaxed);
  }
  return st;
}

/* ---- background refresher ------------------------------------------------------------------------ */

/* One round of the periodic worker (common/worker.h); the next comes an interval after it ends. */
static int64_t refresh_round(void *arg) {
  bgi_guard *g = arg;
  /* with the breaker open Redis is known to be unreachable: keep the snapshot we have */
  if (bgi_breaker_state(&g->breaker) == BG_BREAKER_CLOSED) {
    bgi_err err = {0};
    bgi_guard_refresh(g, 0, bgi_worker_stop_flag(&g->rf), &err);
  }
  return g->rf_interval_ms;
}

int bgi_refresher_start(bgi_guard *g, int64_t interval_ms) {
  g->rf_interval_ms = interval_ms;
  return bgi_worker_start(&g->rf, 0, refresh_round, g);
}

void bgi_refresher_stop(bgi_guard *g) { bgi_worker_stop(&g->rf); }

void bgi_guard_after_fork(bgi_guard *g) {
  bgi_fork_lock();
  uint64_t now = bgi_fork_gen_note();
  if (atomic_load(&g->fork_gen) != now) {
    bgi_fork_remake_mutex(&g->mu);
    bgi_fork_remake_mutex(&g->admin_mu);
    bgi_fork_remake_mutex(&g->dl_mu);
    bgi_fork_remake_mutex(&g->breaker.mu);
    bgi_fork_remake_mutex(&g->bucket.mu);
    if (g->rf.running) {
      bgi_worker_stop(&g->rf);   /* the parent's thread: only marked stopped (common/worker.h) */
      (void)bgi_refresher_start(g, g->rf_interval_ms);
    }
    atomic_store_explicit(&g->fork_gen, now, memory_order_release);
  }
  bgi_fork_unlock();
}
