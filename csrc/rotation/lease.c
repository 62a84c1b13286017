/*
 * The lease keeper: a periodic worker (common/worker.h) per SWAP or LOCKED rotation renews the
 * lease every third of its length, so a rotator that is alive keeps it however long the build
 * takes, and one that died loses it within a lease. Renewal also pushes back the staging keys'
 * TTL (to max(staging TTL, lease): they outlive the lease, rotation.h). A renewal that failed (a
 * timeout, a lost connection) is tried again after a twelfth of the lease rather than a full
 * third, and no renewal waits for its answer longer than a third of the lease (nor past the
 * lease's end), whatever BG_OPT_COMMAND_TIMEOUT_MS is: a lost answer then leaves time for further
 * tries instead of waiting out a command timeout as long as the lease.
 */
#include <string.h>

#include "common/clock.h"
#include "rotation/rotation.h"

/* A renewal sent after the lease's end still gets this long (it will find the lease gone, or the
 * server's clock slower than ours). */
#define LATE_TRY_MS 10

static int64_t period_ms(const bg_rotation *r) { return r->opts.rotate_lease_ms / 3; }

/* One renewal; returns the wait before the next. */
static int64_t renew_round(void *arg) {
  bg_rotation *r = arg;
  bgi_lease *l = &r->lease;
  int64_t period = period_ms(r);
  bgi_err err = {0};
  uint64_t sent = bgi_now_ns();
  /* a renewal waits a third of the lease at most (then a retry still has time) and never past
   * the lease's end, where an answer is of no use */
  uint64_t deadline = bgi_after_ms(sent, period);
  if (deadline > l->until_ns) deadline = l->until_ns;
  if (deadline < bgi_after_ms(sent, LATE_TRY_MS)) deadline = bgi_after_ms(sent, LATE_TRY_MS);
  int st = bgi_rot_step_renew(r, deadline, &err);
  if (st == BG_OK && r->part) {
    pthread_mutex_lock(&r->part->mu);
    st = bgi_prot_renew(r, deadline, &err);
    pthread_mutex_unlock(&r->part->mu);
  }
  if (st == BG_OK) {
    l->until_ns = bgi_after_ms(sent, r->opts.rotate_lease_ms);
    l->gone_by_ns = bgi_deadline_in_ms(r->opts.rotate_lease_ms);   /* the server ran it before its answer came */
  }
  if (st == BG_EROTATING) {
    memcpy(l->lost_why, err.msg, sizeof l->lost_why - 1);
    atomic_store(&l->lost, 1);
    bgi_obs *o = &r->f->client->obs;
    if (bgi_obs_on(o))
      bgi_obs_emit(o, BG_EVENT_LOCK_LOST, r->f->name.s, NULL, "the rotation lease of filter \"%.200s\" was lost: %s",
                   r->f->name.s, err.msg);
    return BGI_WORKER_EXIT;
  }
  /* a failed round trip is retried sooner: the lease is still running out meanwhile */
  return st == BG_OK ? period : (period / 4 > 1 ? period / 4 : 1);
}

int bgi_lease_start(bg_rotation *r) {
  bgi_lease *l = &r->lease;
  atomic_init(&l->lost, 0);
  l->until_ns = l->gone_by_ns = bgi_deadline_in_ms(r->opts.rotate_lease_ms);   /* begin set it just before */
  return bgi_worker_start(&l->worker, period_ms(r), renew_round, r);
}

void bgi_lease_stop(bg_rotation *r) { bgi_worker_stop(&r->lease.worker); }
