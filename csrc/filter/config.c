#include "filter/filter.h"

#include <stdlib.h>
#include <string.h>

#include "bloomguard/hash.h"

int bgi_parse_u64(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0 || len > 20 || (len > 1 && s[0] == '0')) return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;   /* beyond 2^64 - 1 */
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int bgi_parse_i64(const char *s, size_t len, int64_t *out) {
  uint64_t v;
  int neg = len > 0 && s[0] == '-';
  if (bgi_parse_u64(s + neg, len - (size_t)neg, &v) != 0 || v > (uint64_t)INT64_MAX) return -1;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

static int field_str(const bgi_reply *r) {
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

int bgi_cfg_from_pair(const bg_filter *f, const bgi_reply *size, const bgi_reply *k, uint64_t *cfg,
                      bgi_err *err) {
  uint64_t s, it;
  if (size->type == REDIS_REPLY_NIL || k->type == REDIS_REPLY_NIL)
    return bgi_err_set(err, BG_ENOTINIT, "Bloom filter \"%s\" is not initialized: its config hash %s has no "
                       "size/hashIterations (call init first)", f->name.s, f->config_key.s);
  if (!field_str(size) || bgi_parse_u64(size->str, size->len, &s) != 0 || s == 0 || s > BG_MAX_SIZE)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: size \"%.40s\" is not a decimal from 1 to %llu",
                       f->config_key.s, size->str ? size->str : "", (unsigned long long)BG_MAX_SIZE);
  if (!field_str(k) || bgi_parse_u64(k->str, k->len, &it) != 0 || it == 0 || it > BG_MAX_HASH_ITERATIONS)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: hashIterations \"%.40s\" is not a decimal from 1 to %d",
                       f->config_key.s, k->str ? k->str : "", BG_MAX_HASH_ITERATIONS);
  *cfg = bgi_cfg_pack(s, (uint32_t)it);
  return BG_OK;
}

size_t bgi_hmget_config_bound(const bg_filter *f) { return bgi_resp_bound(4, f->config_key.len + 32); }

void bgi_append_hmget_config(bgi_buf *b, const bg_filter *f) {
  bgi_resp_array(b, 4);
  bgi_resp_bulk(b, "HMGET", 5);
  bgi_resp_key(b, &f->config_key);
  bgi_resp_lit(b, BGI_CONFIG_SIZE);
  bgi_resp_lit(b, BGI_CONFIG_K);
}

static int build_load(bgi_conn *c, void *ctx, size_t *n, bgi_err *err) {
  const bg_filter *f = ctx;
  if (bgi_buf_reserve(&c->out, bgi_hmget_config_bound(f)) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_append_hmget_config(&c->out, f);
  *n = 1;
  return BG_OK;
}

static int parse_load(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bg_filter *f = ctx;
  uint64_t cfg;
  (void)c, (void)n;
  if (rep[0]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[0], "reading the config", err);
  if (rep[0]->type != REDIS_REPLY_ARRAY || rep[0]->elements != 2)
    return bgi_err_set(err, BG_EPROTO, "reading the config: unexpected reply to HMGET");
  int st = bgi_cfg_from_pair(f, rep[0]->element[0], rep[0]->element[1], &cfg, err);
  if (st == BG_OK) atomic_store(&f->cfg, cfg);
  return st;
}

void bgi_filter_config_req(bgi_req *r, bg_filter *f, uint64_t deadline_ns) {
  *r = (bgi_req){.client = f->client, .slot = f->slot, .deadline_ns = deadline_ns, .build = build_load,
                 .parse = parse_load, .ctx = f};
}
