/*
 * The rotation's server-side steps. Each is one Lua script, so the lease check and the write it
 * guards happen in one atomic step: a rotator that lost its lease (it stalled past it and another
 * took over) can no longer write a single byte.
 */
#include <stdio.h>
#include <string.h>

#include "redis/script.h"
#include "rotation/rotation.h"

static bgi_script begin_script = {
  .name = "rotation begin",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
    "  return {0, redis.call('HGET', KEYS[1], 'owner') or '', redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    /* leftovers of a rotator that died: never build on them */
    "redis.call('DEL', KEYS[2], KEYS[3])\n"
    "redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2], 'next_size', ARGV[4], 'next_k', ARGV[5],\n"
    "           'next_n', ARGV[6], 'next_fpp', ARGV[7], 'ttl', ARGV[8])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "return {1}\n",
};

static bgi_script upload_script = {
  .name = "rotation upload",
  .body =
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return {0} end\n"
    "redis.call('SETRANGE', KEYS[2], ARGV[2], ARGV[3])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[4])\n"
    "return {1}\n",
};

static bgi_script renew_script = {
  .name = "rotation renew",
  .body =
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return {0} end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[3])\n"
    "redis.call('PEXPIRE', KEYS[3], ARGV[3])\n"
    "return {1}\n",
};

/*
 * The swap. Items added during the rotation were recorded in the delta bitmap with the next
 * generation's indexes; OR-ing it in here, in the same step as the swap, is what makes "no add
 * is lost" hold. A time to live the owner put on the live filter carries over to the new one.
 */
static bgi_script commit_script = {
  .name = "rotation commit",
  .body =
    "local r = redis.call('HMGET', KEYS[3], 'token', 'next_size', 'next_k', 'next_n', 'next_fpp')\n"
    "if r[1] ~= ARGV[1] then return {0} end\n"
    "local ttl = redis.call('PTTL', KEYS[2])\n"
    "if ttl < 0 then ttl = redis.call('PTTL', KEYS[1]) end\n"
    "if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('BITOP', 'OR', KEYS[4], KEYS[4], KEYS[5]) end\n"
    "if redis.call('EXISTS', KEYS[4]) == 1 then\n"
    "  redis.call('RENAME', KEYS[4], KEYS[2])\n"
    "else\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('HSET', KEYS[1], 'size', r[2])\n"
    "redis.call('HSET', KEYS[1], 'hashIterations', r[3])\n"
    "redis.call('HSET', KEYS[1], 'expectedInsertions', r[4])\n"
    "redis.call('HSET', KEYS[1], 'falseProbability', r[5])\n"
    "if ttl > 0 then\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "  redis.call('PEXPIRE', KEYS[2], ttl)\n"
    "else\n"
    "  redis.call('PERSIST', KEYS[2])\n"
    "end\n"
    "redis.call('DEL', KEYS[5], KEYS[3])\n"
    "return {1}\n",
};

static bgi_script abort_script = {
  .name = "rotation abort",
  .body =
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return {0} end\n"
    "redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])\n"
    "return {1}\n",
};

/* One script call with byte-string arguments; the reply is an array of integers and strings. */
typedef struct step {
  bgi_script *script;
  size_t nkeys, nargs;
  const char *const *argv;
  const size_t *lens;
  bgi_script_run run;
  long long ints[4];
  char str[128];
} step;

static int build_step(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  step *s = ctx;
  size_t payload = 0;
  for (size_t i = 0; i < s->nkeys + s->nargs; i++) payload += s->lens[i];
  if (bgi_script_begin(&c->out, s->script, s->run.use_body, s->nkeys, s->nargs) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(s->nkeys + s->nargs, payload)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t i = 0; i < s->nkeys + s->nargs; i++) bgi_resp_bulk(&c->out, s->argv[i], s->lens[i]);
  *nreplies = 1;
  return BG_OK;
}

static int parse_step(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  step *s = ctx;
  const bgi_reply *x = rep[0];
  size_t ni = 0;
  (void)c, (void)n;
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    s->run.noscript = 1;
    return BG_OK;
  }
  if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, s->script->name, err);
  if (x->type != REDIS_REPLY_ARRAY || x->elements == 0)
    return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", s->script->name);
  s->str[0] = 0;
  for (size_t i = 0; i < x->elements && ni < 4; i++) {
    if (x->element[i]->type == REDIS_REPLY_INTEGER) s->ints[ni++] = x->element[i]->integer;
    else if (x->element[i]->str) snprintf(s->str, sizeof s->str, "%s", x->element[i]->str);
  }
  return BG_OK;
}

static int run_step(bg_rotation *r, step *s, bgi_err *err) {
  return bgi_client_call_script(r->f->client, 0, &s->run, s->script->name, build_step, parse_step, s, err);
}

#define ARG(s) (s), strlen(s)

static int lease_lost(bg_rotation *r, const char *what, bgi_err *err) {
  return bgi_err_set(err, BG_EROTATING, "%s: this rotation of \"%s\" lost its lease (it expired, or another "
                     "rotator took over); nothing more was written", what, r->f->name);
}

int bgi_rot_step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err) {
  char lease[24], size[24], k[24], n[24], ttl[24];
  snprintf(lease, sizeof lease, "%lld", (long long)r->opts.rotate_lease_ms);
  snprintf(size, sizeof size, "%llu", (unsigned long long)r->size);
  snprintf(k, sizeof k, "%u", r->k);
  snprintf(n, sizeof n, "%lld", (long long)r->n);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->opts.rotate_staging_ttl_ms);
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key, f->next_key, f->delta_key, r->token, r->owner, lease, size, k, n, r->fpp, ttl};
  size_t lens[] = {f->rotation_key_len, f->next_key_len, f->delta_key_len, 32, strlen(r->owner), strlen(lease),
                   strlen(size), strlen(k), strlen(n), strlen(r->fpp), strlen(ttl)};
  step s = {.script = &begin_script, .nkeys = 3, .nargs = 8, .argv = argv, .lens = lens};
  int st = run_step(r, &s, err);
  if (st != BG_OK) return st;
  if (s.ints[0] == 1) return BG_OK;
  *busy_pttl = s.ints[1];
  snprintf(busy_owner, owner_cap, "%s", s.str);
  return bgi_err_set(err, BG_EROTATING, "a rotation of \"%s\" is in progress (by %s; its lease expires in %lld ms "
                     "unless renewed)", f->name, s.str[0] ? s.str : "?", (long long)s.ints[1]);
}

int bgi_rot_step_upload(bg_rotation *r, size_t offset, const uint8_t *data, size_t len, bgi_err *err) {
  char off[24], ttl[24];
  snprintf(off, sizeof off, "%zu", offset);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->opts.rotate_staging_ttl_ms);
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key, f->next_key, r->token, off, (const char *)data, ttl};
  size_t lens[] = {f->rotation_key_len, f->next_key_len, 32, strlen(off), len, strlen(ttl)};
  step s = {.script = &upload_script, .nkeys = 2, .nargs = 4, .argv = argv, .lens = lens};
  int st = run_step(r, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lease_lost(r, "upload", err);
  return st;
}

int bgi_rot_step_renew(bg_rotation *r, bgi_err *err) {
  char lease[24], ttl[24];
  snprintf(lease, sizeof lease, "%lld", (long long)r->opts.rotate_lease_ms);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->opts.rotate_staging_ttl_ms);
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key, f->next_key, f->delta_key, r->token, lease, ttl};
  size_t lens[] = {f->rotation_key_len, f->next_key_len, f->delta_key_len, 32, strlen(lease), strlen(ttl)};
  step s = {.script = &renew_script, .nkeys = 3, .nargs = 3, .argv = argv, .lens = lens};
  int st = run_step(r, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lease_lost(r, "lease renewal", err);
  return st;
}

int bgi_rot_step_commit(bg_rotation *r, bgi_err *err) {
  const bg_filter *f = r->f;
  const char *argv[] = {f->config_key, f->name, f->rotation_key, f->next_key, f->delta_key, r->token};
  size_t lens[] = {f->config_key_len, f->name_len, f->rotation_key_len, f->next_key_len, f->delta_key_len, 32};
  step s = {.script = &commit_script, .nkeys = 5, .nargs = 1, .argv = argv, .lens = lens};
  int st = run_step(r, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lease_lost(r, "commit", err);
  return st;
}

int bgi_rot_step_abort(bg_rotation *r, bgi_err *err) {
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key, f->next_key, f->delta_key, r->token};
  size_t lens[] = {f->rotation_key_len, f->next_key_len, f->delta_key_len, 32};
  step s = {.script = &abort_script, .nkeys = 3, .nargs = 1, .argv = argv, .lens = lens};
  return run_step(r, &s, err);
}
