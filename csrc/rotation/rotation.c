/* bg_rotation: begin / add / commit / abort; LOCKED's own commit is in locked.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/jdouble.h"
#include "hash/hash.h"
#include "rotation/rotation.h"

/* The progress callback is called at most this often (plus at every phase change). */
#define BGI_PROGRESS_EVERY_NS 50000000ull

static int finish(bg_rotation *r, const bgi_err *err) { return bgi_errslot_store(&r->err, err); }

/* Calls the progress callback; BG_EABORTED if it asks to stop. */
int bgi_rot_report(bg_rotation *r, int phase, int force, bgi_err *err) {
  if (!r->progress) return BG_OK;
  uint64_t now = bgi_now_ns();
  if (!force && now - r->last_progress_ns < BGI_PROGRESS_EVERY_NS) return BG_OK;
  r->last_progress_ns = now;
  if (r->progress(r->progress_data, phase, r->items, r->upload_pos, r->upload_total) != 0)
    return bgi_err_set(err, BG_EABORTED, "the progress callback stopped the rotation of \"%s\"", r->f->name);
  return BG_OK;
}

static void make_token(char token[33]) {
  unsigned char raw[16];
  static const char hex[] = "0123456789abcdef";
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
    /* no entropy source: time and address still make collisions between live rotators unlikely */
    uint64_t a = bgi_now_ns(), b = (uint64_t)(uintptr_t)token ^ ((uint64_t)getpid() << 32);
    memcpy(raw, &a, 8);
    memcpy(raw + 8, &b, 8);
  }
  for (int i = 0; i < 16; i++) token[2 * i] = hex[raw[i] >> 4], token[2 * i + 1] = hex[raw[i] & 15];
  token[32] = 0;
}

static int begin_swap(bg_rotation *r, bgi_err *err) {
  uint64_t deadline = bgi_now_ns() + (uint64_t)r->opts.rotate_wait_ms * 1000000u;
  for (;;) {
    int64_t pttl = 0;
    char owner[128];
    int st = bgi_rot_step_begin(r, &pttl, owner, sizeof owner, err);
    if (st != BG_EROTATING) {
      if (st != BG_OK) return st;
      break;
    }
    uint64_t now = bgi_now_ns();
    if (now >= deadline) return st;
    /* poll until the holder commits, aborts or dies; never past our own deadline */
    uint64_t nap = 50000000u;
    if (pttl > 0 && (uint64_t)pttl * 1000000u < nap) nap = (uint64_t)pttl * 1000000u + 1000000u;
    if (now + nap > deadline) nap = deadline - now;
    /* cancelled: no lease was taken (the begin step answered BG_EROTATING), nothing to undo */
    if (bgi_sleep_ns(nap) == BG_ECANCELED)
      return bgi_err_set(err, BG_ECANCELED, "rotation of \"%s\": cancelled while waiting for the rotation of %s; "
                         "nothing was changed", r->f->name, owner);
  }
  if (bgi_bitmap_init(&r->next, r->size, r->k) != BG_OK) {
    bgi_rot_step_abort(r, &(bgi_err){0});
    return bgi_err_set(err, BG_ENOMEM, "out of memory for a %llu-bit bitmap", (unsigned long long)r->size);
  }
  if (bgi_lease_start(r) != BG_OK) {
    bgi_rot_step_abort(r, &(bgi_err){0});
    return bgi_err_set(err, BG_ENOMEM, "cannot start the lease renewal thread");
  }
  /* adds through this process record into the delta from now on; other processes learn it from
   * their next add (the add step answers with the rotation's config) */
  atomic_store(&r->f->next_cfg, bgi_cfg_pack(r->size, r->k));
  return BG_OK;
}

static int begin_naive(bg_rotation *r, bgi_err *err) {
  /* exactly the rebuild that fails in production: the live filter is gone until tryInit */
  int st = bg_filter_delete_ex(r->f, NULL, NULL);
  if (st == BG_OK) st = bg_filter_init_ex(r->f, NULL, r->n, r->fpp_value, NULL);
  if (st != BG_OK) return bgi_err_set(err, st, "%s", bg_filter_errmsg(r->f));
  return BG_OK;
}

/* begins; its waits observe the thread's current call (bg_rotation_begin_ex enters it) */
static int begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                 const bg_options *opts);

BG_API int bg_rotation_begin_ex(bg_rotation **out, bg_filter *f, bg_call *call, int64_t expected_insertions,
                                double fpp, int strategy, const bg_options *opts) {
  int st;
  BGI_WITH_CALL(call, st = begin(out, f, expected_insertions, fpp, strategy, opts));
  if (call) {
    /* the failure's message is the filter's (as for the plain form) and the call's */
    bgi_err err = {.status = st};
    if (st != BG_OK && f) bgi_errslot_copy(&f->err, err.msg, sizeof err.msg);
    bgi_call_finish(call, NULL, &err, BG_SOURCE_REDIS);
  }
  return st;
}

BG_API int bg_rotation_begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                             const bg_options *opts) {
  return bg_rotation_begin_ex(out, f, NULL, expected_insertions, fpp, strategy, opts);
}

static int begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                 const bg_options *opts) {
  bgi_err err = {0};
  char why[256];
  bg_rotation *r;
  if (!out) return BG_EINVAL;
  *out = NULL;
  if (!f) return BG_EINVAL;
  bgi_errslot_set(&f->err, BG_OK, "%s", "");  /* no stale message from an earlier failure */
  if (strategy != BG_ROTATE_SWAP && strategy != BG_ROTATE_NAIVE && strategy != BG_ROTATE_LOCKED)
    return bgi_errslot_set(&f->err, BG_EINVAL, "rotation: unknown strategy %d (BG_ROTATE_SWAP, BG_ROTATE_NAIVE or "
                           "BG_ROTATE_LOCKED)", strategy);
  if (!(r = calloc(1, sizeof *r))) return bgi_errslot_set(&f->err, BG_ENOMEM, "rotation: out of memory");
  if (bgi_params(expected_insertions, fpp, &r->size, &r->k, why, sizeof why) != BG_OK) {
    free(r);
    return bgi_errslot_set(&f->err, BG_EBADPARAMS, "rotation: %s", why);
  }
  if (bgi_options_copy(&r->opts, opts) != BG_OK) {
    free(r);
    return bgi_errslot_set(&f->err, BG_ENOMEM, "rotation: out of memory");
  }
  if (!r->opts.rotate_threads) {
    /* one CPU left to the rest of the process (its queries) and, often, to redis-server: with all
     * of them hashing, contains p99 rose 33-48x during rotations (bench/README.md) */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    r->opts.rotate_threads = cpus > 1 ? cpus - 1 : 1;
  }
  /* a key the lease guards must outlive it: a staging TTL shorter than the lease is stretched to
   * the lease while the rotation runs (issue 11: a 2 s staging TTL under a 60 s lease let the
   * staging bitmap expire during a 3 s stall and the commit install an empty generation) */
  r->guarded_ttl_ms = r->opts.rotate_staging_ttl_ms > r->opts.rotate_lease_ms ? r->opts.rotate_staging_ttl_ms
                                                                              : r->opts.rotate_lease_ms;
  bgi_errslot_init(&r->err);
  r->f = f;
  r->strategy = strategy;
  r->n = expected_insertions;
  r->fpp_value = fpp;
  bgi_format_java_double(fpp, r->fpp, sizeof r->fpp);
  make_token(r->token);
  char staging[40];
  snprintf(staging, sizeof staging, "next:%s", r->token);
  r->staging_key = bgi_suffix_name(f->name, f->name_len, staging, &r->staging_key_len);
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(r->owner, sizeof r->owner, "%s:%d", host, (int)getpid());
  r->started_ns = bgi_now_ns();

  /* LOCKED opens its lock before it takes the lease: a failure then leaves nothing to undo */
  int st = !r->staging_key ? bgi_err_set(&err, BG_ENOMEM, "rotation: out of memory") : BG_OK;
  if (st == BG_OK && strategy == BG_ROTATE_LOCKED) st = bgi_locked_begin(r, &err);
  if (st == BG_OK) st = strategy == BG_ROTATE_NAIVE ? begin_naive(r, &err) : begin_swap(r, &err);
  if (st != BG_OK) {
    bg_lock_close(r->lock);
    bgi_errslot_store(&f->err, &err);
    free(r->staging_key);
    bgi_bitmap_free(&r->next);
    bgi_errslot_destroy(&r->err);
    bgi_options_clear(&r->opts);
    free(r);
    return st;
  }
  *out = r;
  return BG_OK;
}

BG_API int bg_rotation_set_progress(bg_rotation *r, bg_progress_fn fn, void *userdata) {
  if (!r) return BG_EINVAL;
  r->progress = fn;
  r->progress_data = userdata;
  return BG_OK;
}

int bgi_rot_check_active(bg_rotation *r, const char *what, bgi_err *err) {
  if (r->state != BGI_ROT_ACTIVE)
    return bgi_err_set(err, BG_EINVAL, "%s: the rotation of \"%s\" is already %s", what, r->f->name,
                       r->state == BGI_ROT_COMMITTED ? "committed" : r->state == BGI_ROT_ABORTED ? "aborted" : "over (it failed)");
  if (r->strategy != BG_ROTATE_NAIVE && atomic_load(&r->lease.lost))
    return bgi_err_set(err, BG_EROTATING, "%s", r->lease.lost_why);
  return BG_OK;
}


/* Ends the rotation after a failure: nothing of it may linger on the server. */
static void fail(bg_rotation *r) {
  bgi_locked_release(r);
  if (r->strategy != BG_ROTATE_NAIVE) {
    bgi_lease_stop(r);
    bgi_err ignored = {0};
    bgi_rot_step_abort(r, &ignored);
    uint64_t mine = bgi_cfg_pack(r->size, r->k);
    atomic_compare_exchange_strong(&r->f->next_cfg, &mine, 0);
  }
  r->state = BGI_ROT_FAILED;
}

BG_API int bg_rotation_add_many(bg_rotation *r, const void *const *items, const size_t *lens, size_t n) {
  bgi_err err = {0};
  if (!r) return BG_EINVAL;
  if (bgi_rot_check_active(r, "rotation add", &err) != BG_OK ||
      bgi_check_items("rotation add", items, lens, n, lens, &err) != BG_OK)
    return finish(r, &err);
  if (r->strategy != BG_ROTATE_NAIVE) {
    bgi_bitmap_add(&r->next, items, lens, n, (int)r->opts.rotate_threads, (int)r->opts.rotate_nice);
    r->items += n;
  } else {
    for (size_t done = 0; done < n && err.status == BG_OK;) {
      size_t m = n - done < (size_t)r->opts.rotate_batch ? n - done : (size_t)r->opts.rotate_batch;
      int st = bg_filter_add_many_ex(r->f, NULL, items + done, lens + done, m, NULL);
      if (st != BG_OK) bgi_err_set(&err, st, "%s", bg_filter_errmsg(r->f));
      else r->items += m, done += m;
      if (err.status == BG_OK) bgi_rot_report(r, BG_PHASE_BUILDING, 0, &err);
    }
  }
  if (err.status == BG_OK) bgi_rot_report(r, BG_PHASE_BUILDING, 0, &err);
  if (err.status == BG_EABORTED) fail(r);
  return finish(r, &err);
}

BG_API int bg_rotation_add(bg_rotation *r, const void *item, size_t len) {
  return bg_rotation_add_many(r, &item, &len, 1);
}

static int upload(bg_rotation *r, bgi_err *err) {
  size_t used = bgi_bitmap_used_len(&r->next), chunk = (size_t)r->opts.rotate_chunk_bytes;
  /* over a spare, every byte it has is rewritten (zeros too: none of its bits may survive); the
   * begin script only hands over a spare no longer than this bitmap */
  if (r->spare_len > used) used = r->spare_len <= r->next.len ? (size_t)r->spare_len : r->next.len;
  r->upload_total = used;
  int st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);
  for (size_t off = 0; off < used && st == BG_OK; off += chunk) {
    size_t len = used - off < chunk ? used - off : chunk;
    const uint8_t *p = r->next.bytes + off;
    /* SETRANGE zero-fills gaps, so all-zero chunks past the spare and before the last need not travel */
    int zero = off >= r->spare_len && off + len < used && p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
    if (!zero && (st = bgi_rot_step_upload(r, off, p, len, err)) == BG_OK) r->bytes_uploaded += len;
    if (st == BG_OK && (st = bgi_rot_check_active(r, "upload", err)) == BG_OK) {
      r->upload_pos = off + len;
      /* every chunk: chunks are large (1 MiB by default), and each is a point to stop at */
      st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);
    }
  }
  return st;
}

static int commit(bg_rotation *r);

BG_API int bg_rotation_commit_ex(bg_rotation *r, bg_call *call) {
  int st;
  if (!r) return bgi_call_null_handle(call, "rotation");
  BGI_WITH_CALL(call, st = commit(r));
  if (call) {
    bgi_err err = {.status = st};
    if (st != BG_OK) bgi_errslot_copy(&r->err, err.msg, sizeof err.msg);
    bgi_call_finish(call, NULL, &err, BG_SOURCE_REDIS);
  }
  return st;
}

BG_API int bg_rotation_commit(bg_rotation *r) { return bg_rotation_commit_ex(r, NULL); }

static int commit(bg_rotation *r) {
  bgi_err err = {0};
  if (bgi_rot_check_active(r, "commit", &err) != BG_OK) {
    if (err.status == BG_EROTATING) fail(r);
    return finish(r, &err);
  }
  if (r->strategy != BG_ROTATE_NAIVE) {
    int st;
    if (r->strategy == BG_ROTATE_LOCKED) {
      st = bgi_locked_commit(r, &err);
    } else {
      st = upload(r, &err);
      if (st == BG_OK) st = bgi_rot_drain_delta(r, r->staging_key, r->staging_key_len, &err);
      if (st == BG_OK) st = bgi_rot_report(r, BG_PHASE_COMMITTING, 1, &err);
      if (st == BG_OK) st = bgi_rot_step_commit(r, &err);
    }
    if (st != BG_OK) {
      fail(r);
      return finish(r, &err);
    }
    bgi_lease_stop(r);
    atomic_store(&r->f->cfg, bgi_cfg_pack(r->size, r->k));
    uint64_t mine = bgi_cfg_pack(r->size, r->k);
    atomic_compare_exchange_strong(&r->f->next_cfg, &mine, 0);
  }
  r->state = BGI_ROT_COMMITTED;
  bgi_filter_count_rotation(r->f);
  bgi_rot_report(r, BG_PHASE_DONE, 1, &(bgi_err){0});
  return finish(r, &err);
}

BG_API int bg_rotation_abort(bg_rotation *r) {
  bgi_err err = {0};
  if (!r) return BG_EINVAL;
  if (r->state != BGI_ROT_ACTIVE) return BG_OK;
  if (r->strategy != BG_ROTATE_NAIVE) {
    bgi_lease_stop(r);
    bgi_rot_step_abort(r, &err);
    uint64_t mine = bgi_cfg_pack(r->size, r->k);
    atomic_compare_exchange_strong(&r->f->next_cfg, &mine, 0);
  }
  r->state = BGI_ROT_ABORTED;
  return finish(r, &err);
}

BG_API void bg_rotation_free(bg_rotation *r) {
  if (!r) return;
  if (r->state == BGI_ROT_ACTIVE) bg_rotation_abort(r);
  bgi_lease_stop(r);
  bg_lock_close(r->lock);
  bgi_bitmap_free(&r->next);
  free(r->staging_key);
  bgi_options_clear(&r->opts);
  bgi_errslot_destroy(&r->err);
  free(r);
}

BG_API const char *bg_rotation_errmsg(const bg_rotation *r) { return r ? bgi_errslot_view((bgi_errslot *)&r->err) : "rotation handle is NULL"; }

BG_API int bg_rotation_stats(const bg_rotation *r, uint64_t *items, uint64_t *bytes_uploaded, uint64_t *elapsed_us) {
  if (!r) return BG_EINVAL;
  if (items) *items = r->items;
  if (bytes_uploaded) *bytes_uploaded = r->bytes_uploaded;
  if (elapsed_us) *elapsed_us = (bgi_now_ns() - r->started_ns) / 1000;
  return BG_OK;
}
