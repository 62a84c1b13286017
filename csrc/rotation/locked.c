/*
 * BG_ROTATE_LOCKED: rebuild in place, under the filter's write lock, with no second copy of the
 * bitmap in Redis.
 *
 * It shares SWAP's first half (leased.c): begin takes the rotation lease (so rotations of any
 * strategy exclude each other, and adds from every process record their next-generation bits in
 * the delta), and the next generation is built in memory on this client. Only the commit differs:
 *   1. take the filter's write lock (bg_lock_open_filter), waiting up to the rotation's lease;
 *      from here the filter's queries wait (BG_OPT_WRITE_LOCK_WAIT_MS) and then degrade;
 *   2. mark the config hash (BGI_REBUILD_FIELD) and, if the size changes, drop the old bitmap;
 *   3. overwrite the live bitmap in chunks, each a Lua step that checks the lease;
 *   4. one last step: merge the delta, write the new config, remove the mark, drop the lease;
 *   5. release the write lock, which wakes the waiting queries.
 * A rotator that dies after step 2 leaves the mark without the lock once the lock's lease runs
 * out: queries then fail with BG_ELOCKED at once (the policy answers) instead of reading a
 * half-written bitmap, until the next rotation - of any strategy - rewrites the config.
 * With an unchanged size the bytes are overwritten in place, each byte old or new, so an item
 * present in both generations keeps its bits throughout: Redisson readers, who know nothing of
 * the lock, still find those. Items added during the rebuild reach their bits in step 4.
 *
 * Completeness (issue 11; the same invariant as SWAP's staging key, steps.c): from step 2 the
 * bitmap key exists (an empty string if there was none), and every later step - each chunk, each
 * drain step, the last step - refuses (BG_ESERVER) if it is missing, the last one also if it is
 * shorter than what was written: a bitmap that expired (the filter's own TTL), was evicted or
 * deleted under the rewrite is never completed into a wrong generation. The mark then stays, so
 * queries fail with BG_ELOCKED (the policy answers) until the next rotation.
 */
#include <stdio.h>
#include <string.h>

#include "rotation/delta.h"
#include "rotation/rotation.h"
#include "client/step.h"

/* KEYS config, bitmap, lease, lock; ARGV token, holder, next size, owner. The bitmap exists after.
 * {1, bitmap length}; {0}: the lease is gone; {2}: the write lock is not ours. */
static bgi_script start_script = {
  .name = "locked rotation start",
  .body =
    "if redis.call('HGET', KEYS[3], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if not redis.call('HGET', KEYS[4], ARGV[2]) or "
    "redis.call('HGET', KEYS[4], '" BGI_LOCK_MODE "') ~= '" BGI_LOCK_MODE_WRITE "' then\n"
    "  return {2}\n"
    "end\n"
    "local t = redis.call('TYPE', KEYS[2])['ok']\n"
    "if t ~= 'none' and t ~= 'string' then\n"
    "  return redis.error_reply('WRONGTYPE the bitmap key ' .. KEYS[2] .. ' holds a ' .. t)\n"
    "end\n"
    "redis.call('HSET', KEYS[1], '" BGI_REBUILD_FIELD "', ARGV[4])\n"
    /* another size: the old bytes mean nothing in the new geometry */
    "if redis.call('HGET', KEYS[1], '" BGI_CONFIG_SIZE "') ~= ARGV[3] then redis.call('DEL', KEYS[2]) end\n"
    "local len = redis.call('STRLEN', KEYS[2])\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], '') end\n"
    "return {1, len}\n",
};

/* KEYS lease, bitmap; ARGV token, offset, bytes. {1}; {0}: the lease is gone; {3}: the bitmap vanished. */
static bgi_script write_script = {
  .name = "locked rotation write",
  .body =
    "if redis.call('HGET', KEYS[1], '" BGI_LEASE_TOKEN "') ~= ARGV[1] then return {0} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 then return {3} end\n"
    "redis.call('SETRANGE', KEYS[2], ARGV[2], ARGV[3])\n"
    "return {1}\n",
};

/* KEYS config, bitmap, lease, delta, lock, staging, spare; ARGV token, holder, bytes written.
 * {1}; {0}: lease gone; {2}: lock gone; {3}: the bitmap is missing or shorter than what was written. */
static bgi_script finish_script = {
  .name = "locked rotation commit",
  .body =
    BGI_LUA_MERGE_DELTA
    BGI_LUA_READ_LEASE
    "if not redis.call('HGET', KEYS[5], ARGV[2]) then return {2} end\n"
    "if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('STRLEN', KEYS[2]) < tonumber(ARGV[3]) then return {3} end\n"
    "bgi_merge_delta(KEYS[2], KEYS[4])\n"
    /* an empty generation: no bitmap, as a fresh filter */
    "if redis.call('STRLEN', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end\n"
    "redis.call('HSET', KEYS[1], '" BGI_CONFIG_SIZE "', r[2], '" BGI_CONFIG_K "', r[3], '" BGI_CONFIG_N "', r[4],\n"
    "           '" BGI_CONFIG_FPP "', r[5])\n"
    "redis.call('HDEL', KEYS[1], '" BGI_REBUILD_FIELD "')\n"
    /* a dropped bitmap lost its time to live: the config kept it */
    "local ttl = redis.call('PTTL', KEYS[1])\n"
    "if ttl > 0 and redis.call('PTTL', KEYS[2]) == -1 then redis.call('PEXPIRE', KEYS[2], ttl) end\n"
    /* no second copy stays: a spare a SWAP left (begin moved it to the staging key) goes too */
    "redis.call('DEL', KEYS[4], KEYS[3], KEYS[6], KEYS[7])\n"
    "return {1}\n",
};


static int step_failed(bg_rotation *r, const bgi_step *s, const char *what, bgi_err *err) {
  if (s->ints[0] == 3) return bgi_rot_vanished(r, what, r->f->name.s, err);
  if (s->ints[0] == 0)
    return bgi_err_set(err, BG_EROTATING, "%s: this rotation of \"%s\" lost its lease (it expired, or another "
                       "rotator took over)", what, r->f->name.s);
  return bgi_err_set(err, BG_ELOCKED, "%s: this rotation of \"%s\" no longer holds the write lock %s (its lease "
                     "ran out)", what, r->f->name.s, bg_lock_key(r->lock));
}

static int run(bg_rotation *r, bgi_step *s, const char *what, bgi_err *err) {
  int st = bgi_step_run(r->f->client, r->f->slot, 0, s, err);
  if (st == BG_OK && s->ints[0] != 1) st = step_failed(r, s, what, err);
  return st;
}

/* Opens the write lock before it takes the lease: a failure then leaves nothing to undo. */
static int begin(bg_rotation *r, bgi_err *err) {
  bg_options *o = NULL;
  /* a call of our own: the open's message must not be read back from the filter's shared slot */
  bg_call inner = {0};
  int st = bg_options_new(&o);
  if (st == BG_OK) st = bg_options_set_int(o, BG_OPT_LOCK_LEASE_MS, r->opts.rotate_lease_ms);
  if (st != BG_OK) snprintf(inner.msg, sizeof inner.msg, "%s", bg_strerror(st));
  else st = bg_lock_open_filter_ex(&r->lock, &inner, r->f, o);
  bg_options_free(o);
  if (st != BG_OK) return bgi_err_set(err, st, "rotation: the write lock of \"%s\": %s", r->f->name.s, inner.msg);
  return bgi_leased_begin(r, err);
}

/* Releases the write lock if the commit holds it (after a failure too). */
static void release(bg_rotation *r) {
  if (!r->lock_held) return;
  r->lock_held = 0;
  /* a lost hold needs no release (BG_ELOCKED: the lock is already gone); a failed round trip
   * leaves the hold to the give-back (giveback.c), not to its lease */
  int st = bg_lock_release(r->lock);
  r->lock_left = st != BG_OK && st != BG_ELOCKED;
}

/* Once the old bitmap is being overwritten, stopping would only leave the filter incomplete until
 * the next rebuild: the callback is told, but the rewrite runs to its end. */
static void progress(bg_rotation *r, int phase) {
  bgi_err ignored = {0};
  bgi_rot_report(r, phase, 1, &ignored);
}

/* Overwrites [0, max(new, old length)): every byte the old bitmap had must be rewritten. */
static int write_bitmap(bg_rotation *r, size_t old_len, bgi_err *err) {
  const bg_filter *f = r->f;
  size_t used = bgi_bitmap_used_len(&r->next), chunk = (size_t)r->opts.rotate_chunk_bytes;
  size_t total = used > old_len ? used : old_len;
  static const uint8_t zeros[4096];
  r->upload_total = total;
  int st = BG_OK;
  for (size_t off = 0; off < total && st == BG_OK; off += chunk) {
    size_t len = total - off < chunk ? total - off : chunk;
    /* beyond the new bitmap's end (an old one was longer) the bytes are zero */
    const uint8_t *p = off < r->next.len ? r->next.bytes + off : NULL;
    size_t have = p ? (r->next.len - off < len ? r->next.len - off : len) : 0;
    int zero = off >= old_len && off + len < total && have == len && p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
    if (!zero) {
      for (size_t done = 0; done < len && st == BG_OK;) {
        /* the tail past the in-memory bitmap is sent from a small zero block */
        const uint8_t *src = done < have ? p + done : zeros;
        size_t n = done < have ? have - done : (len - done < sizeof zeros ? len - done : sizeof zeros);
        char offs[24];
        snprintf(offs, sizeof offs, "%zu", off + done);
        const char *argv[] = {f->rotation_key.s, f->name.s, r->token, offs, (const char *)src};
        size_t lens[] = {f->rotation_key.len, f->name.len, 32, strlen(offs), n};
        /* a chunk of the bitmap: declared bulk before it is built (client.h, BGI_CALL_BULK) */
        bgi_step s = {.script = &write_script, .nkeys = 2, .nargs = 3, .argv = argv, .lens = lens,
                      .flags = bgi_call_flags_for_payload(n)};
        if ((st = run(r, &s, "upload", err)) == BG_OK) r->bytes_uploaded += n, done += n;
      }
    }
    if (st == BG_OK && (st = bgi_rot_check_active(r, "upload", err)) == BG_OK) {
      r->upload_pos = off + len;
      progress(r, BG_PHASE_UPLOADING);
    }
  }
  return st;
}

static int commit(bg_rotation *r, bgi_err *err) {
  const bg_filter *f = r->f;
  int st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);   /* the last point to stop at */
  if (st != BG_OK) return st;
  st = bg_lock_acquire(r->lock, BG_LOCK_WRITE, r->opts.rotate_lease_ms, NULL);
  if (st != BG_OK)
    return bgi_err_set(err, st, "commit: cannot take the write lock of \"%s\": %s", f->name.s, bg_lock_errmsg(r->lock));
  r->lock_held = 1;
  char holder[96], size[24];
  size_t hlen = bg_lock_holder_id(r->lock, holder, sizeof holder);
  snprintf(size, sizeof size, "%llu", (unsigned long long)r->size);
  const char *start_argv[] = {f->config_key.s, f->name.s, f->rotation_key.s, bg_lock_key(r->lock), r->token, holder,
                              size, r->owner};
  size_t start_lens[] = {f->config_key.len, f->name.len, f->rotation_key.len, strlen(bg_lock_key(r->lock)), 32,
                         hlen, strlen(size), strlen(r->owner)};
  bgi_step s = {.script = &start_script, .nkeys = 4, .nargs = 4, .argv = start_argv, .lens = start_lens};
  st = run(r, &s, "commit", err);
  if (st == BG_OK) st = write_bitmap(r, s.nints > 1 && s.ints[1] > 0 ? (size_t)s.ints[1] : 0, err);
  if (st == BG_OK) st = bgi_rot_drain_delta(r, &f->name, err);
  if (st == BG_OK) progress(r, BG_PHASE_COMMITTING);
  if (st == BG_OK) {
    char written[24];
    snprintf(written, sizeof written, "%llu", (unsigned long long)r->upload_total);
    const char *argv[] = {f->config_key.s, f->name.s, f->rotation_key.s, f->delta_key.s, bg_lock_key(r->lock),
                          r->staging_key.s, f->spare_key.s, r->token, holder, written};
    size_t lens[] = {f->config_key.len, f->name.len, f->rotation_key.len, f->delta_key.len,
                     strlen(bg_lock_key(r->lock)), r->staging_key.len, f->spare_key.len, 32, hlen, strlen(written)};
    bgi_step fin = {.script = &finish_script, .nkeys = 7, .nargs = 3, .argv = argv, .lens = lens, .durable = 1};
    st = run(r, &fin, "commit", err);
  }
  if (st == BG_OK) {
    release(r);   /* the filter is whole again: wake the queries */
    bgi_leased_settle(r);
    if (r->lock_left) bgi_giveback_start(r, 0);
  }
  return st;
}

static void abort_(bg_rotation *r, bgi_err *err) {
  release(r);
  bgi_leased_abort(r, err);
}

const bgi_rot_ops bgi_rot_locked = {.name = "locked", .begin = begin, .add = bgi_leased_add, .commit = commit,
                                    .abort = abort_};
