/*
 * The lease keeper: one thread per SWAP rotation renews the lease every third of its length, so
 * a rotator that is alive keeps it however long the build takes, and one that died loses it
 * within a lease. Renewal also pushes back the staging keys' TTL (to max(staging TTL, lease): they
 * outlive the lease, rotation.h). A renewal that failed (a timeout, a lost connection) is tried
 * again after a twelfth of the lease rather than a full third, and no renewal waits for its answer
 * longer than a third of the lease (nor past the lease's end), whatever BG_OPT_COMMAND_TIMEOUT_MS
 * is: a lost answer then leaves time for further tries instead of waiting out a command timeout
 * as long as the lease.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/cond.h"
#include "rotation/rotation.h"

static void *keeper(void *arg) {
  bg_rotation *r = arg;
  bgi_lease *l = &r->lease;
  int64_t period_ms = r->opts.rotate_lease_ms / 3, wait_ms = period_ms;
  uint64_t lease_ns = (uint64_t)r->opts.rotate_lease_ms * 1000000u;
  uint64_t lease_until = bgi_now_ns() + lease_ns;   /* begin set it just before */
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(wait_ms / 1000);
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT) {}
    if (l->stop) break;
    pthread_mutex_unlock(&l->mu);
    bgi_err err = {0};
    uint64_t sent = bgi_now_ns();
    /* a renewal waits a third of the lease at most (then a retry still has time) and never past
     * the lease's end, where an answer is of no use; one sent after it still gets a short try (it
     * will find the lease gone, or the server's clock slower than ours) */
    uint64_t deadline = sent + (uint64_t)period_ms * 1000000u;
    if (deadline > lease_until) deadline = lease_until;
    if (deadline < sent + 10000000u) deadline = sent + 10000000u;
    int st = bgi_rot_step_renew(r, deadline, &err);
    if (st == BG_OK) lease_until = sent + lease_ns;
    pthread_mutex_lock(&l->mu);
    if (st == BG_EROTATING) {
      memcpy(l->lost_why, err.msg, sizeof l->lost_why - 1);
      atomic_store(&l->lost, 1);
      break;
    }
    /* a failed round trip is retried sooner: the lease is still running out meanwhile */
    wait_ms = st == BG_OK ? period_ms : (period_ms / 4 > 1 ? period_ms / 4 : 1);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

int bgi_lease_start(bg_rotation *r) {
  bgi_lease *l = &r->lease;
  pthread_mutex_init(&l->mu, NULL);
  bgi_cond_init_monotonic(&l->cv);
  l->stop = 0;
  atomic_init(&l->lost, 0);
  if (pthread_create(&l->thread, NULL, keeper, r) != 0) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    return BG_ENOMEM;
  }
  l->running = 1;
  return BG_OK;
}

void bgi_lease_stop(bg_rotation *r) {
  bgi_lease *l = &r->lease;
  if (!l->running) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  l->running = 0;
}
