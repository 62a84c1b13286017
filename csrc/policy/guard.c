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
  atomic_init(&g->degraded.window, 0);
  atomic_init(&g->degraded.pending, 0);
  atomic_init(&g->fork_gen, bgi_fork_gen_note());
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

static const char *source_name(int source) {
  switch (source) {
    case BG_SOURCE_SNAPSHOT: return "answered from the local snapshot";
    case BG_SOURCE_CALLBACK: return "answered by the fallback callback";
    case BG_SOURCE_ASSUMED_PRESENT: return "assumed present";
    default: return "assumed absent";
  }
}

/* Where the guard task is (bgi_guard_task.state). */
enum {
  G_START,          /* the first attempt is to be made */
  G_FIRST,          /* the first attempt ended */
  G_RETRY_SLEPT,    /* a retry's backoff ended */
  G_RETRY_ENDED     /* a retry ended */
};

void bgi_guard_set_observer(bgi_guard *g, bgi_obs *obs, const char *name) {
  g->obs = obs;
  g->name = name;
}

/* ---- events (observe.h) ------------------------------------------------------------------------ */

/* The breaker moved to state `to` (BG_BREAKER_*); an observer is set. */
static void breaker_event(bgi_guard *g, int to) {
  char msg[BGI_ERRMSG_MAX];
  int status;
  int64_t consecutive, cooldown_ms, not_closed_us, v[BG_EVENT_NVALUES] = {0};
  bgi_breaker_describe(&g->breaker, bgi_now_ns(), &status, msg, sizeof msg, &consecutive, &cooldown_ms,
                       &not_closed_us);
  if (to == BG_BREAKER_OPEN) {
    v[BG_EV_STATUS] = status;
    v[BG_EV_COUNT] = consecutive;
    v[BG_EV_DURATION_US] = cooldown_ms * 1000;
    bgi_obs_emit(g->obs, BG_EVENT_BREAKER_OPEN, g->name, v, "circuit breaker of filter \"%.200s\" open after %lld "
                 "consecutive connection/timeout failures: queries are answered by the policy for %lld ms; the last "
                 "failure: %s", g->name, (long long)consecutive, (long long)cooldown_ms, msg);
  } else if (to == BG_BREAKER_HALF_OPEN) {
    bgi_obs_emit(g->obs, BG_EVENT_BREAKER_HALF_OPEN, g->name, v, "circuit breaker of filter \"%.200s\" half-open: "
                 "its cooldown of %lld ms ended, one probe call goes to the server", g->name, (long long)cooldown_ms);
  } else {
    v[BG_EV_DURATION_US] = not_closed_us;
    bgi_obs_emit(g->obs, BG_EVENT_BREAKER_CLOSED, g->name, v, "circuit breaker of filter \"%.200s\" closed: the "
                 "server answered again after %lld ms", g->name, (long long)(not_closed_us / 1000));
  }
}

/* A query was answered by the policy (source) for the failure st: counted, and now and then told. */
static void degraded_event(bgi_guard *g, int source, int st, const bgi_err *err) {
  int64_t count, v[BG_EVENT_NVALUES] = {0};
  if (!bgi_sampler_hit(&g->degraded, g->obs->degraded_per_s, bgi_now_ns(), &count)) return;
  v[BG_EV_STATUS] = st;
  v[BG_EV_SOURCE] = source;
  v[BG_EV_COUNT] = count;
  bgi_obs_emit(g->obs, BG_EVENT_DEGRADED, g->name, v, "filter \"%.200s\": %lld answer%s from the degrade policy "
               "since the last report; the last %s", g->name, (long long)count, count == 1 ? "" : "s", err->msg);
}

/* Starts an attempt at Redis for items [from, n) (through the breaker when there is a policy):
 * SUB, or - the breaker refused it - the guard resumed at once with err set (rejected). */
static int start_attempt(bgi_guard_task *gt, int next_state, bgi_err *err) {
  gt->rejected = 0;
  gt->state = next_state;
  if (gt->guarded && bgi_breaker_state(&gt->g->breaker) != BG_BREAKER_CLOSED) {
    int admitted = bgi_breaker_admit(&gt->g->breaker, bgi_now_ns(), err);
    if (!admitted) {
      gt->rejected = 1;
      return -1;
    }
    if (admitted == 2 && bgi_obs_on(gt->g->obs)) breaker_event(gt->g, BG_BREAKER_HALF_OPEN);
  }
  gt->done = 0;
  return bgi_task_sub(&gt->t, gt->op.attempt(gt->op.ctx, gt->deadline_ns, gt->from, &gt->done));
}

/* An attempt ended with st: the items it finished, the breaker, the failure's count. */
static void attempt_ended(bgi_guard_task *gt, int st, const bgi_err *err) {
  if (gt->rejected) return;
  gt->from += gt->done;
  /* a cancel says nothing about the server */
  if (gt->guarded && st != BG_ECANCELED) {
    int moved = bgi_breaker_record(&gt->g->breaker, st == BG_OK ? 0 : bgi_now_ns(), st, err->msg);
    if (moved >= 0 && bgi_obs_on(gt->g->obs)) breaker_event(gt->g, moved);
  }
  if (st != BG_OK) {
    int cls = bgi_fail_class(st);
    if (cls) count(gt->g, BGI_ST_FAIL + cls);
  }
}

static int finish(bgi_guard_task *gt, int st) {
  bgi_policy_unref(gt->p);
  gt->p = NULL;
  if (gt->op.hist) bgi_hist_record(&gt->op.hist[bgi_outcome(st)], bgi_now_ns() - gt->started_ns);
  if (gt->op.is_add) count(gt->g, st == BG_OK ? BGI_ST_ADDS_OK : BGI_ST_ADD_ERRORS);
  else count(gt->g, st == BG_OK ? BGI_ST_ANSWERS + gt->source : BGI_ST_QUERY_ERRORS);
  return bgi_task_done(&gt->t, st);
}

/* Answers what is left of the op [from, n) from the answer-giving action act, if it can: its
 * BG_SOURCE_*, or BG_SOURCE_NONE to go on with the chain. */
static int answer_by(bgi_guard *g, const bgi_policy_cfg *c, const bgi_op *op, int act, size_t from) {
  size_t left = op->n - from;
  if (op->is_add) return BG_SOURCE_NONE;
  switch (act) {
    case BG_ACT_SNAPSHOT: {
      int answered = BG_SOURCE_NONE;
      bgi_snapshot *s = bgi_guard_snapshot(g);
      if (s && (!c->snapshot_max_age_ms || bgi_now_ns() - s->taken_ns <= bgi_ms_ns(c->snapshot_max_age_ms))) {
        bgi_snapshot_query(s, OFF(op->items, from), OFF(op->lens, from), left, OFF(op->present, from));
        answered = BG_SOURCE_SNAPSHOT;
      }
      bgi_snapshot_unref(s);
      return answered;
    }
    case BG_ACT_CALLBACK:
      if (!c->fallback) return BG_SOURCE_NONE;
      if (!bgi_bucket_take(&g->bucket, bgi_now_ns())) {
        count(g, BGI_ST_CB_REFUSED);
        return BG_SOURCE_NONE;
      }
      count(g, BGI_ST_CB_CALLS);
      if (c->fallback(c->userdata, OFF(op->items, from), OFF(op->lens, from), left, OFF(op->present, from)) != 0) {
        count(g, BGI_ST_CB_DECLINED);
        return BG_SOURCE_NONE;
      }
      for (size_t j = from; j < op->n; j++) op->present[j] = op->present[j] != 0;
      return BG_SOURCE_CALLBACK;
    case BG_ACT_ASSUME_PRESENT:
    case BG_ACT_ASSUME_ABSENT:
      if (left) memset(op->present + from, act == BG_ACT_ASSUME_PRESENT, left);
      return act == BG_ACT_ASSUME_PRESENT ? BG_SOURCE_ASSUMED_PRESENT : BG_SOURCE_ASSUMED_ABSENT;
    default:
      return BG_SOURCE_NONE;
  }
}

/*
 * The chain of the failure's class, from action chain_i on (a retry from try gt->retry on): the
 * next SLEEP or SUB of a retry, or the end of the operation. A retry that fails moves on to
 * the next retry, and past the last one to the next action.
 */
static int run_chain(bgi_guard_task *gt, bgi_err *err) {
  const bgi_policy_cfg *c = &gt->p->cfg;
  for (; gt->chain_i < c->chain_len[gt->cls]; gt->chain_i++, gt->retry = 0) {
    int act = c->chain[gt->cls][gt->chain_i];
    if (act == BG_ACT_RETRY) {
      /* an open breaker (or one whose probe is under way) would refuse the retry: move on now */
      if (gt->retry >= c->retry_count || bgi_breaker_state(&gt->g->breaker) != BG_BREAKER_CLOSED) continue;
      uint64_t wait = bgi_backoff_ns(c, gt->retry, rand64(gt->g)), now = bgi_now_ns();
      if (gt->deadline_ns && now + wait >= gt->deadline_ns) continue;
      gt->state = G_RETRY_SLEPT;
      if (wait) return bgi_task_sleep(&gt->t, now + wait);
      return gt->t.resume(&gt->t, BG_OK, err);
    }
    if (act < BG_ACT_SNAPSHOT || act > BG_ACT_ASSUME_ABSENT) return finish(gt, gt->st);   /* BG_ACT_ERROR */
    int answered = answer_by(gt->g, c, &gt->op, act, gt->from);
    if (answered) {
      bgi_err_prefix(err, source_name(answered));
      err->degraded = gt->st;
      err->status = BG_OK;
      gt->source = answered;
      if (bgi_obs_on(gt->g->obs)) degraded_event(gt->g, answered, gt->st, err);
      return finish(gt, BG_OK);
    }
  }
  return finish(gt, gt->st);
}

/* After the first attempt: the answer, or the chain of the failure's class. */
static int first_ended(bgi_guard_task *gt, int st, bgi_err *err) {
  attempt_ended(gt, st, err);
  if (st == BG_OK) {
    gt->source = BG_SOURCE_REDIS;
    return finish(gt, BG_OK);
  }
  gt->st = st;
  gt->cls = bgi_fail_class(st);
  if (!gt->guarded || !gt->cls || !(gt->p = bgi_guard_policy(gt->g))) return finish(gt, st);
  gt->chain_i = 0;
  gt->retry = 0;
  return run_chain(gt, err);
}

/* After a retry: the answer, the next retry, or (the breaker refused it) the next action. */
static int retry_ended(bgi_guard_task *gt, int st, bgi_err *err) {
  attempt_ended(gt, st, err);
  if (st == BG_OK) {
    gt->source = BG_SOURCE_REDIS;
    return finish(gt, BG_OK);
  }
  gt->st = st;
  if (gt->rejected) {
    gt->chain_i++;
    gt->retry = 0;
  } else {
    gt->retry++;
  }
  return run_chain(gt, err);
}

static int resume_guard(bgi_task *t, int st, bgi_err *err) {
  bgi_guard_task *gt = (bgi_guard_task *)t;
  switch (gt->state) {
    case G_START:
      if (start_attempt(gt, G_FIRST, err) != -1) return BGI_NEXT_SUB;
      return first_ended(gt, err->status, err);   /* the breaker refused it */
    case G_FIRST:
      return first_ended(gt, st, err);
    case G_RETRY_SLEPT:
      if (st == BG_ECANCELED) return finish(gt, bgi_cancel_err(err, "retry backoff"));
      if (st != BG_OK) return finish(gt, st);
      count(gt->g, BGI_ST_RETRIES);
      if (start_attempt(gt, G_RETRY_ENDED, err) != -1) return BGI_NEXT_SUB;
      return retry_ended(gt, err->status, err);
    case G_RETRY_ENDED:
    default:
      return retry_ended(gt, st, err);
  }
}

void bgi_guard_task_init(bgi_guard_task *gt, bgi_guard *g, const bgi_op *op, uint64_t deadline_ns) {
  bgi_guard_fork_check(g);
  bgi_task_init(&gt->t, resume_guard);
  gt->source = BG_SOURCE_NONE;
  gt->g = g;
  gt->op = *op;
  gt->deadline_ns = deadline_ns;
  gt->state = G_START;
  gt->guarded = atomic_load_explicit(&g->policy, memory_order_relaxed) != NULL;
  gt->rejected = 0;
  gt->st = BG_OK;
  gt->cls = gt->chain_i = 0;
  gt->retry = 0;
  gt->from = gt->done = 0;
  gt->p = NULL;
  gt->started_ns = op->hist ? bgi_now_ns() : 0;
}

int bgi_guard_run(bgi_guard *g, const bgi_op *op, uint64_t deadline_ns, bgi_exec_fn exec, int *source, bgi_err *err) {
  bgi_guard_task gt;
  bgi_guard_task_init(&gt, g, op, deadline_ns);
  int st = bgi_task_run(&gt.t, exec, err);
  *source = gt.source;
  return st;
}
