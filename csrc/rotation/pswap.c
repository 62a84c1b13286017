/*
 * BG_ROTATE_SWAP of a partitioned filter: generation G (live) to G' (its own number, n, p and P),
 * built beside G and made live by one step on the central config (docs/layout.md, "Rotating a
 * partitioned filter"; the steps in psteps.c).
 *
 *   begin   the lease and G's record in the central config (which also lists a dead rotation's
 *           generation to delete, and such generations are deleted now); every partition of G
 *           marked: from the mark on, an add to it records the items' hashes in its delta, in the
 *           same step as the bits; every partition of G' staged (empty, TTL'd, tagged with the
 *           token). Marks and stages are renewed with the lease.
 *   add     items hashed into G' in memory (pbuild.c).
 *   commit  1. each G' partition uploaded (its non-zero chunks), then persisted;
 *           2. each G partition drained: its delta taken and its meta set to forward to G', in
 *              one step - from there an add to it names G' and the adder adds there too before
 *              returning (filter/pop.c), so no add of the rotation is missed by G';
 *           3. the drained hashes added to G';
 *           4. the central config flipped to G' (one step, checking the lease): handles that read
 *              G' from here on query it; a query that read a forward G partition keeps its answer
 *              only if the config read after it still names G (pop.c) - so no answer comes from G
 *              once G' is live, and every item G' lacks was added after the query began;
 *           5. G's keys deleted and its record dropped (a failure here leaves them listed in the
 *              config for the next rotation to delete).
 *   abort   before the flip: marks and forwards removed from G, G' deleted, the lease given back.
 *
 * A rotator that dies: before the flip, G stays live and whole (marks and stages expire with the
 * lease; forwards stay, costing queries one config read, until the next rotation); after it, G' is
 * live and G's keys are deleted by the next rotation (or a delete of the filter).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rotation/rotation.h"

static atomic_int die_at;

void bgi_prot_fault_die_at(int point) { atomic_store(&die_at, point); }

void bgi_prot_maybe_die(int point) {
  if (atomic_load(&die_at) == point) raise(SIGKILL);
}

static atomic_int lose_flip;

void bgi_prot_fault_lose_flip(int mode) { atomic_store(&lose_flip, mode); }

/* The control: a lost flip answer taken at its word (neither commit nor abort asks the config). */
static int flip_unchecked(void) { return atomic_load(&lose_flip) == BGI_PROT_FLIP_LOST_UNCHECKED; }

static void set_phase(bgi_prot *pr, int phase) {
  /* under the keeper's lock: a renewal reads the phase once and renews what it names */
  pthread_mutex_lock(&pr->mu);
  atomic_store(&pr->phase, phase);
  pthread_mutex_unlock(&pr->mu);
}


/* The live generation's record, as the config says after our begin step. */
static int read_config(bg_rotation *r, bgi_pconf *conf, bgi_err *err) {
  bgi_pconf_load ld;
  int st = bgi_pconf_read(r->f, &ld, err);
  if (st != BG_OK) return st;
  if (ld.kind != BGI_KIND_PARTITIONED || ld.conf.live.gen != r->part->live.gen)
    return bgi_err_set(err, BG_ECONFIG, "rotation: the partitioned filter \"%s\" changed under it; rotate again",
                       r->f->name.s);
  *conf = ld.conf;
  return BG_OK;
}

static int begin(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  snprintf(pr->mark, sizeof pr->mark, "%s:%lld", r->token, (long long)r->guarded_ttl_ms);
  int st = bgi_leased_wait(r, bgi_prot_step_begin, err);
  if (st != BG_OK) return st;
  bgi_pconf conf;
  st = read_config(r, &conf, err);
  if (st == BG_OK) {
    pr->live = conf.live;
    if (pr->in_place) pr->next = (bgi_pgen){.gen = pr->live.gen, .parts = pr->live.parts, .cfg = pr->live.cfg,
                                            .n = r->n, .fpp = r->fpp_value};
    /* what dead rotations and failed deletes left */
    for (uint32_t i = 0; i < conf.nsweep && st == BG_OK; i++) st = bgi_prot_delete_gen(r->f, &conf.sweep[i], err);
  }
  if (st == BG_OK && (bgi_pbuild_init(&pr->build, &pr->next) != BG_OK ||
                      !(pr->written = calloc(pr->next.parts, sizeof *pr->written))))
    st = bgi_err_set(err, BG_ENOMEM, "out of memory for a %u-partition generation of %llu bits each", pr->next.parts,
                     (unsigned long long)bgi_cfg_size(pr->next.cfg));
  /* in place (plocked.c) the partitions to write are the live ones: nothing to stage */
  if (pr->in_place) atomic_store(&pr->phase, BGI_PROT_PERSISTED);
  for (uint32_t i = 0; i < pr->next.parts && st == BG_OK && !pr->in_place; i++) st = bgi_prot_step_stage(r, i, err);
  for (uint32_t i = 0; i < pr->live.parts && st == BG_OK; i++) st = bgi_prot_step_mark(r, i, err);
  if (st == BG_OK && bgi_lease_start(r) != BG_OK) st = bgi_err_set(err, BG_ENOMEM, "cannot start the lease renewal thread");
  if (st != BG_OK) {
    r->ops->abort(r, &(bgi_err){0});   /* this strategy's undo: a locked one's deletes nothing */
    return st;
  }
  bgi_prot_maybe_die(BGI_PROT_DIE_BEGUN);
  return BG_OK;
}

int bgi_pswap_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n, bgi_err *err) {
  (void)err;
  bgi_pbuild_add(&r->part->build, items, lens, n, (int)r->opts.rotate_threads, (int)r->opts.rotate_nice);
  r->items += n;
  return BG_OK;
}

/* Bytes of a partition up to its last non-zero one. */
static size_t used_len(const uint8_t *p, size_t len) {
  while (len && !p[len - 1]) len--;
  return len;
}

static int upload(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  size_t chunk = (size_t)r->opts.rotate_chunk_bytes, pbytes = pr->build.pbytes;
  r->upload_total = 0;
  for (uint32_t i = 0; i < pr->next.parts; i++) r->upload_total += used_len(pr->build.bytes + i * pbytes, pbytes);
  int st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err);
  for (uint32_t i = 0; i < pr->next.parts && st == BG_OK; i++) {
    const uint8_t *part = pr->build.bytes + (size_t)i * pbytes;
    size_t used = used_len(part, pbytes);
    for (size_t off = 0; off < used && st == BG_OK; off += chunk) {
      size_t len = used - off < chunk ? used - off : chunk;
      const uint8_t *p = part + off;
      /* SETRANGE zero-fills gaps: all-zero chunks need not travel (the stage starts empty) */
      if (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0) continue;
      if ((st = bgi_prot_step_write(r, i, off, p, len, err)) == BG_OK) r->bytes_uploaded += len;
    }
    if (st == BG_OK && (st = bgi_rot_check_active(r, "upload", err)) == BG_OK) {
      r->upload_pos += used;
      st = bgi_rot_report(r, BG_PHASE_UPLOADING, 0, err);
    }
    if (i == pr->next.parts / 2) bgi_prot_maybe_die(BGI_PROT_DIE_UPLOADING);
  }
  return st;
}

/* The hashes drained from G's deltas, added to G' (only G': a partition of it missing fails). */
static int apply_delta(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  if (!pr->ndelta) return BG_OK;
  bgi_pop_task *pt = malloc(sizeof *pt);
  if (!pt) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  size_t added = 0, done = 0;
  bgi_pop_task_hashes(pt, r->f, &pr->next, 0, (const uint64_t(*)[2])pr->delta, pr->ndelta, &added, &done);
  int st = bgi_task_run_with(&pt->t, &bgi_req_executor, err);
  bgi_pop_task_free(pt);
  free(pt);
  return st;
}

/* After a flip that failed on the way (a timeout, a lost connection): the config says whether it
 * ran. */
static int flipped_anyway(bg_rotation *r) {
  bgi_pconf_load ld;
  bgi_err ignored = {0};
  return !flip_unchecked() && bgi_pconf_read(r->f, &ld, &ignored) == BG_OK && ld.kind == BGI_KIND_PARTITIONED &&
         ld.conf.live.gen == r->part->next.gen;
}

static int commit(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  int st = upload(r, err);
  if (st == BG_OK) {
    set_phase(pr, BGI_PROT_PERSISTED);
    for (uint32_t i = 0; i < pr->next.parts && st == BG_OK; i++) st = bgi_prot_step_persist(r, i, err);
  }
  if (st == BG_OK) st = bgi_rot_report(r, BG_PHASE_COMMITTING, 1, err);
  if (st == BG_OK) {
    set_phase(pr, BGI_PROT_DRAINING);
    for (uint32_t i = 0; i < pr->live.parts && st == BG_OK; i++) {
      st = bgi_prot_step_drain(r, i, err);
      if (i == pr->live.parts / 2) bgi_prot_maybe_die(BGI_PROT_DIE_FORWARDING);
    }
  }
  if (st == BG_OK) st = apply_delta(r, err);
  int64_t config_ttl = -1;
  if (st == BG_OK) {
    st = bgi_prot_step_flip(r, &config_ttl, err);
    if (st == BG_OK && atomic_load(&lose_flip))
      st = bgi_err_set(err, BG_ECONN, "commit: the connection was lost before the flip's answer (a test's fault)");
    if (st != BG_OK && st != BG_EROTATING && st != BG_ECONFIG && flipped_anyway(r)) {
      st = BG_OK;   /* the step ran but its answer was lost */
      bgi_err_clear(err);
    }
  }
  if (st != BG_OK) return st;
  bgi_prot_maybe_die(BGI_PROT_DIE_FLIPPED);
  bgi_lease_stop(r);
  bgi_pconf_set(r->f, &(bgi_pconf){.live = pr->next});
  /* the rest is housekeeping: what it leaves stays listed in the config for the next rotation */
  bgi_err ignored = {0};
  if (config_ttl > 0) bgi_prot_sweep(r->f, &pr->next, BGI_PSWEEP_EXPIRE, config_ttl, &ignored);
  bgi_prot_delete_gen(r->f, &pr->live, &ignored);
  return BG_OK;
}

static void abort_(bg_rotation *r, bgi_err *err) {
  bgi_prot *pr = r->part;
  bgi_lease_stop(r);
  if (!pr->next.gen) return;   /* the begin step never ran */
  /* the config first: a flip whose answer was lost made the built generation live, and then it
   * all stays; else its record goes, so adds stop forwarding to it */
  int live = 0, st = bgi_prot_step_release(r, &live, err);
  if (st != BG_OK || (live && !flip_unchecked())) return;
  for (uint32_t i = 0; i < pr->live.parts; i++) {
    bgi_err one = {0};
    if (bgi_prot_step_unmark(r, i, &one) != BG_OK && st == BG_OK) st = (*err = one).status;
  }
  bgi_err one = {0};
  /* never the live generation (in place, next is the live one: plocked.c has its own abort) */
  if (pr->next.gen != pr->live.gen && bgi_prot_sweep(r->f, &pr->next, BGI_PSWEEP_DELETE, 0, &one) != BG_OK &&
      st == BG_OK)
    *err = one;
}

const bgi_rot_ops bgi_rot_pswap = {.name = "swap", .begin = begin, .add = bgi_pswap_add, .commit = commit, .abort = abort_};

/* ---- the rotation's state ------------------------------------------------------------------ */

int bgi_prot_new(bg_rotation *r, const bgi_pgen *live, int64_t parts, bgi_err *err) {
  bgi_prot *pr = calloc(1, sizeof *pr);
  if (!pr) return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
  r->part = pr;
  pr->live = *live;
  pthread_mutex_init(&pr->mu, NULL);
  atomic_init(&pr->phase, BGI_PROT_BUILDING);
  bgi_pgeom geo;
  int st = bgi_partition_geometry(r->n, r->fpp_value, parts ? parts : live->parts, &geo, err);
  if (st != BG_OK) {
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return bgi_err_set(err, st, "rotation: %s", why);
  }
  /* its number: the begin step hands it out */
  pr->next = (bgi_pgen){.parts = geo.parts, .cfg = bgi_cfg_pack(geo.psize, geo.k), .n = r->n, .fpp = r->fpp_value};
  pr->keycap = 8 * BGI_PKEY_MAX(r->f->name.len);
  if (!(pr->keybuf = malloc(pr->keycap))) return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
  return BG_OK;
}

void bgi_prot_free(bg_rotation *r) {
  bgi_prot *pr = r->part;
  if (!pr) return;
  bgi_pbuild_free(&pr->build);
  free(pr->written);
  free(pr->delta);
  free(pr->keybuf);
  pthread_mutex_destroy(&pr->mu);
  free(pr);
  r->part = NULL;
}
