/*
 * The queue's readiness on macOS and the BSDs (poller.h): a kqueue holding the wake's read end
 * (a socket pair's, EVFILT_READ), one EVFILT_TIMER for the earliest timer, and the queue's sockets (EVFILT_READ and
 * EVFILT_WRITE, one filter per direction). A kqueue descriptor is pollable on these systems (it
 * is readable while events are pending), so the host sees one fd, as with epoll.
 *
 * A kqueue is not inherited by fork (the child's descriptor is closed, or unusable): after a fork
 * a fresh one takes its number.
 *
 * The inherited number is free in the child then, so the fresh one (or the wake's socket pair,
 * made first) may get it itself: bgi_poller_renumber keeps it.
 *
 * Linux test builds (-DBG_TEST_LIBKQUEUE=ON) run this file on libkqueue, whose kqueue fd is a
 * pipe's write end (not pollable): docs/building.md, the kqueue backend on Linux.
 */
#include "client/poller.h"

#if defined(BGI_HAVE_KQUEUE)

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"

/* the tag of the wake (a socket's tag is its connection); the timer's ident */
static char wake_tag;
#define TIMER_IDENT 1

static int add_wake(bgi_poller *p) {
  struct kevent kev;
  EV_SET(&kev, p->wake_rd, EVFILT_READ, EV_ADD, 0, 0, &wake_tag);
  return kevent(p->fd, &kev, 1, NULL, 0, NULL);
}

static int new_kqueue(void) {
  int fd = kqueue();
  if (fd >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int bgi_poller_kqueue_open(bgi_poller *p) {
  int fds[2];
  if (bgi_poller_wake_channel(fds) != 0) return -1;
  p->wake_rd = fds[0];
  p->wake_wr = fds[1];
  p->fd = new_kqueue();
  if (p->fd < 0) return -1;
  return add_wake(p);
}

void bgi_poller_kqueue_after_fork(bgi_poller *p) {
  bgi_poller_wake_channel_renew(p);
  p->fd = bgi_poller_renumber(p->fd, new_kqueue());
  if (p->fd >= 0 && p->wake_rd >= 0) (void)add_wake(p);
}

void bgi_poller_kqueue_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events) {
  struct kevent kev[2];
  int n = 0;
  /* each direction that changes; a socket closed since is gone from the kqueue already (ENOENT
   * then: nothing to do) */
  if ((old ^ events) & BGI_PEV_IN)
    EV_SET(&kev[n++], fd, EVFILT_READ, events & BGI_PEV_IN ? EV_ADD : EV_DELETE, 0, 0, tag);
  if ((old ^ events) & BGI_PEV_OUT)
    EV_SET(&kev[n++], fd, EVFILT_WRITE, events & BGI_PEV_OUT ? EV_ADD : EV_DELETE, 0, 0, tag);
  /* the tag of a direction that stays is the same (a connection keeps its socket's registration) */
  if (n) (void)kevent(p->fd, kev, n, NULL, 0, NULL);
}

/* A one-shot relative timer: kqueue's timers count from now (the absolute form is not on every
 * BSD). Armed only when earlier than what it is armed for, as with epoll's timerfd. A timer due
 * already (the earliest can be due by the end of a round) gets the smallest period, never 0: what
 * a period of 0 does differs (at once on FreeBSD, never with libkqueue, which disarms its timerfd
 * then; test_poller), as epoll's timerfd is armed for 1 ns rather than 0, which disarms it. */
void bgi_poller_kqueue_arm(bgi_poller *p, uint64_t due_ns) {
  struct kevent kev;
  if (due_ns == UINT64_MAX) {
    EV_SET(&kev, TIMER_IDENT, EVFILT_TIMER, EV_DELETE, 0, 0, NULL);
  } else {
    uint64_t now = bgi_now_ns(), in_ns = due_ns > now ? due_ns - now : 0;
#if defined(NOTE_USECONDS)
    uint64_t n = (in_ns + 999) / 1000;
    EV_SET(&kev, TIMER_IDENT, EVFILT_TIMER, EV_ADD | EV_ONESHOT, NOTE_USECONDS, (intptr_t)(n ? n : 1), NULL);
#else
    uint64_t n = (in_ns + 999999) / 1000000;
    EV_SET(&kev, TIMER_IDENT, EVFILT_TIMER, EV_ADD | EV_ONESHOT, 0, (intptr_t)(n ? n : 1), NULL);
#endif
  }
  (void)kevent(p->fd, &kev, 1, NULL, 0, NULL);
  p->timer_due = due_ns;
}

int bgi_poller_kqueue_wait(bgi_poller *p, bgi_pevent *out, int max, int timeout_ms, unsigned *flags) {
  struct kevent ev[64];
  struct timespec ts, *tsp = NULL;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    tsp = &ts;
  }
  int n = kevent(p->fd, NULL, 0, ev, max < 64 ? max : 64, tsp);
  if (n < 0) return -1;
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (ev[i].filter == EVFILT_TIMER) {
      p->timer_due = UINT64_MAX;
      *flags |= BGI_POLLER_TIMED;
    } else if (ev[i].udata == (void *)&wake_tag) {
      bgi_poller_drain(p->wake_rd);
      *flags |= BGI_POLLER_WOKEN;
    } else if (ev[i].flags & EV_ERROR) {
      continue;   /* a registration that failed (a socket closed meanwhile) */
    } else {
      out[k].tag = (void *)ev[i].udata;
      out[k++].events = (ev[i].filter == EVFILT_READ ? BGI_PEV_IN : BGI_PEV_OUT) |
                        (ev[i].flags & EV_EOF ? BGI_PEV_ERR : 0);
    }
  }
  return k;
}

#endif
