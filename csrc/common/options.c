#include "common/options.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"

/*
 * The one table of options: what bg_options_set_int / _set_str accept, bg_options_bounds answers,
 * the defaults, and which consumer reads each (bgi_options_check). A new option is one row here
 * (and its field in struct bg_options); rows may come in any order.
 */
#define INT_OPT(id, consumer, lo, hi, def, field) {id, #id, consumer, 0, lo, hi, def, offsetof(struct bg_options, field)}
#define STR_OPT(id, consumer, field) {id, #id, consumer, 1, 0, 0, 0, offsetof(struct bg_options, field)}

typedef struct opt_spec {
  int id;
  const char *name;   /* "BG_OPT_POOL_SIZE" */
  int consumer;       /* BGI_OPT_* */
  int is_str;
  int64_t lo, hi;     /* integer options: the accepted range */
  int64_t def;        /* integer options: the default (may lie outside the range: "take the URL's") */
  size_t offset;      /* of the int64_t or char * in struct bg_options */
} opt_spec;

static const opt_spec specs[] = {
  INT_OPT(BG_OPT_CONNECT_TIMEOUT_MS, BGI_OPT_CLIENT, 1, 3600000, 2000, connect_timeout_ms),
  INT_OPT(BG_OPT_COMMAND_TIMEOUT_MS, BGI_OPT_CLIENT, 1, 3600000, 1000, command_timeout_ms),
  INT_OPT(BG_OPT_POOL_SIZE, BGI_OPT_CLIENT, 1, 1024, 4, pool_size),
  INT_OPT(BG_OPT_DB, BGI_OPT_CLIENT, 0, 1000000, -1, db),
  INT_OPT(BG_OPT_CONFIG_RETRIES, BGI_OPT_CLIENT, 0, 100, 5, config_retries),
  INT_OPT(BG_OPT_WRITE_LOCK_WAIT_MS, BGI_OPT_CLIENT, 0, 3600000, 100, lock_wait_ms),
  INT_OPT(BG_OPT_TRACKING, BGI_OPT_CLIENT, 0, 1, 1, tracking),
  INT_OPT(BG_OPT_CLUSTER, BGI_OPT_CLIENT, BG_CLUSTER_OFF, BG_CLUSTER_AUTO, BG_CLUSTER_AUTO, cluster),
  INT_OPT(BG_OPT_WAIT_REPLICAS, BGI_OPT_CLIENT, 0, 64, 0, wait_replicas),
  INT_OPT(BG_OPT_WAIT_TIMEOUT_MS, BGI_OPT_CLIENT, 1, 3600000, 1000, wait_timeout_ms),
  INT_OPT(BG_OPT_TLS_VERIFY, BGI_OPT_CLIENT, 0, 1, 1, tls_verify),
  INT_OPT(BG_OPT_PIPELINE, BGI_OPT_CLIENT, 0, 1, 1, pipeline),
  INT_OPT(BG_OPT_PIPELINE_CONNS, BGI_OPT_CLIENT, 1, 64, 2, pipeline_conns),
  INT_OPT(BG_OPT_PIPELINE_SPIN_US, BGI_OPT_CLIENT, 0, 1000, 0, pipeline_spin_us),
  INT_OPT(BG_OPT_CONNECT_AT_OPEN, BGI_OPT_CLIENT, 0, 1, 0, connect_at_open),
  INT_OPT(BG_OPT_DEGRADED_EVENTS_PER_S, BGI_OPT_CLIENT, 0, 1000000, 1, degraded_events_per_s),
  INT_OPT(BG_OPT_HISTOGRAMS, BGI_OPT_CLIENT, 0, 1, 1, histograms),
  INT_OPT(BG_OPT_NATIVE_MAX_BYTES, BGI_OPT_CLIENT, 4096, INT64_C(1) << 40, 536870912, native_max_bytes),
  INT_OPT(BG_OPT_ROTATE_LEASE_MS, BGI_OPT_ROTATION, 100, 3600000, 30000, rotate_lease_ms),
  INT_OPT(BG_OPT_ROTATE_WAIT_MS, BGI_OPT_ROTATION, 0, 3600000, 0, rotate_wait_ms),
  INT_OPT(BG_OPT_ROTATE_STAGING_TTL_MS, BGI_OPT_ROTATION, 1000, 86400000, 300000, rotate_staging_ttl_ms),
  /* default 0: the online CPUs - 1, at least 1 (bg_rotation_begin) */
  INT_OPT(BG_OPT_ROTATE_THREADS, BGI_OPT_ROTATION, 1, 256, 0, rotate_threads),
  INT_OPT(BG_OPT_ROTATE_CHUNK_BYTES, BGI_OPT_ROTATION, 4096, 67108864, 1 << 20, rotate_chunk_bytes),
  INT_OPT(BG_OPT_ROTATE_BATCH, BGI_OPT_ROTATION, 1, 1000000, 1000, rotate_batch),
  INT_OPT(BG_OPT_ROTATE_NICE, BGI_OPT_ROTATION, 0, 19, 10, rotate_nice),
  INT_OPT(BG_OPT_ROTATE_PARTITIONS, BGI_OPT_ROTATION, 0, 16384, 0, rotate_partitions),
  INT_OPT(BG_OPT_LOCK_LEASE_MS, BGI_OPT_LOCK, 30, 3600000, 30000, lock_lease_ms),
  INT_OPT(BG_OPT_LOCK_RENEW, BGI_OPT_LOCK, 0, 1, 1, lock_renew),
  INT_OPT(BG_OPT_LOCK_SUBSCRIBE, BGI_OPT_LOCK, 0, 1, 1, lock_subscribe),
  INT_OPT(BG_OPT_LOCK_POLL_MAX_MS, BGI_OPT_LOCK, 1, 60000, 100, lock_poll_max_ms),
  STR_OPT(BG_OPT_USERNAME, BGI_OPT_CLIENT, username),
  STR_OPT(BG_OPT_PASSWORD, BGI_OPT_CLIENT, password),
  STR_OPT(BG_OPT_CLIENT_NAME, BGI_OPT_CLIENT, client_name),
  STR_OPT(BG_OPT_SENTINEL_USERNAME, BGI_OPT_CLIENT, sentinel_username),
  STR_OPT(BG_OPT_SENTINEL_PASSWORD, BGI_OPT_CLIENT, sentinel_password),
  STR_OPT(BG_OPT_TLS_CA_FILE, BGI_OPT_CLIENT, tls_ca_file),
  STR_OPT(BG_OPT_TLS_CA_DIR, BGI_OPT_CLIENT, tls_ca_dir),
  STR_OPT(BG_OPT_TLS_CERT_FILE, BGI_OPT_CLIENT, tls_cert_file),
  STR_OPT(BG_OPT_TLS_KEY_FILE, BGI_OPT_CLIENT, tls_key_file),
  STR_OPT(BG_OPT_TLS_SERVER_NAME, BGI_OPT_CLIENT, tls_server_name),
};
#define NSPECS (sizeof specs / sizeof specs[0])
_Static_assert(NSPECS <= 64, "struct bg_options.set has one bit per row of the option table");

static const opt_spec *find_spec(int id) {
  for (size_t i = 0; i < NSPECS; i++)
    if (specs[i].id == id) return &specs[i];
  return NULL;
}

static int64_t *int_slot(struct bg_options *o, const opt_spec *s) { return (int64_t *)((char *)o + s->offset); }
static char **str_slot(struct bg_options *o, const opt_spec *s) { return (char **)((char *)o + s->offset); }
static uint64_t bit(const opt_spec *s) { return 1ull << (size_t)(s - specs); }

static const char *consumer_what(int consumer) {
  switch (consumer) {
    case BGI_OPT_CLIENT: return "a client option (bg_client_open)";
    case BGI_OPT_ROTATION: return "a rotation option (bg_rotation_begin)";
    default: return "a lock option (bg_lock_open)";
  }
}

int bgi_options_check(const struct bg_options *o, int consumer, bgi_err *err) {
  if (!o) return BG_OK;
  for (size_t i = 0; i < NSPECS; i++) {
    if (!(o->set & (1ull << i)) || specs[i].consumer == consumer) continue;
    /* an option the consumer never reads was a mistake of the caller's (issue 16): say where it goes */
    return bgi_err_set(err, BG_ENOTSUP, "%s is %s, not %s", specs[i].name, consumer_what(specs[i].consumer),
                       consumer_what(consumer));
  }
  return BG_OK;
}

int bgi_options_take_from_url(struct bg_options *o, const char *param, int option, int64_t value, const char *text,
                              bgi_err *err) {
  const opt_spec *s = find_spec(option);
  if (!s) return bgi_err_set(err, BG_ENOTSUP, "URL query parameter %s: no such option", param);
  if (o->set & bit(s)) return BG_OK;
  if (s->is_str) {
    char *copy = strdup(text);
    if (!copy) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    free(*str_slot(o, s));
    *str_slot(o, s) = copy;
    return BG_OK;
  }
  if (value < s->lo || value > s->hi)
    return bgi_err_set(err, BG_EBADURL, "bad server URL: the query's %s is out of range (%lld..%lld%s)", param,
                       (long long)s->lo, (long long)s->hi, strstr(s->name, "_MS") ? " ms" : "");
  *int_slot(o, s) = value;
  return BG_OK;
}

void bgi_options_defaults(struct bg_options *o) {
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < NSPECS; i++)
    if (!specs[i].is_str) *int_slot(o, &specs[i]) = specs[i].def;
}

static void free_secret(char *s) {
  if (s) {
    /* volatile so the wipe is not optimised away before free */
    volatile char *p = s;
    while (*p) *p++ = 0;
    free(s);
  }
}

void bgi_options_clear(struct bg_options *o) {
  free(o->username);
  free_secret(o->password);
  free(o->client_name);
  free(o->sentinel_username);
  free_secret(o->sentinel_password);
  free(o->tls_ca_file);
  free(o->tls_ca_dir);
  free(o->tls_cert_file);
  free(o->tls_key_file);
  free(o->tls_server_name);
  o->username = o->password = o->client_name = o->sentinel_username = o->sentinel_password = NULL;
  o->tls_ca_file = o->tls_ca_dir = o->tls_cert_file = o->tls_key_file = o->tls_server_name = NULL;
}

static int dup_opt(char **dst, const char *src) {
  *dst = NULL;
  if (src && !(*dst = strdup(src))) return BG_ENOMEM;
  return BG_OK;
}

int bgi_options_copy(struct bg_options *dst, const struct bg_options *src) {
  if (!src) {
    bgi_options_defaults(dst);
    return BG_OK;
  }
  *dst = *src;
  dst->username = dst->password = dst->client_name = dst->sentinel_username = dst->sentinel_password = NULL;
  dst->tls_ca_file = dst->tls_ca_dir = dst->tls_cert_file = dst->tls_key_file = dst->tls_server_name = NULL;
  if (dup_opt(&dst->username, src->username) || dup_opt(&dst->password, src->password) ||
      dup_opt(&dst->client_name, src->client_name) || dup_opt(&dst->sentinel_username, src->sentinel_username) ||
      dup_opt(&dst->sentinel_password, src->sentinel_password) || dup_opt(&dst->tls_ca_file, src->tls_ca_file) ||
      dup_opt(&dst->tls_ca_dir, src->tls_ca_dir) || dup_opt(&dst->tls_cert_file, src->tls_cert_file) ||
      dup_opt(&dst->tls_key_file, src->tls_key_file) || dup_opt(&dst->tls_server_name, src->tls_server_name)) {
    bgi_options_clear(dst);
    return BG_ENOMEM;
  }
  return BG_OK;
}

BG_API int bg_options_new(bg_options **out) {
  if (!out) return BG_EINVAL;
  *out = malloc(sizeof **out);
  if (!*out) return BG_ENOMEM;
  bgi_options_defaults(*out);
  return BG_OK;
}

BG_API void bg_options_free(bg_options *o) {
  if (!o) return;
  bgi_options_clear(o);
  free(o);
}

BG_API int bg_options_bounds(int option, int64_t *lo, int64_t *hi) {
  const opt_spec *s = find_spec(option);
  if (!s || s->is_str) return BG_ENOTSUP;
  if (lo) *lo = s->lo;
  if (hi) *hi = s->hi;
  return BG_OK;
}

BG_API int bg_options_set_int(bg_options *o, int option, int64_t v) {
  const opt_spec *s = find_spec(option);
  if (!o) return BG_EINVAL;
  if (!s || s->is_str) return BG_ENOTSUP;
  if (v < s->lo || v > s->hi) return BG_EINVAL;
  *int_slot(o, s) = v;
  o->set |= bit(s);
  return BG_OK;
}

BG_API int bg_options_set_str(bg_options *o, int option, const char *v) {
  const opt_spec *s = find_spec(option);
  char **slot, *copy = NULL;
  if (!o) return BG_EINVAL;
  if (!s || !s->is_str) return BG_ENOTSUP;
  /* CLIENT SETNAME refuses spaces and newlines; catch it here with a clear status */
  if (option == BG_OPT_CLIENT_NAME && v && (strpbrk(v, " \r\n") || !*v)) return BG_EINVAL;
  /* an empty string is the option unset (for a user or password, the URL's then applies: Redis
   * refuses AUTH with ""; an empty file name names no file) */
  if (v && !*v) v = NULL;
  if (v && !(copy = strdup(v))) return BG_ENOMEM;
  slot = str_slot(o, s);
  if (option == BG_OPT_PASSWORD || option == BG_OPT_SENTINEL_PASSWORD) free_secret(*slot);
  else free(*slot);
  *slot = copy;
  /* back to the default (NULL, "") is no longer an explicit setting */
  if (copy) o->set |= bit(s);
  else o->set &= ~bit(s);
  return BG_OK;
}
