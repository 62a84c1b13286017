/*
 * Internal: a fixed-size pool of connections shared by the threads using one client.
 *
 * Connections are opened lazily and replaced after a failure: a call that finds a broken slot
 * reconnects it. Acquire waits (up to the call's deadline, else the command timeout) when every
 * connection is busy.
 */
#ifndef BG_INTERNAL_POOL_H
#define BG_INTERNAL_POOL_H

#include <pthread.h>

#include "redis/conn.h"

typedef struct bgi_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bgi_conn *conns;
  unsigned char *busy;
  size_t size;
  const bgi_endpoint *ep;
} bgi_pool;

int bgi_pool_init(bgi_pool *p, size_t size, const bgi_endpoint *ep);
void bgi_pool_destroy(bgi_pool *p);

/* A connected connection, for the calling thread alone until released; waits for a free one until
 * the call's absolute deadline_ns (0: the command timeout from now; BG_ECANCELED when the current
 * call is cancelled meanwhile), then connects it when it is not (bgi_conn_open, the same deadline). */
int bgi_pool_acquire(bgi_pool *p, uint64_t deadline_ns, bgi_conn **out, bgi_err *err);
/* In a child after fork (common/fork.h; no thread of the child uses the pool meanwhile): every
 * connection is let go without a write (bgi_conn_abandon) and free again - the threads that held
 * some are the parent's - and the lock is made anew; the next acquire connects. */
void bgi_pool_after_fork(bgi_pool *p);
/* Returns it; a broken connection is closed here so the next acquire reconnects. */
void bgi_pool_release(bgi_pool *p, bgi_conn *c);

#endif
