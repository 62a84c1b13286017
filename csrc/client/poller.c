/* The queue's readiness (poller.h): the choice of backend, and what the backends share. */
#include "client/poller.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/sock.h"

#if defined(BGI_HAVE_EPOLL)
#include <sys/eventfd.h>
#endif

#if defined(BGI_HAVE_EPOLL)
#define DEFAULT_KIND BGI_POLLER_EPOLL
#else
#define DEFAULT_KIND BGI_POLLER_KQUEUE
#endif

const char *bgi_poller_name(int kind) {
  switch (kind) {
    case BGI_POLLER_EPOLL: return "epoll";
    case BGI_POLLER_KQUEUE: return "kqueue";
    case BGI_POLLER_POLL: return "poll";
    default: return "?";
  }
}

static int built_in(int kind) {
  if (kind == BGI_POLLER_POLL) return 1;
#if defined(BGI_HAVE_EPOLL)
  if (kind == BGI_POLLER_EPOLL) return 1;
#endif
#if defined(BGI_HAVE_KQUEUE)
  if (kind == BGI_POLLER_KQUEUE) return 1;
#endif
  return 0;
}

/* BG_QUEUE_POLLER's value as a kind (the names of bgi_poller_name), or -1 */
static int kind_named(const char *name) {
  for (int k = BGI_POLLER_EPOLL; k <= BGI_POLLER_POLL; k++)
    if (!strcmp(name, bgi_poller_name(k))) return k;
  return -1;
}

/* the backends of this build other than poll, for a message: "epoll" or "epoll, kqueue" */
static const char *built_in_names(char *buf, size_t cap) {
  buf[0] = 0;
  for (int k = BGI_POLLER_EPOLL; k < BGI_POLLER_POLL; k++)
    if (built_in(k)) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "", bgi_poller_name(k));
  return buf;
}

int bgi_poller_open(bgi_poller *p, int kind, bgi_err *err) {
  memset(p, 0, sizeof *p);
  p->fd = p->wake_rd = p->wake_wr = p->tfd = -1;
  p->timer_due = UINT64_MAX;
  if (kind == BGI_POLLER_DEFAULT) {
    const char *env = getenv("BG_QUEUE_POLLER");
    kind = DEFAULT_KIND;
    if (env && *env) {
      kind = kind_named(env);
      if (kind < 0 || !built_in(kind)) {
        char names[32];
        return bgi_err_set(err, BG_EINVAL, "BG_QUEUE_POLLER=%s: this build's queue backends are %s and poll; "
                           "unset it or name one of them", env, built_in_names(names, sizeof names));
      }
    }
  }
  if (!built_in(kind))
    return bgi_err_set(err, BG_EINVAL, "the %s queue backend is not in this build", bgi_poller_name(kind));
  p->kind = kind;
  int r;
  switch (kind) {
#if defined(BGI_HAVE_EPOLL)
    case BGI_POLLER_EPOLL: r = bgi_poller_epoll_open(p); break;
#endif
#if defined(BGI_HAVE_KQUEUE)
    case BGI_POLLER_KQUEUE: r = bgi_poller_kqueue_open(p); break;
#endif
    default: r = bgi_poller_poll_open(p); break;
  }
  if (r != 0) {
    int e = errno;
    bgi_poller_close(p);
    return bgi_err_set(err, BG_ENOMEM, "cannot make the queue's fds (%s): %s", bgi_poller_name(kind), strerror(e));
  }
  return BG_OK;
}

void bgi_poller_close(bgi_poller *p) {
  if (p->fd >= 0 && p->fd != p->wake_rd) close(p->fd);
  if (p->wake_rd >= 0) close(p->wake_rd);
  if (p->wake_wr >= 0 && p->wake_wr != p->wake_rd) close(p->wake_wr);
  if (p->tfd >= 0) close(p->tfd);
  free(p->pfds);
  free(p->tags);
  memset(p, 0, sizeof *p);
  p->fd = p->wake_rd = p->wake_wr = p->tfd = -1;
}

void bgi_poller_after_fork(bgi_poller *p) {
  switch (p->kind) {
#if defined(BGI_HAVE_EPOLL)
    case BGI_POLLER_EPOLL: bgi_poller_epoll_after_fork(p); break;
#endif
#if defined(BGI_HAVE_KQUEUE)
    case BGI_POLLER_KQUEUE: bgi_poller_kqueue_after_fork(p); break;
#endif
    default: bgi_poller_poll_after_fork(p); break;
  }
  p->timer_due = UINT64_MAX;
}

void bgi_poller_watch(bgi_poller *p, int fd, void *tag, uint32_t old, uint32_t events) {
  switch (p->kind) {
#if defined(BGI_HAVE_EPOLL)
    case BGI_POLLER_EPOLL: bgi_poller_epoll_watch(p, fd, tag, old, events); break;
#endif
#if defined(BGI_HAVE_KQUEUE)
    case BGI_POLLER_KQUEUE: bgi_poller_kqueue_watch(p, fd, tag, old, events); break;
#endif
    default: bgi_poller_poll_watch(p, fd, tag, old, events); break;
  }
}

void bgi_poller_wake(bgi_poller *p) {
  bgi_wake_fd_write(p->wake_wr);
}

void bgi_poller_arm(bgi_poller *p, uint64_t due_ns) {
  switch (p->kind) {
#if defined(BGI_HAVE_EPOLL)
    case BGI_POLLER_EPOLL: bgi_poller_epoll_arm(p, due_ns); break;
#endif
#if defined(BGI_HAVE_KQUEUE)
    case BGI_POLLER_KQUEUE: bgi_poller_kqueue_arm(p, due_ns); break;
#endif
    default: p->timer_due = due_ns; break;   /* bg_queue_poll bounds its own waits by the timers */
  }
}

int bgi_poller_wait(bgi_poller *p, bgi_pevent *ev, int max, int timeout_ms, unsigned *flags) {
  *flags = 0;
  switch (p->kind) {
#if defined(BGI_HAVE_EPOLL)
    case BGI_POLLER_EPOLL: return bgi_poller_epoll_wait(p, ev, max, timeout_ms, flags);
#endif
#if defined(BGI_HAVE_KQUEUE)
    case BGI_POLLER_KQUEUE: return bgi_poller_kqueue_wait(p, ev, max, timeout_ms, flags);
#endif
    default: return bgi_poller_poll_wait(p, ev, max, timeout_ms, flags);
  }
}

/* ---- shared ----------------------------------------------------------------------------------- */

#if !defined(BGI_HAVE_EPOLL)
static int cloexec_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  return fcntl(fd, F_SETFD, FD_CLOEXEC);
}
#endif

int bgi_poller_wake_channel(int fds[2]) {
#if defined(BGI_HAVE_EPOLL)
  fds[0] = fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return fds[0] >= 0 ? 0 : -1;
#else
  /* a socket pair, not a pipe: a writer whose reader closed its end (the queue closed while a
   * resolver thread ran) gets EPIPE from send with MSG_NOSIGNAL or SO_NOSIGPIPE, never SIGPIPE */
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
  if (cloexec_nonblock(fds[0]) != 0 || cloexec_nonblock(fds[1]) != 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  bgi_sock_nosigpipe(fds[1]);
  return 0;
#endif
}

void bgi_poller_wake_channel_renew(bgi_poller *p) {
  int fds[2] = {-1, -1};
  if (bgi_poller_wake_channel(fds) != 0) fds[0] = fds[1] = -1;
  if (p->wake_rd == p->wake_wr) {
    p->wake_rd = p->wake_wr = bgi_poller_renumber(p->wake_rd, fds[0]);
  } else {
    p->wake_rd = bgi_poller_renumber(p->wake_rd, fds[0]);
    p->wake_wr = bgi_poller_renumber(p->wake_wr, fds[1]);
  }
}

void bgi_poller_drain(int fd) {
  char buf[256];
  while (read(fd, buf, sizeof buf) == (ssize_t)sizeof buf) {
  }
}

int bgi_poller_renumber(int inherited, int fresh) {
  if (inherited < 0) {
    if (fresh >= 0) close(fresh);
    return -1;
  }
  /* the fresh one got the number itself: free in a child where the inherited one was not copied
   * (a kqueue on macOS and the BSDs, or under libkqueue). dup2 onto itself would succeed and the
   * close below then close it (dup3 refuses it: EINVAL). Its maker set close-on-exec. */
  if (fresh == inherited) return inherited;
#if defined(__linux__)
  int ok = fresh >= 0 && dup3(fresh, inherited, O_CLOEXEC) >= 0;
#else
  /* no dup3 here: a thread of the child that forks and execs between the two calls may take the fd
   * along (the close-on-exec flag is per descriptor, and dup2 clears it) */
  int ok = fresh >= 0 && dup2(fresh, inherited) >= 0 && fcntl(inherited, F_SETFD, FD_CLOEXEC) == 0;
#endif
  if (ok) {
    close(fresh);
    return inherited;
  }
  if (fresh >= 0) close(fresh);
  close(inherited);
  return -1;
}
