/* The wait primitive (design in wait.h). */
#include "common/wait.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <time.h>

#include "common/cond.h"

static _Thread_local const bg_call *current;

const bg_call *bgi_call_enter(const bg_call *call) {
  const bg_call *prev = current;
  if (call) current = call;
  return prev;
}

void bgi_call_leave(const bg_call *prev) { current = prev; }

const bg_call *bgi_call_detach(void) {
  const bg_call *prev = current;
  current = NULL;
  return prev;
}

int bgi_cancelled(void) {
  const bg_call *c = current;
  if (!c) return 0;
  if (atomic_load(&c->cancelled)) return 1;
  return c->interrupt && c->interrupt(c->interrupt_data) != 0;
}

int bgi_cancel_err(bgi_err *err, const char *what) {
  /* by bg_call_cancel or the call's interrupt callback: words a binding's user reads too */
  return bgi_err_set(err, BG_ECANCELED, "%s: cancelled while waiting", what);
}

/* The next slice from now towards until_ns, in ns; 0 when it is reached. */
static uint64_t slice_ns(uint64_t until_ns) {
  uint64_t now = bgi_now_ns();
  if (now >= until_ns) return 0;
  uint64_t left = until_ns - now, max = bgi_ms_ns(BGI_WAIT_SLICE_MS);
  return left < max ? left : max;
}

int bgi_sleep_until(uint64_t until_ns) {
  for (;;) {
    if (bgi_cancelled()) return BG_ECANCELED;
    uint64_t ns = slice_ns(until_ns);
    if (!ns) return BG_OK;
    struct timespec ts = bgi_timespec(ns);
    /* EINTR (a signal handler ran - maybe the one that cancels): look at the flag again at once */
    nanosleep(&ts, NULL);
  }
}

int bgi_poll_fd(int fd, short events, int64_t ms, short *revents) {
  return bgi_poll_until(fd, events, bgi_deadline_in_ms(ms), 1, revents);
}

int bgi_poll_until(int fd, short events, uint64_t until_ns, int cancellable, short *revents) {
  for (;;) {
    if (cancellable && bgi_cancelled()) return BG_ECANCELED;
    uint64_t ns;
    if (cancellable) {
      ns = slice_ns(until_ns);
    } else {
      uint64_t now = bgi_now_ns();
      ns = until_ns > now ? until_ns - now : 0;
    }
    struct pollfd p = {.fd = fd, .events = events};
    /* rounded up: a wait of 0.3 ms is not a busy loop of 0 ms polls */
    int64_t ms = bgi_ns_ms_ceil(ns);
    int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
    if (r < 0 && errno != EINTR) return -1;
    if (r > 0) {
      if (revents) *revents = p.revents;
      return 1;
    }
    if (!ns) return 0;
  }
}

int bgi_cond_wait_cancellable(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t until_ns) {
  if (bgi_cancelled()) return BG_ECANCELED;
  uint64_t ns = slice_ns(until_ns);
  if (!ns) return ETIMEDOUT;
  /* a slice, not the whole wait: the cancel flag is looked at again when it ends */
  int r = bgi_cond_wait_until(cv, mu, bgi_now_ns() + ns);
  if (r == ETIMEDOUT && bgi_now_ns() < until_ns) r = 0;
  if (r != ETIMEDOUT && bgi_cancelled()) return BG_ECANCELED;
  return r == ETIMEDOUT ? ETIMEDOUT : 0;
}
