/*
 * The queue's readiness on Linux (poller.h): an epoll instance holding an eventfd (the wake), a
 * timerfd armed for the earliest timer (absolute, on CLOCK_MONOTONIC: the timers' clock), and the
 * queue's sockets. epoll fds are themselves pollable: the host sees one fd, readable whenever any
 * of them is.
 */
#include "client/poller.h"

#if defined(BGI_HAVE_EPOLL)

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

/* the tags of the wake and the timer (a socket's tag is its connection, never these) */
static char wake_tag, timer_tag;

static int add(int epfd, int fd, void *tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
  return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int bgi_poller_epoll_open(bgi_poller *p) {
  p->fd = epoll_create1(EPOLL_CLOEXEC);
  p->wake_rd = p->wake_wr = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (p->fd < 0 || p->wake_rd < 0 || p->tfd < 0) return -1;
  if (add(p->fd, p->wake_rd, &wake_tag) != 0 || add(p->fd, p->tfd, &timer_tag) != 0) return -1;
  return 0;
}

void bgi_poller_epoll_after_fork(bgi_poller *p) {
  p->fd = bgi_poller_renumber(p->fd, epoll_create1(EPOLL_CLOEXEC));
  p->wake_rd = p->wake_wr = bgi_poller_renumber(p->wake_rd, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  p->tfd = bgi_poller_renumber(p->tfd, timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (p->fd >= 0 && p->wake_rd >= 0) (void)add(p->fd, p->wake_rd, &wake_tag);
  if (p->fd >= 0 && p->tfd >= 0) (void)add(p->fd, p->tfd, &timer_tag);
}

void bgi_poller_epoll_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events) {
  if (!events) {
    epoll_ctl(p->fd, EPOLL_CTL_DEL, fd, NULL);
    return;
  }
  struct epoll_event ev = {.events = (events & BGI_PEV_IN ? EPOLLIN : 0) | (events & BGI_PEV_OUT ? EPOLLOUT : 0),
                           .data.ptr = tag};
  epoll_ctl(p->fd, old ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
}

/* Armed only when earlier than what it is armed for: a later one is re-armed by the poll its early
 * wake causes (one system call per earlier timer, not one per change of the earliest). */
void bgi_poller_epoll_arm(bgi_poller *p, uint64_t due_ns) {
  struct itimerspec its;
  memset(&its, 0, sizeof its);
  if (due_ns != UINT64_MAX) its.it_value = bgi_timespec(due_ns ? due_ns : 1);
  timerfd_settime(p->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  p->timer_due = due_ns;
}

int bgi_poller_epoll_wait(bgi_poller *p, bgi_pevent *out, int max, int timeout_ms, unsigned *flags) {
  struct epoll_event ev[64];
  int n = epoll_wait(p->fd, ev, max < 64 ? max : 64, timeout_ms);
  if (n < 0) return -1;
  int k = 0;
  for (int i = 0; i < n; i++) {
    void *tag = ev[i].data.ptr;
    if (tag == &wake_tag) {
      uint64_t v;
      ssize_t ignored = read(p->wake_rd, &v, sizeof v);
      (void)ignored;
      *flags |= BGI_POLLER_WOKEN;
    } else if (tag == &timer_tag) {
      uint64_t v;
      ssize_t ignored = read(p->tfd, &v, sizeof v);
      (void)ignored;
      p->timer_due = UINT64_MAX;
      *flags |= BGI_POLLER_TIMED;
    } else {
      uint32_t e = ev[i].events;
      out[k].tag = tag;
      out[k++].events = (e & EPOLLIN ? BGI_PEV_IN : 0) | (e & EPOLLOUT ? BGI_PEV_OUT : 0) |
                        (e & (EPOLLERR | EPOLLHUP) ? BGI_PEV_ERR : 0);
    }
  }
  return k;
}

#endif
