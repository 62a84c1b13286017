/*
 * The rotation's server-side steps. Begin, renew, commit and abort are Lua scripts, so the lease
 * check and the write it guards happen in one atomic step. The upload is not: it is plain
 * MULTI/SETRANGE/PEXPIRE/EXEC (Lua costs the server more per chunk: bench/README.md,
 * bench_rotate, "Why the rotation is built this way") into a staging key
 * named after this rotation's token, so a rotator that lost its lease (it stalled past it and
 * another took over) writes only into its own key, which nothing ever reads: the commit checks
 * the token before it renames that key into place.
 *
 * The spare: the commit renames the old live bitmap to the filter's "spare" key (with the
 * staging TTL) instead of freeing it (Redis frees a big string inside the step that drops it),
 * and the next begin renames the spare to its staging key, so the upload overwrites a full-size
 * value in place instead of growing a fresh one, many times cheaper for the server (the same
 * section of bench/README.md has the figures). The
 * upload then rewrites every byte the spare has (zeros included), so none of its bits survive.
 *
 * Completeness (issue 11): a key that expires, is evicted or deleted under a rotation comes back
 * zero-filled at the next SETRANGE or BITFIELD, and a commit that renamed it into place would
 * install a generation missing some or all of its items. So the staging key exists from begin
 * on (the spare, or an empty string), and the invariant the commit relies on is: "it has existed
 * without a break since begin". Every step that touches it checks it in the same atomic step:
 * each upload chunk asks EXISTS before its SETRANGE (in the same MULTI; a chunk that landed on a
 * recreated key is detected and the rotation fails), each drain step and the commit script
 * refuse a missing key, and the commit also refuses one shorter than the bytes uploaded. A key
 * that vanished and was recreated by a later write would need that write to come from this
 * rotation, and every such write checks first. Nothing guarded by the lease may expire before
 * it: every TTL they get is guarded_ttl_ms = max(staging TTL, lease) (rotation.h).
 */
#include <stdio.h>
#include <string.h>

#include "redis/script.h"
#include "rotation/delta.h"
#include "rotation/rotation.h"
#include "client/step.h"

/* KEYS: rotation, staging, delta, spare. ARGV: token, owner, lease ms, size, k, n, fpp, guarded
 * TTL (also what adds give the delta), bitmap bytes. Reply {1, spare bytes now in staging} or
 * {0, owner, pttl} when busy. */
static bgi_script begin_script = {
  .name = "rotation begin",
  .body =
    "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
    "  return {0, redis.call('HGET', KEYS[1], '" BGI_LEASE_OWNER "') or '', redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    /* leftovers of a rotator that died: never build on them (its staging key is its own) */
    "redis.call('DEL', KEYS[3])\n"
    "redis.call('HSET', KEYS[1], '" BGI_LEASE_TOKEN "', ARGV[1], '" BGI_LEASE_OWNER "', ARGV[2], "
    "'" BGI_LEASE_NEXT_SIZE "', ARGV[4], '" BGI_LEASE_NEXT_K "', ARGV[5],\n"
    "           '" BGI_LEASE_NEXT_N "', ARGV[6], '" BGI_LEASE_NEXT_FPP "', ARGV[7], '" BGI_LEASE_TTL "', ARGV[8])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "local spare = 0\n"
    "if redis.call('TYPE', KEYS[4])['ok'] == 'string' then\n"
    "  spare = redis.call('STRLEN', KEYS[4])\n"
    /* longer than the new bitmap (the filter shrinks): no use, and bytes past it would stay */
    "  if spare > tonumber(ARGV[9]) then\n"
    "    redis.call('DEL', KEYS[4])\n"
    "    spare = 0\n"
    "  else\n"
    "    redis.call('RENAME', KEYS[4], KEYS[2])\n"
    "    redis.call('PEXPIRE', KEYS[2], ARGV[8])\n"
    "  end\n"
    "end\n"
    /* the staging key exists from here to the commit: a missing one later means it was lost */
    "if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], '', 'PX', ARGV[8]) end\n"
    "return {1, spare}\n",
};

/* KEYS: rotation, staging, delta. ARGV: token, lease ms, guarded TTL (>= lease ms). */
static bgi_script renew_script = {
  .name = "rotation renew",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[3])\n"
    "redis.call('PEXPIRE', KEYS[3], ARGV[3])\n"
    "return {1}\n",
};

/*
 * The swap. Items added during the rotation were recorded in the delta with the next
 * generation's indexes; setting them here, in the same step as the swap, is what makes "no add
 * is lost" hold. A time to live the owner put on the live filter carries over to the new one.
 * Before anything, the staging bitmap must be all there (see the top): present and at least as
 * long as the bytes uploaded; else {2, its length} and nothing is touched.
 * KEYS: config, live, rotation, staging, delta, spare. ARGV: token, spare TTL, bytes uploaded.
 */
static bgi_script commit_script = {
  .name = "rotation commit",
  .body =
    BGI_LUA_MERGE_DELTA
    BGI_LUA_READ_LEASE
    "local have = redis.call('STRLEN', KEYS[4])\n"
    "if redis.call('EXISTS', KEYS[4]) == 0 or have < tonumber(ARGV[3]) then return {2, have} end\n"
    "local ttl = redis.call('PTTL', KEYS[2])\n"
    "if ttl < 0 then ttl = redis.call('PTTL', KEYS[1]) end\n"
    "bgi_merge_delta(KEYS[4], KEYS[5])\n"
    "if redis.call('STRLEN', KEYS[4]) > 0 then\n"
    /* the old bitmap becomes the next rotation's upload buffer: nothing is freed here */
    "  if redis.call('TYPE', KEYS[2])['ok'] == 'string' then\n"
    "    redis.call('RENAME', KEYS[2], KEYS[6])\n"
    "    redis.call('PEXPIRE', KEYS[6], ARGV[2])\n"
    "  end\n"
    "  redis.call('RENAME', KEYS[4], KEYS[2])\n"
    "else\n"
    /* an empty generation (no item, no add): no bitmap, as a fresh filter */
    "  redis.call('DEL', KEYS[2], KEYS[4])\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_SIZE "', r[2])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_K "', r[3])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_N "', r[4])\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_FPP "', r[5])\n"
    "if ttl > 0 then\n"
    "  redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "  redis.call('PEXPIRE', KEYS[2], ttl)\n"
    "else\n"
    "  redis.call('PERSIST', KEYS[2])\n"
    "end\n"
    "redis.call('DEL', KEYS[5], KEYS[3])\n"
    "return {1}\n",
};

/*
 * KEYS: rotation, staging, delta, spare. ARGV: token, spare TTL. The staging key is this
 * rotation's own (named after its token) and goes at once in any case; while the lease is still
 * ours it becomes the spare (its content does not matter: an upload rewrites all of it), so an
 * aborted rotation frees nothing either.
 */
/* KEYS: rotation, target, delta. ARGV: token, limit. {1, offsets left}; {0}: the lease is gone;
 * {2}: the target vanished (it exists from begin, or LOCKED's start, to the commit: see the top). */
static bgi_script drain_script = {
  .name = "rotation drain",
  .body =
    BGI_LUA_MERGE_DELTA
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then return {2} end\n"
    "bgi_merge_delta(KEYS[2], KEYS[3], tonumber(ARGV[2]))\n"
    "return {1, redis.call('LLEN', KEYS[3])}\n",
};

static bgi_script abort_script = {
  .name = "rotation abort",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "  return {0}\n"
    "end\n"
    "if redis.call('EXISTS', KEYS[2]) == 1 and redis.call('EXISTS', KEYS[4]) == 0 then\n"
    "  redis.call('RENAME', KEYS[2], KEYS[4])\n"
    "  redis.call('PEXPIRE', KEYS[4], ARGV[2])\n"
    "else\n"
    "  redis.call('DEL', KEYS[2])\n"
    "end\n"
    "redis.call('DEL', KEYS[1], KEYS[3])\n"
    "return {1}\n",
};

static int run_step(bg_rotation *r, bgi_step *s, bgi_err *err) { return bgi_step_run(r->f->client, r->f->slot, 0, s, err); }


static int lease_lost(bg_rotation *r, const char *what, bgi_err *err) {
  return bgi_err_set(err, BG_EROTATING, "%s: this rotation of \"%s\" lost its lease (it expired, or another "
                     "rotator took over); nothing more was written", what, r->f->name.s);
}

/* The staging bitmap (SWAP) or the live one being rewritten in place (LOCKED, whose callers pass
 * the filter's own name, r->f->name.s itself) is not all there. */
int bgi_rot_vanished(bg_rotation *r, const char *what, const char *key, bgi_err *err) {
  if (key == r->f->name.s)
    return bgi_err_set(err, BG_ESERVER, "%s refused: the bitmap %s of \"%s\" vanished during the in-place rewrite (it "
                       "expired, was evicted or deleted); the filter stays marked as being rebuilt (queries fail with "
                       "BG_ELOCKED) until the next rotation: rotate again", what, key, r->f->name.s);
  return bgi_err_set(err, BG_ESERVER, "%s refused: the staging bitmap %s of \"%s\" is not all there (it expired, was "
                     "evicted or deleted during the rotation); the live filter is unchanged: rotate again", what, key,
                     r->f->name.s);
}

int bgi_rot_step_begin(bg_rotation *r, int64_t *busy_pttl, char *busy_owner, size_t owner_cap, bgi_err *err) {
  char lease[24], size[24], k[24], n[24], ttl[24], bytes[24];
  snprintf(lease, sizeof lease, "%lld", (long long)r->opts.rotate_lease_ms);
  snprintf(size, sizeof size, "%llu", (unsigned long long)r->size);
  snprintf(k, sizeof k, "%u", r->k);
  snprintf(n, sizeof n, "%lld", (long long)r->n);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->guarded_ttl_ms);
  snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)((r->size + 7) / 8));
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, f->spare_key.s, r->token, r->owner, lease,
                        size, k, n, r->fpp, ttl, bytes};
  size_t lens[] = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, f->spare_key.len, 32, strlen(r->owner),
                   strlen(lease), strlen(size), strlen(k), strlen(n), strlen(r->fpp), strlen(ttl), strlen(bytes)};
  bgi_step s = {.script = &begin_script, .nkeys = 4, .nargs = 9, .argv = argv, .lens = lens};
  int st = run_step(r, &s, err);
  if (st != BG_OK) return st;
  if (s.ints[0] == 1) {
    r->spare_len = s.ints[1] > 0 ? (uint64_t)s.ints[1] : 0;
    return BG_OK;
  }
  *busy_pttl = s.ints[1];
  snprintf(busy_owner, owner_cap, "%s", s.str[0]);
  return bgi_err_set(err, BG_EROTATING, "a rotation of \"%s\" is in progress (by %s; its lease expires in %lld ms "
                     "unless renewed)", f->name.s, s.str[0][0] ? s.str[0] : "?", (long long)s.ints[1]);
}

/* One upload chunk: MULTI, EXISTS staging, SETRANGE staging, PEXPIRE staging, EXEC - no script. The
 * EXISTS, in the same transaction, says whether the SETRANGE landed on the key begin created or on
 * a zero-filled one it recreated (the old one lost): then the upload fails (see the top). */
typedef struct chunk {
  const bg_rotation *r;
  size_t offset, len;
  const uint8_t *data;
} chunk;

static int build_chunk(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  chunk *ch = ctx;
  const bg_rotation *r = ch->r;
  if (bgi_buf_reserve(&c->out, bgi_resp_bound(16, 128 + 3 * r->staging_key.len + ch->len)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 1);
  bgi_resp_cstr(&c->out, "MULTI");
  bgi_resp_array(&c->out, 2);
  bgi_resp_cstr(&c->out, "EXISTS");
  bgi_resp_key(&c->out, &r->staging_key);
  bgi_resp_array(&c->out, 4);
  bgi_resp_cstr(&c->out, "SETRANGE");
  bgi_resp_key(&c->out, &r->staging_key);
  bgi_resp_u64(&c->out, ch->offset);
  bgi_resp_bulk(&c->out, ch->data, ch->len);
  bgi_resp_array(&c->out, 3);
  bgi_resp_cstr(&c->out, "PEXPIRE");
  bgi_resp_key(&c->out, &r->staging_key);
  bgi_resp_u64(&c->out, (uint64_t)r->guarded_ttl_ms);
  bgi_resp_array(&c->out, 1);
  bgi_resp_cstr(&c->out, "EXEC");
  *nreplies = 5;
  return BG_OK;
}

static int parse_chunk(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  chunk *ch = ctx;
  (void)c;
  for (size_t i = 0; i < n; i++)
    if (rep[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[i], "rotation upload", err);
  const bgi_reply *x = rep[n - 1];
  if (x->type != REDIS_REPLY_ARRAY || x->elements != 3)
    return bgi_err_set(err, BG_EPROTO, "rotation upload: unexpected EXEC reply");
  for (size_t i = 0; i < 3; i++)
    if (x->element[i]->type == REDIS_REPLY_ERROR) return bgi_reply_error(x->element[i], "rotation upload", err);
  if (x->element[0]->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "rotation upload: unexpected EXISTS reply");
  if (x->element[0]->integer != 1) {
    bg_rotation *r = (bg_rotation *)ch->r;
    return bgi_rot_vanished(r, "upload", r->staging_key.s, err);
  }
  return BG_OK;
}

int bgi_rot_step_upload(bg_rotation *r, size_t offset, const uint8_t *data, size_t len, bgi_err *err) {
  chunk ch = {r, offset, len, data};
  /* a chunk (1 MiB by default) is known to be big before it is built: straight to a pooled
   * connection, not encoded on a multiplexed workspace first only to be found too big there */
  return bgi_client_call_ex(r->f->client, r->f->slot, 0, bgi_call_flags_for_payload(len), build_chunk, parse_chunk,
                            &ch, err);
}

int bgi_rot_step_renew(bg_rotation *r, uint64_t deadline_ns, bgi_err *err) {
  char lease[24], ttl[24];
  snprintf(lease, sizeof lease, "%lld", (long long)r->opts.rotate_lease_ms);
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->guarded_ttl_ms);
  const bg_filter *f = r->f;
  const char *argv[] = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, r->token, lease, ttl};
  size_t lens[] = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, 32, strlen(lease), strlen(ttl)};
  bgi_step s = {.script = &renew_script, .nkeys = 3, .nargs = 3, .argv = argv, .lens = lens};
  int st = bgi_step_run(r->f->client, r->f->slot, deadline_ns, &s, err);
  if (st == BG_OK && s.ints[0] != 1) return lease_lost(r, "lease renewal", err);
  return st;
}

int bgi_rot_step_commit(bg_rotation *r, bgi_err *err) {
  char ttl[24], bytes[24];
  snprintf(ttl, sizeof ttl, "%lld", (long long)r->opts.rotate_staging_ttl_ms);
  snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)r->upload_total);
  const bg_filter *f = r->f;
  const char *argv[] = {f->config_key.s, f->name.s, f->rotation_key.s, r->staging_key.s, f->delta_key.s,
                        f->spare_key.s, r->token, ttl, bytes};
  size_t lens[] = {f->config_key.len, f->name.len, f->rotation_key.len, r->staging_key.len, f->delta_key.len,
                   f->spare_key.len, 32, strlen(ttl), strlen(bytes)};
  bgi_step s = {.script = &commit_script, .nkeys = 6, .nargs = 3, .argv = argv, .lens = lens, .durable = 1};
  int st = run_step(r, &s, err);
  if (st == BG_OK && s.ints[0] == 2) return bgi_rot_vanished(r, "commit", r->staging_key.s, err);
  if (st == BG_OK && s.ints[0] != 1) return lease_lost(r, "commit", err);
  return st;
}

void bgi_rot_lease_ref(const bg_rotation *r, bgi_lease_ref *ref) {
  const bg_filter *f = r->f;
  *ref = (bgi_lease_ref){.client = f->client, .slot = f->slot, .token = r->token,
                         .spare_ttl_ms = r->opts.rotate_staging_ttl_ms,
                         .keys = {f->rotation_key.s, r->staging_key.s, f->delta_key.s, f->spare_key.s},
                         .lens = {f->rotation_key.len, r->staging_key.len, f->delta_key.len, f->spare_key.len}};
}

int bgi_rot_step_release(const bgi_lease_ref *ref, uint64_t deadline_ns, int *was_ours, bgi_err *err) {
  char ttl[24];
  snprintf(ttl, sizeof ttl, "%lld", (long long)ref->spare_ttl_ms);
  const char *argv[] = {ref->keys[0], ref->keys[1], ref->keys[2], ref->keys[3], ref->token, ttl};
  size_t lens[] = {ref->lens[0], ref->lens[1], ref->lens[2], ref->lens[3], 32, strlen(ttl)};
  bgi_step s = {.script = &abort_script, .nkeys = 4, .nargs = 2, .argv = argv, .lens = lens};
  int st = bgi_step_run(ref->client, ref->slot, deadline_ns, &s, err);
  if (was_ours) *was_ours = st == BG_OK && s.ints[0] == 1;
  return st;
}

int bgi_rot_step_abort(bg_rotation *r, bgi_err *err) {
  bgi_lease_ref ref;
  bgi_rot_lease_ref(r, &ref);
  return bgi_rot_step_release(&ref, 0, NULL, err);
}

int bgi_rot_drain_delta(bg_rotation *r, const bgi_key *target, bgi_err *err) {
  const bg_filter *f = r->f;
  char limit[24];
  snprintf(limit, sizeof limit, "%d", BGI_DRAIN_SLICE);
  const char *argv[] = {f->rotation_key.s, target->s, f->delta_key.s, r->token, limit};
  size_t lens[] = {f->rotation_key.len, target->len, f->delta_key.len, 32, strlen(limit)};
  /* bounded: adds arriving faster than the drain are left to the final step */
  for (int i = 0; i < 64; i++) {
    bgi_step s = {.script = &drain_script, .nkeys = 3, .nargs = 2, .argv = argv, .lens = lens};
    int st = run_step(r, &s, err);
    if (st != BG_OK) return st;
    if (s.ints[0] == 2) return bgi_rot_vanished(r, "commit", target->s, err);
    if (s.ints[0] != 1) return lease_lost(r, "commit", err);
    if (s.nints < 2 || s.ints[1] <= BGI_DRAIN_SLICE) return BG_OK;
  }
  return BG_OK;
}
