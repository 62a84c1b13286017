/* Internal layout of bg_options (opaque to callers). */
#ifndef BG_INTERNAL_OPTIONS_H
#define BG_INTERNAL_OPTIONS_H

#include <stdint.h>

#include "bloomguard/options.h"
#include "common/err.h"

struct bg_options {
  int64_t connect_timeout_ms;
  int64_t command_timeout_ms;
  int64_t pool_size;
  int64_t db;              /* -1: take the URL's */
  int64_t config_retries;
  int64_t lock_wait_ms;          /* queries on a write-locked filter */
  int64_t tracking;              /* 0 or 1 */
  int64_t cluster;               /* BG_CLUSTER_* */
  int64_t wait_replicas;         /* 0: no WAIT after writes */
  int64_t wait_timeout_ms;
  int64_t tls_verify;            /* 0 or 1 */
  int64_t pipeline;              /* 0 or 1 */
  int64_t pipeline_conns;
  int64_t pipeline_spin_us;
  int64_t connect_at_open;       /* 0 or 1 */
  int64_t degraded_events_per_s;
  int64_t histograms;            /* 0 or 1 */
  int64_t native_max_bytes;      /* a native filter's largest first link */
  int64_t rotate_lease_ms;
  int64_t rotate_wait_ms;
  int64_t rotate_staging_ttl_ms;
  int64_t rotate_threads;        /* 0: the online CPUs - 1, at least 1 */
  int64_t rotate_chunk_bytes;
  int64_t rotate_batch;
  int64_t rotate_nice;           /* added to the hashing threads' nice value */
  int64_t rotate_partitions;     /* 0: the live generation's */
  int64_t lock_lease_ms;
  int64_t lock_renew;            /* 0 or 1 */
  int64_t lock_subscribe;        /* 0 or 1 */
  int64_t lock_poll_max_ms;
  char *username;          /* NULL: take the URL's */
  char *password;          /* NULL: take the URL's */
  char *client_name;
  char *sentinel_username; /* NULL: none (sentinels have credentials of their own) */
  char *sentinel_password;
  char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file, *tls_server_name;   /* NULL: unset */
  uint64_t set;            /* bit i: row i of the option table (options.c) was set explicitly */
};

/* Who reads an option: each consumer refuses an explicitly set option of another (BG_ENOTSUP). */
#define BGI_OPT_CLIENT    1  /* bg_client_open */
#define BGI_OPT_ROTATION  2  /* bg_rotation_begin */
#define BGI_OPT_LOCK      3  /* bg_lock_open, bg_lock_open_filter */

/*
 * BG_OK when every option set explicitly in o (NULL: none) is one of consumer's (BGI_OPT_*), else
 * BG_ENOTSUP on err naming the first foreign one and where it belongs, e.g.
 * "BG_OPT_ROTATE_LEASE_MS is a rotation option (bg_rotation_begin), not a client option (bg_client_open)".
 */
int bgi_options_check(const struct bg_options *o, int consumer, bgi_err *err);

/*
 * A client option the URL's query gave (param: its name in messages): o takes it unless o had it
 * set explicitly (the options given to the open win over the URL). value for an integer option,
 * text for a string one. BG_OK, BG_EBADURL naming param and the range when out of range, or
 * BG_ENOMEM.
 */
int bgi_options_take_from_url(struct bg_options *o, const char *param, int option, int64_t value, const char *text,
                              bgi_err *err);

void bgi_options_defaults(struct bg_options *o);
/* Deep copy; src may be NULL (defaults). Returns BG_OK or BG_ENOMEM. */
int bgi_options_copy(struct bg_options *dst, const struct bg_options *src);
/* Frees the strings (zeroing the password first). */
void bgi_options_clear(struct bg_options *o);

#endif
