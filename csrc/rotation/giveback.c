/*
 * A lease that could not be given back. An abort after a failure (a commit that timed out, a
 * server that stalls, a cancelled call) may fail too: the server then still holds the lease, and
 * nobody would renew or release it, so every rotation of the filter got BG_EROTATING until it ran
 * out (30 s by default) - the live process that left it included. Two things end that sooner:
 *
 *  - the give-back goes on in the background: a thread of its own tries the abort step again,
 *    with a growing pause (BACKOFF_MIN_MS .. BACKOFF_MAX_MS), until it succeeds or the lease would
 *    have run out anyway. It keeps what it needs (key names, token) and a reference to the client,
 *    so the rotation handle, the filter and the caller's reference to the client may all go first.
 *    A LOCKED rotation whose write lock could not be released hands over its lock handle too: the
 *    same thread releases the lock (bgi_lock_release_all) once the lease is back.
 *  - the same owner takes it over: a begin of this process that finds the lease held by a token
 *    this process left behind releases it (the same abort step, checked against that token) and
 *    begins at once. The owner is the process: only a token it drew itself and recorded here is
 *    taken over - another process's lease, or a live rotation of this one, is never touched.
 *
 * Every try is a token-checked step (steps.c; the lock's holder id), so a give-back that comes
 * after the lease ran out, or after another rotator took the filter, changes nothing of theirs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wait.h"
#include "lock/lock.h"
#include "rotation/rotation.h"

#define BACKOFF_MIN_MS 20
#define BACKOFF_MAX_MS 1000
/* left leases of one filter a begin looks at (more than one only after repeated failures) */
#define TAKEOVER_MAX 8

typedef struct job {
  bgi_lease_ref ref;     /* its strings point into names */
  char token[33];
  atomic_int lease_done; /* the lease is back (or was never left): by the thread or a take-over */
  uint64_t lease_until_ns;
  bg_lock *lock;         /* LOCKED: the write lock's handle, still holding (or NULL) */
  uint64_t lock_until_ns;
  struct job *next;
  char names[];          /* the four key names, each NUL-terminated */
} job;

static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static job *jobs;                     /* what this process left and still tries to give back */
static _Atomic int fault_mask;        /* tests only (rotation.h) */

void bgi_rotation_fault_giveback(int mask) { atomic_store(&fault_mask, mask); }

/* fork: the child is another owner - the parent's left leases are not its to take over, and their
 * threads are not in the child (the records stay the parent's: forgotten, not freed) */
static void fork_prepare(void) { pthread_mutex_lock(&jobs_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&jobs_mu); }
static void fork_child(void) {
  jobs = NULL;
  pthread_mutex_unlock(&jobs_mu);
}
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void at_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void unlink_job(job *j) {
  pthread_mutex_lock(&jobs_mu);
  for (job **pp = &jobs; *pp; pp = &(*pp)->next)
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  pthread_mutex_unlock(&jobs_mu);
}

/* A try waits its command timeout at most, and never past until_ns. */
static uint64_t try_deadline(const job *j, uint64_t until_ns) {
  uint64_t d = bgi_after_ms(bgi_now_ns(), j->ref.client->ep.command_timeout_ms);
  return d < until_ns ? d : until_ns;
}

static void *give_back(void *arg) {
  job *j = arg;
  int64_t pause_ms = BACKOFF_MIN_MS;
  for (;;) {
    uint64_t now = bgi_now_ns();
    bgi_err err = {0};
    if (!atomic_load(&j->lease_done) &&
        (now >= j->lease_until_ns || bgi_rot_step_release(&j->ref, try_deadline(j, j->lease_until_ns), NULL, &err) == BG_OK))
      atomic_store(&j->lease_done, 1);
    /* the lock after the lease: a rotation of another process then finds the filter free at once */
    if (atomic_load(&j->lease_done) && j->lock &&
        (now >= j->lock_until_ns || bgi_lock_release_all(j->lock, try_deadline(j, j->lock_until_ns), &err) == BG_OK)) {
      bg_lock_close(j->lock);
      j->lock = NULL;
    }
    if (atomic_load(&j->lease_done) && !j->lock) break;
    uint64_t until = atomic_load(&j->lease_done) ? j->lock_until_ns : j->lease_until_ns;
    if (j->lock && j->lock_until_ns > until) until = j->lock_until_ns;
    uint64_t wake = bgi_after_ms(bgi_now_ns(), pause_ms);
    bgi_sleep_until(wake < until ? wake : until);   /* no current call here: not cancellable */
    pause_ms = pause_ms * 2 < BACKOFF_MAX_MS ? pause_ms * 2 : BACKOFF_MAX_MS;
  }
  unlink_job(j);
  bgi_client_unref(j->ref.client);
  free(j);
  return NULL;
}

int bgi_giveback_start(bg_rotation *r, int lease_left) {
  bgi_lease_ref ref;
  bgi_rot_lease_ref(r, &ref);
  size_t total = 0;
  for (int i = 0; i < 4; i++) total += ref.lens[i] + 1;
  job *j = calloc(1, sizeof *j + total);
  if (!j) return BG_ENOMEM;
  char *p = j->names;
  for (int i = 0; i < 4; i++) {
    memcpy(p, ref.keys[i], ref.lens[i]);
    p[ref.lens[i]] = 0;
    ref.keys[i] = p;
    p += ref.lens[i] + 1;
  }
  memcpy(j->token, r->token, sizeof j->token);
  ref.token = j->token;
  j->ref = ref;
  atomic_init(&j->lease_done, !lease_left);
  j->lease_until_ns = r->lease.gone_by_ns;
  if (r->lock_left) {
    /* its holds run out a lease after their last renewal, which stops now */
    j->lock = r->lock, r->lock = NULL, r->lock_left = 0;
    j->lock_until_ns = bgi_deadline_in_ms(bgi_lock_lease_ms(j->lock));
  }
  bgi_client_ref(ref.client);
  pthread_once(&fork_once, at_fork);
  pthread_mutex_lock(&jobs_mu);
  j->next = jobs;
  jobs = j;
  pthread_mutex_unlock(&jobs_mu);
  /* the tests' fault: the job is recorded (a begin may take its lease over), nothing tries */
  if (atomic_load(&fault_mask) & BGI_FAULT_NO_GIVEBACK) return BG_OK;
  pthread_t t;
  pthread_attr_t attr;
  /* detached: it ends by itself (all given back, or run out), and nobody joins it */
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, give_back, j);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    unlink_job(j);
    if (j->lock) bg_lock_close(j->lock);   /* one more try, as a plain close would */
    bgi_client_unref(ref.client);
    free(j);
    return BG_ENOMEM;
  }
  return BG_OK;
}

/* Marks the lease of token given back (by a take-over): the thread stops trying it. */
static void lease_given_back(const char *token) {
  pthread_mutex_lock(&jobs_mu);
  for (job *j = jobs; j; j = j->next)
    if (!strcmp(j->token, token)) atomic_store(&j->lease_done, 1);
  pthread_mutex_unlock(&jobs_mu);
}

int bgi_giveback_take_over(bg_rotation *r, bgi_err *err) {
  if (atomic_load(&fault_mask) & BGI_FAULT_NO_TAKEOVER) return 0;
  const bgi_key *lease = &r->f->rotation_key;
  /* the tokens this process left on a lease of that name (copied: a job may end meanwhile); the
   * same name on another server is tried too, and its token found not to hold the lease here */
  char tokens[TAKEOVER_MAX][33];
  int n = 0;
  uint64_t now = bgi_now_ns();
  pthread_mutex_lock(&jobs_mu);
  for (job *j = jobs; j && n < TAKEOVER_MAX; j = j->next)
    if (!atomic_load(&j->lease_done) && now < j->lease_until_ns && j->ref.lens[0] == lease->len &&
        !memcmp(j->ref.keys[0], lease->s, lease->len))
      memcpy(tokens[n++], j->token, sizeof tokens[0]);
  pthread_mutex_unlock(&jobs_mu);
  for (int i = 0; i < n; i++) {
    /* its staging key is named after its token, as ours after ours */
    bgi_key staging = {0};
    char suffix[40];
    snprintf(suffix, sizeof suffix, BGI_KEY_NEXT "%.32s", tokens[i]);
    if (bgi_key_suffix(&staging, r->f->name.s, r->f->name.len, suffix) != BG_OK)
      return bgi_err_set(err, BG_ENOMEM, "rotation: out of memory");
    bgi_lease_ref ref;
    bgi_rot_lease_ref(r, &ref);
    ref.token = tokens[i];
    ref.keys[1] = staging.s, ref.lens[1] = staging.len;
    int ours = 0;
    int st = bgi_rot_step_release(&ref, 0, &ours, err);
    bgi_key_free(&staging);
    if (st != BG_OK) return st;   /* its thread goes on trying */
    if (ours) {
      lease_given_back(tokens[i]);
      return 1;
    }
  }
  return 0;
}
