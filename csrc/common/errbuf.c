#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int bgi_err_set(bgi_err *e, int status, const char *fmt, ...) {
  va_list ap;
  e->status = status;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return status;
}

const char *bgi_err_text(const bgi_err *e) { return e->msg[0] || e->status == BG_OK ? e->msg : bg_strerror(e->status); }

void bgi_err_prefix(bgi_err *e, const char *prefix) {
  char tmp[BGI_ERRMSG_MAX];
  snprintf(tmp, sizeof tmp, "%.100s: %.400s", prefix, e->msg);
  memcpy(e->msg, tmp, sizeof tmp);
}

void bgi_errslot_init(bgi_errslot *s) {
  pthread_mutex_init(&s->mu, NULL);
  s->msg[0] = 0;
}

void bgi_errslot_destroy(bgi_errslot *s) { pthread_mutex_destroy(&s->mu); }

int bgi_errslot_store(bgi_errslot *s, const bgi_err *e) {
  if (e->status != BG_OK) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->msg, sizeof s->msg, "%s", bgi_err_text(e));
    pthread_mutex_unlock(&s->mu);
  }
  return e->status;
}

int bgi_errslot_set(bgi_errslot *s, int status, const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&s->mu);
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&s->mu);
  return status;
}

size_t bgi_errslot_copy(bgi_errslot *s, char *buf, size_t cap) {
  size_t n;
  pthread_mutex_lock(&s->mu);
  n = strlen(s->msg);
  if (buf && cap) {
    size_t m = n < cap - 1 ? n : cap - 1;
    memcpy(buf, s->msg, m);
    buf[m] = 0;
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* The pointer-returning bg_*_errmsg getters hand out this per-thread copy: a handle shared between
 * threads may record another failure at any moment, and a pointer into the slot itself would be
 * read while it is being rewritten. The copy stays valid until this thread asks again. */
const char *bgi_errslot_view(bgi_errslot *s) {
  static _Thread_local char view[BGI_ERRMSG_MAX];
  bgi_errslot_copy(s, view, sizeof view);
  return view;
}
