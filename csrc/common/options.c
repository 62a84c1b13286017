#include "common/options.h"

#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"

void bgi_options_defaults(struct bg_options *o) {
  memset(o, 0, sizeof *o);
  o->connect_timeout_ms = 2000;
  o->command_timeout_ms = 1000;
  o->pool_size = 4;
  o->db = -1;
  o->config_retries = 5;
  o->lock_wait_ms = 100;
  o->tracking = 1;
  o->cluster = BG_CLUSTER_AUTO;
  o->wait_timeout_ms = 1000;
  o->tls_verify = 1;
  o->pipeline = 1;
  o->pipeline_conns = 2;
  o->rotate_lease_ms = 30000;
  o->rotate_wait_ms = 0;
  o->rotate_staging_ttl_ms = 300000;
  o->rotate_threads = 0;
  o->rotate_nice = 10;
  o->rotate_chunk_bytes = 1 << 20;
  o->rotate_batch = 1000;
  o->lock_lease_ms = 30000;
  o->lock_renew = 1;
  o->lock_subscribe = 1;
  o->lock_poll_max_ms = 100;
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

static int in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

static int set_ranged(int64_t *slot, int64_t v, int64_t lo, int64_t hi) {
  if (!in_range(v, lo, hi)) return BG_EINVAL;
  *slot = v;
  return BG_OK;
}

BG_API int bg_options_set_int(bg_options *o, int option, int64_t v) {
  if (!o) return BG_EINVAL;
  switch (option) {
    case BG_OPT_CONNECT_TIMEOUT_MS: return set_ranged(&o->connect_timeout_ms, v, 1, 3600000);
    case BG_OPT_COMMAND_TIMEOUT_MS: return set_ranged(&o->command_timeout_ms, v, 1, 3600000);
    case BG_OPT_POOL_SIZE: return set_ranged(&o->pool_size, v, 1, 1024);
    case BG_OPT_DB: return set_ranged(&o->db, v, 0, 1000000);
    case BG_OPT_CONFIG_RETRIES: return set_ranged(&o->config_retries, v, 0, 100);
    case BG_OPT_WRITE_LOCK_WAIT_MS: return set_ranged(&o->lock_wait_ms, v, 0, 3600000);
    case BG_OPT_TRACKING: return set_ranged(&o->tracking, v, 0, 1);
    case BG_OPT_CLUSTER: return set_ranged(&o->cluster, v, BG_CLUSTER_OFF, BG_CLUSTER_AUTO);
    case BG_OPT_WAIT_REPLICAS: return set_ranged(&o->wait_replicas, v, 0, 64);
    case BG_OPT_WAIT_TIMEOUT_MS: return set_ranged(&o->wait_timeout_ms, v, 1, 3600000);
    case BG_OPT_TLS_VERIFY: return set_ranged(&o->tls_verify, v, 0, 1);
    case BG_OPT_PIPELINE: return set_ranged(&o->pipeline, v, 0, 1);
    case BG_OPT_PIPELINE_CONNS: return set_ranged(&o->pipeline_conns, v, 1, 64);
    case BG_OPT_ROTATE_LEASE_MS: return set_ranged(&o->rotate_lease_ms, v, 100, 3600000);
    case BG_OPT_ROTATE_WAIT_MS: return set_ranged(&o->rotate_wait_ms, v, 0, 3600000);
    case BG_OPT_ROTATE_STAGING_TTL_MS: return set_ranged(&o->rotate_staging_ttl_ms, v, 1000, 86400000);
    case BG_OPT_ROTATE_THREADS: return set_ranged(&o->rotate_threads, v, 1, 256);
    case BG_OPT_ROTATE_CHUNK_BYTES: return set_ranged(&o->rotate_chunk_bytes, v, 4096, 67108864);
    case BG_OPT_ROTATE_BATCH: return set_ranged(&o->rotate_batch, v, 1, 1000000);
    case BG_OPT_ROTATE_NICE: return set_ranged(&o->rotate_nice, v, 0, 19);
    case BG_OPT_LOCK_LEASE_MS: return set_ranged(&o->lock_lease_ms, v, 30, 3600000);
    case BG_OPT_LOCK_RENEW: return set_ranged(&o->lock_renew, v, 0, 1);
    case BG_OPT_LOCK_SUBSCRIBE: return set_ranged(&o->lock_subscribe, v, 0, 1);
    case BG_OPT_LOCK_POLL_MAX_MS: return set_ranged(&o->lock_poll_max_ms, v, 1, 60000);
    default:
      return BG_ENOTSUP;
  }
}

BG_API int bg_options_set_str(bg_options *o, int option, const char *v) {
  char **slot;
  char *copy = NULL;
  if (!o) return BG_EINVAL;
  switch (option) {
    case BG_OPT_USERNAME: slot = &o->username; break;
    case BG_OPT_PASSWORD: slot = &o->password; break;
    case BG_OPT_SENTINEL_USERNAME: slot = &o->sentinel_username; break;
    case BG_OPT_SENTINEL_PASSWORD: slot = &o->sentinel_password; break;
    case BG_OPT_TLS_CA_FILE: slot = &o->tls_ca_file; break;
    case BG_OPT_TLS_CA_DIR: slot = &o->tls_ca_dir; break;
    case BG_OPT_TLS_CERT_FILE: slot = &o->tls_cert_file; break;
    case BG_OPT_TLS_KEY_FILE: slot = &o->tls_key_file; break;
    case BG_OPT_TLS_SERVER_NAME: slot = &o->tls_server_name; break;
    case BG_OPT_CLIENT_NAME:
      /* CLIENT SETNAME refuses spaces and newlines; catch it here with a clear status */
      if (v && (strpbrk(v, " \r\n") || !*v)) return BG_EINVAL;
      slot = &o->client_name;
      break;
    default: return BG_ENOTSUP;
  }
  /* an empty string is the option unset (for a user or password, the URL's then applies: Redis
   * refuses AUTH with ""; an empty file name names no file) */
  if (v && !*v) v = NULL;
  if (v && !(copy = strdup(v))) return BG_ENOMEM;
  if (slot == &o->password || slot == &o->sentinel_password) free_secret(*slot);
  else free(*slot);
  *slot = copy;
  return BG_OK;
}
