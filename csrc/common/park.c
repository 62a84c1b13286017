#include "common/park.h"

#include <errno.h>
#include <sched.h>

#include "common/clock.h"
#include "common/cond.h"
#include "common/platform.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

/* The spin: 1 if woken within spin_ns. sched_yield lets the threads this one waits for (the
 * reader, the server on a small machine) have the CPU. */
static int spin_for_wake(bgi_parker *p, unsigned ticket, uint64_t deadline_ns, uint64_t spin_ns) {
  if (!spin_ns) return bgi_park_ticket(p) != ticket;
  uint64_t now = bgi_now_ns(), until = now + spin_ns < deadline_ns ? now + spin_ns : deadline_ns;
  for (;;) {
    if (bgi_park_ticket(p) != ticket) return 1;
    if (bgi_now_ns() >= until) return 0;
    sched_yield();
  }
}

#ifdef __linux__

void bgi_park_init(bgi_parker *p) {
  atomic_init(&p->word, 0);
  atomic_init(&p->sleeping, 0);
}

void bgi_park_destroy(bgi_parker *p) { (void)p; }

int bgi_park_wait(bgi_parker *p, unsigned ticket, uint64_t deadline_ns, uint64_t spin_ns) {
  if (spin_for_wake(p, ticket, deadline_ns, spin_ns)) return 0;
  /* sleeping before the last look at the word, the waker's add before its look at sleeping
   * (both sequentially consistent): one of the two sees the other */
  atomic_store(&p->sleeping, 1);
  int r = 0;
  while (bgi_park_ticket(p) == ticket) {
    if (bgi_now_ns() >= deadline_ns) {
      r = ETIMEDOUT;
      break;
    }
    /* FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC (the deadlines' clock); the
     * kernel sleeps only if the word still holds the ticket */
    struct timespec ts = bgi_timespec(deadline_ns);
    syscall(SYS_futex, &p->word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, ticket, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
  }
  atomic_store(&p->sleeping, 0);
  return r;
}

void bgi_park_wake(bgi_parker *p) {
  atomic_fetch_add(&p->word, 1);
  if (atomic_load(&p->sleeping)) syscall(SYS_futex, &p->word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

#else

void bgi_park_init(bgi_parker *p) {
  atomic_init(&p->word, 0);
  atomic_init(&p->sleeping, 0);
  pthread_mutex_init(&p->mu, NULL);
  bgi_cond_init_monotonic(&p->cv);
}

void bgi_park_destroy(bgi_parker *p) {
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
}

int bgi_park_wait(bgi_parker *p, unsigned ticket, uint64_t deadline_ns, uint64_t spin_ns) {
  if (spin_for_wake(p, ticket, deadline_ns, spin_ns)) return 0;
  int r = 0;
  pthread_mutex_lock(&p->mu);
  while (bgi_park_ticket(p) == ticket && r != ETIMEDOUT) r = bgi_cond_wait_until(&p->cv, &p->mu, deadline_ns);
  pthread_mutex_unlock(&p->mu);
  return bgi_park_ticket(p) != ticket ? 0 : r;
}

void bgi_park_wake(bgi_parker *p) {
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->word, 1);
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

#endif
