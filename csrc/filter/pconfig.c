/* A partitioned filter's central config (partitioned.h): reading it, and the handle's copy. */
#include "filter/partitioned.h"

#include <stdio.h>
#include <string.h>

#include "bloomguard/hash.h"
#include "common/jdouble.h"

void bgi_pconf_get(bg_filter *f, bgi_pconf *out) {
  pthread_mutex_lock(&f->pmu);
  *out = f->pconf;
  pthread_mutex_unlock(&f->pmu);
}

void bgi_pconf_set(bg_filter *f, const bgi_pconf *conf) {
  pthread_mutex_lock(&f->pmu);
  f->pconf = *conf;
  pthread_mutex_unlock(&f->pmu);
  atomic_store(&f->kind, BGI_KIND_PARTITIONED);
}

void bgi_pconf_set_none(bg_filter *f) {
  pthread_mutex_lock(&f->pmu);
  memset(&f->pconf, 0, sizeof f->pconf);
  pthread_mutex_unlock(&f->pmu);
  atomic_store(&f->kind, BGI_KIND_PLAIN);
}

void bgi_resp_pk(bgi_buf *b, const bg_filter *f, uint64_t gen, uint32_t part, uint32_t parts, char what) {
  bgi_resp_pkey(b, &f->name, bgi_pslot(part, parts), gen, part, what);
}

const char *bgi_pk_text(const bg_filter *f, uint64_t gen, uint32_t part, uint32_t parts, char what, char *buf,
                        size_t cap) {
  char key[BGI_PKEY_MAX(256)];
  if (f->name.len > 256) {
    snprintf(buf, cap, "partition %u of generation %llu", part, (unsigned long long)gen);
    return buf;
  }
  size_t n = bgi_pkey_write(key, &f->name, bgi_pslot(part, parts), gen, part, what);
  snprintf(buf, cap, "%.*s", (int)n, key);
  return buf;
}

/* ---- the central config ------------------------------------------------------------------- */

/* The value of "g<gen>:<name>" in the hash, or NULL. */
static const bgi_reply *gen_field(const bgi_reply *h, uint64_t gen, const char *name) {
  char key[64];
  int n = snprintf(key, sizeof key, BGI_PCONF_GEN_PREFIX "%llu:%s", (unsigned long long)gen, name);
  return bgi_reply_field(h, key, (size_t)n);
}

static int str_field(const bgi_reply *r) { return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS); }

/* A decimal field, 0 when absent; -1 when present and not one. */
static int u64_field(const bgi_reply *r, uint64_t *out) {
  *out = 0;
  if (!r) return 0;
  return str_field(r) && bgi_parse_u64(r->str, r->len, out) == 0 ? 0 : -1;
}

static int corrupt(const bg_filter *f, bgi_err *err, const char *what, uint64_t gen) {
  return bgi_err_set(err, BG_ECORRUPT, "config hash %s of the partitioned filter \"%s\": %s of generation %llu is "
                     "missing or not a number (delete the filter and init it again)", f->config_key.s, f->name.s, what,
                     (unsigned long long)gen);
}

/* Generation gen's record (gen 0: none). */
static int parse_gen(const bg_filter *f, const bgi_reply *h, uint64_t gen, bgi_pgen *out, bgi_err *err) {
  uint64_t parts, psize, k;
  memset(out, 0, sizeof *out);
  if (!gen) return BG_OK;
  if (u64_field(gen_field(h, gen, BGI_PCONF_PARTITIONS), &parts) != 0 || parts < 1 || parts > BGI_MAX_PARTITIONS)
    return corrupt(f, err, BGI_PCONF_PARTITIONS, gen);
  if (u64_field(gen_field(h, gen, BGI_PCONF_PSIZE), &psize) != 0 || psize < 1 || psize > BG_MAX_SIZE)
    return corrupt(f, err, BGI_PCONF_PSIZE, gen);
  if (u64_field(gen_field(h, gen, BGI_CONFIG_K), &k) != 0 || k < 1 || k > BG_MAX_HASH_ITERATIONS)
    return corrupt(f, err, BGI_CONFIG_K, gen);
  out->gen = gen;
  out->parts = (uint32_t)parts;
  out->cfg = bgi_cfg_pack(psize, (uint32_t)k);
  const bgi_reply *n = gen_field(h, gen, BGI_CONFIG_N), *p = gen_field(h, gen, BGI_CONFIG_FPP);
  if (str_field(n) && bgi_parse_i64(n->str, n->len, &out->n) != 0) out->n = 0;
  if (str_field(p) && bgi_parse_double(p->str, p->len, &out->fpp) != 0) out->fpp = 0;
  return BG_OK;
}

/* The generations listed to be deleted (each with its record: their keys' slots need it). */
static int parse_sweep(const bg_filter *f, const bgi_reply *h, bgi_pconf *conf, bgi_err *err) {
  const bgi_reply *list = bgi_reply_field(h, BGI_PCONF_SWEEP, sizeof BGI_PCONF_SWEEP - 1);
  if (!str_field(list)) return BG_OK;
  const char *p = list->str, *end = list->str + list->len;
  while (p < end && conf->nsweep < BGI_PSWEEP_GENS) {
    while (p < end && *p == ' ') p++;
    const char *q = p;
    while (q < end && *q != ' ') q++;
    uint64_t gen;
    if (q > p && bgi_parse_u64(p, (size_t)(q - p), &gen) == 0 && gen && gen != conf->live.gen) {
      int st = parse_gen(f, h, gen, &conf->sweep[conf->nsweep], err);
      /* a record already gone: its keys were deleted (the list is cleaned after them) */
      if (st == BG_OK) conf->nsweep++;
      else bgi_err_clear(err);
    }
    p = q;
  }
  return BG_OK;
}

int bgi_pconf_parse(bg_filter *f, const bgi_reply *h, bgi_pconf_load *ld, bgi_err *err) {
  if (h->type == REDIS_REPLY_ERROR) return bgi_reply_error(h, "reading the config", err);
  if (!bgi_reply_is_pairs(h)) return bgi_err_set(err, BG_EPROTO, "reading the config: unexpected reply to HGETALL");
  const bgi_reply *kind = bgi_reply_field(h, BGI_PCONF_KIND, sizeof BGI_PCONF_KIND - 1);
  memset(&ld->conf, 0, sizeof ld->conf);
  if (!kind) {
    /* Redisson's layout, or nothing */
    const bgi_reply *nil = &(bgi_reply){.type = REDIS_REPLY_NIL};
    const bgi_reply *size = bgi_reply_field(h, BGI_CONFIG_SIZE, sizeof BGI_CONFIG_SIZE - 1);
    const bgi_reply *k = bgi_reply_field(h, BGI_CONFIG_K, sizeof BGI_CONFIG_K - 1);
    uint64_t cfg;
    int st = bgi_cfg_from_pair(f, size ? size : nil, k ? k : nil, &cfg, err);
    if (st != BG_OK) return st;
    ld->kind = BGI_KIND_PLAIN;
    atomic_store(&f->cfg, cfg);
    atomic_store(&f->kind, BGI_KIND_PLAIN);
    return BG_OK;
  }
  if (!bgi_reply_is_lit(kind, BGI_PCONF_KIND_PARTITIONED))
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: %s is \"%.40s\", a kind of filter this version does not know "
                       "(a newer bloomguard wrote it?)", f->config_key.s, BGI_PCONF_KIND, kind->str ? kind->str : "");
  uint64_t live;
  if (u64_field(bgi_reply_field(h, BGI_PCONF_LIVE, sizeof BGI_PCONF_LIVE - 1), &live) != 0)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: %s is not a generation number", f->config_key.s,
                       BGI_PCONF_LIVE);
  if (!live)
    return bgi_err_set(err, BG_ENOTINIT, "partitioned filter \"%s\" is not initialized yet: its config hash %s has no "
                       "live generation (an init is under way, or died: its claim expires in seconds; init again)",
                       f->name.s, f->config_key.s);
  int st = parse_gen(f, h, live, &ld->conf.live, err);
  if (st != BG_OK) return st;
  uint64_t next;
  if (u64_field(bgi_reply_field(h, BGI_PCONF_NEXT, sizeof BGI_PCONF_NEXT - 1), &next) != 0)
    return bgi_err_set(err, BG_ECORRUPT, "config hash %s: %s is not a generation number", f->config_key.s,
                       BGI_PCONF_NEXT);
  if (next && next != live && (st = parse_gen(f, h, next, &ld->conf.next, err)) != BG_OK) return st;
  if ((st = parse_sweep(f, h, &ld->conf, err)) != BG_OK) return st;
  bgi_err_clear(err);
  ld->kind = BGI_KIND_PARTITIONED;
  bgi_pconf_set(f, &ld->conf);
  return BG_OK;
}

static int build_load(bgi_conn *c, void *ctx, size_t *n, bgi_err *err) {
  const bgi_pconf_load *ld = ctx;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(2, ld->f->config_key.len + 8)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 2);
  bgi_resp_bulk(&c->out, "HGETALL", 7);
  bgi_resp_key(&c->out, &ld->f->config_key);
  *n = 1;
  return BG_OK;
}

static int parse_load(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_pconf_load *ld = ctx;
  (void)c, (void)n;
  return bgi_pconf_parse(ld->f, rep[0], ld, err);
}

void bgi_pconf_req(bgi_req *r, bgi_pconf_load *ld, bg_filter *f, uint64_t deadline_ns) {
  ld->f = f;
  ld->kind = BGI_KIND_PLAIN;
  *r = (bgi_req){.client = f->client, .slot = f->slot, .deadline_ns = deadline_ns, .build = build_load,
                 .parse = parse_load, .ctx = ld};
}

int bgi_pconf_read(bg_filter *f, bgi_pconf_load *ld, bgi_err *err) {
  bgi_req req;
  bgi_pconf_req(&req, ld, f, 0);
  return bgi_req_exec(&req, err);
}
