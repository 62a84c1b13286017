/*
 * BG_ROTATE_LOCKED of a partitioned filter: the live generation rewritten in place, one partition
 * at a time, with no second copy in Redis (docs/layout.md, "Rotating a partitioned filter").
 * In place means the same partitions: the rotation's (n, p, P) must give the live geometry
 * (partition size, k, P); n and p may otherwise change, and the config records them.
 *
 *   begin   swap's (pswap.c): the lease, every live partition marked (adds record their hashes).
 *   add     items hashed in memory (pbuild.c).
 *   commit  for each partition: its meta's stage set (from here its queries wait, as a plain
 *           filter's wait for the write lock: BG_OPT_WRITE_LOCK_WAIT_MS, then BG_ELOCKED and the
 *           policy answers), every byte rewritten, then the adds its mark recorded set in steps
 *           until none is left, in the same step as the stage, mark and delta go. Then the
 *           config's n and p.
 *   abort   the marks removed and the lease given back; a partition whose rewrite had begun
 *           keeps its stage (queries of it fail with BG_ELOCKED, never read half-written bits)
 *           until the next rotation rewrites it.
 */
#include <stdio.h>
#include <string.h>

#include "rotation/rotation.h"

/* Every byte of the partition up to what it had, zeros included: none of its old bits may stay. */
static int rewrite(bg_rotation *r, uint32_t part, uint64_t old_len, bgi_err *err) {
  bgi_prot *pr = r->part;
  size_t chunk = (size_t)r->opts.rotate_chunk_bytes, pbytes = pr->build.pbytes;
  const uint8_t *bytes = pr->build.bytes + (size_t)part * pbytes;
  size_t used = pbytes;
  while (used && !bytes[used - 1]) used--;
  size_t total = old_len > used ? (old_len < pbytes ? (size_t)old_len : pbytes) : used;
  int st = BG_OK;
  for (size_t off = 0; off < total && st == BG_OK; off += chunk) {
    size_t len = total - off < chunk ? total - off : chunk;
    if ((st = bgi_prot_step_write(r, part, off, bytes + off, len, err)) == BG_OK) r->bytes_uploaded += len;
  }
  return st;
}

static int commit(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  int st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);   /* the last point to stop at */
  r->upload_total = (uint64_t)pr->build.pbytes * pr->live.parts;
  for (uint32_t i = 0; i < pr->live.parts && st == BG_OK; i++) {
    uint64_t old_len = 0;
    st = bgi_prot_step_rewrite_start(r, i, &old_len, err);
    if (i == pr->live.parts / 2) bgi_prot_maybe_die(BGI_PROT_DIE_REWRITING);
    if (st == BG_OK) st = rewrite(r, i, old_len, err);
    if (st == BG_OK) st = bgi_prot_step_rewrite_finish(r, i, err);
    if (st == BG_OK) st = bgi_rot_check_active(r, "commit", err);
    r->upload_pos += pr->build.pbytes;
    if (st == BG_OK) bgi_rot_report(r, BG_PHASE_UPLOADING, 0, &(bgi_err){0});
  }
  if (st == BG_OK) st = bgi_rot_report(r, BG_PHASE_COMMITTING, 1, &(bgi_err){0});
  if (st == BG_OK) st = bgi_prot_step_rewrite_done(r, err);
  if (st != BG_OK) return st;
  bgi_lease_stop(r);
  bgi_pconf_set(r->f, &(bgi_pconf){.live = pr->live});
  return BG_OK;
}

static void abort_(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  bgi_lease_stop(r);
  int st = BG_OK;
  for (uint32_t i = atomic_load(&pr->done); i < pr->live.parts; i++) {
    bgi_err one = {0};
    if (bgi_prot_step_unmark(r, i, &one) != BG_OK && st == BG_OK) st = (*err = one).status;
  }
  bgi_err one = {0};
  int live = 0;
  if (bgi_prot_step_release(r, &live, &one) != BG_OK && st == BG_OK) *err = one;
}

int bgi_plocked_check(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  if (pr->next.parts == pr->live.parts && pr->next.cfg == pr->live.cfg) return BG_OK;
  return bgi_err_set(err, BG_EBADPARAMS, "rotation: a locked rotation rewrites the partitions of \"%s\" in place, so "
                     "their geometry must stay (%u partitions of %llu bits, k %u); (%lld, %s) over %u partitions gives "
                     "%llu bits, k %u: keep (n, p) or use BG_ROTATE_SWAP", r->f->name.s, pr->live.parts,
                     (unsigned long long)bgi_cfg_size(pr->live.cfg), bgi_cfg_k(pr->live.cfg), (long long)r->n, r->fpp,
                     pr->next.parts, (unsigned long long)bgi_cfg_size(pr->next.cfg), bgi_cfg_k(pr->next.cfg));
}

static int begin(bg_rotation *r, bgi_err *err);

const bgi_rot_ops bgi_rot_plocked = {.name = "locked", .begin = begin, .add = bgi_pswap_add, .commit = commit,
                                     .abort = abort_};

static int begin(bg_rotation *r, bgi_err *err) {
  r->part->in_place = 1;
  return bgi_rot_pswap.begin(r, err);
}
