/*
 * The queue's readiness anywhere (poller.h), the portable reference: the wake (an eventfd on Linux,
 * a socket pair elsewhere) and an array of pollfd for the sockets, waited on by poll(2) inside
 * bg_queue_poll. The fd the host sees is the wake's read end: readable when completions wait, a cancel came or a name was
 * resolved, not when a socket is ready or a timer is due (no descriptor stands for those), so a
 * host drives such a queue by calling bg_queue_poll with a timeout. There is no timer: bg_queue_poll
 * bounds each wait by the earliest timer itself.
 */
#include "client/poller.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

/* pfds[0] is the wake's read end (tags[0] NULL); the sockets follow. */
int bgi_poller_poll_open(bgi_poller *p) {
  int fds[2];
  if (bgi_poller_wake_channel(fds) != 0) return -1;
  p->wake_rd = p->fd = fds[0];
  p->wake_wr = fds[1];
  p->cap = 8;
  p->pfds = calloc(p->cap, sizeof *p->pfds);
  p->tags = calloc(p->cap, sizeof *p->tags);
  if (!p->pfds || !p->tags) {
    errno = ENOMEM;
    return -1;
  }
  p->pfds[0].fd = p->wake_rd;
  p->pfds[0].events = POLLIN;
  p->n = 1;
  return 0;
}

void bgi_poller_poll_after_fork(bgi_poller *p) {
  bgi_poller_wake_channel_renew(p);
  p->fd = p->wake_rd;
  p->pfds[0].fd = p->wake_rd;
  p->n = 1;   /* the sockets were the parent's */
}

void bgi_poller_poll_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events) {
  (void)old;
  size_t i = 1;
  while (i < p->n && p->pfds[i].fd != fd) i++;
  if (!events) {
    if (i < p->n) {   /* the last one takes its place */
      p->pfds[i] = p->pfds[p->n - 1];
      p->tags[i] = p->tags[p->n - 1];
      p->n--;
    }
    return;
  }
  if (i == p->n) {
    if (p->n == p->cap) {
      size_t cap = p->cap * 2;
      struct pollfd *f = realloc(p->pfds, cap * sizeof *f);
      if (f) p->pfds = f;
      void **t = f ? realloc(p->tags, cap * sizeof *t) : NULL;
      if (t) p->tags = t;
      if (!f || !t) return;   /* out of memory: the connection's deadline ends its requests */
      p->cap = cap;
    }
    p->n++;
  }
  p->pfds[i].fd = fd;
  p->pfds[i].events = (short)((events & BGI_PEV_IN ? POLLIN : 0) | (events & BGI_PEV_OUT ? POLLOUT : 0));
  p->pfds[i].revents = 0;
  p->tags[i] = tag;
}

int bgi_poller_poll_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags) {
  int r = poll(p->pfds, (nfds_t)p->n, timeout_ms);
  if (r <= 0) return r;
  if (p->pfds[0].revents) {
    bgi_poller_drain(p->wake_rd);
    *flags |= BGI_POLLER_WOKEN;
  }
  int k = 0;
  /* the ones past max keep their readiness for the next wait (level-triggered) */
  for (size_t i = 1; i < p->n && k < max; i++) {
    short re = p->pfds[i].revents;
    if (!re) continue;
    ev[k].tag = p->tags[i];
    ev[k++].events = (re & POLLIN ? BGI_PEV_IN : 0) | (re & POLLOUT ? BGI_PEV_OUT : 0) |
                     (re & (POLLERR | POLLHUP | POLLNVAL) ? BGI_PEV_ERR : 0);
  }
  return k;
}
