/*
 * contains and add on a partitioned filter (partitioned.h), window by window: a window's items
 * hashed once, grouped by partition of the live generation, and a round of lanes (pquery.c,
 * padd.c) run as one fan-out. Items whose lane found its partition gone or changed are asked
 * again after the central config was read again (at most BG_OPT_CONFIG_RETRIES times a window).
 *
 * A rotation's commit (rotation/pswap.c) marks each partition of the live generation with the
 * generation it moves to ("forward"), then makes that one live in the central config. Items an
 * add put into a forward partition are added to the named generation too before the add returns,
 * so none is missing from it whenever the commit lands. A query that read a forward partition
 * keeps its answers only if the central config, read after those bits, still names the
 * generation they came from (the bits were then read before the switch); otherwise the window is
 * asked again of what is live.
 */
#include "filter/partitioned.h"

#include <stdio.h>

enum { C_START, C_CONFIG, C_ROUND, C_FORWARD, C_CONFIRM, C_NAP };

static atomic_int fault_ignore_forward;

void bgi_pop_fault_ignore_forward(int on) { atomic_store(&fault_ignore_forward, on); }

static void init_lane(bgi_plane *l, const uint32_t *items, uint32_t n, uint32_t part, void *ctx) {
  bgi_pop_task *pt = ctx;
  bgi_plane_init(l, pt->f, &pt->win, items, n, part, &pt->g, pt->deadline_ns);
  if (pt->is_add) bgi_plane_add_init(l);
  else bgi_plane_query_init(l, pt->present + pt->from);
}

static int finish(bgi_pop_task *pt, int st) {
  bgi_pop_task_free(pt);
  return bgi_task_done(&pt->t, st);
}

/* Reads the central config; state says what the answer is for. */
static int load_config(bgi_pop_task *pt, int state) {
  pt->state = state;
  bgi_pconf_req(&pt->req, &pt->ld, pt->f, pt->deadline_ns);
  return bgi_task_call(&pt->t, &pt->req);
}

static int reload(bgi_pop_task *pt) { return load_config(pt, C_CONFIG); }

static int next_round(bgi_pop_task *pt, bgi_err *err);

/* Groups the window's items to do by the live generation's partitions (or the task's own), and
 * starts the rounds. */
static int group(bgi_pop_task *pt, bgi_err *err) {
  bgi_pconf conf;
  bgi_pconf_get(pt->f, &conf);
  pt->g = pt->fixed.gen ? pt->fixed : conf.live;
  pt->forwarding = 0;
  if (!pt->g.gen) return reload(pt);
  int st = bgi_pwin_group(&pt->win, pt->g.parts, err);
  if (st != BG_OK) return finish(pt, st);
  pt->cursor = 0;
  return next_round(pt, err);
}

static int next_window(bgi_pop_task *pt, bgi_err *err) {
  pt->from += pt->win.n;
  *pt->done = pt->from;
  if (pt->from >= pt->n) return finish(pt, BG_OK);
  size_t m = pt->n - pt->from < BGI_WINDOW_ITEMS ? pt->n - pt->from : BGI_WINDOW_ITEMS;
  int st = bgi_pwin_reserve(&pt->win, m, err);
  if (st != BG_OK) return finish(pt, st);
  if (pt->hashes) bgi_pwin_set_hashes(&pt->win, pt->hashes + pt->from, m);
  else bgi_pwin_hash(&pt->win, pt->items + pt->from, pt->lens + pt->from, m);
  pt->attempt = 0;
  pt->confirm = pt->fwd_gen = 0;
  return group(pt, err);
}

static int changed_too_often(bgi_pop_task *pt, bgi_err *err) {
  return finish(pt, bgi_err_set(err, BG_ECONFIG, "%s: the partitioned filter \"%s\" changed on each of %lld attempts",
                                pt->is_add ? "add" : "contains", pt->f->name.s, (long long)pt->attempt));
}

/* The generation gen as the handle's copy of the central config knows it (gen 0: it does not). */
static bgi_pgen known_gen(bg_filter *f, uint64_t gen) {
  bgi_pconf conf;
  bgi_pconf_get(f, &conf);
  if (conf.live.gen == gen) return conf.live;
  if (conf.next.gen == gen) return conf.next;
  return (bgi_pgen){0};
}

/* The items added into forward partitions go to the generation those named. Unknown to the
 * config even when read again: the rotation that built it was aborted or died, and the items are
 * in the generation that stays live. */
static int forward(bgi_pop_task *pt, int reloaded, bgi_err *err) {
  bgi_pgen target = known_gen(pt->f, pt->fwd_gen);
  if (!target.gen && !reloaded) return load_config(pt, C_FORWARD);
  if (!target.gen || pt->attempt++ >= pt->retries) {
    pt->win.n_fwd = 0;
    return target.gen ? changed_too_often(pt, err) : next_window(pt, err);
  }
  memcpy(pt->win.todo, pt->win.fwd, pt->win.n_fwd * sizeof *pt->win.fwd);
  pt->win.n_todo = pt->win.n_fwd;
  pt->win.n_fwd = pt->win.n_redo = 0;
  pt->g = target;
  pt->forwarding = 1;
  pt->fwd_gen = 0;
  int st = bgi_pwin_group(&pt->win, pt->g.parts, err);
  if (st != BG_OK) return finish(pt, st);
  pt->cursor = 0;
  return next_round(pt, err);
}

static int next_round(bgi_pop_task *pt, bgi_err *err) {
  pt->nlanes = bgi_pwin_lanes(&pt->win, pt->g.parts, &pt->cursor, &pt->one, init_lane, pt);
  if (pt->nlanes) {
    pt->state = C_ROUND;
    return bgi_pwin_run(&pt->t, &pt->win, &pt->one, pt->nlanes);
  }
  if (!pt->win.n_redo) {
    if (pt->win.n_fwd) return forward(pt, 0, err);
    if (pt->confirm) return load_config(pt, C_CONFIRM);
    return next_window(pt, err);
  }
  if (pt->locked) {
    /* partitions being rewritten by a locked rotation: asked again after a nap, as a plain
     * filter's queries wait for its write lock */
    uint64_t until = 0;
    char held[200];
    snprintf(held, sizeof held, "a locked rotation rewrites some of its %u partitions in place", pt->g.parts);
    pt->locked = 0;
    int st = bgi_lock_nap(pt->f, &pt->lw, held, &until, err);
    if (st != BG_OK) return finish(pt, st);
    bgi_pwin_take_redo(&pt->win);
    pt->state = C_NAP;
    return bgi_task_sleep(&pt->t, until);
  }
  /* some partitions were gone or changed: the central config says what is live now */
  if (pt->attempt++ >= pt->retries) return changed_too_often(pt, err);
  bgi_pwin_take_redo(&pt->win);
  return reload(pt);
}

static int resume_pop(bgi_task *t, int st, bgi_err *err) {
  bgi_pop_task *pt = (bgi_pop_task *)t;
  switch (pt->state) {
    case C_START:
      pt->win.n = 0;
      return next_window(pt, err);
    case C_CONFIG:
      if (st != BG_OK) return finish(pt, st);
      if (pt->ld.kind != BGI_KIND_PARTITIONED)
        return finish(pt, bgi_err_set(err, BG_ENOTINIT, "%s: \"%s\" is no longer a partitioned filter",
                                      pt->is_add ? "add" : "contains", pt->f->name.s));
      return group(pt, err);
    case C_FORWARD:
      if (st != BG_OK) return finish(pt, st);
      return forward(pt, 1, err);
    case C_NAP:
      if (st != BG_OK) return finish(pt, st);
      return group(pt, err);
    case C_CONFIRM:
      if (st != BG_OK) return finish(pt, st);
      if (pt->ld.kind == BGI_KIND_PARTITIONED && pt->ld.conf.live.gen == pt->confirm && pt->g.gen == pt->confirm)
        return next_window(pt, err);
      /* the commit landed after (some of) these bits were read: ask what is live now */
      pt->confirm = 0;
      if (pt->attempt++ >= pt->retries) return changed_too_often(pt, err);
      bgi_pwin_all(&pt->win);
      return pt->ld.kind == BGI_KIND_PARTITIONED ? group(pt, err) : reload(pt);
    case C_ROUND:
    default:
      break;
  }
  for (uint32_t i = 0; i < pt->nlanes; i++) {
    bgi_plane *l = bgi_pwin_lane(&pt->win, &pt->one, i);
    int ls = bgi_pwin_lane_status(&pt->win, pt->nlanes, i, st, err);
    if (ls != BG_OK) return finish(pt, ls);
    if (l->outcome == BGI_LANE_GONE) {
      if (pt->fixed.gen) {
        char key[160];
        return finish(pt, bgi_err_set(err, BG_ESERVER, "rotation of \"%s\": its partition %s vanished (it expired, was "
                                      "evicted or deleted); the live filter is unchanged: rotate again", pt->f->name.s,
                                      bgi_pk_text(pt->f, l->g.gen, l->part, l->g.parts, BGI_PKEY_META, key, sizeof key)));
      }
      /* a generation the items were forwarded to is gone: its rotation ended without a commit */
      if (pt->forwarding) continue;
      memcpy(pt->win.redo + pt->win.n_redo, l->items, l->n * sizeof *l->items);
      pt->win.n_redo += l->n;
      continue;
    }
    if (l->outcome == BGI_LANE_LOCKED) {
      memcpy(pt->win.redo + pt->win.n_redo, l->items, l->n * sizeof *l->items);
      pt->win.n_redo += l->n;
      pt->locked = 1;
      continue;
    }
    if (pt->added && !pt->forwarding) *pt->added += l->added;
    if (l->forward && !pt->fixed.gen && !atomic_load_explicit(&fault_ignore_forward, memory_order_relaxed)) {
      if (pt->is_add) {
        memcpy(pt->win.fwd + pt->win.n_fwd, l->items, l->n * sizeof *l->items);
        pt->win.n_fwd += l->n;
        if (l->forward > pt->fwd_gen) pt->fwd_gen = l->forward;
      } else {
        pt->confirm = l->g.gen;
      }
    }
  }
  return next_round(pt, err);
}

void bgi_pop_task_init(bgi_pop_task *pt, bg_filter *f, int is_add, uint64_t deadline_ns, const void *const *items,
                       const size_t *lens, size_t n, uint8_t *present, size_t *added, size_t *done) {
  bgi_task_init(&pt->t, resume_pop);
  pt->f = f;
  pt->is_add = is_add;
  pt->items = items;
  pt->lens = lens;
  pt->n = n;
  pt->done = done;
  pt->added = added;
  pt->present = present;
  pt->hashes = NULL;
  pt->fixed = (bgi_pgen){0};
  pt->forwarding = pt->confirm = pt->locked = 0;
  pt->fwd_gen = 0;
  pt->lw = (bgi_lock_wait){.wait_ms = f->client->opts.lock_wait_ms, .deadline_ns = deadline_ns};
  pt->deadline_ns = deadline_ns;
  pt->retries = f->client->opts.config_retries;
  pt->attempt = 0;
  pt->state = C_START;
  pt->from = 0;
  bgi_pwin_init(&pt->win);
  *done = 0;
  if (added) *added = 0;
}

void bgi_pop_task_free(bgi_pop_task *pt) { bgi_pwin_free(&pt->win); }

void bgi_pop_task_hashes(bgi_pop_task *pt, bg_filter *f, const bgi_pgen *g, uint64_t deadline_ns,
                         const uint64_t (*hashes)[2], size_t n, size_t *added, size_t *done) {
  bgi_pop_task_init(pt, f, 1, deadline_ns, NULL, NULL, n, NULL, added, done);
  pt->hashes = hashes;
  pt->fixed = *g;
}
