/* bg_lock: open / acquire / release / held / close (design in include/bloomguard/lock.h). */
#include "lock/lock.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cond.h"
#include "common/fork.h"
#include "common/random.h"
#include "redis/keyslot.h"

#define MAX_WAIT_MS 3600000
/* With a subscription, still look again at least this often (a defence, not the mechanism). */
#define SUB_RECHECK_MS 1000
/* Subscriptions one acquire makes again after the server ended one (slot migrations, failovers). */
#define MAX_RESUBSCRIBES 5
#define POLL_FIRST_MS 2

size_t bgi_lock_holder(const bg_lock *l, uint64_t seq, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s:%llu", l->uuid, (unsigned long long)seq);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static void free_names(bg_lock *l) {
  free(l->name);
  bgi_key_free(&l->key);
  bgi_key_free(&l->fence_key);
  bgi_key_free(&l->readers_key);
  bgi_key_free(&l->writers_key);
  bgi_key_free(&l->channel);
}

/* The lock's keys and channel, named by Redisson's rules (redis/names.h). */
static int name_keys(bg_lock *l, const char *name) {
  size_t nlen = strlen(name);
  if (!(l->name = strdup(name))) return BG_ENOMEM;
  /* not suffix(NAME, "lock"): Redisson users name an RLock NAME + ":lock" themselves */
  if (bgi_key_cat(&l->key, name, nlen, ":" BGI_KEY_LOCK) != BG_OK ||
      bgi_key_suffix(&l->fence_key, l->key.s, l->key.len, BGI_KEY_FENCE) != BG_OK ||
      bgi_key_suffix(&l->readers_key, l->key.s, l->key.len, BGI_KEY_READERS) != BG_OK ||
      bgi_key_suffix(&l->writers_key, l->key.s, l->key.len, BGI_KEY_WRITERS) != BG_OK ||
      bgi_key_prefix(&l->channel, BGI_LOCK_CHANNEL, l->key.s, l->key.len) != BG_OK)
    return BG_ENOMEM;
  return BG_OK;
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

  if (name_keys(l, name) != BG_OK) {
    free_names(l);
    free(l);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  if (bgi_keyslot(l->key.s, l->key.len) != bgi_keyslot(l->fence_key.s, l->fence_key.len)) {
    bgi_err_set(err, BG_EBADNAME,
                "lock name \"%.200s\": its key \"%.200s\" and its other keys (e.g. \"%.200s\") would hash to "
                "different cluster slots (an empty {} hash tag, or a '{' never closed); use a name without "
                "\"{}\" or with a non-empty tag such as \"users{tag}\"", name, l->key.s, l->fence_key.s);
    free_names(l);
    free(l);
    return BG_EBADNAME;
  }
  l->slot = (int)bgi_keyslot(l->key.s, l->key.len);
  bgi_random_uuid(l->uuid);   /* like Redisson's connection manager id */
  l->fork_gen = bgi_fork_gen_note();
  pthread_mutex_init(&l->mu, NULL);
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

/* The owner's hold record, or NULL; l->mu held. */
static bgi_hold *find_hold(bg_lock *l, uint64_t seq) {
  for (size_t i = 0; i < l->nholds; i++)
    if (l->holds[i].seq == seq) return &l->holds[i];
  return NULL;
}

static void drop_hold(bg_lock *l, bgi_hold *h) {
  size_t i = (size_t)(h - l->holds);
  bgi_lock_owner_drop_hold(h->owner);
  l->holds[i] = l->holds[--l->nholds];
}

/*
 * fork (common/fork.h): a handle opened before the fork is, in the child, another process's. Its
 * holds are the parent's (the parent renews and releases them): the child's copy forgets them -
 * it renews none (the renewal thread is not in the child either), releases none (not even at
 * bg_lock_close) - and takes a new uuid, so its holder ids are new and an acquire in the child
 * waits for the parent's hold like any other process's instead of finding it reentrant. Run at
 * the start of every call that uses the holds or the uuid.
 */
static void forked(bg_lock *l) {
  if (!bgi_forked_since(__atomic_load_n(&l->fork_gen, __ATOMIC_ACQUIRE))) return;
  bgi_fork_lock();
  uint64_t now = bgi_fork_gen_note();
  if (l->fork_gen != now) {
    bgi_fork_remake_mutex(&l->mu);
    while (l->nholds) drop_hold(l, &l->holds[l->nholds - 1]);
    l->rn_prev = l->rn_next = NULL;   /* the renewal list was the parent's (renew.c empties it) */
    l->rn_registered = l->rn_busy = 0;
    l->rn_domain = NULL;
    bgi_random_uuid(l->uuid);
    __atomic_store_n(&l->fork_gen, now, __ATOMIC_RELEASE);
  }
  bgi_fork_unlock();
}

/* A record for a fresh acquire in flight (count 0, busy); l->mu held. */
static bgi_hold *add_hold(bg_lock *l, bg_lock_owner *o, int kind, int mode) {
  if (l->nholds == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    bgi_hold *p = realloc(l->holds, cap * sizeof *p);
    if (!p) return NULL;
    l->holds = p, l->cap = cap;
  }
  bgi_hold *h = &l->holds[l->nholds++];
  memset(h, 0, sizeof *h);
  h->owner = o;
  h->seq = o->seq;
  h->kind = kind;
  h->mode = mode;
  h->busy = 1;
  h->gen = ++l->next_gen;
  bgi_lock_owner_take_hold(o);
  return h;
}

/* The record of this call (seq, gen), or NULL if it is gone; l->mu held. */
static bgi_hold *find_gen(bg_lock *l, uint64_t seq, uint64_t gen) {
  bgi_hold *h = find_hold(l, seq);
  return h && h->gen == gen ? h : NULL;
}

static const char *who(const bg_lock_owner *o) {
  return o->is_default ? "the calling thread (its default owner)" : "this owner";
}

static int overlap(bg_lock *l, const bg_lock_owner *o, const char *what, bgi_err *err) {
  return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": %s refused: another call of %s on this handle is still "
                     "running (an owner's calls on one handle must not overlap; give each concurrent user an "
                     "owner of its own)", l->key.s, what, who(o));
}

static const char *kind_text(const bgi_acq *a) {
  if (!strcmp(a->mode, BGI_LOCK_MODE_READ)) return a->holders > 1 ? "readers" : "reading";
  if (!strcmp(a->mode, BGI_LOCK_MODE_WRITE)) return "a Redisson RReadWriteLock writer";
  return "exclusive";
}

static int busy(bg_lock *l, const bgi_acq *a, int64_t waited_ms, bgi_err *err) {
  char lease[64];
  if (a->pttl >= 0) snprintf(lease, sizeof lease, "%lld ms", (long long)a->pttl);
  else snprintf(lease, sizeof lease, "no expiry");
  if (a->status == 2)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": %lld writer(s) waiting, first %s (its intent expires in %s "
                       "unless renewed); new readers queue behind them; gave up after %lld ms", l->key.s,
                       (long long)a->holders, a->who, lease, (long long)waited_ms);
  if (a->status == 0 && a->holders > 1)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\" is held by %lld %s, e.g. %s (lease left: %s, unless "
                       "renewed); gave up after %lld ms", l->key.s, (long long)a->holders, kind_text(a), a->who,
                       lease, (long long)waited_ms);
  return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\" is held by %s (%s; lease left: %s, unless renewed); gave up "
                     "after %lld ms", l->key.s, a->who[0] ? a->who : "?", kind_text(a), lease, (long long)waited_ms);
}

static _Atomic uint64_t acquire_fault_delay_ns; /* tests only (lock.h) */

void bgi_lock_acquire_fault_delay(uint64_t ns) { atomic_store(&acquire_fault_delay_ns, ns); }

static int acquire(bg_lock *l, bg_call *call, bg_lock_owner *o, int mode, int64_t wait_ms, uint64_t *token,
                   bgi_err *err) {
  if (mode != BG_LOCK_EXCLUSIVE && mode != BG_LOCK_READ && mode != BG_LOCK_WRITE)
    return bgi_err_set(err, BG_EINVAL, "lock acquire: unknown mode %d (BG_LOCK_EXCLUSIVE, BG_LOCK_READ or "
                       "BG_LOCK_WRITE)", mode);
  if (wait_ms < 0 || wait_ms > MAX_WAIT_MS)
    return bgi_err_set(err, BG_EINVAL, "lock acquire: wait_ms %lld is not in 0..%d", (long long)wait_ms, MAX_WAIT_MS);
  forked(l);
  if (!o && !(o = bgi_lock_owner_default()))
    return bgi_err_set(err, BG_ENOMEM, "lock acquire: out of memory (the thread's default owner)");
  uint64_t seq = o->seq, gen;
  int kind = mode == BG_LOCK_READ ? BGI_KIND_R : BGI_KIND_X, fresh = 1;

  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, seq);
  if (h) {
    if (h->busy) {
      pthread_mutex_unlock(&l->mu);
      return overlap(l, o, "acquire", err);
    }
    if (h->lost) {
      bgi_err_set(err, BG_ELOCKED, "%s; %s no longer holds it", h->lost_why, who(o));
      drop_hold(l, h);
      pthread_mutex_unlock(&l->mu);
      return BG_ELOCKED;
    }
    if (h->kind == BGI_KIND_R && kind == BGI_KIND_X) {
      pthread_mutex_unlock(&l->mu);
      return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": %s holds it for reading; release it before "
                         "acquiring it exclusively (upgrades would deadlock)", l->key.s, who(o));
    }
    if (h->count == UINT32_MAX) {
      pthread_mutex_unlock(&l->mu);
      return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": reentrancy count overflow", l->key.s);
    }
    kind = h->kind; /* a READ inside an exclusive hold counts as one more exclusive hold */
    fresh = 0;
    h->busy = 1;
  } else if (!(h = add_hold(l, o, kind, mode))) {
    pthread_mutex_unlock(&l->mu);
    return bgi_err_set(err, BG_ENOMEM, "lock acquire: out of memory");
  }
  gen = h->gen;
  pthread_mutex_unlock(&l->mu);

  uint64_t start = bgi_now_ns(), wait_end = bgi_after_ms(start, wait_ms);
  uint64_t call_deadline = bgi_call_deadline(call);
  int64_t intent_ms = kind == BGI_KIND_X && wait_ms > 0 ? (l->lease_ms < BGI_LOCK_INTENT_MS ? l->lease_ms
                                                                                           : BGI_LOCK_INTENT_MS) : 0;
  int intent_recorded = 0, st, lost = 0;
  int64_t backoff = POLL_FIRST_MS;
  bgi_lock_sub sub = {0};
  int tried_sub = !l->subscribe, resubscribes = 0;
  bgi_acq a;
  for (;;) {
    uint64_t sent = bgi_now_ns();
    st = bgi_lock_step_acquire(l, call_deadline, seq, kind, mode == BG_LOCK_WRITE, fresh, intent_ms, &a, err);
    if (st == BG_ETIMEOUT && err->not_durable) {
      /* taken on the master but not on enough replicas (BG_OPT_WAIT_REPLICAS): a failover could
       * hand it to someone else as well, so it is given back (one count of a reentrant hold) */
      int held;
      bgi_lock_step_release(l, 0, seq, kind, fresh, &held, &(bgi_err){0});
    }
    if (st != BG_OK) break;
    if (a.status == 1) {
      uint64_t delay = atomic_load(&acquire_fault_delay_ns);
      if (delay && fresh) bgi_sleep_ns(delay);
      pthread_mutex_lock(&l->mu);
      h = find_gen(l, seq, gen); /* there: only this call removes a busy record */
      if (h && !fresh) {
        h->count++;
        if (token) *token = h->token;
      } else if (h) {
        h->count = 1;
        h->token = a.token;
        h->lease_from_ns = sent;
        h->held_from_ns = bgi_now_ns();
        if (token) *token = a.token;
        if ((st = bgi_lock_renewer_register(l, sent)) != BG_OK) {
          bgi_err_set(err, st, "lock \"%.200s\": cannot start the renewal thread", l->key.s);
          h->count = 0; /* dropped below */
        }
      }
      pthread_mutex_unlock(&l->mu);
      if (st != BG_OK) {
        int held;
        bgi_lock_step_release(l, 0, seq, kind, 1, &held, &(bgi_err){0});
      }
      intent_recorded = 0;
      break;
    }
    if (a.status == 3) {
      lost = 1;
      st = bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": the hold of %s was lost (its lease of %lld ms ran out, "
                       "or the key was deleted); it holds nothing now", l->key.s, who(o), (long long)l->lease_ms);
      break;
    }
    if (intent_ms > 0 && a.status == 0) intent_recorded = 1;
    uint64_t now = bgi_now_ns();
    if (call_deadline && now >= call_deadline) {
      st = bgi_err_set(err, BG_ETIMEOUT, "lock \"%.200s\": the call's deadline passed while waiting", l->key.s);
      break;
    }
    if (now >= wait_end) {
      st = busy(l, &a, (int64_t)((now - start) / BGI_NS_PER_MS), err);
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
    int64_t slice = bgi_ms_until(end, now);
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
    if (bgi_sleep_ns(bgi_ms_ns(slice)) == BG_ECANCELED) {
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
    bgi_lock_step_cancel_intent(l, seq, &(bgi_err){0});
    bgi_call_leave(cur);
  }
  /* the call is over: a first acquire that failed leaves no record, a lost hold is forgotten */
  pthread_mutex_lock(&l->mu);
  if ((h = find_gen(l, seq, gen))) {
    if (h->count == 0 || lost) drop_hold(l, h);
    else h->busy = 0;
  }
  pthread_mutex_unlock(&l->mu);
  return st;
}

BG_API int bg_lock_acquire_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner, int mode, int64_t wait_ms,
                                    uint64_t *fencing_token) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  BGI_WITH_CALL(call, err.status = acquire(l, call, owner, mode, wait_ms, fencing_token, &err));
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_lock_acquire_ex(bg_lock *l, bg_call *call, int mode, int64_t wait_ms, uint64_t *fencing_token) {
  return bg_lock_acquire_owner_ex(l, call, NULL, mode, wait_ms, fencing_token);
}

BG_API int bg_lock_acquire_owner(bg_lock *l, bg_lock_owner *owner, int mode, int64_t wait_ms,
                                 uint64_t *fencing_token) {
  return bg_lock_acquire_owner_ex(l, NULL, owner, mode, wait_ms, fencing_token);
}

BG_API int bg_lock_acquire(bg_lock *l, int mode, int64_t wait_ms, uint64_t *fencing_token) {
  return bg_lock_acquire_owner_ex(l, NULL, NULL, mode, wait_ms, fencing_token);
}

static int release(bg_lock *l, bg_call *call, bg_lock_owner *o, bgi_err *err) {
  forked(l);
  if (!o && !(o = bgi_lock_owner_default()))
    return bgi_err_set(err, BG_ENOMEM, "lock release: out of memory (the thread's default owner)");
  uint64_t seq = o->seq;
  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, seq);
  if (h && h->busy) {
    pthread_mutex_unlock(&l->mu);
    return overlap(l, o, "release", err);
  }
  if (!h) {
    pthread_mutex_unlock(&l->mu);
    return bgi_err_set(err, BG_EINVAL, "lock \"%.200s\": release refused: %s does not hold it through this handle "
                       "(only the owner that acquired it can release it)", l->key.s, who(o));
  }
  if (h->lost) {
    bgi_err_set(err, BG_ELOCKED, "%s; nothing was released", h->lost_why);
    drop_hold(l, h);
    pthread_mutex_unlock(&l->mu);
    return BG_ELOCKED;
  }
  int kind = h->kind, final = h->count == 1;
  uint64_t gen = h->gen;
  h->busy = 1;
  pthread_mutex_unlock(&l->mu);

  int held = 0;
  int st = bgi_lock_step_release(l, bgi_call_deadline(call), seq, kind, final, &held, err);
  pthread_mutex_lock(&l->mu);
  h = find_gen(l, seq, gen);
  if (h) {
    h->busy = 0;
    /* a failed round trip leaves the hold (still renewed): the caller may release again */
    if (st == BG_OK && (!held || final)) drop_hold(l, h);
    else if (st == BG_OK) h->count--;
  }
  pthread_mutex_unlock(&l->mu);
  if (st != BG_OK) return st;
  if (!held)
    return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": the hold of %s was lost before the release (its lease "
                       "of %lld ms ran out, or the key was deleted); the lock was left alone", l->key.s, who(o),
                       (long long)l->lease_ms);
  return BG_OK;
}

BG_API int bg_lock_release_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  BGI_WITH_CALL(call, err.status = release(l, call, owner, &err));
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_lock_release_ex(bg_lock *l, bg_call *call) { return bg_lock_release_owner_ex(l, call, NULL); }

BG_API int bg_lock_release_owner(bg_lock *l, bg_lock_owner *owner) {
  return bg_lock_release_owner_ex(l, NULL, owner);
}

BG_API int bg_lock_release(bg_lock *l) { return bg_lock_release_owner_ex(l, NULL, NULL); }

static int retire(bg_lock *l, bg_call *call, int *deleted, bgi_err *err) {
  forked(l);
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
                       "intent expires in %s unless renewed); nothing was deleted", l->key.s, (long long)a.holders,
                       a.who, lease);
  return bgi_err_set(err, BG_ELOCKED, "lock \"%.200s\": not retired: held by %s%s (%s; lease left: %s); nothing was "
                     "deleted - retire a name only when nothing uses it any more", l->key.s, a.who[0] ? a.who : "?",
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

static int held(bg_lock *l, bg_lock_owner *o, int *mode, uint32_t *count, uint64_t *fencing_token, bgi_err *err) {
  forked(l);
  if (mode) *mode = 0;
  if (count) *count = 0;
  if (fencing_token) *fencing_token = 0;
  if (!o && !(o = bgi_lock_owner_default()))
    return bgi_err_set(err, BG_ENOMEM, "lock held: out of memory (the thread's default owner)");
  int st = BG_OK;
  pthread_mutex_lock(&l->mu);
  bgi_hold *h = find_hold(l, o->seq);
  if (h && h->count > 0) { /* count 0: a first acquire still in flight holds nothing yet */
    if (mode) *mode = h->mode;
    if (count) *count = h->count;
    if (fencing_token) *fencing_token = h->token;
    if (h->lost) st = bgi_err_set(err, BG_ELOCKED, "%s", h->lost_why);
  }
  pthread_mutex_unlock(&l->mu);
  return st;
}

BG_API int bg_lock_held_owner_ex(bg_lock *l, bg_call *call, bg_lock_owner *owner, int *mode, uint32_t *count,
                                 uint64_t *fencing_token) {
  bgi_err err = {0};
  if (!l) return bgi_call_null_handle(call, "lock");
  err.status = held(l, owner, mode, count, fencing_token, &err);
  /* no round trip: what the handle knows */
  return bgi_call_finish(call, &l->err, &err, BG_SOURCE_NONE);
}

BG_API int bg_lock_held_owner(bg_lock *l, bg_lock_owner *owner, int *mode, uint32_t *count,
                              uint64_t *fencing_token) {
  return bg_lock_held_owner_ex(l, NULL, owner, mode, count, fencing_token);
}

BG_API int bg_lock_held_ex(bg_lock *l, bg_call *call, int *mode, uint32_t *count, uint64_t *fencing_token) {
  return bg_lock_held_owner_ex(l, call, NULL, mode, count, fencing_token);
}

BG_API int bg_lock_held(bg_lock *l, int *mode, uint32_t *count, uint64_t *fencing_token) {
  return bg_lock_held_ex(l, NULL, mode, count, fencing_token);
}

BG_API const char *bg_lock_key(const bg_lock *l) { return l ? l->key.s : NULL; }

BG_API size_t bg_lock_holder_id_owner(const bg_lock *l, const bg_lock_owner *owner, char *buf, size_t cap) {
  char tmp[96];
  if (buf && cap) buf[0] = 0;
  if (!l) return 0;
  forked((bg_lock *)l);   /* the child's id is new */
  if (!owner && !(owner = bgi_lock_owner_default())) return 0;
  size_t n = bgi_lock_holder(l, owner->seq, tmp, sizeof tmp);
  if (buf && cap) snprintf(buf, cap, "%s", tmp);
  return n;
}

BG_API size_t bg_lock_holder_id(const bg_lock *l, char *buf, size_t cap) {
  return bg_lock_holder_id_owner(l, NULL, buf, cap);
}

BG_API const char *bg_lock_errmsg(const bg_lock *l) { return l ? bgi_errslot_view((bgi_errslot *)&l->err) : "lock handle is NULL"; }

BG_API size_t bg_lock_errmsg_copy(const bg_lock *l, char *buf, size_t cap) {
  if (!l) return 0;
  return bgi_errslot_copy((bgi_errslot *)&l->err, buf, cap);
}

int bgi_lock_release_all(bg_lock *l, uint64_t deadline_ns, bgi_err *err) {
  int first = BG_OK;
  forked(l);   /* a child releases none of the parent's holds */
  bgi_lock_renewer_unregister(l);
  for (size_t i = 0; i < l->nholds;) {
    bgi_hold *h = &l->holds[i];
    int held, st = BG_OK;
    if (!h->lost && h->count > 0) st = bgi_lock_step_release(l, deadline_ns, h->seq, h->kind, 1, &held, err);
    if (st != BG_OK) {
      if (first == BG_OK) first = st;
      i++;   /* kept for another try */
      continue;
    }
    drop_hold(l, h);   /* moves the last record here */
  }
  return first;
}

BG_API void bg_lock_close(bg_lock *l) {
  if (!l) return;
  /* the handle goes away: nobody could release what it still holds (whoever owns it), so release
   * it now rather than let others wait out the lease */
  bgi_lock_release_all(l, 0, &(bgi_err){0});
  while (l->nholds) drop_hold(l, &l->holds[l->nholds - 1]);
  free(l->holds);
  pthread_mutex_destroy(&l->mu);
  bgi_errslot_destroy(&l->err);
  bgi_client_unref(l->client);
  free_names(l);
  free(l);
}
