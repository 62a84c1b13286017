/*
 * Waiting for an unlock: a connection of its own (never a pooled one, which must stay free for
 * request/reply calls) SUBSCRIBEd to the lock's channel, "redisson_lock__channel:{KEY}". Every
 * release - bloomguard's or Redisson's - publishes there, so a waiter tries again at once instead
 * of sleeping out a poll interval. In a Redis Cluster the subscription is sharded (SSUBSCRIBE, on
 * the node serving the channel's slot), where Redisson 3.22+ waits and releases; the server ends
 * it when the slot moves or the node is demoted, and the waiter subscribes again on the new
 * owner. The blocking hiredis context is read with poll(2) and redisBufferRead, so a wait that
 * times out leaves the connection usable.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lock/lock.h"
#include "redis/redirect.h"

/* SUBSCRIBE, or in a cluster SSUBSCRIBE (Redisson 3.22+ releases there with SPUBLISH, and so do
 * we: lock/steps.c wake()), to the channel on the node serving it. *moved is set from a MOVED. */
static int subscribe_once(bg_lock *l, bgi_lock_sub *s, bgi_redirect *moved, bgi_err *err) {
  bgi_reply *rep[1];
  const bgi_endpoint *ep;
  const char *cmd = l->client->cluster && !l->client->cluster->sentinel ? "SSUBSCRIBE" : "SUBSCRIBE";
  int st = bgi_client_endpoint(l->client, l->slot, 0, &ep, err);
  if (st != BG_OK) return st;
  /* a subscriber stays in RESP2: there, messages are replies, not pushes */
  if ((st = bgi_conn_open(&s->conn, ep, 0, BGI_CONN_NO_TRACKING, err)) != BG_OK) return st;
  bgi_buf_reset(&s->conn.out);
  if (bgi_buf_reserve(&s->conn.out, bgi_resp_bound(2, l->channel.len + 16)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&s->conn.out, 2);
  bgi_resp_cstr(&s->conn.out, cmd);
  bgi_resp_key(&s->conn.out, &l->channel);
  st = bgi_conn_roundtrip(&s->conn, rep, 1, bgi_deadline_in_ms(l->client->ep.command_timeout_ms), err);
  if (st != BG_OK) return st;
  if (rep[0]->type == REDIS_REPLY_ERROR && bgi_redirect_parse(rep[0], moved) == BGI_REDIR_MOVED) {
    if (!moved->host[0]) snprintf(moved->host, sizeof moved->host, "%s", ep->url.host);
    return bgi_err_set(err, BG_ESERVER, "%s: %s", cmd, rep[0]->str);
  }
  if (rep[0]->type != REDIS_REPLY_ARRAY || rep[0]->elements < 1 || !rep[0]->element[0]->str ||
      strcasecmp(rep[0]->element[0]->str, cmd) != 0)
    return rep[0]->type == REDIS_REPLY_ERROR ? bgi_reply_error(rep[0], cmd, err)
                                             : bgi_err_set(err, BG_EPROTO, "%s: unexpected reply", cmd);
  return BG_OK;
}

int bgi_lock_sub_open(bg_lock *l, bgi_lock_sub *s, bgi_err *err) {
  int st = BG_OK;
  memset(s, 0, sizeof *s);
  /* a MOVED (the slot moved before the map knew) is followed, a few times at most */
  for (int attempt = 0; attempt < 3; attempt++) {
    bgi_redirect moved = {.kind = BGI_REDIR_NONE};
    st = subscribe_once(l, s, &moved, err);
    if (st == BG_OK) {
      s->active = 1;
      s->cluster = l->client->cluster;
      return BG_OK;
    }
    bgi_conn_free(&s->conn);
    memset(s, 0, sizeof *s);
    if (moved.kind != BGI_REDIR_MOVED) break;
    bgi_node *to = bgi_cluster_node(l->client->cluster, moved.host, moved.port);
    if (!to) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    bgi_cluster_moved(l->client->cluster, moved.slot, to);
  }
  return st;
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
    /* the server ended a sharded subscription itself: the slot migrated or the node was demoted.
     * The caller subscribes again, on the slot's owner (bgi_lock_sub_open follows MOVED). */
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->str &&
        strcmp(r->element[0]->str, "sunsubscribe") == 0) {
      if (s->cluster) bgi_cluster_want_reload(s->cluster);
      return -1;
    }
    /* replies live in the connection's arena: forget them once no reply is half-read */
    if (ctx->reader->ridx == -1) bgi_arena_reset(&s->conn.arena);
  }
  return got;
}

int bgi_lock_sub_wait(bgi_lock_sub *s, int64_t ms) {
  if (!s->active) return -1;
  int got = drain(s);
  if (got != 0) goto out;
  /* in slices of the one wait primitive: a cancelled call stops waiting within one */
  int r = bgi_poll_fd(s->conn.ctx->fd, POLLIN, ms, NULL);
  if (r == BG_ECANCELED) return BG_ECANCELED;  /* the subscription stays usable; the caller closes it */
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
