/*
 * Internal: noticing fork() (DESIGN.md: nothing inherited across fork() is ever written or read
 * by the child).
 *
 * A child process starts with a copy of every handle: the parent's sockets (the same open file
 * descriptions: a byte either process writes goes to the parent's server connection, a reply
 * either one reads is taken from the other), epoll, eventfd and timerfd instances, mutexes that
 * threads of the parent held at that moment (those threads are not in the child: the mutexes stay
 * locked), and records of threads that do not exist. So every handle that keeps such state notes
 * the process's fork generation when it makes it, and compares before using it: a different
 * generation means this is a child of the process that made it, and the handle first lets go of
 * what it inherited - closing its copies of the sockets without writing a byte (no QUIT, no TLS
 * close_notify: the parent's connections go on), making its locks and fds anew - and makes new
 * connections when next needed.
 *
 * The generation moves in a pthread_atfork child handler (registered by the first handle that
 * notes it), so the check on a hot path is one relaxed atomic load and a compare, not a getpid()
 * system call per call. The parent's generation never moves; a grandchild's moves again.
 */
#ifndef BG_INTERNAL_FORK_H
#define BG_INTERNAL_FORK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

extern _Atomic uint64_t bgi_fork_generation;

/* The generation now, for a handle that makes state to check later (registers the handler on
 * the first call). */
uint64_t bgi_fork_gen_note(void);

/* 1 when gen (a handle's note) is not this process's: the handle was made before a fork. */
static inline int bgi_forked_since(uint64_t gen) {
  return __builtin_expect(atomic_load_explicit(&bgi_fork_generation, memory_order_relaxed) != gen, 0);
}

/* Held by whoever lets go of a handle's inherited state in a child, so that of several threads
 * of the child that find the same handle inherited, one does it and the others wait for it. A
 * plain mutex made anew in the child (no thread of the parent holds it there). */
void bgi_fork_lock(void);
void bgi_fork_unlock(void);

/* Makes a mutex (or condition variable) anew in a child: the one inherited may be held by a
 * thread of the parent, which is not in the child. Never on one a thread of the child uses. */
void bgi_fork_remake_mutex(pthread_mutex_t *mu);

/* Tests only (the fork tests' negative control, never set otherwise): the generation stops
 * moving, so nothing notices a fork and a child uses what it inherited, as before this rule. The
 * bindings' tests, which cannot call it, start a process with BG_TEST_FORK_UNDETECTED=1 instead
 * (read when the first handle notes the generation). */
void bgi_fork_fault_no_detect(int on);

#endif
