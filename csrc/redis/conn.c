#include "redis/conn.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct timeval ms_to_tv(int64_t ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
  return tv;
}

static const char *where(const bgi_endpoint *ep, char *buf, size_t cap) {
  if (ep->url.is_unix) snprintf(buf, cap, "unix:%s", ep->url.path);
  else snprintf(buf, cap, "%s:%d", ep->url.host, ep->url.port);
  return buf;
}

/* Maps the context's transport error to a status, and marks the connection unusable. */
static int transport_error(bgi_conn *c, int saved_errno, bgi_err *err) {
  int st;
  c->broken = 1;
#ifdef REDIS_ERR_TIMEOUT
  if (c->ctx->err == REDIS_ERR_TIMEOUT) saved_errno = EAGAIN;
#endif
  if (c->ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK))
    st = bgi_err_set(err, BG_ETIMEOUT, "the server did not answer within %lld ms", (long long)c->timeout_ms);
  else if (c->ctx->err == REDIS_ERR_EOF)
    st = bgi_err_set(err, BG_ECONN, "the server closed the connection");
  else if (c->ctx->err == REDIS_ERR_PROTOCOL)
    st = bgi_err_set(err, BG_EPROTO, "protocol error: %s", c->ctx->errstr);
  else if (c->ctx->err == REDIS_ERR_OOM || c->arena.failed)
    st = bgi_err_set(err, BG_ENOMEM, "out of memory while reading a reply");
  else
    st = bgi_err_set(err, BG_ECONN, "connection error: %s", c->ctx->errstr);
  return st;
}

/* Hands c->out to hiredis, which writes it (through its TLS layer when the connection has one)
 * before it reads the first reply: every byte goes through hiredis. */
static int queue_out(bgi_conn *c, bgi_err *err) {
  if (redisAppendFormattedCommand(c->ctx, c->out.data, c->out.len) != REDIS_OK) {
    c->broken = 1;
    return bgi_err_set(err, BG_ENOMEM, "out of memory while queueing a request");
  }
  return BG_OK;
}

int bgi_conn_roundtrip(bgi_conn *c, bgi_reply **rep, size_t n, int64_t timeout_ms, bgi_err *err) {
  int st;
  if (!c->ctx || c->broken) return bgi_err_set(err, BG_ECONN, "connection is not open");
  if (timeout_ms != c->timeout_ms) {
    /* a call with its own deadline: the socket timeouts bound every send and read of it */
    if (redisSetTimeout(c->ctx, ms_to_tv(timeout_ms)) != REDIS_OK) {
      c->broken = 1;
      return bgi_err_set(err, BG_ECONN, "cannot set the socket timeout: %s", c->ctx->errstr);
    }
    c->timeout_ms = timeout_ms;
  }
  bgi_arena_reset(&c->arena);
  if ((st = queue_out(c, err)) != BG_OK) return st;
  for (int done = n > 0; !done;) {  /* nothing to read: write it all now */
    errno = 0;
    if (redisBufferWrite(c->ctx, &done) != REDIS_OK) return transport_error(c, errno, err);
  }
  for (size_t i = 0; i < n; i++) {
    void *obj = NULL;
    errno = 0;
    if (redisGetReply(c->ctx, &obj) != REDIS_OK || !obj) return transport_error(c, errno, err);
    rep[i] = obj;
  }
  c->calls++;
  return BG_OK;
}

int bgi_reply_is_error(const bgi_reply *r, const char *code) {
  size_t n = strlen(code);
  return r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, code, n) == 0;
}

int bgi_reply_error(const bgi_reply *r, const char *what, bgi_err *err) {
  const char *s = r->str ? r->str : "";
  if (strstr(s, "WRONGTYPE"))
    return bgi_err_set(err, BG_EWRONGTYPE, "%s: a key of the filter holds the wrong Redis type (%s)", what, s);
  if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9) || !strncmp(s, "NOPERM", 6))
    return bgi_err_set(err, BG_EAUTH, "%s: refused by the server: %s", what, s);
  return bgi_err_set(err, BG_ESERVER, "%s: server error: %s", what, s);
}

/* 1 when the handshake asks for RESP3 and tracking. */
static int wants_tracking(const bgi_endpoint *ep, int flags) {
  return ep->tracking && !(flags & BGI_CONN_NO_TRACKING) && bgi_tracking_supported();
}

int bgi_conn_handshake_build(bgi_conn *c, const bgi_endpoint *ep, int flags, bgi_buf *out, size_t *nreplies,
                             bgi_err *err) {
  size_t n = 0;
  size_t ulen = ep->user ? strlen(ep->user) : 0, plen = ep->password ? strlen(ep->password) : 0;
  const char *name = ep->client_name ? ep->client_name : "bloomguard";
  int st;
  if ((st = bgi_buf_reserve(out, bgi_resp_bound(9, ulen + plen + strlen(name) + 64))) != BG_OK)
    return bgi_err_set(err, st, "out of memory");
  if (ep->password) {
    bgi_resp_array(out, ep->user ? 3 : 2);
    bgi_resp_cstr(out, "AUTH");
    if (ep->user) bgi_resp_bulk(out, ep->user, ulen);
    bgi_resp_bulk(out, ep->password, plen);
    n++;
  }
  if (ep->db) {
    bgi_resp_array(out, 2);
    bgi_resp_cstr(out, "SELECT");
    bgi_resp_u64(out, (uint64_t)ep->db);
    n++;
  }
  bgi_resp_array(out, 3);
  bgi_resp_cstr(out, "CLIENT");
  bgi_resp_cstr(out, "SETNAME");
  bgi_resp_cstr(out, name);
  n++;
  if (ep->require_master) {
    bgi_resp_array(out, 1);
    bgi_resp_cstr(out, "ROLE");
    n++;
  }
  c->hs_tracking = wants_tracking(ep, flags);
  c->hs_epoch = bgi_tracking_epoch(c->track);
  if (c->hs_tracking) {
    if (bgi_tracking_append_handshake(out, __atomic_load_n(&ep->probe_slot, __ATOMIC_RELAXED)) != BG_OK)
      return bgi_err_set(err, BG_ENOMEM, "out of memory");
    n += BGI_TRACKING_HANDSHAKE_REPLIES;
  }
  *nreplies = n;
  return BG_OK;
}

int bgi_conn_handshake_take(bgi_conn *c, const bgi_endpoint *ep, bgi_reply **rep, size_t n, bgi_err *err) {
  size_t i = 0;
  (void)n;
  if (ep->password) {
    bgi_reply *r = rep[i++];
    if (r->type == REDIS_REPLY_ERROR)
      /* the user is not named: a URL whose ':' went missing holds the password in the user part */
      return bgi_err_set(err, BG_EAUTH, "authentication failed: %s (check the user and password)", r->str);
  }
  if (ep->db) {
    bgi_reply *r = rep[i++];
    if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "cluster mode"))
      return bgi_err_set(err, BG_EINVAL, "database %d requested, but a Redis Cluster has only db 0 (remove /%d "
                         "or ?db=%d from the URL, or BG_OPT_DB)", ep->db, ep->db, ep->db);
    if (r->type == REDIS_REPLY_ERROR)
      return bgi_err_set(err, BG_EAUTH, "SELECT %d refused: %s", ep->db, r->str);
  }
  bgi_reply *r = rep[i];
  if (r->type == REDIS_REPLY_ERROR) {
    /* without AUTH the first command is refused with NOAUTH: say what to do about it */
    if (!strncmp(r->str, "NOAUTH", 6))
      return bgi_err_set(err, BG_EAUTH, "the server requires a password: %s", r->str);
    /* a server that renamed or disabled CLIENT is still usable: the name is only a courtesy */
  }
  if (ep->require_master) {
    const bgi_reply *role = rep[++i];
    if (role->type != REDIS_REPLY_ARRAY || role->elements < 1 || !role->element[0]->str ||
        strcmp(role->element[0]->str, "master") != 0)
      return bgi_err_set(err, BG_ESERVER, "this server is not the master (ROLE: %s); the sentinels are asked again",
                         role->type == REDIS_REPLY_ARRAY && role->elements && role->element[0]->str
                             ? role->element[0]->str : "refused");
  }
  /* Tracking is an optimisation: a server before 6.0 (no HELLO), a read-only replica (the probe
   * writes), or one whose ACL or renamed commands refuse a step, is used with the full check on
   * every query. A connection whose HELLO worked stays in RESP3, which every parse accepts. */
  if (c->hs_tracking) bgi_tracking_take_handshake(c->track, rep + i + 1, c->hs_epoch);
  return BG_OK;
}

static int handshake(bgi_conn *c, const bgi_endpoint *ep, int flags, bgi_err *err) {
  bgi_reply *rep[4 + BGI_TRACKING_HANDSHAKE_REPLIES];
  size_t n = 0;
  bgi_buf_reset(&c->out);
  int st = bgi_conn_handshake_build(c, ep, flags, &c->out, &n, err);
  if (st == BG_OK) st = bgi_conn_roundtrip(c, rep, n, c->timeout_ms, err);
  /* the handshake secret must not linger in the reusable buffer */
  memset(c->out.data, 0, c->out.len);
  if (st != BG_OK) return st;
  return bgi_conn_handshake_take(c, ep, rep, n, err);
}

/* ---- the non-blocking pieces (a submission queue's connections, client/pipes.c) ---------------- */

int bgi_conn_start(bgi_conn *c, const bgi_endpoint *ep, bgi_err *err) {
  char at[300];
  bgi_conn_drop(c);
  if (!c->track) c->track = &c->own_track;
  c->broken = 0;
  c->calls = 0;
  if (ep->tls) return bgi_err_set(err, BG_ENOTSUP, "TLS on a submission queue's connections is not built yet");
  if (ep->url.is_unix) c->ctx = redisConnectUnixNonBlock(ep->url.path);
  else c->ctx = redisConnectNonBlock(ep->url.host, ep->url.port);
  if (!c->ctx) return bgi_err_set(err, BG_ENOMEM, "out of memory creating a connection");
  if (c->ctx->err) {
    int st = bgi_err_set(err, BG_ECONN, "cannot connect to %s: %s", where(ep, at, sizeof at), c->ctx->errstr);
    bgi_conn_drop(c);
    return st;
  }
  bgi_reply_attach(c->ctx, &c->arena);
  bgi_tracking_attach(c->ctx, c->track);
  return BG_OK;
}

int bgi_conn_connect_step(bgi_conn *c, const bgi_endpoint *ep, short *want, bgi_err *err) {
  char at[300];
  int soerr = 0;
  socklen_t len = sizeof soerr;
  if (getsockopt(c->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
  if (soerr == EINPROGRESS || soerr == EALREADY) {
    *want = POLLOUT;
    return 1;
  }
  if (soerr) return bgi_err_set(err, BG_ECONN, "cannot connect to %s: %s", where(ep, at, sizeof at), strerror(soerr));
  if (!ep->url.is_unix) redisEnableKeepAlive(c->ctx);
  return BG_OK;
}

ssize_t bgi_conn_send_some(bgi_conn *c, const char *p, size_t n, bgi_err *err) {
  for (;;) {
    ssize_t k = send(c->ctx->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k >= 0) return k;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    c->broken = 1;
    bgi_err_set(err, BG_ECONN, "writing to the connection failed: %s", strerror(errno));
    return -1;
  }
}

int bgi_conn_recv_some(bgi_conn *c, bgi_err *err) {
  if (redisBufferRead(c->ctx) == REDIS_OK) return BG_OK;
  c->broken = 1;
  if (c->ctx->err == REDIS_ERR_EOF) return bgi_err_set(err, BG_ECONN, "the server closed the connection");
  return bgi_err_set(err, BG_ECONN, "connection error: %s", c->ctx->errstr);
}

int bgi_conn_buffered(const bgi_conn *c) {
  (void)c;
  return 0;
}

int bgi_conn_open(bgi_conn *c, const bgi_endpoint *ep, int64_t timeout_ms, int flags, bgi_err *err) {
  char at[300];
  int64_t connect_ms = timeout_ms > 0 && timeout_ms < ep->connect_timeout_ms ? timeout_ms : ep->connect_timeout_ms;
  int64_t command_ms = timeout_ms > 0 ? timeout_ms : ep->command_timeout_ms;
  struct timeval ctv = ms_to_tv(connect_ms);
  bgi_conn_drop(c);
  if (!c->track) c->track = &c->own_track;
  c->broken = 0;
  c->calls = 0;
  if (ep->url.is_unix) c->ctx = redisConnectUnixWithTimeout(ep->url.path, ctv);
  else c->ctx = redisConnectWithTimeout(ep->url.host, ep->url.port, ctv);
  if (!c->ctx) return bgi_err_set(err, BG_ENOMEM, "out of memory creating a connection");
  if (c->ctx->err) {
    int st = bgi_err_set(err, BG_ECONN, "cannot connect to %s within %lld ms: %s", where(ep, at, sizeof at),
                         (long long)connect_ms, c->ctx->errstr);
    bgi_conn_drop(c);
    return st;
  }
  c->timeout_ms = command_ms;
  if (redisSetTimeout(c->ctx, ms_to_tv(command_ms)) != REDIS_OK) {
    int st = bgi_err_set(err, BG_ECONN, "cannot set the command timeout on %s: %s", where(ep, at, sizeof at),
                         c->ctx->errstr);
    bgi_conn_drop(c);
    return st;
  }
  if (!ep->url.is_unix) redisEnableKeepAlive(c->ctx);
  if (ep->tls) {
    int st = bgi_tls_connect(ep->tls, c->ctx, ep->url.is_unix ? "localhost" : ep->url.host, err);
    if (st != BG_OK) {
      bgi_err_prefix(err, where(ep, at, sizeof at));
      bgi_conn_drop(c);
      return st;
    }
  }
  bgi_reply_attach(c->ctx, &c->arena);
  bgi_tracking_attach(c->ctx, c->track);   /* its verdicts were reset by bgi_conn_drop above */
  int st = handshake(c, ep, flags, err);
  if (st == BG_ECONN && ep->tls) {
    /* TLS 1.3 ends the client's side of the handshake first: a server that wants a client
     * certificate hangs up on the first command instead */
    char was[BGI_ERRMSG_MAX];
    snprintf(was, sizeof was, "%s", err->msg);
    st = bgi_err_set(err, BG_ETLS, "%.300s right after the TLS handshake: does the server require a client "
                     "certificate (BG_OPT_TLS_CERT_FILE / BG_OPT_TLS_KEY_FILE), or one from another CA?", was);
  }
  if (st != BG_OK) {
    if (st == BG_ECONN || st == BG_ETIMEOUT || st == BG_ESERVER || st == BG_ETLS) bgi_err_prefix(err, where(ep, at, sizeof at));
    bgi_conn_drop(c);
    return st;
  }
  return BG_OK;
}

void bgi_conn_drop(bgi_conn *c) {
  if (c->ctx) redisFree(c->ctx);
  c->ctx = NULL;
  if (c->track) bgi_tracking_reset(c->track);
  c->no_verdict = 0;
  c->broken = 0;
}

void bgi_conn_free(bgi_conn *c) {
  bgi_conn_drop(c);
  bgi_arena_free(&c->arena);
  bgi_buf_free(&c->out);
  bgi_buf_free(&c->alt);
  free(c->idx);
  c->idx = NULL;
  c->idx_cap = 0;
}

int bgi_conn_idx_reserve(bgi_conn *c, size_t n) {
  if (n <= c->idx_cap) return BG_OK;
  size_t cap = c->idx_cap ? c->idx_cap : 1024;
  while (cap < n) cap *= 2;
  uint64_t *p = realloc(c->idx, cap * sizeof *p);
  if (!p) return BG_ENOMEM;
  c->idx = p;
  c->idx_cap = cap;
  return BG_OK;
}
