/*
 * The checks every strategy makes between its steps: the progress callback (which may stop the
 * rotation) and "is this rotation still on, and its lease still ours". Used by rotation.c and by
 * the strategies; calls neither.
 */
#include "rotation/rotation.h"

/* The progress callback is called at most this often (plus at every phase change). */
#define BGI_PROGRESS_EVERY_NS 50000000ull

/* Calls the progress callback; BG_EABORTED if it asks to stop. */
int bgi_rot_report(bg_rotation *r, int phase, int force, bgi_err *err) {
  if (!r->progress) return BG_OK;
  uint64_t now = bgi_now_ns();
  if (!force && now - r->last_progress_ns < BGI_PROGRESS_EVERY_NS) return BG_OK;
  r->last_progress_ns = now;
  if (r->progress(r->progress_data, phase, r->items, r->upload_pos, r->upload_total) != 0)
    return bgi_err_set(err, BG_EABORTED, "the progress callback stopped the rotation of \"%s\"", r->f->name.s);
  return BG_OK;
}

int bgi_rot_check_active(bg_rotation *r, const char *what, bgi_err *err) {
  if (r->state != BGI_ROT_ACTIVE)
    return bgi_err_set(err, BG_EINVAL, "%s: the rotation of \"%s\" is already %s", what, r->f->name.s,
                       r->state == BGI_ROT_COMMITTED ? "committed" : r->state == BGI_ROT_ABORTED ? "aborted" : "over (it failed)");
  /* only a lease keeper sets lost: a strategy without a lease (NAIVE) never sees it */
  if (atomic_load(&r->lease.lost)) return bgi_err_set(err, BG_EROTATING, "%s", r->lease.lost_why);
  return BG_OK;
}
