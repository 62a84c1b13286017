/*
 * Internal: the queue's readiness (client/queue.c, client/pipes.c) behind one small interface, so the
 * queue's engine is the same on every platform. Three backends, each a file of its own:
 *
 *   epoll  (Linux, the default there; poller_epoll.c): the fd is an epoll instance holding an eventfd
 *          (the wake), a timerfd armed for the earliest timer, and the sockets. Pollable.
 *   kqueue (macOS and the BSDs, the default there; poller_kqueue.c): the fd is a kqueue holding the
 *          wake's read end (EVFILT_READ), an EVFILT_TIMER for the earliest timer and the sockets
 *          (EVFILT_READ / EVFILT_WRITE). A kqueue descriptor is pollable on those systems.
 *   poll   (everywhere; poller_poll.c, the portable reference): the wake and an array of pollfd
 *          for the sockets, waited on by poll(2) inside bg_queue_poll. The fd is the wake's read
 *          end: readable when completions wait, a cancel came or a name was resolved,
 *          NOT when a socket is ready or a timer is due - a host drives such a queue by calling
 *          bg_queue_poll with a timeout (docs/queue.md).
 *
 * The backend is chosen at bg_queue_open: the environment variable BG_QUEUE_POLLER (epoll, kqueue
 * or poll; the tests force poll with it), else the platform's default. A Linux test build with
 * -DBG_TEST_LIBKQUEUE=ON has kqueue too, on libkqueue (docs/building.md says what that leaves out).
 *
 * The wake is an eventfd (Linux) or a socket pair (elsewhere: a writer whose reader closed gets no
 * SIGPIPE, common/sock.h), whose write end another thread may write 8 bytes to (the name resolver,
 * redis/resolve.h; a discovery) and bgi_poller_wake writes to, async-signal-safely (bg_queue_cancel
 * may run in a signal handler). Why not EVFILT_USER on kqueue: kevent(2) is not async-signal-safe by
 * POSIX, and the resolver's thread needs a descriptor to write to anyway - one mechanism, not two.
 */
#ifndef BG_INTERNAL_POLLER_H
#define BG_INTERNAL_POLLER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/platform.h"

#define BGI_POLLER_DEFAULT 0
#define BGI_POLLER_EPOLL 1
#define BGI_POLLER_KQUEUE 2
#define BGI_POLLER_POLL 3

/* What a socket is watched for, and what a wait found. */
#define BGI_PEV_IN 1u
#define BGI_PEV_OUT 2u
#define BGI_PEV_ERR 4u   /* an error or a hang-up: a read finds out which */

/* bgi_poller_wait's flags: the wake fired (and was drained); the timer fired (it is disarmed). */
#define BGI_POLLER_WOKEN 1u
#define BGI_POLLER_TIMED 2u

typedef struct bgi_pevent {
  void *tag;
  uint32_t events;
} bgi_pevent;

typedef struct bgi_poller {
  int kind;
  int fd;               /* bg_queue_fd: the epoll or kqueue instance; poll: wake_rd */
  int wake_rd, wake_wr; /* the wake: an eventfd (both the same) or a socket pair */
  int tfd;              /* epoll: the timerfd; else -1 */
  uint64_t timer_due;   /* what the timer is armed for; UINT64_MAX: not armed */
  /* poll: the sockets watched (pfds[i] is tags[i]'s) */
  struct pollfd *pfds;
  void **tags;
  size_t n, cap;
} bgi_poller;

/* kind: BGI_POLLER_DEFAULT (BG_QUEUE_POLLER, else the platform's) or one of the backends. BG_OK,
 * or BG_EINVAL (a backend this build lacks, an unknown BG_QUEUE_POLLER) / BG_ENOMEM with err set. */
int bgi_poller_open(bgi_poller *p, int kind, bgi_err *err);
void bgi_poller_close(bgi_poller *p);
/* fork: fresh instances on the same fd numbers (queue.h: bgi_queue_after_fork), no socket watched. */
void bgi_poller_after_fork(bgi_poller *p);
/* fd is watched for events (0: no longer) instead of old (0: was not); tag comes back with them. */
void bgi_poller_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events);
/* Makes the wake fire (async-signal-safe). */
void bgi_poller_wake(bgi_poller *p);
/* The fd another thread writes 8 bytes to, to wake the queue. */
static inline int bgi_poller_wake_fd(const bgi_poller *p) { return p->wake_wr; }
/* Arms the timer for the monotonic due_ns (earlier than timer_due: the caller checks). No-op for
 * poll, whose waits are bounded by bg_queue_poll's own timeout. */
void bgi_poller_arm(bgi_poller *p, uint64_t due_ns);
/* Waits up to timeout_ms (-1: no limit, 0: a look) for socket events (into ev, at most max) and
 * the wake and timer (*flags). The number of socket events, or -1 with errno (EINTR). */
int bgi_poller_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags);
/* The backend's name (epoll, kqueue, poll). */
const char *bgi_poller_name(int kind);

/* ---- the backends (poller.c dispatches) ------------------------------------------------------ */

/* Shared by the backends: the wake's fds (non-blocking, close-on-exec; read end, write end): an
 * eventfd (both the same) on Linux, a socket pair elsewhere (so that a writer whose reader is gone
 * gets no SIGPIPE: common/sock.h); after a fork, fresh ones on the same numbers; draining. */
int bgi_poller_wake_channel(int fds[2]);
void bgi_poller_wake_channel_renew(bgi_poller *p);
void bgi_poller_drain(int fd);
/* fresh takes the number of inherited (fork); -1 when fresh is -1 or the dup fails. */
int bgi_poller_renumber(int inherited, int fresh);

int bgi_poller_epoll_open(bgi_poller *p);
void bgi_poller_epoll_after_fork(bgi_poller *p);
void bgi_poller_epoll_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events);
void bgi_poller_epoll_arm(bgi_poller *p, uint64_t due_ns);
int bgi_poller_epoll_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags);

int bgi_poller_kqueue_open(bgi_poller *p);
void bgi_poller_kqueue_after_fork(bgi_poller *p);
void bgi_poller_kqueue_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events);
void bgi_poller_kqueue_arm(bgi_poller *p, uint64_t due_ns);
int bgi_poller_kqueue_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags);

int bgi_poller_poll_open(bgi_poller *p);
void bgi_poller_poll_after_fork(bgi_poller *p);
void bgi_poller_poll_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events);
int bgi_poller_poll_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags);

#endif
