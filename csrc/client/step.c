/* One Lua step of a rotation or a lock (step.h). */
#include "client/step.h"

#include <stdio.h>
#include <string.h>

#include "redis/keyslot.h"
#include "redis/layout.h"

/* Appends s's EVALSHA (or EVAL) with its keys, the migration guard and its arguments to c->out. */
static int append_step(bgi_conn *c, bgi_step *s, const bgi_script_run *run, bgi_err *err) {
  size_t payload = 0;
  char guard[64];
  int glen = snprintf(guard, sizeof guard, BGI_KEY_MIGRATION_GUARD "{%u}", bgi_slot_tag((unsigned)s->slot));
  for (size_t i = 0; i < s->nkeys + s->nargs; i++) payload += s->lens[i];
  if (bgi_script_begin(&c->out, s->script, run->use_body, s->nkeys + 1, s->nargs) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(s->nkeys + 1 + s->nargs, payload + (size_t)glen)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t i = 0; i < s->nkeys; i++) bgi_resp_bulk(&c->out, s->argv[i], s->lens[i]);
  /* the fault switch is the cluster tests' negative control: a key that does exist guards nothing */
  if (c->fault_no_guard) bgi_resp_bulk(&c->out, s->argv[0], s->lens[0]);
  else bgi_resp_bulk(&c->out, guard, (size_t)glen);
  for (size_t i = s->nkeys; i < s->nkeys + s->nargs; i++) bgi_resp_bulk(&c->out, s->argv[i], s->lens[i]);
  return BG_OK;
}

static int build_step(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_step *s = ctx;
  int st = append_step(c, s, &s->run, err);
  c->durable = s->durable;
  *nreplies = 1;
  return st;
}

/* Reads one step's reply into s; NOSCRIPT sets run->noscript (the call is sent again with the body). */
static int parse_one(const bgi_reply *x, bgi_step *s, bgi_script_run *run, bgi_err *err) {
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    run->noscript = 1;
    return BG_OK;
  }
  if (x->type == REDIS_REPLY_ERROR) return bgi_reply_error(x, s->script->name, err);
  if (x->type != REDIS_REPLY_ARRAY || x->elements == 0 || x->element[0]->type != REDIS_REPLY_INTEGER)
    return bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", s->script->name);
  s->nints = s->nstrs = 0;
  s->str[0][0] = s->str[1][0] = 0;
  for (size_t i = 0; i < x->elements; i++) {
    const bgi_reply *e = x->element[i];
    if (e->type == REDIS_REPLY_INTEGER) {
      if (s->nints < 4) s->ints[s->nints++] = e->integer;
    } else if (e->type == REDIS_REPLY_ARRAY && s->take_list) {
      int st = s->take_list(s->take_ctx, e, err);
      if (st != BG_OK) return st;
    } else if (e->str && s->nstrs < 2) {
      snprintf(s->str[s->nstrs++], sizeof s->str[0], "%s", e->str);
    }
  }
  return BG_OK;
}

static int parse_step(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_step *s = ctx;
  (void)c, (void)n;
  return parse_one(rep[0], s, &s->run, err);
}

int bgi_step_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *s, bgi_err *err) {
  s->slot = slot;
  return bgi_client_call_script_ex(c, slot, deadline_ns, s->flags, &s->run, s->script->name, build_step, parse_step,
                                   s, err);
}

/* ---- several steps, one round trip ---------------------------------------------------------- */

typedef struct batch {
  bgi_step *const *steps;
  size_t n;
  bgi_script_run run;   /* one for the batch: a NOSCRIPT anywhere sends every body */
} batch;

static int build_batch(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  batch *b = ctx;
  for (size_t i = 0; i < b->n; i++) {
    int st = append_step(c, b->steps[i], &b->run, err);
    if (st != BG_OK) return st;
  }
  *nreplies = b->n;
  return BG_OK;
}

static int parse_batch(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  batch *b = ctx;
  (void)c, (void)n;
  (void)err;
  for (size_t i = 0; i < b->n; i++) {
    bgi_err one = {0};   /* a step's failure is its own: the others' replies still count */
    b->steps[i]->status = parse_one(rep[i], b->steps[i], &b->run, &one);
  }
  return BG_OK;
}

int bgi_steps_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *const *steps, size_t n, bgi_err *err) {
  if (n == 0) return BG_OK;
  if (n > BGI_STEPS_MAX) return bgi_err_set(err, BG_EINVAL, "internal: %zu steps in one round trip", n);
  batch b = {steps, n, {0}};
  for (size_t i = 0; i < n; i++) steps[i]->status = BG_OK;
  return bgi_client_call_script_ex(c, slot, deadline_ns, 0, &b.run, steps[0]->script->name, build_batch, parse_batch,
                                   &b, err);
}
