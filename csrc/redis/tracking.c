#include "redis/tracking.h"

#include <string.h>

#if HIREDIS_MAJOR >= 1
/* Called by redisGetReply for each push, before the reply it precedes is returned. The push was
 * parsed into the connection's arena, which frees it with the call's other replies. */
static void on_push(void *privdata, void *reply) {
  (void)reply;
  ((bgi_tracking *)privdata)->epoch++;
}

int bgi_tracking_supported(void) { return 1; }

void bgi_tracking_attach(redisContext *ctx, bgi_tracking *t) {
  ctx->privdata = t;
  ctx->free_privdata = NULL;
  /* also replaces hiredis' default handler, which would free arena memory with freeReplyObject */
  redisSetPushCallback(ctx, on_push);
}
#else
int bgi_tracking_supported(void) { return 0; }

void bgi_tracking_attach(redisContext *ctx, bgi_tracking *t) {
  (void)ctx;
  (void)t;
}
#endif

void bgi_tracking_reset(bgi_tracking *t) {
  t->on = 0;
  t->epoch = 0;
  memset(t->slot, 0, sizeof t->slot);
}
