#include "redis/tracking.h"

#include <stdio.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "redis/keyslot.h"

/* The pushes themselves are taken by whoever reads the connection (redis/conn.c, redis/mux.c):
 * they arrive in the stream ahead of the replies they precede. */
#if HIREDIS_MAJOR >= 1
int bgi_tracking_supported(void) { return 1; }
#else
int bgi_tracking_supported(void) { return 0; }
#endif

/* Expires on its own; written by every connection that turns tracking on. */
#define PROBE_KEY "bloomguard:tracking-probe"

static void command(bgi_buf *out, const char *const *argv, size_t argc) {
  bgi_resp_array(out, argc);
  for (size_t i = 0; i < argc; i++) bgi_resp_cstr(out, argv[i]);
}

int bgi_tracking_append_handshake(bgi_buf *out, int probe_slot) {
  char key[64] = PROBE_KEY;
  if (probe_slot >= 0) snprintf(key, sizeof key, PROBE_KEY ":{%u}", bgi_slot_tag((unsigned)probe_slot));
  static const char *const hello[] = {"HELLO", "3"}, *const on[] = {"CLIENT", "TRACKING", "ON", "OPTIN"},
                           *const multi[] = {"MULTI"}, *const caching[] = {"CLIENT", "CACHING", "YES"},
                           *const exec[] = {"EXEC"}, *const ping[] = {"PING"};
  const char *const read[] = {"EXISTS", key}, *const write[] = {"SET", key, "1", "PX", "1000"};
  if (bgi_buf_reserve(out, bgi_resp_bound(20, 256)) != BG_OK) return BG_ENOMEM;
  command(out, hello, 2);
  command(out, on, 4);
  command(out, multi, 1);
  command(out, caching, 3);
  command(out, read, 2);
  command(out, exec, 1);
  command(out, write, 5);
  command(out, ping, 1);
  return BG_OK;
}

void bgi_tracking_take_handshake(bgi_tracking *t, bgi_reply *const *rep, uint64_t epoch_before) {
  int ok = 1;
  for (int i = 0; i < BGI_TRACKING_HANDSHAKE_REPLIES; i++) ok &= rep[i]->type != REDIS_REPLY_ERROR;
  /* EXEC's array: [OK, 0 or 1]; a refused command inside it is an error element */
  const bgi_reply *ex = rep[5];
  ok &= ex->type == REDIS_REPLY_ARRAY && ex->elements == 2 && ex->element[0]->type != REDIS_REPLY_ERROR &&
        ex->element[1]->type != REDIS_REPLY_ERROR;
  /* the write's invalidation came before PING's reply: reads in a transaction are tracked */
  atomic_store(&t->on, ok && bgi_tracking_epoch(t) != epoch_before);
}

void bgi_tracking_reset(bgi_tracking *t) {
  atomic_store(&t->on, 0);
  atomic_fetch_add(&t->epoch, 1);   /* never back: see tracking.h */
  bgi_tracking_lock(t);
  memset(t->slot, 0, sizeof t->slot);
  bgi_tracking_unlock(t);
}
