/*
 * What SWAP and LOCKED share (swap.c, locked.c): begin takes the rotation lease - waiting, up to
 * BG_OPT_ROTATE_WAIT_MS, for another rotation to end - and starts its keeper (lease.c); add builds
 * the next generation in memory (bitmap.c); after a commit the handle learns the new config; an
 * abort gives the lease back and drops the staging keys (an abort that fails hands the give-back
 * to a background thread, and a begin of this process takes such a lease over: giveback.c). Only
 * the commit differs.
 */
#include <stdio.h>
#include <string.h>

#include "rotation/rotation.h"

int bgi_leased_wait(bg_rotation *r, bgi_lease_step_fn step, bgi_err *err) {
  uint64_t deadline = bgi_deadline_in_ms(r->opts.rotate_wait_ms);
  for (;;) {
    int64_t pttl = 0;
    char owner[128];
    int st = step(r, &pttl, owner, sizeof owner, err);
    if (st != BG_EROTATING) return st;
    /* a lease this process left behind (its give-back failed, giveback.c) is released and the
     * filter begun at once; a failed try leaves the wait below as it was */
    if (bgi_giveback_take_over(r, &(bgi_err){0}) == 1) continue;
    uint64_t now = bgi_now_ns();
    if (now >= deadline) return st;
    /* poll until the holder commits, aborts or dies; never past our own deadline */
    uint64_t nap = bgi_ms_ns(50);
    if (pttl > 0 && bgi_ms_ns(pttl) < nap) nap = bgi_ms_ns(pttl + 1);
    if (now + nap > deadline) nap = deadline - now;
    /* cancelled: no lease was taken (the begin step answered BG_EROTATING), nothing to undo */
    if (bgi_sleep_ns(nap) == BG_ECANCELED)
      return bgi_err_set(err, BG_ECANCELED, "rotation of \"%s\": cancelled while waiting for the rotation of %s; "
                         "nothing was changed", r->f->name.s, owner);
  }
}

int bgi_leased_begin(bg_rotation *r, bgi_err *err) {
  int st = bgi_leased_wait(r, bgi_rot_step_begin, err);
  if (st != BG_OK) return st;
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

int bgi_leased_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err) {
  (void)err;
  bgi_bitmap_add(&r->next, items, lens, n, (int)r->opts.rotate_threads, (int)r->opts.rotate_nice);
  r->items += n;
  return BG_OK;
}

/* This handle's adds stop recording for a next generation (unless another rotation set its own). */
static void forget_next(bg_rotation *r) {
  uint64_t mine = bgi_cfg_pack(r->size, r->k);
  atomic_compare_exchange_strong(&r->f->next_cfg, &mine, 0);
}

void bgi_leased_settle(bg_rotation *r) {
  bgi_lease_stop(r);
  atomic_store(&r->f->cfg, bgi_cfg_pack(r->size, r->k));
  forget_next(r);
}

void bgi_leased_abort(bg_rotation *r, bgi_err *err) {
  bgi_lease_stop(r);
  int lease_left = bgi_rot_step_abort(r, err) != BG_OK;
  if ((lease_left || r->lock_left) && bgi_giveback_start(r, lease_left) == BG_OK && lease_left) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, "; the lease is given back in the background (tried until it "
             "would have run out)");
  }
  forget_next(r);
}
