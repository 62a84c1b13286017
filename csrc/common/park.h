/*
 * Internal: a parking spot for one waiting thread, woken by another without either holding a
 * lock for it. Why not a condition variable: a thread woken from pthread_cond_wait must take the
 * mutex again (glibc then marks it contended, so its unlock is one more system call), and the
 * thread that woke it usually still holds that mutex or takes it right back. A multiplexed call
 * (redis/mux.c) is woken once per query; that hand-over was a third of its system calls.
 *
 *   waiter (under its own lock):  t = bgi_park_ticket(p); ...unlock...; bgi_park_wait(p, t, deadline, spin)
 *   waker (any time after):       bgi_park_wake(p)
 *
 * A wake between the ticket and the wait is not lost (the wait returns at once). The waiter may
 * first spin (yielding the CPU to whoever else can run) for a bounded time before it sleeps: a
 * reply due in tens of microseconds then costs no sleep and no wake-up system call, which on a
 * virtual machine cost more than the reply's own round trip. Linux: a futex word; elsewhere a
 * mutex and a condition variable of its own.
 */
#ifndef BG_INTERNAL_PARK_H
#define BG_INTERNAL_PARK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct bgi_parker {
  atomic_uint word;     /* moves on every wake */
  atomic_int sleeping;  /* the waiter is (about to be) asleep: a wake must make the system call */
#ifndef __linux__
  pthread_mutex_t mu;
  pthread_cond_t cv;
#endif
} bgi_parker;

void bgi_park_init(bgi_parker *p);
void bgi_park_destroy(bgi_parker *p);
static inline unsigned bgi_park_ticket(bgi_parker *p) { return atomic_load(&p->word); }
/* Until a wake after `ticket`, or the monotonic deadline_ns, spinning at most spin_ns first:
 * 0, or ETIMEDOUT. May return 0 spuriously (a wake meant for an earlier ticket). */
int bgi_park_wait(bgi_parker *p, unsigned ticket, uint64_t deadline_ns, uint64_t spin_ns);
void bgi_park_wake(bgi_parker *p);

#endif
