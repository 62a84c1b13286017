/* bg_lock: open / acquire / release / held / close (design in include/bloomguard/lock.h). */
#include "lock/lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cond.h"
#include "filter/filter.h"
#include "redis/keyslot.h"

#define MAX_WAIT_MS 3600000
/* With a subscription, still look again at least this often (a defence, not the mechanism). */
#define SUB_RECHECK_MS 1000
/* Subscriptions one acquire makes again after the server ended one (slot migrations, failovers). */
#define MAX_RESUBSCRIBES 5
#define POLL_FIRST_MS 2

pid_t bgi_gettid(void) { return (pid_t)syscall(SYS_gettid); }

size_t bgi_lock_holder(const bg_lock *l, pid_t tid, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s:%ld", l->uuid, (long)tid);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* A random (version 4) UUID in Java's UUID.toString() form, like Redisson's connection manager id. */
static void make_uuid(char out[37]) {
  unsigned char b[16];
  static const char hex[] = "0123456789abcdef";
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
    /* no entropy source: time, pid and address still keep live handles apart */
    uint64_t x = bgi_now_ns(), y = (uint64_t)(uintptr_t)out ^ ((uint64_t)getpid() << 32);
    memcpy(b, &x, 8);
    memcpy(b + 8, &y, 8);
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  char *p = out;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = hex[b[i] >> 4];
    *p++ = hex[b[i] & 15];
  }
  *p = 0;
}

static void free_names(bg_lock *l) {
  free(l->name);
  free(l->key);
  free(l->fence_key);
  free(l->readers_key);
  free(l->writers_key);
  free(l->channel);
}

static int open_lock(bg_lock **out, bg_client *c, const char *name, const bg_options *opts, bgi_err *err) {
  struct bg_options o;
  bg_lock *l;
  if (!name) return bgi_err_set(err, BG_EINVAL, "lock open: name must not be NULL");
  if (bgi_options_check(opts, BGI_OPT_LOCK, err) != BG_OK) return err->status;
  if (bgi_options_copy(&o, opts) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  if (!(l = calloc(1, sizeof *l))) {
    bgi_options_clear(&o);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  l->lease_ms = o.lock_lease_ms;
  l->renew = o.lock_renew != 0;
  l->subscribe = o.lock_subscribe != 0;
  l->poll_max_ms = o.lock_poll_max_ms;
  bgi_options_clear(&o);

  size_t nlen = strlen(name);
  l->name = strdup(name);
  l->key_len = nlen + 5;
  if ((l->key = malloc(l->key_len + 1))) {
    memcpy(l->key, name, nlen);
    memcpy(l->key + nlen, ":lock", 6);
  }
  if (l->key) {
    l->fence_key = bgi_suffix_name(l->key, l->key_len, "fence", &l->fence_key_len);
    l->readers_key = bgi_suffix_name(l->key, l->key_len, "readers", &l->readers_key_len);
    l->writers_key = bgi_suffix_name(l->key, l->key_len, "writers", &l->writers_key_len);
    /* Redisson's prefixName("redisson_lock__channel", key) */
    int tagged = strchr(l->key, '{') != NULL;
    l->channel_len = strlen("redisson_lock__channel:") + l->key_len + (tagged ? 0 : 2);
    if ((l->channel = malloc(l->channel_len + 1)))
      snprintf(l->channel, l->channel_len + 1, tagged ? "redisson_lock__channel:%s" : "redisson_lock__channel:{%s}",
               l->key);
  }
  if (!l->name || !l->key || !l->fence_key || !l->readers_key || !l->writers_key || !l->channel) {
    free_names(l);
    free(l);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  if (bgi_keyslot(l->key, l->key_len) != bgi_keyslot(l->fence_key, l->fence_key_len)) {
    bgi_err_set(err, BG_EBADNAME,
                "lock name \"%.200s\": its key \"%.200s\" and its other keys (e.g. \"%.200s\") would hash to "
                "different cluster slots (an empty {} hash tag, or a '{' never closed); use a name without "
                "\"{}\" or with a non-empty tag such as \"users{tag}\"", name, l->key, l->fence_key);
    free_names(l);
    free(l);
    return BG_EBADNAME;
  }
  l->slot = (int)bgi_keyslot(l->key, l->key_len);
  make_uuid(l->uuid);
  pthread_mutex_init(&l->mu, NULL);
  bgi_cond_init_monotonic(&l->cv);
  bgi_errslot_init(&l->err);
  bgi_client_ref(c);
  l->client = c;
  *out = l;
  return BG_OK;
}

BG_API int bg_lock_open_ex(bg_lock **out, bg_call *call, bg_client *c, const char *name, const bg_options *opts) {
  bgi_err err = {0};
  if (!out) return bgi_call_null_handle(call, "out");
  *out = NULL;
  if (!c) return bgi_call_null_handle(call, "client");
  err.status = open_lock(out, c, name, opts, &err);
  return bgi_call_finish(call, &c->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_lock_open(bg_lock **out, bg_client *c, const char *name, const bg_options *opts) {
  return bg_lock_open_ex(out, NULL, c, name, opts);
}

/* The calling thread's hold, or NULL; l->mu held. */
static bgi_hold *find_hold(bg_lock *l, pid_t tid) {
  for (size_t i = 0; i < l->nholds; i++)
    if (l->holds[i].tid == tid) return &l->holds[i];
  return NULL;
}

static void drop_hold(bg_lock *l, bgi_hold *h) {
  size_t i = (size_t)(h - l->holds);
  l->holds[i] = l->holds[--l->nholds];
}

static int add_hold(bg_lock *l, pid_t tid, int kind, int mode, uint64_t token) {
  if (l->nholds == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    bgi_hold *p = realloc(l->holds, cap * sizeof *p);
    if (!p) return BG_ENOMEM;
    l->holds = p, l->cap = cap;
  }
  int st = bgi_lock_renewer_start(l);
  if (st != BG_OK) return st;
  bgi_hold *h = &l->holds[l->nholds++];
  memset(h, 0, sizeof *h);
  h->tid = tid;
  h->kind = kind;
  h->mode = mode;
  h->count = 1;
  h->token = token;
  h->gen = ++l->next_gen;
  if (l->nholds == 1) pthread_cond_broadcast(&l->cv);
  return BG_OK;
}

static const char *kind_text(const bgi_acq *a) {
  if (!strcmp(a->mode, "read")) return a->holders > 1 ? "readers" : "reading";
  if (!strcmp(a->mode, "write")) return "a Redisson RReadWriteLock writer";
  return "exclusive";
}

static int busy(bg_lock *l, const bgi_acq *a, int64_t waited_ms, bgi_err *err) {
  char lease[64];
  if (a->pttl >= 0) snprintf(lease, sizeof lease, "%lld ms", (long long)a->pttl);
  else snprintf(lease, sizeof lease, "no expiry");
  if (a->status == 2)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": %lld writer(s) waiting, first %s (its intent expires in %s "
                       "unless renewed); new readers queue behind them; gave up after %lld ms", l->key,
                       (long long)a->holders, a->who, lease, (long long)waited_ms);
  if (a->status == 0 && a->holders > 1)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\" is held by %lld %s, e.g. %s (lease left: %s, unless "
                       "renewed); gave up after %lld ms", l->key, (long long)a->holders, kind_text(a), a->who,
                       lease, (long long)waited_ms);
  return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\" is held by %s (%s; lease left: %s, unless renewed); gave up "
                     "after %lld ms", l->key, a->who[0] ? a->who : "?", kind_text(a), lease, (long long)waited_ms);
}

static int acquire(bg_lock *l, bg_call *call, int mode, int64_t wait_ms, uint64_t *token, bgi_err *err) {
  if (mode != BG_LOCK_EXCLUSIVE && mode != BG_LOCK_READ && mode != BG_LOCK_WRITE)
    return bgi_err_set(err, BG_EINVAL, "lock acquire: unknown mode %d (BG_LOCK_EXCLUSIVE, BG_LOCK_READ or "
                       "BG_LOCK_WRITE)", mode);
  if (wait_ms < 0 || wait_ms > MAX_WAIT_MS)
    return bgi_err_set(err, BG_EINVAL, "lock acquire: wait_ms %lld is not in 0..%d", (long long)wait_ms, MAX_WAIT_MS);
  pid_t tid = bgi_gettid();
  int kind = mode == BG_LOCK_READ ? BGI_KIND_R : BGI_KIND_X, fresh = 1;

  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, tid);
  if (h) {
    if (h->lost) {
      bgi_err_set(err, BG_ELOCKED, "%s; this thread no longer holds it", h->lost_why);
      drop_hold(l, h);
      pthread_mutex_unlock(&l->mu);
      return BG_ELOCKED;
    }
    if (h->kind == BGI_KIND_R && kind == BGI_KIND_X) {
      pthread_mutex_unlock(&l->mu);
      return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": this thread holds it for reading; release it before "
                         "acquiring it exclusively (upgrades would deadlock)", l->key);
    }
    if (h->count == UINT32_MAX) {
      pthread_mutex_unlock(&l->mu);
      return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": reentrancy count overflow", l->key);
    }
    kind = h->kind; /* a READ inside an exclusive hold counts as one more exclusive hold */
    fresh = 0;
  }
  pthread_mutex_unlock(&l->mu);

  uint64_t start = bgi_now_ns(), wait_end = start + (uint64_t)wait_ms * 1000000u;
  uint64_t call_deadline = bgi_call_deadline(call);
  int64_t intent_ms = kind == BGI_KIND_X && wait_ms > 0 ? (l->lease_ms < BGI_LOCK_INTENT_MS ? l->lease_ms
                                                                                           : BGI_LOCK_INTENT_MS) : 0;
  int intent_recorded = 0, st;
  int64_t backoff = POLL_FIRST_MS;
  bgi_lock_sub sub = {0};
  int tried_sub = !l->subscribe, resubscribes = 0;
  bgi_acq a;
  for (;;) {
    st = bgi_lock_step_acquire(l, call_deadline, tid, kind, mode == BG_LOCK_WRITE, fresh, intent_ms, &a, err);
    if (st == BG_ETIMEOUT && err->not_durable) {
      /* taken on the master but not on enough replicas (BG_OPT_WAIT_REPLICAS): a failover could
       * hand it to someone else as well, so it is given back (one count of a reentrant hold) */
      int held;
      bgi_lock_step_release(l, 0, tid, kind, fresh, &held, &(bgi_err){0});
    }
    if (st != BG_OK) break;
    if (a.status == 1) {
      pthread_mutex_lock(&l->mu);
      h = find_hold(l, tid);
      if (h && !fresh) {
        h->count++;
        if (token) *token = h->token;
        st = BG_OK;
      } else {
        if (h) drop_hold(l, h); /* cannot happen: only this thread adds its hold */
        st = add_hold(l, tid, kind, mode, a.token);
        if (token) *token = a.token;
        if (st != BG_OK) bgi_err_set(err, st, "lock \"%.200s\": cannot start the renewal thread", l->key);
      }
      pthread_mutex_unlock(&l->mu);
      if (st != BG_OK) {
        int held;
        bgi_lock_step_release(l, 0, tid, kind, 1, &held, &(bgi_err){0});
      }
      intent_recorded = 0;
      break;
    }
    if (a.status == 3) {
      pthread_mutex_lock(&l->mu);
      if ((h = find_hold(l, tid))) drop_hold(l, h);
      pthread_mutex_unlock(&l->mu);
      st = bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": this thread's hold was lost (its lease of %lld ms ran out, "
                       "or the key was deleted); it holds nothing now", l->key, (long long)l->lease_ms);
      break;
    }
    if (intent_ms > 0 && a.status == 0) intent_recorded = 1;
    uint64_t now = bgi_now_ns();
    if (call_deadline && now >= call_deadline) {
      st = bgi_err_set(err, BG_ETIMEOUT, "lock \"%.200s\": the call's deadline passed while waiting", l->key);
      break;
    }
    if (now >= wait_end) {
      st = busy(l, &a, (int64_t)((now - start) / 1000000u), err);
      break;
    }
    if (!tried_sub) {
      /* subscribe, then try again before waiting: a release between the try and the subscription
       * is not missed (Redisson's order too) */
      tried_sub = 1;
      bgi_err ignored = {0};
      bgi_lock_sub_open(l, &sub, &ignored);
      continue;
    }
    uint64_t end = wait_end;
    if (call_deadline && call_deadline < end) end = call_deadline;
    int64_t slice = (int64_t)((end - now + 999999u) / 1000000u);
    if (a.pttl >= 0 && a.pttl < slice) slice = a.pttl + 1; /* an expiry publishes nothing */
    if (intent_ms > 0 && intent_ms / 3 < slice) slice = intent_ms / 3 > 0 ? intent_ms / 3 : 1;
    if (sub.active) {
      if (slice > SUB_RECHECK_MS) slice = SUB_RECHECK_MS;
      int got = bgi_lock_sub_wait(&sub, slice);
      if (got == BG_ECANCELED) {
        st = bgi_cancel_err(err, "lock acquire");
        break;
      }
      if (got >= 0) continue;
      /* the subscription broke or the server ended it (a cluster slot moved): subscribe again,
       * a few times, then poll */
      if (resubscribes++ < MAX_RESUBSCRIBES) {
        tried_sub = 0;
        continue;
      }
    }
    if (backoff < slice) slice = backoff;
    if (bgi_sleep_ns((uint64_t)(slice > 0 ? slice : 0) * 1000000u) == BG_ECANCELED) {
      st = bgi_cancel_err(err, "lock acquire");
      break;
    }
    backoff = backoff * 2 < l->poll_max_ms ? backoff * 2 : l->poll_max_ms;
  }
  bgi_lock_sub_close(&sub);
  if (intent_recorded) {
    /* withdrawn also after a cancel: a cancelled waiter leaves no intent behind to hold readers
     * back (a cluster busy backoff here must not be cut short by that same cancel) */
    const bg_call *cur = bgi_call_detach();
    bgi_lock_step_cancel_intent(l, tid, &(bgi_err){0});
    bgi_call_leave(cur);
  }
  return st;
}

BG_API int bg_lock_acquire_ex(bg_lock *l, bg_call *call, int mode, int64_t wait_ms, uint64_t *fencing_token) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  BGI_WITH_CALL(call, err.status = acquire(l, call, mode, wait_ms, fencing_token, &err));
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_lock_acquire(bg_lock *l, int mode, int64_t wait_ms, uint64_t *fencing_token) {
  return bg_lock_acquire_ex(l, NULL, mode, wait_ms, fencing_token);
}

static int release(bg_lock *l, bg_call *call, bgi_err *err) {
  pid_t tid = bgi_gettid();
  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, tid);
  if (!h) {
    pthread_mutex_unlock(&l->mu);
    return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": release refused: the calling thread does not hold it "
                       "through this handle (only the thread that acquired it can release it)", l->key);
  }
  if (h->lost) {
    bgi_err_set(err, BG_ELOCKED, "%s; nothing was released", h->lost_why);
    drop_hold(l, h);
    pthread_mutex_unlock(&l->mu);
    return BG_ELOCKED;
  }
  int kind = h->kind, final = h->count == 1;
  uint64_t gen = h->gen;
  pthread_mutex_unlock(&l->mu);

  int held = 0;
  int st = bgi_lock_step_release(l, bgi_call_deadline(call), tid, kind, final, &held, err);
  if (st != BG_OK) return st; /* the hold stays (and is renewed): the caller may release again */
  pthread_mutex_lock(&l->mu);
  h = find_hold(l, tid);
  if (h && h->gen == gen) {
    if (!held || final) drop_hold(l, h);
    else h->count--;
  }
  pthread_mutex_unlock(&l->mu);
  if (!held)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": this thread's hold was lost before the release (its lease "
                       "of %lld ms ran out, or the key was deleted); the lock was left alone", l->key,
                       (long long)l->lease_ms);
  return BG_OK;
}

BG_API int bg_lock_release_ex(bg_lock *l, bg_call *call) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  BGI_WITH_CALL(call, err.status = release(l, call, &err));
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_lock_release(bg_lock *l) { return bg_lock_release_ex(l, NULL); }

static int retire(bg_lock *l, bg_call *call, int *deleted, bgi_err *err) {
  bgi_acq a;
  int st = bgi_lock_step_retire(l, bgi_call_deadline(call), &a, err);
  if (st != BG_OK) return st;
  if (a.status == 1) {
    if (deleted) *deleted = a.token != 0;
    return BG_OK;
  }
  char lease[64];
  if (a.pttl >= 0) snprintf(lease, sizeof lease, "%lld ms", (long long)a.pttl);
  else snprintf(lease, sizeof lease, "no expiry");
  if (a.status == 2)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": not retired: %lld writer(s) wait for it, first %s (its "
                       "intent expires in %s unless renewed); nothing was deleted", l->key, (long long)a.holders,
                       a.who, lease);
  return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": not retired: held by %s%s (%s; lease left: %s); nothing was "
                     "deleted - retire a name only when nothing uses it any more", l->key, a.who[0] ? a.who : "?",
                     a.holders > 1 ? " and others" : "", kind_text(&a), lease);
}

BG_API int bg_lock_retire_ex(bg_lock *l, bg_call *call, int *deleted) {
  bgi_err err = {0};
  if (deleted) *deleted = 0;
  if (!l) return bgi_call_null_handle(call, "lock");
  BGI_WITH_CALL(call, err.status = retire(l, call, deleted, &err));
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_lock_retire(bg_lock *l, int *deleted) { return bg_lock_retire_ex(l, NULL, deleted); }

BG_API int bg_lock_held_ex(bg_lock *l, bg_call *call, int *mode, uint32_t *count, uint64_t *fencing_token) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  pid_t tid = bgi_gettid();
  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, tid);
  if (mode) *mode = h ? h->mode : 0;
  if (count) *count = h ? h->count : 0;
  if (fencing_token) *fencing_token = h ? h->token : 0;
  if (h && h->lost) bgi_err_set(&err, BG_ELOCKED, "%s", h->lost_why);
  pthread_mutex_unlock(&l->mu);
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_lock_held(bg_lock *l, int *mode, uint32_t *count, uint64_t *fencing_token) {
  return bg_lock_held_ex(l, NULL, mode, count, fencing_token);
}

BG_API const char *bg_lock_key(const bg_lock *l) { return l ? l->key : NULL; }

BG_API size_t bg_lock_holder_id(const bg_lock *l, char *buf, size_t cap) {
  char tmp[96];
  if (!l) return 0;
  size_t n = bgi_lock_holder(l, bgi_gettid(), tmp, sizeof tmp);
  if (buf && cap) snprintf(buf, cap, "%s", tmp);
  return n;
}

BG_API const char *bg_lock_errmsg(const bg_lock *l) { return l ? bgi_errslot_view((bgi_errslot *)&l->err) : "lock handle is NULL"; }

BG_API size_t bg_lock_errmsg_copy(const bg_lock *l, char *buf, size_t cap) {
  if (!l) return 0;
  return bgi_errslot_copy((bgi_errslot *)&l->err, buf, cap);
}

BG_API void bg_lock_close(bg_lock *l) {
  if (!l) return;
  bgi_lock_renewer_stop(l);
  /* the handle goes away: nobody could release what it still holds, so release it now rather
   * than let others wait out the lease */
  for (size_t i = 0; i < l->nholds; i++) {
    int held;
    if (!l->holds[i].lost)
      bgi_lock_step_release(l, 0, l->holds[i].tid, l->holds[i].kind, 1, &held, &(bgi_err){0});
  }
  free(l->holds);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  bgi_errslot_destroy(&l->err);
  bgi_client_unref(l->client);
  free_names(l);
  free(l);
}
