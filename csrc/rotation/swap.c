/*
 * BG_ROTATE_SWAP (the default): build the next generation in memory (leased.c), upload it beside
 * the live filter into this rotation's staging key, apply the delta, then swap bitmap and config
 * in one atomic step (steps.c).
 */
#include <string.h>

#include "rotation/rotation.h"

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

static int commit(bg_rotation *r, bgi_err *err) {
  int st = upload(r, err);
  if (st == BG_OK) st = bgi_rot_drain_delta(r, &r->staging_key, err);
  if (st == BG_OK) st = bgi_rot_report(r, BG_PHASE_COMMITTING, 1, err);
  if (st == BG_OK) st = bgi_rot_step_commit(r, err);
  if (st == BG_OK) bgi_leased_settle(r);
  return st;
}

const bgi_rot_ops bgi_rot_swap = {.name = "swap", .begin = bgi_leased_begin, .add = bgi_leased_add, .commit = commit,
                                  .abort = bgi_leased_abort};
