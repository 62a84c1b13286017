/*
 * Lock owners (bg_lock_owner, lock.h): what a hold belongs to, instead of an OS thread. An owner
 * is a number (seq) from one per-process counter; its holder id on a handle is
 * "<handle uuid>:<seq>", the layout of Redisson's "<uuid>:<thread id>". Each thread has a default
 * owner, made on its first use of a call with a NULL owner and given up when the thread exits
 * (a pthread key destructor), so the calls without an owner keep their per-thread meaning.
 *
 * Lifetime: an owner is reference counted (lock/lock.h): bg_lock_owner_free (or the thread's
 * exit) gives up the owner's own reference, each hold record holds one more; so an owner freed
 * while it still holds locks stays in memory, unreachable to the caller, until the handles that
 * hold through it release those holds (bg_lock_close does).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lock/lock.h"

/* 0 is never an owner's seq: a default owner numbered from 1 cannot be confused with "none" */
static _Atomic uint64_t next_seq = 1;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t default_key;
static int key_ok;

static void unref(bg_lock_owner *o);
static void default_owner_gone(void *p) { unref(p); }

static void make_key(void) { key_ok = pthread_key_create(&default_key, default_owner_gone) == 0; }

static bg_lock_owner *owner_alloc(int is_default) {
  bg_lock_owner *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->seq = atomic_fetch_add(&next_seq, 1);
  atomic_init(&o->refs, 1);
  atomic_init(&o->holds, 0);
  o->is_default = is_default;
  return o;
}

static void unref(bg_lock_owner *o) {
  if (atomic_fetch_sub(&o->refs, 1) == 1) free(o);
}

void bgi_lock_owner_take_hold(bg_lock_owner *o) {
  atomic_fetch_add(&o->refs, 1);
  atomic_fetch_add(&o->holds, 1);
}

void bgi_lock_owner_drop_hold(bg_lock_owner *o) {
  atomic_fetch_sub(&o->holds, 1);
  unref(o);
}

bg_lock_owner *bgi_lock_owner_default(void) {
  pthread_once(&key_once, make_key);
  if (!key_ok) return NULL;
  bg_lock_owner *o = pthread_getspecific(default_key);
  if (o) return o;
  if (!(o = owner_alloc(1))) return NULL;
  if (pthread_setspecific(default_key, o) != 0) {
    free(o);
    return NULL;
  }
  return o;
}

BG_API int bg_lock_owner_new(bg_lock_owner **out) {
  if (!out) return BG_EINVAL;
  *out = owner_alloc(0);
  return *out ? BG_OK : BG_ENOMEM;
}

BG_API void bg_lock_owner_free(bg_lock_owner *o) {
  /* a default owner is the thread's: only its exit gives it up */
  if (!o || o->is_default) return;
  unref(o);
}

BG_API uint64_t bg_lock_owner_seq(const bg_lock_owner *o) {
  if (!o) o = bgi_lock_owner_default();
  return o ? o->seq : 0;
}

BG_API uint32_t bg_lock_owner_holds(const bg_lock_owner *o) {
  if (!o) o = bgi_lock_owner_default();
  return o ? atomic_load(&o->holds) : 0;
}
