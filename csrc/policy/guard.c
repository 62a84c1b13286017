/*
 * The policy engine per filter handle: a call goes through the breaker to its attempt callback; a
 * failure is classified and its class's chain decides the answer. See include/bloomguard/policy.h.
 * Calls into policy.c (settings, the policy reference), breaker.c and snapshot.c; none of them
 * calls back here.
 */
#include "policy/guard.h"

#include "common/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* p + i, without computing NULL + 0 (items may be NULL for an empty batch) */
#define OFF(p, i) ((i) ? (p) + (i) : (p))

static inline void count(bgi_guard *g, int slot) {
  atomic_fetch_add_explicit(&g->stats[slot], 1, memory_order_relaxed);
}

void bgi_guard_init(bgi_guard *g) {
  memset(g, 0, sizeof *g);
  atomic_init(&g->policy, NULL);
  for (int i = 0; i < BGI_ST_COUNT; i++) atomic_init(&g->stats[i], 0);
  atomic_init(&g->rng, (uint64_t)bgi_now_ns() ^ (uint64_t)(uintptr_t)g);
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_init(&g->admin_mu, NULL);
  pthread_mutex_init(&g->dl_mu, NULL);
  bgi_breaker_init(&g->breaker);
  bgi_bucket_init(&g->bucket);
}

void bgi_guard_destroy(bgi_guard *g) {
  bgi_refresher_stop(g);
  bgi_policy_unref(atomic_load(&g->policy));
  bgi_snapshot_unref(g->snap);
  bgi_breaker_destroy(&g->breaker);
  bgi_bucket_destroy(&g->bucket);
  pthread_mutex_destroy(&g->dl_mu);
  pthread_mutex_destroy(&g->admin_mu);
  pthread_mutex_destroy(&g->mu);
}

/*
 * Pairs of settings that cannot work together, refused when the policy is given to a filter (the
 * settings are set one at a time, so only here are both known). The others all work: a backoff
 * base above the max makes every wait the max; a breaker cooldown of any length against any
 * timeout just bounds how often a probe pays one; retries never outlast the call's deadline.
 */
static int check_pairs(const bgi_policy_cfg *c, bgi_err *err) {
  /* the refresher downloads every interval (plus the download's own time), so a snapshot younger
   * than the max age exists only for part of each interval: BG_ACT_SNAPSHOT would skip it the rest */
  if (c->snapshot_interval_ms > 0 && c->snapshot_max_age_ms > 0 && c->snapshot_max_age_ms < c->snapshot_interval_ms)
    return bgi_err_set(err, BG_EINVAL, "set_policy: BG_POLICY_SNAPSHOT_MAX_AGE_MS (%lld ms) is shorter than "
                       "BG_POLICY_SNAPSHOT_INTERVAL_MS (%lld ms): each refreshed snapshot would be too old to answer "
                       "for the last %lld ms of every interval; set the max age to at least the interval (twice it "
                       "also rides out one failed refresh), refresh more often, or set the max age to 0 (any age)",
                       (long long)c->snapshot_max_age_ms, (long long)c->snapshot_interval_ms,
                       (long long)(c->snapshot_interval_ms - c->snapshot_max_age_ms));
  return BG_OK;
}

int bgi_guard_set_policy(bgi_guard *g, const bg_policy *p, bgi_err *err) {
  bgi_policy *np = NULL, *old;
  if (p && check_pairs(&p->cfg, err) != BG_OK) return err->status;
  if (p) {
    if (!(np = malloc(sizeof *np))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    atomic_init(&np->refs, 1);
    np->cfg = p->cfg;
  }
  pthread_mutex_lock(&g->admin_mu);
  /* joins a download under way (it stops between two chunks) */
  bgi_refresher_stop(g);
  if (np && np->cfg.snapshot_interval_ms > 0 && g->download && bgi_refresher_start(g, np->cfg.snapshot_interval_ms) != BG_OK) {
    old = atomic_load(&g->policy);
    if (old && old->cfg.snapshot_interval_ms > 0) bgi_refresher_start(g, old->cfg.snapshot_interval_ms);
    pthread_mutex_unlock(&g->admin_mu);
    free(np);
    return bgi_err_set(err, BG_ENOMEM, "set_policy: cannot start the snapshot refresh thread");
  }
  /* fresh breaker and bucket first: calls that see the new policy find them set for it */
  bgi_breaker_reset(&g->breaker, np ? np->cfg.breaker_threshold : 0, np ? np->cfg.breaker_cooldown_ms : 1);
  if (np) bgi_bucket_reset(&g->bucket, np->cfg.callback_rate, np->cfg.callback_burst, bgi_now_ns());
  pthread_mutex_lock(&g->mu);
  old = atomic_load(&g->policy);
  atomic_store(&g->policy, np);
  pthread_mutex_unlock(&g->mu);
  pthread_mutex_unlock(&g->admin_mu);
  bgi_policy_unref(old);
  return BG_OK;
}

/* ---- the engine --------------------------------------------------------------------------------- */

static uint64_t rand64(bgi_guard *g) {
  uint64_t z = atomic_fetch_add_explicit(&g->rng, 0x9e3779b97f4a7c15ull, memory_order_relaxed) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* One attempt at Redis for items [*from, n), through the breaker when there is a policy. */
static int attempt(bgi_guard *g, const bgi_op *op, int guarded, uint64_t deadline_ns, size_t *from, int *rejected,
                   bgi_err *err) {
  *rejected = 0;
  if (guarded && bgi_breaker_state(&g->breaker) != BG_BREAKER_CLOSED &&
      !bgi_breaker_admit(&g->breaker, bgi_now_ns(), err)) {
    *rejected = 1;
    return err->status;
  }
  size_t done = *from;
  int st = op->attempt(op->ctx, deadline_ns, *from, &done, err);
  if (done > *from) *from = done;
  /* a cancel says nothing about the server */
  if (guarded && st != BG_ECANCELED) bgi_breaker_record(&g->breaker, st == BG_OK ? 0 : bgi_now_ns(), st, err->msg);
  if (st != BG_OK) {
    int cls = bgi_fail_class(st);
    if (cls) count(g, BGI_ST_FAIL + cls);
  }
  return st;
}

static const char *source_name(int source) {
  switch (source) {
    case BG_SOURCE_SNAPSHOT: return "answered from the local snapshot";
    case BG_SOURCE_CALLBACK: return "answered by the fallback callback";
    case BG_SOURCE_ASSUMED_PRESENT: return "assumed present";
    default: return "assumed absent";
  }
}

/* The chain of class cls for op (its items [from, n) still unanswered); returns the status. */
static int run_chain(bgi_guard *g, const bgi_policy *p, const bgi_op *op, int cls, int st, uint64_t deadline_ns,
                     size_t from, int *source, bgi_err *err) {
  const bgi_policy_cfg *c = &p->cfg;
  size_t left = op->n - from;
  int answered = BG_SOURCE_NONE;
  for (int i = 0; i < c->chain_len[cls] && !answered; i++) {
    switch (c->chain[cls][i]) {
      case BG_ACT_RETRY:
        for (int64_t a = 0; a < c->retry_count; a++) {
          int rejected;
          /* an open breaker (or one whose probe is under way) would refuse the retry: move on now */
          if (bgi_breaker_state(&g->breaker) != BG_BREAKER_CLOSED) break;
          uint64_t wait = bgi_backoff_ns(c, a, rand64(g));
          if (deadline_ns && bgi_now_ns() + wait >= deadline_ns) break;
          if (wait && bgi_sleep_ns(wait) == BG_ECANCELED) return bgi_cancel_err(err, "retry backoff");
          count(g, BGI_ST_RETRIES);
          st = attempt(g, op, 1, deadline_ns, &from, &rejected, err);
          if (st == BG_OK) {
            *source = BG_SOURCE_REDIS;
            return BG_OK;
          }
          if (rejected) break;
        }
        left = op->n - from;
        break;
      case BG_ACT_SNAPSHOT: {
        if (op->is_add) break;
        bgi_snapshot *s = bgi_guard_snapshot(g);
        if (s && (!c->snapshot_max_age_ms || bgi_now_ns() - s->taken_ns <= bgi_ms_ns(c->snapshot_max_age_ms))) {
          bgi_snapshot_query(s, OFF(op->items, from), OFF(op->lens, from), left, OFF(op->present, from));
          answered = BG_SOURCE_SNAPSHOT;
        }
        bgi_snapshot_unref(s);
        break;
      }
      case BG_ACT_CALLBACK:
        if (op->is_add || !c->fallback) break;
        if (!bgi_bucket_take(&g->bucket, bgi_now_ns())) {
          count(g, BGI_ST_CB_REFUSED);
          break;
        }
        count(g, BGI_ST_CB_CALLS);
        if (c->fallback(c->userdata, OFF(op->items, from), OFF(op->lens, from), left, OFF(op->present, from)) != 0) {
          count(g, BGI_ST_CB_DECLINED);
          break;
        }
        for (size_t j = from; j < op->n; j++) op->present[j] = op->present[j] != 0;
        answered = BG_SOURCE_CALLBACK;
        break;
      case BG_ACT_ASSUME_PRESENT:
      case BG_ACT_ASSUME_ABSENT:
        if (op->is_add) break;
        if (left) memset(op->present + from, c->chain[cls][i] == BG_ACT_ASSUME_PRESENT, left);
        answered = c->chain[cls][i] == BG_ACT_ASSUME_PRESENT ? BG_SOURCE_ASSUMED_PRESENT : BG_SOURCE_ASSUMED_ABSENT;
        break;
      case BG_ACT_ERROR:
      default:
        return st;
    }
  }
  if (!answered) return st;
  bgi_err_prefix(err, source_name(answered));
  err->degraded = st;
  err->status = BG_OK;
  *source = answered;
  return BG_OK;
}

int bgi_guard_run(bgi_guard *g, const bgi_op *op, uint64_t deadline_ns, int *source, bgi_err *err) {
  int guarded = atomic_load_explicit(&g->policy, memory_order_relaxed) != NULL, rejected;
  size_t from = 0;
  *source = BG_SOURCE_NONE;
  int st = attempt(g, op, guarded, deadline_ns, &from, &rejected, err);
  if (st != BG_OK) {
    int cls = bgi_fail_class(st);
    bgi_policy *p = guarded && cls ? bgi_guard_policy(g) : NULL;
    if (p) st = run_chain(g, p, op, cls, st, deadline_ns, from, source, err);
    bgi_policy_unref(p);
  } else {
    *source = BG_SOURCE_REDIS;
  }
  if (op->is_add) count(g, st == BG_OK ? BGI_ST_ADDS_OK : BGI_ST_ADD_ERRORS);
  else count(g, st == BG_OK ? BGI_ST_ANSWERS + *source : BGI_ST_QUERY_ERRORS);
  return st;
}
