/*
 * Internal error plumbing. Deep code (connections, parsing) writes status + message into a
 * caller-owned bgi_err on the stack; the public entry point then stores it on the handle.
 * That keeps handles free of races inside the call and needs no thread-local state.
 */
#ifndef BG_INTERNAL_ERR_H
#define BG_INTERNAL_ERR_H

#include <pthread.h>
#include <stddef.h>

#include "bloomguard/errors.h"

#define BGI_ERRMSG_MAX 512

typedef struct bgi_err {
  int status;
  int degraded;   /* status BG_OK from the policy: the status of the failure it answered for */
  int not_durable; /* BG_ETIMEOUT from BG_OPT_WAIT_REPLICAS: the master applied the step, too few
                      replicas acknowledged it (a lock acquire gives the hold back) */
  char msg[BGI_ERRMSG_MAX];
} bgi_err;

/* Records status and a printf-style message; returns status so callers can `return bgi_err_set(...)`. */
int bgi_err_set(bgi_err *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Forgets a failure that was recovered from (a retry succeeded): the status and the message. */
static inline void bgi_err_clear(bgi_err *e) {
  e->status = BG_OK;
  e->msg[0] = 0;
}
/* The message to hand out for e: its own, or the status's text when a failure recorded none (no
 * error reaches a caller with an empty message). */
const char *bgi_err_text(const bgi_err *e);
/* Prefixes the existing message with context ("contains: ..."). */
void bgi_err_prefix(bgi_err *e, const char *prefix);

/* The message slot of a handle; readers copy it under the lock so it never tears. */
typedef struct bgi_errslot {
  pthread_mutex_t mu;
  char msg[BGI_ERRMSG_MAX];
} bgi_errslot;

void bgi_errslot_init(bgi_errslot *s);
void bgi_errslot_destroy(bgi_errslot *s);
/* Stores e's message when e->status is an error; returns e->status. */
int bgi_errslot_store(bgi_errslot *s, const bgi_err *e);
/* Stores a message directly (for argument checks at the API edge); returns status. */
int bgi_errslot_set(bgi_errslot *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t bgi_errslot_copy(bgi_errslot *s, char *buf, size_t cap);
const char *bgi_errslot_view(bgi_errslot *s);

#endif
