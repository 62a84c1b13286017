#include "redis/pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cond.h"
#include "common/fork.h"
#include "common/wait.h"

int bgi_pool_init(bgi_pool *p, size_t size, const bgi_endpoint *ep) {
  memset(p, 0, sizeof *p);
  p->conns = calloc(size, sizeof *p->conns);
  p->busy = calloc(size, 1);
  if (!p->conns || !p->busy) {
    free(p->conns);
    free(p->busy);
    return BG_ENOMEM;
  }
  p->size = size;
  p->ep = ep;
  pthread_mutex_init(&p->mu, NULL);
  bgi_cond_init_monotonic(&p->cv);
  return BG_OK;
}

void bgi_pool_destroy(bgi_pool *p) {
  if (!p->conns) return;
  for (size_t i = 0; i < p->size; i++) bgi_conn_free(&p->conns[i]);
  free(p->conns);
  free(p->busy);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  p->conns = NULL;
}

void bgi_pool_after_fork(bgi_pool *p) {
  if (!p->conns) return;
  bgi_fork_remake_mutex(&p->mu);
  memset(&p->cv, 0, sizeof p->cv);
  bgi_cond_init_monotonic(&p->cv);
  for (size_t i = 0; i < p->size; i++) {
    bgi_conn_abandon(&p->conns[i]);
    p->busy[i] = 0;
  }
}

/* Index of a free slot, preferring one that is already connected; -1 if all are busy. */
static long pick_free(bgi_pool *p) {
  long unconnected = -1;
  for (size_t i = 0; i < p->size; i++) {
    if (p->busy[i]) continue;
    if (p->conns[i].ctx && !p->conns[i].broken) return (long)i;
    if (unconnected < 0) unconnected = (long)i;
  }
  return unconnected;
}

int bgi_pool_acquire(bgi_pool *p, uint64_t deadline_ns, bgi_conn **out, bgi_err *err) {
  long i;
  uint64_t started = bgi_now_ns();
  uint64_t until = deadline_ns ? deadline_ns : bgi_after_ms(started, p->ep->command_timeout_ms);

  pthread_mutex_lock(&p->mu);
  while ((i = pick_free(p)) < 0) {
    int r = bgi_cond_wait_cancellable(&p->cv, &p->mu, until);
    if (r == 0 || (i = pick_free(p)) >= 0) continue;
    /* a release's signal may have been meant for this waiter: pass it on */
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (r == BG_ECANCELED) return bgi_cancel_err(err, "waiting for a pooled connection");
    return bgi_err_set(err, BG_ETIMEOUT, "all %zu pooled connections stayed busy for %lld ms "
                       "(raise BG_OPT_POOL_SIZE)", p->size, (long long)bgi_ns_ms_ceil(bgi_now_ns() - started));
  }
  p->busy[i] = 1;
  pthread_mutex_unlock(&p->mu);

  bgi_conn *c = &p->conns[i];
  if (!c->ctx || c->broken) {
    /* connect outside the lock: other threads keep using the healthy connections meanwhile */
    int st = bgi_conn_open(c, p->ep, deadline_ns, 0, err);
    if (st != BG_OK) {
      bgi_pool_release(p, c);
      return st;
    }
  }
  *out = c;
  return BG_OK;
}

void bgi_pool_release(bgi_pool *p, bgi_conn *c) {
  size_t i = (size_t)(c - p->conns);
  if (c->broken) bgi_conn_drop(c);
  pthread_mutex_lock(&p->mu);
  p->busy[i] = 0;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}
