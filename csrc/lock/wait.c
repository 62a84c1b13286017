/*
 * Waiting for an unlock: a connection of its own (never a pooled one, which must stay free for
 * request/reply calls) SUBSCRIBEd to the lock's channel, "redisson_lock__channel:{KEY}". Every
 * release - bloomguard's or Redisson's - publishes there, so a waiter tries again at once instead
 * of sleeping out a poll interval. The blocking hiredis context is read with poll(2) and
 * redisBufferRead, so a wait that times out leaves the connection usable.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "lock/lock.h"

int bgi_lock_sub_open(bg_lock *l, bgi_lock_sub *s, bgi_err *err) {
  bgi_reply *rep[1];
  memset(s, 0, sizeof *s);
  /* a subscriber stays in RESP2: there, messages are replies, not pushes */
  bgi_endpoint ep = l->client->ep;
  ep.tracking = 0;
  int st = bgi_conn_open(&s->conn, &ep, 0, err);
  if (st != BG_OK) {
    bgi_conn_free(&s->conn);
    return st;
  }
  bgi_buf_reset(&s->conn.out);
  if (bgi_buf_reserve(&s->conn.out, bgi_resp_bound(2, l->channel_len + 16)) != BG_OK) {
    bgi_conn_free(&s->conn);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  bgi_resp_array(&s->conn.out, 2);
  bgi_resp_cstr(&s->conn.out, "SUBSCRIBE");
  bgi_resp_bulk(&s->conn.out, l->channel, l->channel_len);
  st = bgi_conn_roundtrip(&s->conn, rep, 1, l->client->ep.command_timeout_ms, err);
  if (st == BG_OK && (rep[0]->type != REDIS_REPLY_ARRAY || rep[0]->elements < 1 ||
                      !rep[0]->element[0]->str || strcmp(rep[0]->element[0]->str, "subscribe") != 0))
    st = rep[0]->type == REDIS_REPLY_ERROR ? bgi_reply_error(rep[0], "SUBSCRIBE", err)
                                           : bgi_err_set(err, BG_EPROTO, "SUBSCRIBE: unexpected reply");
  if (st != BG_OK) {
    bgi_conn_free(&s->conn);
    return st;
  }
  s->active = 1;
  return BG_OK;
}

/* Takes every complete reply the reader holds: 1 if one was a message, 0 if none, -1 on error. */
static int drain(bgi_lock_sub *s) {
  redisContext *ctx = s->conn.ctx;
  int got = 0;
  for (;;) {
    void *obj = NULL;
    if (redisGetReplyFromReader(ctx, &obj) != REDIS_OK) return -1;
    if (!obj) break;
    const bgi_reply *r = obj;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->str &&
        (strcmp(r->element[0]->str, "message") == 0 || strcmp(r->element[0]->str, "smessage") == 0))
      got = 1;
    /* replies live in the connection's arena: forget them once no reply is half-read */
    if (ctx->reader->ridx == -1) bgi_arena_reset(&s->conn.arena);
  }
  return got;
}

int bgi_lock_sub_wait(bgi_lock_sub *s, int64_t ms) {
  if (!s->active) return -1;
  int got = drain(s);
  if (got != 0) goto out;
  struct pollfd p = {.fd = s->conn.ctx->fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, ms > 0x7fffffff ? 0x7fffffff : (int)(ms < 0 ? 0 : ms));
  while (r < 0 && errno == EINTR);
  if (r < 0) {
    got = -1;
    goto out;
  }
  if (r == 0) return 0;
  if (redisBufferRead(s->conn.ctx) != REDIS_OK) {
    got = -1;
    goto out;
  }
  got = drain(s);
out:
  if (got < 0) bgi_lock_sub_close(s);
  return got;
}

void bgi_lock_sub_close(bgi_lock_sub *s) {
  if (!s->active) return;
  bgi_conn_free(&s->conn);
  s->active = 0;
}
