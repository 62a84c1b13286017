/* The timer heap (timers.h): a binary min-heap of pointers, each timer knowing its place. */
#include "common/timers.h"

#include <stdlib.h>

#include "bloomguard/errors.h"

void bgi_timers_init(bgi_timers *h) {
  h->heap = NULL;
  h->n = h->cap = 0;
}

void bgi_timers_free(bgi_timers *h) {
  for (size_t i = 0; i < h->n; i++) h->heap[i]->slot = 0;
  free(h->heap);
  bgi_timers_init(h);
}

static void place(bgi_timers *h, size_t i, bgi_timer *t) {
  h->heap[i] = t;
  t->slot = i + 1;
}

static void sift_up(bgi_timers *h, size_t i) {
  bgi_timer *t = h->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (h->heap[parent]->due_ns <= t->due_ns) break;
    place(h, i, h->heap[parent]);
    i = parent;
  }
  place(h, i, t);
}

static void sift_down(bgi_timers *h, size_t i) {
  bgi_timer *t = h->heap[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= h->n) break;
    if (child + 1 < h->n && h->heap[child + 1]->due_ns < h->heap[child]->due_ns) child++;
    if (h->heap[child]->due_ns >= t->due_ns) break;
    place(h, i, h->heap[child]);
    i = child;
  }
  place(h, i, t);
}

/* Removes the entry at i (the last one takes its place, then moves up or down). */
static void remove_at(bgi_timers *h, size_t i) {
  bgi_timer *gone = h->heap[i];
  gone->slot = 0;
  if (--h->n == i) return;
  place(h, i, h->heap[h->n]);
  if (i > 0 && h->heap[(i - 1) / 2]->due_ns > h->heap[i]->due_ns) sift_up(h, i);
  else sift_down(h, i);
}

int bgi_timers_arm(bgi_timers *h, bgi_timer *t, uint64_t due_ns) {
  if (t->slot) remove_at(h, t->slot - 1);
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    bgi_timer **p = realloc(h->heap, cap * sizeof *p);
    if (!p) return BG_ENOMEM;
    h->heap = p;
    h->cap = cap;
  }
  t->due_ns = due_ns;
  place(h, h->n++, t);
  sift_up(h, h->n - 1);
  return BG_OK;
}

void bgi_timers_cancel(bgi_timers *h, bgi_timer *t) {
  if (t->slot) remove_at(h, t->slot - 1);
}

bgi_timer *bgi_timers_pop_due(bgi_timers *h, uint64_t now_ns) {
  if (!h->n || h->heap[0]->due_ns > now_ns) return NULL;
  bgi_timer *t = h->heap[0];
  remove_at(h, 0);
  return t;
}
