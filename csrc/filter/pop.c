/*
 * contains and add on a partitioned filter (partitioned.h), window by window: a window's items
 * hashed once, grouped by partition of the live generation, and a round of lanes (pquery.c,
 * padd.c) run as one fan-out. Items whose lane found its partition gone or changed are asked
 * again after the central config was read again (at most BG_OPT_CONFIG_RETRIES times a window).
 */
#include "filter/partitioned.h"

enum { C_START, C_CONFIG, C_ROUND };

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

static int reload(bgi_pop_task *pt) {
  pt->state = C_CONFIG;
  bgi_pconf_req(&pt->req, &pt->ld, pt->f, pt->deadline_ns);
  return bgi_task_call(&pt->t, &pt->req);
}

static int next_round(bgi_pop_task *pt, bgi_err *err);

/* Groups the window's items to do by the live generation's partitions, and starts the rounds. */
static int group(bgi_pop_task *pt, bgi_err *err) {
  bgi_pconf conf;
  bgi_pconf_get(pt->f, &conf);
  pt->g = conf.live;
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
  bgi_pwin_hash(&pt->win, pt->items + pt->from, pt->lens + pt->from, m);
  pt->attempt = 0;
  return group(pt, err);
}

static int next_round(bgi_pop_task *pt, bgi_err *err) {
  pt->nlanes = bgi_pwin_lanes(&pt->win, pt->g.parts, &pt->cursor, &pt->one, init_lane, pt);
  if (pt->nlanes) {
    pt->state = C_ROUND;
    return bgi_pwin_run(&pt->t, &pt->win, &pt->one, pt->nlanes);
  }
  if (!pt->win.n_redo) return next_window(pt, err);
  /* some partitions were gone or changed: the central config says what is live now */
  if (pt->attempt++ >= pt->retries)
    return finish(pt, bgi_err_set(err, BG_ECONFIG, "%s: the partitioned filter \"%s\" changed on each of %lld attempts",
                                  pt->is_add ? "add" : "contains", pt->f->name.s, (long long)pt->attempt));
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
    case C_ROUND:
    default:
      break;
  }
  for (uint32_t i = 0; i < pt->nlanes; i++) {
    bgi_plane *l = bgi_pwin_lane(&pt->win, &pt->one, i);
    int ls = bgi_pwin_lane_status(&pt->win, pt->nlanes, i, st, err);
    if (ls != BG_OK) return finish(pt, ls);
    if (l->outcome == BGI_LANE_GONE) {
      memcpy(pt->win.redo + pt->win.n_redo, l->items, l->n * sizeof *l->items);
      pt->win.n_redo += l->n;
    } else if (pt->added) {
      *pt->added += l->added;
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
