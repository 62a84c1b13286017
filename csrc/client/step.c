/* One Lua step of a rotation or a lock (step.h). */
#include "client/step.h"

#include <stdio.h>
#include <string.h>

#include "redis/keyslot.h"
#include "redis/layout.h"

static int build_step(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  bgi_step *s = ctx;
  size_t payload = 0;
  char guard[64];
  int glen = snprintf(guard, sizeof guard, BGI_KEY_MIGRATION_GUARD "{%u}", bgi_slot_tag((unsigned)s->slot));
  for (size_t i = 0; i < s->nkeys + s->nargs; i++) payload += s->lens[i];
  if (bgi_script_begin(&c->out, s->script, s->run.use_body, s->nkeys + 1, s->nargs) != BG_OK ||
      bgi_buf_reserve(&c->out, bgi_resp_bound(s->nkeys + 1 + s->nargs, payload + (size_t)glen)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  for (size_t i = 0; i < s->nkeys; i++) bgi_resp_bulk(&c->out, s->argv[i], s->lens[i]);
  /* the fault switch is the cluster tests' negative control: a key that does exist guards nothing */
  if (c->fault_no_guard) bgi_resp_bulk(&c->out, s->argv[0], s->lens[0]);
  else bgi_resp_bulk(&c->out, guard, (size_t)glen);
  for (size_t i = s->nkeys; i < s->nkeys + s->nargs; i++) bgi_resp_bulk(&c->out, s->argv[i], s->lens[i]);
  c->durable = s->durable;
  *nreplies = 1;
  return BG_OK;
}

static int parse_step(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  bgi_step *s = ctx;
  const bgi_reply *x = rep[0];
  (void)c, (void)n;
  if (bgi_reply_is_error(x, "NOSCRIPT")) {
    s->run.noscript = 1;
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
    } else if (e->str && s->nstrs < 2) {
      snprintf(s->str[s->nstrs++], sizeof s->str[0], "%s", e->str);
    }
  }
  return BG_OK;
}

int bgi_step_run(bg_client *c, int slot, uint64_t deadline_ns, bgi_step *s, bgi_err *err) {
  s->slot = slot;
  return bgi_client_call_script_ex(c, slot, deadline_ns, s->flags, &s->run, s->script->name, build_step, parse_step,
                                   s, err);
}
