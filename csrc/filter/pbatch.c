/* A window of a partitioned filter's items, split per partition (partitioned.h). */
#include "filter/partitioned.h"

#include <stdlib.h>
#include <string.h>

void bgi_pwin_init(bgi_pwin *w) {
  memset(w, 0, sizeof *w);
  w->h = w->h1;
  w->part = w->part1;
  w->todo = w->todo1;
  w->redo = w->redo1;
  w->fwd = w->fwd1;
  w->order = w->order1;
  w->cap = 1;
}

static void free_arrays(bgi_pwin *w) {
  if (w->h != w->h1) free(w->h);
  if (w->part != w->part1) free(w->part);
  /* todo and redo swap places: free what is not the one-item room */
  if (w->todo != w->todo1 && w->todo != w->redo1) free(w->todo);
  if (w->redo != w->todo1 && w->redo != w->redo1) free(w->redo);
  if (w->order != w->order1) free(w->order);
  if (w->fwd != w->fwd1) free(w->fwd);
}

void bgi_pwin_free(bgi_pwin *w) {
  free_arrays(w);
  free(w->start);
  free(w->lanes);
  free(w->subs);
  bgi_pwin_init(w);
}

int bgi_pwin_reserve(bgi_pwin *w, size_t n, bgi_err *err) {
  if (n > 1 && !w->lanes) {
    w->lanes = calloc(BGI_PLANES_MAX, sizeof *w->lanes);
    w->subs = calloc(BGI_PLANES_MAX, sizeof *w->subs);
    if (!w->lanes || !w->subs) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  if (n <= w->cap) return BG_OK;
  free_arrays(w);
  w->h = malloc(n * sizeof *w->h);
  w->part = malloc(n * sizeof *w->part);
  w->todo = malloc(n * sizeof *w->todo);
  w->redo = malloc(n * sizeof *w->redo);
  w->order = malloc(n * sizeof *w->order);
  w->fwd = malloc(n * sizeof *w->fwd);
  if (!w->h || !w->part || !w->todo || !w->redo || !w->order || !w->fwd) {
    /* back to the one-item room, nothing leaked */
    free(w->h), free(w->part), free(w->todo), free(w->redo), free(w->order), free(w->fwd);
    w->h = w->h1, w->part = w->part1, w->todo = w->todo1, w->redo = w->redo1, w->order = w->order1;
    w->fwd = w->fwd1;
      w->cap = 1;
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  w->cap = n;
  return BG_OK;
}

void bgi_pwin_hash(bgi_pwin *w, const void *const *items, const size_t *lens, size_t n) {
  w->n = n;
  for (size_t i = 0; i < n; i++) {
    bgi_hash128(items[i], lens[i], w->h[i]);
  }
  bgi_pwin_all(w);
}

void bgi_pwin_set_hashes(bgi_pwin *w, const uint64_t (*h)[2], size_t n) {
  w->n = n;
  memcpy(w->h, h, n * sizeof *h);
  bgi_pwin_all(w);
}

int bgi_pwin_group(bgi_pwin *w, uint32_t parts, bgi_err *err) {
  for (size_t j = 0; j < w->n_todo; j++) {
    uint32_t i = w->todo[j];
    w->part[i] = bgi_partition_of(w->h[i][0], w->h[i][1], parts);
  }
  if (w->n_todo <= 1) return BG_OK;
  if (parts + 1 > w->cap_parts) {
    uint32_t *s = realloc(w->start, (parts + 1) * sizeof *s);
    if (!s) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    w->start = s;
    w->cap_parts = parts + 1;
  }
  /* a counting sort: start[p + 1] counts p's items, then becomes where they end */
  memset(w->start, 0, (parts + 1) * sizeof *w->start);
  for (size_t j = 0; j < w->n_todo; j++) w->start[w->part[w->todo[j]] + 1]++;
  for (uint32_t p = 0; p < parts; p++) w->start[p + 1] += w->start[p];
  for (size_t j = 0; j < w->n_todo; j++) {
    uint32_t i = w->todo[j];
    w->order[w->start[w->part[i]]++] = i;
  }
  /* each start[p] now points where p + 1's items begin: shift back by one partition */
  memmove(w->start + 1, w->start, parts * sizeof *w->start);
  w->start[0] = 0;
  return BG_OK;
}

uint32_t bgi_pwin_next(const bgi_pwin *w, uint32_t parts, uint32_t *p, const uint32_t **items) {
  if (w->n_todo <= 1) {
    if (w->n_todo == 1 && *p <= w->part[w->todo[0]]) {
      *p = w->part[w->todo[0]];
      *items = w->todo;
      return 1;
    }
    *p = parts;
    return 0;
  }
  for (; *p < parts; (*p)++) {
    uint32_t k = w->start[*p + 1] - w->start[*p];
    if (k) {
      *items = w->order + w->start[*p];
      return k;
    }
  }
  return 0;
}

uint32_t bgi_pwin_lanes(bgi_pwin *w, uint32_t parts, uint32_t *cursor, bgi_plane *one, bgi_plane_init_fn init,
                        void *ctx) {
  uint32_t nlanes = 0;
  const uint32_t *items;
  uint32_t k;
  while (nlanes < BGI_PLANES_MAX && (k = bgi_pwin_next(w, parts, cursor, &items)) > 0) {
    bgi_plane *l = w->lanes ? &w->lanes[nlanes] : one;
    init(l, items, k, *cursor, ctx);
    if (w->lanes) w->subs[nlanes].t = &l->t;
    nlanes++;
    (*cursor)++;
    if (!w->lanes) break;   /* one item, one lane */
  }
  return nlanes;
}

int bgi_pwin_run(bgi_task *t, bgi_pwin *w, bgi_plane *one, uint32_t nlanes) {
  if (nlanes == 1) return bgi_task_sub(t, w->lanes ? &w->lanes[0].t : &one->t);
  return bgi_task_fanout(t, w->subs, nlanes);
}

int bgi_pwin_lane_status(bgi_pwin *w, uint32_t nlanes, uint32_t i, int round_st, bgi_err *err) {
  if (nlanes == 1) return round_st;   /* a SUB: its status, its message already in err */
  int st = w->subs[i].t->status;
  if (st != BG_OK) *err = w->subs[i].err;
  return st;
}

/* ---- lanes ---------------------------------------------------------------------------------- */

void bgi_plane_init(bgi_plane *l, bg_filter *f, const bgi_pwin *w, const uint32_t *items, uint32_t n, uint32_t part,
                    const bgi_pgen *g, uint64_t deadline_ns) {
  memset(l, 0, sizeof *l);
  l->f = f;
  l->w = w;
  l->items = items;
  l->n = n;
  l->part = part;
  l->g = *g;
  l->deadline_ns = deadline_ns;
  l->outcome = BGI_LANE_DONE;
}

int bgi_plane_indexes(bgi_conn *c, const bgi_plane *l, bgi_err *err) {
  uint64_t size = bgi_cfg_size(l->g.cfg);
  uint32_t k = bgi_cfg_k(l->g.cfg);
  if (bgi_conn_idx_reserve(c, (size_t)l->n * k) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (uint32_t j = 0; j < l->n; j++) {
    const uint64_t *h = l->w->h[l->items[j]];
    bgi_indexes_from_hash(h[0], h[1], size, k, c->idx + (size_t)j * k);
  }
  return BG_OK;
}
