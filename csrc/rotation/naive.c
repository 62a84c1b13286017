/*
 * BG_ROTATE_NAIVE: the rebuild that fails in production, kept on purpose as the control that shows
 * the failure - delete, tryInit, re-add into the live keys. It has no lease, no delta and nothing to
 * commit or undo. It calls the filter's internal steps directly (filter/filter.h), not the public
 * ABI, and not through the handle's policy: a rebuild's own adds are not degraded or retried.
 */
#include "rotation/rotation.h"

static int begin(bg_rotation *r, bgi_err *err) {
  /* exactly the rebuild that fails in production: the live filter is gone until tryInit */
  int st = bgi_filter_delete(r->f, 0, NULL, err);
  if (st == BG_OK) st = bgi_filter_init_parts(r->f, 0, r->n, r->fpp_value, r->part ? r->part->next.parts : 0, NULL, err);
  return st;
}

static int add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err) {
  for (size_t done = 0; done < n;) {
    size_t m = n - done < (size_t)r->opts.rotate_batch ? n - done : (size_t)r->opts.rotate_batch;
    size_t added = 0, d = 0;
    int st = bgi_filter_add_raw(r->f, 0, items + done, lens + done, m, &added, &d, err);
    if (st != BG_OK) return err->status = st;
    r->items += m, done += m;
    if ((st = bgi_rot_report(r, BG_PHASE_BUILDING, 0, err)) != BG_OK) return st;
  }
  return BG_OK;
}

static int commit(bg_rotation *r, bgi_err *err) {
  (void)r, (void)err;
  return BG_OK;   /* every item is in the live filter already */
}

static void abort_(bg_rotation *r, bgi_err *err) { (void)r, (void)err; }

const bgi_rot_ops bgi_rot_naive = {.name = "naive", .begin = begin, .add = add, .commit = commit, .abort = abort_};
