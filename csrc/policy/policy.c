/* bg_policy: the settings object, its defaults, the classification of failures, and the reference
 * a handle's engine publishes (a filter holds a refcounted copy). */
#include "policy/guard.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static void set_default_chain(bgi_policy_cfg *c, int cls, const uint8_t *acts, size_t n) {
  memcpy(c->chain[cls], acts, n);
  c->chain_len[cls] = (uint8_t)n;
}

void bgi_policy_defaults(bgi_policy_cfg *c) {
  static const uint8_t retry_then_present[] = {BG_ACT_RETRY, BG_ACT_ASSUME_PRESENT};
  static const uint8_t present[] = {BG_ACT_ASSUME_PRESENT};
  static const uint8_t error[] = {BG_ACT_ERROR};
  memset(c, 0, sizeof *c);
  set_default_chain(c, BG_FAIL_NOTINIT, retry_then_present, 2);
  set_default_chain(c, BG_FAIL_CONFIG, retry_then_present, 2);
  /* a lock wait or a timeout has been paid already: a retry would pay it again */
  set_default_chain(c, BG_FAIL_LOCKED, present, 1);
  set_default_chain(c, BG_FAIL_CONNECTION, retry_then_present, 2);
  set_default_chain(c, BG_FAIL_TIMEOUT, present, 1);
  set_default_chain(c, BG_FAIL_SERVER, retry_then_present, 2);
  set_default_chain(c, BG_FAIL_CORRUPT, present, 1);
  set_default_chain(c, BG_FAIL_OTHER, error, 1);
  c->retry_count = 2;
  c->backoff_base_ms = 10;
  c->backoff_max_ms = 100;
  c->jitter_pct = 50;
  c->breaker_threshold = 5;
  c->breaker_cooldown_ms = 1000;
  c->callback_rate = 100;
  c->callback_burst = 100;
  c->snapshot_interval_ms = 0;
  c->snapshot_max_age_ms = 0;
  c->snapshot_chunk_bytes = 1048576;
}

int bgi_fail_class(int status) {
  switch (status) {
    case BG_OK:
    case BG_EINVAL:
    case BG_ECANCELED: return 0;  /* the caller's own wish: nothing to degrade */
    case BG_ENOTINIT: return BG_FAIL_NOTINIT;
    case BG_ECONFIG: return BG_FAIL_CONFIG;
    case BG_ELOCKED: return BG_FAIL_LOCKED;
    case BG_ECONN: return BG_FAIL_CONNECTION;
    case BG_ETIMEOUT: return BG_FAIL_TIMEOUT;
    case BG_ESERVER: return BG_FAIL_SERVER;
    case BG_ECORRUPT:
    case BG_EWRONGTYPE: return BG_FAIL_CORRUPT;
    default: return BG_FAIL_OTHER;
  }
}

int bgi_outcome(int status) {
  if (status == BG_OK) return BG_OUTCOME_OK;
  if (status == BG_ECANCELED) return BG_OUTCOME_CANCELLED;
  int cls = bgi_fail_class(status);
  return cls ? cls : BG_FAIL_OTHER;
}

uint64_t bgi_backoff_ns(const bgi_policy_cfg *c, int64_t attempt, uint64_t r) {
  uint64_t max = bgi_ms_ns(c->backoff_max_ms), wait = bgi_ms_ns(c->backoff_base_ms);
  for (int64_t i = 0; i < attempt && wait < max; i++) wait *= 2;
  if (wait > max) wait = max;
  /* shorten by a uniform random part of jitter_pct percent: spreads the retries of many callers */
  uint64_t cut = (uint64_t)((double)wait * (double)c->jitter_pct / 100.0 * ((double)(r >> 11) / 9007199254740992.0));
  return wait - (cut < wait ? cut : wait);
}

void bgi_policy_unref(bgi_policy *p) {
  if (p && atomic_fetch_sub(&p->refs, 1) == 1) free(p);
}

bgi_policy *bgi_guard_policy(bgi_guard *g) {
  pthread_mutex_lock(&g->mu);
  bgi_policy *p = atomic_load(&g->policy);
  if (p) atomic_fetch_add(&p->refs, 1);
  pthread_mutex_unlock(&g->mu);
  return p;
}

BG_API int bg_policy_new(bg_policy **out) {
  if (!out) return BG_EINVAL;
  if (!(*out = malloc(sizeof **out))) return BG_ENOMEM;
  bgi_policy_defaults(&(*out)->cfg);
  return BG_OK;
}

BG_API void bg_policy_free(bg_policy *p) { free(p); }

/* The one table of integer settings: where each lives, its range (bg_policy_set_int checks it,
 * bg_policy_bounds answers it). A new setting is one row. */
typedef struct setting_spec {
  int id;
  int64_t lo, hi;
  size_t offset;   /* of the int64_t in bgi_policy_cfg */
} setting_spec;

#define SETTING(id, lo, hi, field) {id, lo, hi, offsetof(bgi_policy_cfg, field)}
static const setting_spec settings[] = {
  SETTING(BG_POLICY_RETRY_COUNT, 0, 100, retry_count),
  SETTING(BG_POLICY_BACKOFF_BASE_MS, 0, 60000, backoff_base_ms),
  SETTING(BG_POLICY_BACKOFF_MAX_MS, 0, 600000, backoff_max_ms),
  SETTING(BG_POLICY_JITTER_PCT, 0, 100, jitter_pct),
  SETTING(BG_POLICY_BREAKER_THRESHOLD, 0, 1000000, breaker_threshold),
  SETTING(BG_POLICY_BREAKER_COOLDOWN_MS, 1, 3600000, breaker_cooldown_ms),
  SETTING(BG_POLICY_CALLBACK_RATE, 0, 1000000, callback_rate),
  SETTING(BG_POLICY_CALLBACK_BURST, 1, 1000000, callback_burst),
  /* and 0 (never): a refresh every few ms would be a download loop, not a snapshot */
  SETTING(BG_POLICY_SNAPSHOT_INTERVAL_MS, 100, 86400000, snapshot_interval_ms),
  SETTING(BG_POLICY_SNAPSHOT_MAX_AGE_MS, 0, 31536000000, snapshot_max_age_ms),
  SETTING(BG_POLICY_SNAPSHOT_CHUNK_BYTES, 4096, 67108864, snapshot_chunk_bytes),
};

static const setting_spec *find_setting(int option) {
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
    if (settings[i].id == option) return &settings[i];
  return NULL;
}

static int64_t *field(bgi_policy_cfg *c, const setting_spec *s) { return (int64_t *)((char *)c + s->offset); }

BG_API int bg_policy_bounds(int option, int64_t *lo, int64_t *hi) {
  const setting_spec *s = find_setting(option);
  if (!s) return BG_ENOTSUP;
  if (lo) *lo = s->lo;
  if (hi) *hi = s->hi;
  return BG_OK;
}

BG_API int bg_policy_set_int(bg_policy *p, int option, int64_t value) {
  const setting_spec *s = find_setting(option);
  if (!p) return BG_EINVAL;
  if (!s) return BG_ENOTSUP;
  int off = option == BG_POLICY_SNAPSHOT_INTERVAL_MS && value == 0;
  if (!off && (value < s->lo || value > s->hi)) return BG_EINVAL;
  *field(&p->cfg, s) = value;
  return BG_OK;
}

BG_API int bg_policy_get_int(const bg_policy *p, int option, int64_t *value) {
  const setting_spec *s = find_setting(option);
  if (!p || !value) return BG_EINVAL;
  if (!s) return BG_ENOTSUP;
  *value = *field((bgi_policy_cfg *)&p->cfg, s);
  return BG_OK;
}

BG_API int bg_policy_set_chain(bg_policy *p, int fail_class, const int *actions, size_t n) {
  if (!p) return BG_EINVAL;
  if (fail_class < 1 || fail_class >= BGI_FAIL_CLASSES) return BG_ENOTSUP;
  if (!actions || n == 0 || n > BG_POLICY_MAX_CHAIN) return BG_EINVAL;
  for (size_t i = 0; i < n; i++)
    if (actions[i] < BG_ACT_RETRY || actions[i] > BG_ACT_ERROR) return BG_ENOTSUP;
  for (size_t i = 0; i < n; i++) p->cfg.chain[fail_class][i] = (uint8_t)actions[i];
  p->cfg.chain_len[fail_class] = (uint8_t)n;
  return BG_OK;
}

BG_API int bg_policy_get_chain(const bg_policy *p, int fail_class, int *actions, size_t cap, size_t *n) {
  if (!p || (cap && !actions)) return BG_EINVAL;
  if (fail_class < 1 || fail_class >= BGI_FAIL_CLASSES) return BG_ENOTSUP;
  size_t len = p->cfg.chain_len[fail_class];
  for (size_t i = 0; i < len && i < cap; i++) actions[i] = p->cfg.chain[fail_class][i];
  if (n) *n = len;
  return BG_OK;
}

BG_API int bg_policy_set_fallback(bg_policy *p, bg_fallback_fn fn, void *userdata) {
  if (!p) return BG_EINVAL;
  p->cfg.fallback = fn;
  p->cfg.userdata = fn ? userdata : NULL;
  return BG_OK;
}
