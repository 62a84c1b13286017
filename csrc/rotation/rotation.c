/*
 * bg_rotation: the ABI (begin / add / commit / abort / free) and the dispatch to the strategy's
 * table (rotation.h: swap.c, locked.c, naive.c). What happens on the server is the strategies';
 * this file sets the handle up, keeps its state and undoes a failed rotation through its table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fork.h"
#include "common/jdouble.h"
#include "common/random.h"
#include "hash/hash.h"
#include "rotation/rotation.h"

static int finish(bg_rotation *r, const bgi_err *err) { return bgi_errslot_store(&r->err, err); }

/* ---- what operators see (observe.h) ---------------------------------------------------------- */

static int strategy_of(const bg_rotation *r) {
  if (r->ops == &bgi_rot_swap || r->ops == &bgi_rot_pswap || r->ops == &bgi_rot_nswap) return BG_ROTATE_SWAP;
  return r->ops == &bgi_rot_locked || r->ops == &bgi_rot_plocked ? BG_ROTATE_LOCKED : BG_ROTATE_NAIVE;
}

/* A rotation event: kind, with st its status (BG_EV_STATUS) and why its cause (NULL: none). */
static void rotation_event(bg_rotation *r, int kind, int st, const char *why) {
  bgi_obs *o = &r->f->client->obs;
  if (!bgi_obs_on(o)) return;
  int64_t v[BG_EVENT_NVALUES] = {0};
  uint64_t us = (bgi_now_ns() - r->started_ns) / 1000;
  v[BG_EV_STATUS] = st;
  v[BG_EV_STRATEGY] = strategy_of(r);
  v[BG_EV_ITEMS] = (int64_t)r->items;
  v[BG_EV_BYTES] = (int64_t)r->bytes_uploaded;
  v[BG_EV_DURATION_US] = kind == BG_EVENT_ROTATION_BEGIN ? 0 : (int64_t)us;
  const char *name = r->f->name.s;
  if (kind == BG_EVENT_ROTATION_BEGIN)
    bgi_obs_emit(o, kind, name, v, "rotation of filter \"%.200s\" began (%s, to %lld expected insertions at %s)",
                 name, r->ops->name, (long long)r->n, r->fpp);
  else if (kind == BG_EVENT_ROTATION_COMMIT)
    bgi_obs_emit(o, kind, name, v, "rotation of filter \"%.200s\" committed (%s): %llu items, %llu bytes uploaded, "
                 "%.3f s after its begin", name, r->ops->name, (unsigned long long)r->items,
                 (unsigned long long)r->bytes_uploaded, (double)us / 1e6);
  else
    bgi_obs_emit(o, kind, name, v, "rotation of filter \"%.200s\" aborted (%s) after %.3f s, %llu items: %s", name,
                 r->ops->name, (double)us / 1e6, (unsigned long long)r->items, why ? why : "asked by its caller");
}

/* The rotation ended: committed (st BG_OK), aborted when asked (asked), or failed with st. */
static void rotation_ended(bg_rotation *r, int st, int asked, const char *why) {
  static const int ops[] = {[BG_ROTATE_SWAP] = BG_OP_ROTATE_SWAP, [BG_ROTATE_NAIVE] = BG_OP_ROTATE_NAIVE,
                            [BG_ROTATE_LOCKED] = BG_OP_ROTATE_LOCKED};
  bgi_filter_stats *fs = &r->f->stats;
  if (fs->hist_on)
    bgi_hist_record(&fs->hist[ops[strategy_of(r)] - 1][asked ? BG_OUTCOME_ABORTED : bgi_outcome(st)],
                    bgi_now_ns() - r->started_ns);
  rotation_event(r, st == BG_OK && !asked ? BG_EVENT_ROTATION_COMMIT : BG_EVENT_ROTATION_ABORT,
                 asked ? BG_EABORTED : st, why);
}

/* The strategy table of a BG_ROTATE_* value; NULL for an unknown one. */
static const bgi_rot_ops *strategy_ops(int strategy) {
  static const bgi_rot_ops *const ops[] = {
    [BG_ROTATE_SWAP] = &bgi_rot_swap,
    [BG_ROTATE_NAIVE] = &bgi_rot_naive,
    [BG_ROTATE_LOCKED] = &bgi_rot_locked,
  };
  return strategy >= 0 && (size_t)strategy < sizeof ops / sizeof ops[0] ? ops[strategy] : NULL;
}

/* Begins; its waits observe the thread's current call (bg_rotation_begin_ex enters it). A failure's
 * message goes to err, this begin's own: the filter's slot is shared by every thread using the
 * filter, so a message read back from it may be another call's. */
static int begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                 const bg_options *opts, bgi_err *err);

BG_API int bg_rotation_begin_ex(bg_rotation **out, bg_call *call, bg_filter *f, int64_t expected_insertions,
                                double fpp, int strategy, const bg_options *opts) {
  bgi_err err = {0};
  if (!out) return bgi_call_null_handle(call, "out");
  *out = NULL;
  if (!f) return bgi_call_null_handle(call, "filter");
  BGI_WITH_CALL(call, err.status = begin(out, f, expected_insertions, fpp, strategy, opts, &err));
  /* the failure's message is on the filter (as for the plain form) and, this call's own, on the call */
  bgi_errslot_store(&f->err, &err);
  return call ? bgi_call_finish(call, NULL, &err, BG_SOURCE_REDIS) : err.status;
}

BG_API int bg_rotation_begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                             const bg_options *opts) {
  return bg_rotation_begin_ex(out, NULL, f, expected_insertions, fpp, strategy, opts);
}

/* The filter's kind decides: a plain one's strategies write Redisson's layout (n and p checked
 * as Redisson does), a partitioned one's build a generation of its own (pswap.c). */
static int choose(bg_rotation *r, const bgi_rot_ops **ops, char *why, size_t why_cap, bgi_err *err) {
  bg_filter *f = r->f;
  bgi_pconf_load ld;
  if (f->native) {
    /* the server builds the next generation: SWAP into a staging key and a RENAME (nswap.c), or
     * NAIVE; its size is checked as init checks it, with the live filter's expansion */
    if (*ops == &bgi_rot_locked)
      return bgi_err_set(err, BG_ENOTSUP, "rotation: native filter \"%s\" rotates with BG_ROTATE_SWAP (or "
                         "BG_ROTATE_NAIVE), not in place (BG_ROTATE_LOCKED)", f->name.s);
    if (r->opts.rotate_partitions)
      return bgi_err_set(err, BG_EINVAL, "rotation: native filter \"%s\" has no partitions", f->name.s);
    int st = bgi_native_check_size(f, r->n, r->fpp_value, -1, err);
    if (st != BG_OK) return st;
    if (*ops == &bgi_rot_swap) {
      *ops = &bgi_rot_nswap;
      if (bgi_key_suffix(&r->native_reg, f->name.s, f->name.len, BGI_KEY_STAGINGS) != BG_OK)
        return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
    }
    return BG_OK;
  }
  int st = bgi_pconf_read(f, &ld, err);
  if (st != BG_OK && st != BG_ENOTINIT) return st;
  bgi_err_clear(err);
  if (st == BG_OK && ld.kind == BGI_KIND_PARTITIONED) {
    if ((st = bgi_prot_new(r, &ld.conf.live, r->opts.rotate_partitions, err)) != BG_OK) return st;
    if (*ops == &bgi_rot_locked && (st = bgi_plocked_check(r, err)) != BG_OK) return st;
    r->size = bgi_cfg_size(r->part->next.cfg) * r->part->next.parts;
    r->k = bgi_cfg_k(r->part->next.cfg);
    if (*ops == &bgi_rot_swap) *ops = &bgi_rot_pswap;
    if (*ops == &bgi_rot_locked) *ops = &bgi_rot_plocked;
    return BG_OK;
  }
  if (r->opts.rotate_partitions)
    return bgi_err_set(err, BG_EINVAL, "rotation: BG_OPT_ROTATE_PARTITIONS is for a partitioned filter, and \"%s\" is "
                       "not one (init it with partitions to spread it)", f->name.s);
  if (bgi_params(r->n, r->fpp_value, &r->size, &r->k, why, why_cap) != BG_OK)
    return bgi_err_set(err, BG_EBADPARAMS, "rotation: %s", why);
  return BG_OK;
}

static int begin(bg_rotation **out, bg_filter *f, int64_t expected_insertions, double fpp, int strategy,
                 const bg_options *opts, bgi_err *err) {
  char why[256];
  bg_rotation *r;
  const bgi_rot_ops *ops = strategy_ops(strategy);
  if (!ops)
    return bgi_err_set(err, BG_EINVAL, "rotation: unknown strategy %d (BG_ROTATE_SWAP, BG_ROTATE_NAIVE or "
                       "BG_ROTATE_LOCKED)", strategy);
  int st = bgi_options_check(opts, BGI_OPT_ROTATION, err);
  if (st != BG_OK) return st;
  if (!(r = calloc(1, sizeof *r))) return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
  r->fork_gen = bgi_fork_gen_note();
  /* n and p as Redisson checks them, before anything is asked of the server (the size cap of a
   * plain filter only once the filter's kind is known: a partitioned one has none) */
  if (bgi_params_uncapped(expected_insertions, fpp, &r->size, &r->k, why, sizeof why) != BG_OK) {
    free(r);
    return bgi_err_set(err, BG_EBADPARAMS, "rotation: %s", why);
  }
  if (bgi_options_copy(&r->opts, opts) != BG_OK) {
    free(r);
    return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
  }
  if (!r->opts.rotate_threads) {
    /* one CPU left to the rest of the process (its queries) and, often, to redis-server: with all
     * of them hashing, contains p99 rose many times during rotations (bench/README.md,
     * bench_rotate, "Why the rotation is built this way") */
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
  r->ops = ops;
  r->n = expected_insertions;
  r->fpp_value = fpp;
  bgi_format_java_double(fpp, r->fpp, sizeof r->fpp);
  bgi_random_hex(r->token, 16);
  char staging[40];
  snprintf(staging, sizeof staging, BGI_KEY_NEXT "%s", r->token);
  int named = bgi_key_suffix(&r->staging_key, f->name.s, f->name.len, staging);
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(r->owner, sizeof r->owner, "%s:%d", host, (int)getpid());
  r->started_ns = bgi_now_ns();

  st = named != BG_OK ? bgi_err_set(err, BG_ENOMEM, "rotation: out of memory") : BG_OK;
  if (st == BG_OK) st = choose(r, &ops, why, sizeof why, err);
  r->ops = ops;
  if (st == BG_OK) st = ops->begin(r, err);
  if (st == BG_OK) rotation_event(r, BG_EVENT_ROTATION_BEGIN, BG_OK, NULL);
  if (st != BG_OK) {
    bg_lock_close(r->lock);
    bgi_prot_free(r);
    bgi_key_free(&r->staging_key);
    bgi_key_free(&r->native_reg);
    bgi_nload_free(r);
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

/* Ends the rotation after the failure why (BG_EABORTED: its progress callback asked): nothing of it
 * may linger on the server. */
static void fail(bg_rotation *r, const bgi_err *why) {
  bgi_err ignored = {0};
  r->ops->abort(r, &ignored);
  r->state = BGI_ROT_FAILED;
  rotation_ended(r, why->status, why->status == BG_EABORTED, bgi_err_text(why));
}

/*
 * fork (common/fork.h): a rotation begun before the fork is the parent's - its lease (renewed by
 * the parent's thread, not in the child), its staging keys, its lock. In the child the handle
 * can neither add to it, commit nor abort it: each fails with BG_EINVAL, and bg_rotation_free
 * there only frees memory (no abort: that would delete the parent's staging keys and lease).
 * 1 (err set) when r is such a handle.
 */
static int forked_away(bg_rotation *r, const char *what, bgi_err *err) {
  if (!bgi_forked_since(r->fork_gen)) return 0;
  if (r->state == BGI_ROT_ACTIVE) r->state = BGI_ROT_FAILED;   /* nothing of it is undone here */
  bgi_err_set(err, BG_EINVAL, "%s: the rotation of \"%s\" was begun before this process forked: it is the parent "
              "process's (its lease, staging keys and lock); begin one in this process instead", what, r->f->name.s);
  return 1;
}

static int add_many(bg_rotation *r, const void *const *items, const size_t *lens, size_t n) {
  bgi_err err = {0};
  if (forked_away(r, "rotation add", &err)) return finish(r, &err);
  if (bgi_rot_check_active(r, "rotation add", &err) != BG_OK ||
      bgi_check_items("rotation add", items, lens, n, lens, &err) != BG_OK)
    return finish(r, &err);
  r->ops->add(r, items, lens, n, &err);
  if (err.status == BG_OK) bgi_rot_report(r, BG_PHASE_BUILDING, 0, &err);
  if (err.status == BG_EABORTED) fail(r, &err);
  return finish(r, &err);
}

/* The _ex forms of a rotation: the message is the rotation's (as for the plain form) and the call's. */
static int finish_call(bg_rotation *r, bg_call *call, int st) {
  if (call) {
    bgi_err err = {.status = st};
    if (st != BG_OK) bgi_errslot_copy(&r->err, err.msg, sizeof err.msg);
    bgi_call_finish(call, NULL, &err, BG_SOURCE_REDIS);
  }
  return st;
}

BG_API int bg_rotation_add_many_ex(bg_rotation *r, bg_call *call, const void *const *items, const size_t *lens,
                                   size_t n) {
  int st;
  if (!r) return bgi_call_null_handle(call, "rotation");
  BGI_WITH_CALL(call, st = add_many(r, items, lens, n));
  return finish_call(r, call, st);
}

BG_API int bg_rotation_add_many(bg_rotation *r, const void *const *items, const size_t *lens, size_t n) {
  return bg_rotation_add_many_ex(r, NULL, items, lens, n);
}

BG_API int bg_rotation_add_ex(bg_rotation *r, bg_call *call, const void *item, size_t len) {
  return bg_rotation_add_many_ex(r, call, &item, &len, 1);
}

BG_API int bg_rotation_add(bg_rotation *r, const void *item, size_t len) {
  return bg_rotation_add_many_ex(r, NULL, &item, &len, 1);
}

static int commit(bg_rotation *r);

BG_API int bg_rotation_commit_ex(bg_rotation *r, bg_call *call) {
  int st;
  if (!r) return bgi_call_null_handle(call, "rotation");
  BGI_WITH_CALL(call, st = commit(r));
  return finish_call(r, call, st);
}

BG_API int bg_rotation_commit(bg_rotation *r) { return bg_rotation_commit_ex(r, NULL); }

static int commit(bg_rotation *r) {
  bgi_err err = {0};
  if (forked_away(r, "commit", &err)) return finish(r, &err);
  if (bgi_rot_check_active(r, "commit", &err) != BG_OK) {
    if (err.status == BG_EROTATING) fail(r, &err);
    return finish(r, &err);
  }
  if (r->ops->commit(r, &err) != BG_OK) {
    fail(r, &err);
    return finish(r, &err);
  }
  r->state = BGI_ROT_COMMITTED;
  bgi_filter_count_rotation(r->f);
  rotation_ended(r, BG_OK, 0, NULL);
  bgi_rot_report(r, BG_PHASE_DONE, 1, &(bgi_err){0});
  return finish(r, &err);
}

static int abort_rotation(bg_rotation *r) {
  bgi_err err = {0};
  if (forked_away(r, "abort", &err)) return finish(r, &err);
  if (r->state != BGI_ROT_ACTIVE) return BG_OK;
  r->ops->abort(r, &err);
  r->state = BGI_ROT_ABORTED;
  rotation_ended(r, BG_EABORTED, 1, NULL);
  return finish(r, &err);
}

BG_API int bg_rotation_abort_ex(bg_rotation *r, bg_call *call) {
  int st;
  if (!r) return bgi_call_null_handle(call, "rotation");
  BGI_WITH_CALL(call, st = abort_rotation(r));
  return finish_call(r, call, st);
}

BG_API int bg_rotation_abort(bg_rotation *r) { return bg_rotation_abort_ex(r, NULL); }

BG_API void bg_rotation_free(bg_rotation *r) {
  if (!r) return;
  if (r->state == BGI_ROT_ACTIVE && !forked_away(r, "free", &(bgi_err){0})) bg_rotation_abort(r);
  bgi_lease_stop(r);
  bg_lock_close(r->lock);
  bgi_prot_free(r);
  bgi_bitmap_free(&r->next);
  bgi_key_free(&r->staging_key);
  bgi_key_free(&r->native_reg);
  bgi_nload_free(r);
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
