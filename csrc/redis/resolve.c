/* Host names resolved on detached threads (resolve.h). */
#include "redis/resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>   /* FreeBSD: in6_addr */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bloomguard/errors.h"
#include "common/clock.h"
#include "common/cond.h"
#include "common/sock.h"
#include "common/wait.h"

struct bgi_resolve {
  atomic_int refs;          /* the thread's (while it runs) and the owner's */
  atomic_int done;
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* signalled when done, for bgi_resolve_wait */
  int fd;                   /* the owner's descriptor, duplicated (-1: none) */
  int status;               /* the outcome, once done */
  char addr[BGI_RESOLVE_ADDR_MAX];
  char why[256];
  char host[256];
  char label[300];
};

static atomic_int inflight;
static atomic_int fault_inline;

int bgi_resolve_inflight(void) { return atomic_load(&inflight); }
void bgi_resolve_fault_inline(int on) { atomic_store(&fault_inline, on); }

int bgi_resolve_is_literal(const char *host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void unref(bgi_resolve *r) {
  if (atomic_fetch_sub(&r->refs, 1) != 1) return;
  if (r->fd >= 0) close(r->fd);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* getaddrinfo as hiredis's connect asks it: IPv4 first, IPv6 when the name has no IPv4 address. */
static void lookup(bgi_resolve *r) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_INET;
  int rv = getaddrinfo(r->host, NULL, &hints, &res);
  if (rv != 0) {
    hints.ai_family = AF_INET6;
    rv = getaddrinfo(r->host, NULL, &hints, &res);
  }
  if (rv == 0 && res &&
      getnameinfo(res->ai_addr, res->ai_addrlen, r->addr, sizeof r->addr, NULL, 0, NI_NUMERICHOST) == 0) {
    r->status = BG_OK;
  } else {
    snprintf(r->why, sizeof r->why, "%s",
             rv == 0 ? "no usable address" : rv == EAI_SYSTEM ? strerror(errno) : gai_strerror(rv));
    r->status = BG_ECONN;
  }
  if (res) freeaddrinfo(res);
}

static void finish(bgi_resolve *r) {
  pthread_mutex_lock(&r->mu);
  atomic_store(&r->done, 1);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (r->fd >= 0) bgi_wake_fd_write(r->fd);   /* its reader may have closed its end: no SIGPIPE */
}

static void *resolve_thread(void *p) {
  bgi_resolve *r = p;
  lookup(r);
  finish(r);
  atomic_fetch_sub(&inflight, 1);
  unref(r);
  return NULL;
}

int bgi_resolve_start(bgi_resolve **out, const char *host, int notify_fd, const char *label, bgi_err *err) {
  *out = NULL;
  bgi_resolve *r = calloc(1, sizeof *r);
  if (!r) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  atomic_init(&r->refs, 1);
  pthread_mutex_init(&r->mu, NULL);
  bgi_cond_init_monotonic(&r->cv);
  r->fd = -1;
  snprintf(r->host, sizeof r->host, "%s", host);
  snprintf(r->label, sizeof r->label, "%s", label);
  if (atomic_load(&fault_inline)) {  /* the control: on this thread, to its end */
    lookup(r);
    atomic_store(&r->done, 1);
    *out = r;
    return BG_OK;
  }
  if (notify_fd >= 0 && (r->fd = fcntl(notify_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
    int e = errno;
    unref(r);
    return bgi_err_set(err, BG_ECONN, "cannot connect to %s: resolving its name: %s", label, strerror(e));
  }
  if (atomic_fetch_add(&inflight, 1) >= BGI_RESOLVE_MAX_INFLIGHT) {
    atomic_fetch_sub(&inflight, 1);
    unref(r);
    return bgi_err_set(err, BG_ECONN, "cannot connect to %s: %d resolutions of host names are still waiting for the "
                       "resolver (check /etc/resolv.conf, or give the server's address as an IP)", label,
                       BGI_RESOLVE_MAX_INFLIGHT);
  }
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  atomic_store(&r->refs, 2);
  int rc = pthread_create(&t, &attr, resolve_thread, r);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    atomic_fetch_sub(&inflight, 1);
    atomic_store(&r->refs, 1);
    unref(r);
    return bgi_err_set(err, BG_ECONN, "cannot connect to %s: no thread to resolve its name: %s", label, strerror(rc));
  }
  *out = r;
  return BG_OK;
}

int bgi_resolve_done(const bgi_resolve *r) { return atomic_load_explicit(&r->done, memory_order_acquire); }

int bgi_resolve_wait(bgi_resolve *r, uint64_t until_ns, int timeout_st, int64_t budget_ms, bgi_err *err) {
  int st = BG_OK;
  pthread_mutex_lock(&r->mu);
  while (!atomic_load(&r->done)) {
    int w = bgi_cond_wait_cancellable(&r->cv, &r->mu, until_ns ? until_ns : UINT64_MAX);
    if (w == BG_ECANCELED || w == ETIMEDOUT) {
      st = w == BG_ECANCELED ? BG_ECANCELED : timeout_st;
      break;
    }
  }
  pthread_mutex_unlock(&r->mu);
  if (st == BG_ECANCELED) return bgi_cancel_err(err, "resolving the server's name");
  if (st != BG_OK)
    return bgi_err_set(err, st, "cannot connect to %s within %lld ms: the resolver did not answer%s", r->label,
                       (long long)budget_ms, st == BG_ETIMEOUT ? " (the call's deadline)" : "");
  return BG_OK;
}

int bgi_resolve_result(const bgi_resolve *r, char addr[BGI_RESOLVE_ADDR_MAX], bgi_err *err) {
  if (r->status != BG_OK)
    return bgi_err_set(err, BG_ECONN, "cannot connect to %s: cannot resolve its name: %s", r->label, r->why);
  memcpy(addr, r->addr, BGI_RESOLVE_ADDR_MAX);
  return BG_OK;
}

void bgi_resolve_release(bgi_resolve *r) {
  if (r) unref(r);
}
