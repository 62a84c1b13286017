/* Internal layout of bg_filter and the helpers its operations share. */
#ifndef BG_INTERNAL_FILTER_H
#define BG_INTERNAL_FILTER_H

#include <stdatomic.h>
#include <stdint.h>

#include "bloomguard/filter.h"
#include "common/call.h"
#include "client.h"
#include "common/wait.h"
#include "policy/guard.h"
#include "redis/layout.h"
#include "redis/names.h"

/*
 * The config this handle last saw, packed as size << 32 | k so readers need no lock
 * (size <= BG_MAX_SIZE < 2^32, k <= BG_MAX_HASH_ITERATIONS). 0 means "not read yet".
 */
static inline uint64_t bgi_cfg_pack(uint64_t size, uint32_t k) { return size << 32 | k; }
static inline uint64_t bgi_cfg_size(uint64_t cfg) { return cfg >> 32; }
static inline uint32_t bgi_cfg_k(uint64_t cfg) { return (uint32_t)cfg; }

/* The keys of a filter (docs/layout.md): all suffix(name, ...) but the bitmap, at the name itself. */
struct bg_filter {
  bg_client *client;
  bgi_key name;          /* the filter's name, and its bitmap's key */
  bgi_key config_key;
  /* keys of a rotation in progress (see rotation.h): lease hash, delta list (the staging bitmap is
   * the rotation's own, named after its token) */
  bgi_key rotation_key, delta_key;
  /* the filter's write lock (bg_lock_open_filter): queries wait while it is held in WRITE mode */
  bgi_key lock_key;
  /* the previous bitmap a SWAP commit keeps for the next upload (rotation/steps.c); delete drops it */
  bgi_key spare_key;
  int slot;              /* the cluster hash slot every key of the filter lives in */
  atomic_uint_fast64_t cfg;
  /* names this handle in the connections' tracking verdicts (redis/tracking.h); never reused */
  uint64_t id;
  /* the next generation's config while a SWAP rotation runs (adds record into its delta), else 0 */
  atomic_uint_fast64_t next_cfg;
  bgi_errslot err;
  /* the degrade policy, breaker, counters and snapshot of this handle (policy/guard.h) */
  bgi_guard guard;
};

/* Items hashed and sent per round trip, and per atomic server step within it: bounds client
 * memory for huge batches and keeps each server-side step short (other clients wait for it). */
#define BGI_WINDOW_ITEMS 16384
#define BGI_CHUNK_ITEMS 1024

/* Strict parses of config fields (plain decimal, no sign, no leading zeros): 0 ok, -1 bad. */
int bgi_parse_u64(const char *s, size_t len, uint64_t *out);
/*
 * Turns the [size, hashIterations] pair of an HMGET reply into a packed config.
 * BG_ENOTINIT if either is missing, BG_ECORRUPT if unparsable or out of range.
 */
int bgi_cfg_from_pair(const bg_filter *f, const bgi_reply *size, const bgi_reply *k, uint64_t *cfg,
                      bgi_err *err);

/* Reads the config (HMGET) into f->cfg. */
int bgi_filter_load_config(bg_filter *f, uint64_t deadline_ns, bgi_err *err);
/* The cached config, loading it first if needed. */
int bgi_filter_config(bg_filter *f, uint64_t deadline_ns, uint64_t *cfg, bgi_err *err);

/* Appends "HMGET config size hashIterations". */
void bgi_append_hmget_config(bgi_buf *b, const bg_filter *f);
/* Room needed for bgi_append_hmget_config. */
size_t bgi_hmget_config_bound(const bg_filter *f);

/*
 * Hashes items[from..to) into c->idx: k indexes per item for cfg, then (when next_cfg is not 0)
 * next_k indexes per item for next_cfg - each item hashed once for both.
 */
int bgi_compute_indexes(bgi_conn *c, const void *const *items, const size_t *lens, size_t from, size_t to,
                        uint64_t cfg, uint64_t next_cfg, bgi_err *err);

/* Checks the arguments every batch call shares. */
int bgi_check_items(const char *fn, const void *const *items, const size_t *lens, size_t n, const void *out,
                    bgi_err *err);

/*
 * Queries / adds items[0..n) against Redis, without the policy (policy/guard.c wraps them). On
 * failure *done is how many leading items were answered / added before it (whole windows).
 */
int bgi_filter_contains_raw(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens,
                            size_t n, uint8_t *present, size_t *done, bgi_err *err);
int bgi_filter_add_raw(bg_filter *f, uint64_t deadline_ns, const void *const *items, const size_t *lens, size_t n,
                       size_t *added, size_t *done, bgi_err *err);

/* Ends a public filter operation (see bgi_call_finish). */
static inline int bgi_filter_finish(bg_filter *f, bg_call *call, const bgi_err *err) {
  return bgi_call_finish(call, &f->err, err, BG_SOURCE_REDIS);
}

#endif
