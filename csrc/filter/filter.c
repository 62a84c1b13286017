#include "filter/filter.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fork.h"
#include "hash/hash.h"
#include "redis/keyslot.h"

/* 0 is an empty verdict slot */
static atomic_uint_fast64_t next_filter_id = 1;

static void free_names(bg_filter *f) {
  bgi_key_free(&f->lock_key);
  bgi_key_free(&f->spare_key);
  bgi_key_free(&f->delta_key);
  bgi_key_free(&f->rotation_key);
  bgi_key_free(&f->config_key);
  bgi_key_free(&f->name);
}

/* The filter's keys, named by Redisson's rule (redis/names.h). */
static int name_keys(bg_filter *f, const char *name) {
  size_t len = strlen(name);
  if (bgi_key_copy(&f->name, name, len) != BG_OK || bgi_key_suffix(&f->config_key, name, len, BGI_KEY_CONFIG) != BG_OK ||
      bgi_key_suffix(&f->rotation_key, name, len, BGI_KEY_ROTATION) != BG_OK ||
      bgi_key_suffix(&f->delta_key, name, len, BGI_KEY_DELTA) != BG_OK ||
      bgi_key_suffix(&f->lock_key, name, len, BGI_KEY_LOCK) != BG_OK ||
      bgi_key_suffix(&f->spare_key, name, len, BGI_KEY_SPARE) != BG_OK)
    return BG_ENOMEM;
  return BG_OK;
}

BG_API int bg_filter_open_ex(bg_filter **out, bg_call *call, bg_client *c, const char *name) {
  bgi_err err = {0};
  bg_filter *f;
  if (!out) return bgi_call_null_handle(call, "out");
  *out = NULL;
  if (!c) return bgi_call_null_handle(call, "client");
  if (!name) {
    bgi_err_set(&err, BG_EINVAL, "filter open: name must not be NULL");
    return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
  }
  /* aligned: the policy guard keeps its hot fields on cache lines of their own (_Alignas(64)) */
  if ((f = aligned_alloc(_Alignof(struct bg_filter), sizeof *f))) memset(f, 0, sizeof *f);
  if (!f) {
    bgi_err_set(&err, BG_ENOMEM, "out of memory");
    return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
  }
  if (name_keys(f, name) != BG_OK) {
    free_names(f);
    free(f);
    bgi_err_set(&err, BG_ENOMEM, "out of memory");
    return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
  }
  if (bgi_keyslot(f->name.s, f->name.len) != bgi_keyslot(f->config_key.s, f->config_key.len)) {
    bgi_err_set(&err, BG_EBADNAME,
                "filter name \"%.200s\": its bitmap key and config key \"%.200s\" would hash to different "
                "cluster slots (an empty {} hash tag, or a '{' never closed); use a name without \"{}\" or "
                "with a non-empty tag such as \"users{tag}\"", name, f->config_key.s);
    free_names(f);
    free(f);
    return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
  }
  atomic_init(&f->refs, 1);
  f->slot = (int)bgi_keyslot(f->name.s, f->name.len);
  atomic_init(&f->cfg, 0);
  f->id = atomic_fetch_add_explicit(&next_filter_id, 1, memory_order_relaxed);
  atomic_init(&f->next_cfg, 0);
  atomic_init(&f->kind, 0);
  pthread_mutex_init(&f->pmu, NULL);
  pthread_mutex_init(&f->spare_mu, NULL);
  atomic_init(&f->fork_gen, bgi_fork_gen_note());
  bgi_errslot_init(&f->err);
  bgi_guard_init(&f->guard);
  /* the engine refreshes its snapshot through the filter's consistent download (download.c) */
  bgi_guard_set_source(&f->guard, bgi_filter_download, f);
  bgi_filter_stats_init(&f->stats, c->opts.histograms != 0);
  bgi_guard_set_observer(&f->guard, &c->obs, f->name.s);
  bgi_client_ref(c);
  f->client = c;
  *out = f;
  bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
  return BG_OK;
}

BG_API int bg_filter_open(bg_filter **out, bg_client *c, const char *name) {
  return bg_filter_open_ex(out, NULL, c, name);
}

void bgi_filter_ref(bg_filter *f) { atomic_fetch_add(&f->refs, 1); }

static void filter_free(bg_filter *f) {
  bgi_guard_destroy(&f->guard);   /* first: it stops the snapshot refresher, which uses the client */
  bgi_client_unref(f->client);
  bgi_errslot_destroy(&f->err);
  pthread_mutex_destroy(&f->pmu);
  bgi_guarded_free_spares(f);
  pthread_mutex_destroy(&f->spare_mu);
  free_names(f);
  free(f);
}

void bgi_filter_unref(bg_filter *f) {
  if (atomic_fetch_sub(&f->refs, 1) == 1) filter_free(f);
}

/* The caller's reference goes: operations still in flight on a queue finish with the filter as it
 * was (they hold references), and the last of them frees it. The snapshot refresher stops now, on
 * the caller's thread, rather than on a queue's, which the last operation may complete on. */
BG_API void bg_filter_close(bg_filter *f) {
  if (!f) return;
  pthread_mutex_lock(&f->guard.admin_mu);
  bgi_refresher_stop(&f->guard);
  pthread_mutex_unlock(&f->guard.admin_mu);
  bgi_filter_unref(f);
}

BG_API const char *bg_filter_name(const bg_filter *f) { return f ? f->name.s : NULL; }

BG_API int bg_filter_node_ex(bg_filter *f, bg_call *call, char *buf, size_t cap, int32_t *slot) {
  bgi_err err = {0};
  if (!f) return bgi_call_null_handle(call, "filter");
  if (!buf && cap) {
    bgi_err_set(&err, BG_EINVAL, "filter node: buf must not be NULL when cap is not 0");
    return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
  }
  char addr[300];
  BGI_WITH_CALL(call, bgi_client_node_addr(f->client, f->slot, bgi_call_deadline(call), addr, sizeof addr, &err));
  if (cap) snprintf(buf, cap, "%s", addr);
  if (slot) *slot = f->slot;
  return bgi_call_finish(call, &f->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_filter_node(bg_filter *f, char *buf, size_t cap, int32_t *slot) {
  return bg_filter_node_ex(f, NULL, buf, cap, slot);
}

BG_API const char *bg_filter_errmsg(const bg_filter *f) { return f ? bgi_errslot_view((bgi_errslot *)&f->err) : "filter handle is NULL"; }

BG_API size_t bg_filter_errmsg_copy(const bg_filter *f, char *buf, size_t cap) {
  if (!f) return 0;
  return bgi_errslot_copy((bgi_errslot *)&f->err, buf, cap);
}

int bgi_compute_indexes(bgi_conn *c, const void *const *items, const size_t *lens, size_t from, size_t to,
                        uint64_t cfg, uint64_t next_cfg, bgi_err *err) {
  uint64_t size = bgi_cfg_size(cfg), next_size = bgi_cfg_size(next_cfg);
  uint32_t k = bgi_cfg_k(cfg), next_k = bgi_cfg_k(next_cfg);
  size_t n = to - from;
  if (bgi_conn_idx_reserve(c, n * (k + next_k)) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  uint64_t *out = c->idx, *next_out = c->idx + n * k;
  for (size_t i = from; i < to; i++, out += k, next_out += next_k) {
    uint64_t h[2];
    bgi_hash128(items[i], lens[i], h);
    bgi_indexes_from_hash(h[0], h[1], size, k, out);
    if (next_k) bgi_indexes_from_hash(h[0], h[1], next_size, next_k, next_out);
  }
  return BG_OK;
}

/* No object is bigger than PTRDIFF_MAX bytes (C's pointer difference must hold its size), so
 * neither an item nor a batch's copy can be: a larger length is a mistake of the caller's (a
 * negative length cast, an unset one), and a sum past it would wrap around a copy's size. */
#define ITEMS_MAX_BYTES ((size_t)PTRDIFF_MAX)
/* An item's pointer, its length and an answer byte per item, all in one batch's copy. */
#define ITEMS_MAX_COUNT (ITEMS_MAX_BYTES / (sizeof(void *) + sizeof(size_t) + 1))

int bgi_check_items(const char *fn, const void *const *items, const size_t *lens, size_t n, const void *out,
                    bgi_err *err) {
  if (n && (!items || !lens)) return bgi_err_set(err, BG_EINVAL, "%s: items and lens must not be NULL", fn);
  if (n && !out) return bgi_err_set(err, BG_EINVAL, "%s: the output array must not be NULL", fn);
  if (n > ITEMS_MAX_COUNT)
    return bgi_err_set(err, BG_EINVAL, "%s: %zu items in one batch: at most %zu fit in memory (PTRDIFF_MAX bytes); "
                       "check n", fn, n, ITEMS_MAX_COUNT);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (!items[i] && lens[i])
      return bgi_err_set(err, BG_EINVAL, "%s: item %zu is NULL with length %zu", fn, i, lens[i]);
    if (lens[i] > ITEMS_MAX_BYTES - total)
      return bgi_err_set(err, BG_EINVAL, "%s: item %zu's length %zu takes the batch past PTRDIFF_MAX (%zu) bytes, more "
                         "than any buffer can hold: a length is wrong (a negative number cast to size_t?)", fn, i,
                         lens[i], ITEMS_MAX_BYTES);
    total += lens[i];
  }
  return BG_OK;
}
