#include "redis/conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/observe.h"
#include "common/sock.h"
#include "common/wait.h"
#include "redis/resolve.h"

void bgi_endpoint_label_url(bgi_endpoint *ep, const char *what) {
  if (ep->url.is_unix) snprintf(ep->label, sizeof ep->label, "unix:%s", ep->url.path);
  else bgi_url_host_label(ep->url.host, ep->url.port, what, ep->label, sizeof ep->label);
}

void bgi_endpoint_label_named(bgi_endpoint *ep) {
  snprintf(ep->label, sizeof ep->label, strchr(ep->url.host, ':') ? "[%s]:%d" : "%s:%d", ep->url.host, ep->url.port);
}

static const char *label(const bgi_endpoint *ep) { return ep->label[0] ? ep->label : "the server"; }

/* Records the context's failure as a status (BG_ECONN for a closed or reset connection wherever it
 * happens; BG_ETLS only for a failure of TLS itself) and marks the connection unusable. */
static int transport_status(bgi_conn *c, bgi_err *err) {
  if (c->tls && bgi_tls_failure(c->ctx, err) != BG_OK) return err->status;
  if (c->ctx->err == REDIS_ERR_EOF) return bgi_err_set(err, BG_ECONN, "the server closed the connection");
  if (c->ctx->err == REDIS_ERR_PROTOCOL) return bgi_err_set(err, BG_EPROTO, "protocol error: %s", c->ctx->errstr);
  if (c->ctx->err == REDIS_ERR_OOM || c->arena.failed)
    return bgi_err_set(err, BG_ENOMEM, "out of memory while reading a reply");
  return bgi_err_set(err, BG_ECONN, "connection error: %s", c->ctx->errstr);
}

static int transport_error(bgi_conn *c, bgi_err *err) {
  int st = transport_status(c, err);
  bgi_conn_mark_lost(c, st);
  return st;
}

void bgi_conn_pushed(bgi_conn *c) {
  bgi_tracking_pushed(c->track);
  bgi_obs_add(c->up_obs, BGI_OBS_INVALIDATIONS, 1);
}

void bgi_conn_mark_lost(bgi_conn *c, int st) {
  c->broken = 1;
  if (!c->lost_status) c->lost_status = st;
}

ssize_t bgi_conn_send_some(bgi_conn *c, const char *p, size_t n, bgi_err *err) {
  ssize_t k;
  if (c->tls) {
    if ((k = bgi_tls_send(c->ctx, p, n)) >= 0) return k;
    if (bgi_tls_failure(c->ctx, err) == BG_OK) bgi_err_set(err, BG_ECONN, "the connection was closed or reset");
    bgi_conn_mark_lost(c, err->status);
    return -1;
  }
  do k = send(c->ctx->fd, p, n, BGI_MSG_NOSIGNAL | MSG_DONTWAIT);
  while (k < 0 && errno == EINTR);
  if (k >= 0) return k;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
  bgi_conn_mark_lost(c, BG_ECONN);
  bgi_err_set(err, BG_ECONN, "writing to the server failed: %s", strerror(errno));
  return -1;
}

int bgi_conn_recv_some(bgi_conn *c, bgi_err *err) {
  if (redisBufferRead(c->ctx) != REDIS_OK) return transport_error(c, err);
  return BG_OK;
}

int bgi_conn_buffered(const bgi_conn *c) { return c->tls && bgi_tls_buffered(c->ctx); }

/* Waits for the socket to be ready for events, by deadline_ns: BG_OK, or the failure (the
 * connection broken: a round trip stopped half-way cannot be resumed). */
static int wait_ready(bgi_conn *c, short events, uint64_t deadline_ns, uint64_t started_ns, bgi_err *err) {
  int r = bgi_poll_until(c->ctx->fd, events, deadline_ns, 0, NULL);
  if (r == 1) return BG_OK;
  bgi_conn_mark_lost(c, r == 0 ? BG_ETIMEOUT : BG_ECONN);
  if (r == 0)
    return bgi_err_set(err, BG_ETIMEOUT, "the server did not answer within %lld ms",
                       (long long)bgi_ns_ms_ceil(deadline_ns - started_ns));
  return bgi_err_set(err, BG_ECONN, "poll failed: %s", strerror(errno));
}

/* The next reply from the reader (RESP3 pushes are taken on the way, in stream order), reading the
 * socket as needed. */
static int read_reply(bgi_conn *c, bgi_reply **out, uint64_t deadline_ns, uint64_t started_ns, bgi_err *err) {
  for (;;) {
    void *obj = NULL;
    if (redisGetReplyFromReader(c->ctx, &obj) != REDIS_OK) return transport_error(c, err);
    if (c->arena.failed) return transport_error(c, err);
    if (obj) {
#ifdef REDIS_REPLY_PUSH
      if (((bgi_reply *)obj)->type == REDIS_REPLY_PUSH) {
        /* an invalidation: the replies behind it see the tracking epoch moved */
        bgi_conn_pushed(c);
        continue;
      }
#endif
      *out = obj;
      return BG_OK;
    }
    int st;
    if (!bgi_conn_buffered(c) && (st = wait_ready(c, POLLIN, deadline_ns, started_ns, err)) != BG_OK) return st;
    if ((st = bgi_conn_recv_some(c, err)) != BG_OK) return st;
  }
}

/* The round trip, by deadline_ns; with reply_ms > 0 the deadline moves on by reply_ms with each
 * reply that is complete (the pace of a call with no deadline of its own). */
static int roundtrip(bgi_conn *c, bgi_reply **rep, size_t n, uint64_t deadline_ns, int64_t reply_ms, bgi_err *err) {
  int st;
  uint64_t started = bgi_now_ns();
  if (!c->ctx || c->broken) return bgi_err_set(err, BG_ECONN, "connection is not open");
  bgi_arena_reset(&c->arena);
  for (size_t sent = 0; sent < c->out.len;) {
    ssize_t k = bgi_conn_send_some(c, c->out.data + sent, c->out.len - sent, err);
    if (k < 0) return err->status;
    sent += (size_t)k;
    if (sent < c->out.len && (st = wait_ready(c, POLLOUT, deadline_ns, started, err)) != BG_OK) return st;
  }
  for (size_t i = 0; i < n; i++) {
    if ((st = read_reply(c, &rep[i], deadline_ns, started, err)) != BG_OK) return st;
    if (reply_ms > 0) {
      started = bgi_now_ns();
      deadline_ns = bgi_after_ms(started, reply_ms);
    }
  }
  c->calls++;
  return BG_OK;
}

int bgi_conn_roundtrip(bgi_conn *c, bgi_reply **rep, size_t n, uint64_t deadline_ns, bgi_err *err) {
  return roundtrip(c, rep, n, deadline_ns, 0, err);
}

int bgi_conn_roundtrip_paced(bgi_conn *c, bgi_reply **rep, size_t n, int64_t reply_ms, bgi_err *err) {
  return roundtrip(c, rep, n, bgi_deadline_in_ms(reply_ms), reply_ms, err);
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
  (void)n;
  size_t i = 0;
  if (ep->password) {
    bgi_reply *r = rep[i++];
    if (r->type == REDIS_REPLY_ERROR)
      /* the user is not named: a URL whose ':' went missing holds the password in the user part */
      return bgi_err_set(err, BG_EAUTH, "authentication failed: %s (check the user and password)", r->str);
  }
  if (ep->db) {
    bgi_reply *r = rep[i++];
    /* refused for what the server is, whatever its words (Redis: "SELECT is not allowed in cluster
     * mode", Valkey: "DB index is out of range", either beyond `databases`): the request is wrong
     * for this server, not the credentials. NOAUTH is the password's, told below. */
    if (r->type == REDIS_REPLY_ERROR && !bgi_reply_is_error(r, "NOAUTH"))
      return bgi_err_set(err, BG_EINVAL, "database %d cannot be selected on this server (%s): a Redis Cluster has "
                         "only db 0, and a server only the databases its `databases` setting makes (remove /%d or "
                         "?db=%d from the URL, or BG_OPT_DB)", ep->db, r->str, ep->db, ep->db);
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
  /* up: counted among the client's connections until it is dropped */
  c->up = 1;
  c->up_ep = ep;
  c->up_obs = ep->obs;
  bgi_obs_add(ep->obs, BGI_OBS_CONNS, 1);
  return BG_OK;
}


static int handshake(bgi_conn *c, const bgi_endpoint *ep, int flags, uint64_t deadline_ns, bgi_err *err) {
  bgi_reply *rep[4 + BGI_TRACKING_HANDSHAKE_REPLIES];
  size_t n = 0;
  bgi_buf_reset(&c->out);
  int st = bgi_conn_handshake_build(c, ep, flags, &c->out, &n, err);
  if (st == BG_OK) st = bgi_conn_roundtrip(c, rep, n, deadline_ns, err);
  /* the handshake secret must not linger in the reusable buffer */
  memset(c->out.data, 0, c->out.len);
  if (st != BG_OK) return st;
  return bgi_conn_handshake_take(c, ep, rep, n, err);
}

/* The non-blocking TCP (or unix) connect begun, to host: the URL's when it needs no resolving, else
 * the address the resolver gave (the certificate is still checked against the URL's name). */
static int start_connect(bgi_conn *c, const bgi_endpoint *ep, const char *host, bgi_err *err) {
  if (ep->url.is_unix) c->ctx = redisConnectUnixNonBlock(ep->url.path);
  else c->ctx = redisConnectNonBlock(host, ep->url.port);
  if (!c->ctx) return bgi_err_set(err, BG_ENOMEM, "out of memory creating a connection");
  if (c->ctx->err) return bgi_err_set(err, BG_ECONN, "cannot connect to %s: %s", label(ep), c->ctx->errstr);
  bgi_sock_nosigpipe(c->ctx->fd);   /* macOS: before any write (common/sock.h) */
  return BG_OK;
}

/* The socket became writable (or failed): whether the connect worked. */
static int connect_done(bgi_conn *c, const bgi_endpoint *ep, int poll_failed, bgi_err *err) {
  int soerr = 0;
  socklen_t len = sizeof soerr;
  if (poll_failed || getsockopt(c->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
  if (soerr) return bgi_err_set(err, BG_ECONN, "cannot connect to %s: %s", label(ep), strerror(soerr));
  if (!ep->url.is_unix) redisEnableKeepAlive(c->ctx);
  return BG_OK;
}

/* 1 when the endpoint's host must be resolved before a connect (not a unix socket, not an IP). */
static int needs_resolving(const bgi_endpoint *ep) {
  return !ep->url.is_unix && !bgi_resolve_is_literal(ep->url.host);
}

/* The TCP (or unix) connect on a non-blocking socket, waiting for it by until_ns; timeout_st: the
 * status when that passes. A host name is resolved first on a thread of its own, within the same
 * bound and cancellable (a resolver that does not answer never holds the call past its deadline). */
static int tcp_connect(bgi_conn *c, const bgi_endpoint *ep, uint64_t until_ns, int timeout_st, int64_t budget_ms,
                       bgi_err *err) {
  char addr[BGI_RESOLVE_ADDR_MAX];
  const char *host = ep->url.host;
  int st;
  if (needs_resolving(ep)) {
    bgi_resolve *r = NULL;
    if ((st = bgi_resolve_start(&r, ep->url.host, -1, label(ep), err)) != BG_OK) return st;
    st = bgi_resolve_wait(r, until_ns, timeout_st, budget_ms, err);
    if (st == BG_OK) st = bgi_resolve_result(r, addr, err);
    bgi_resolve_release(r);
    if (st != BG_OK) return st;
    host = addr;
  }
  if ((st = start_connect(c, ep, host, err)) != BG_OK) return st;
  int r = bgi_poll_until(c->ctx->fd, POLLOUT, until_ns, 1, NULL);
  if (r == BG_ECANCELED) return bgi_cancel_err(err, "connecting");
  if (r == 0)
    return bgi_err_set(err, timeout_st, "cannot connect to %s within %lld ms%s", label(ep), (long long)budget_ms,
                       timeout_st == BG_ETIMEOUT ? " (the call's deadline)" : "");
  return connect_done(c, ep, r < 0, err);
}

/* bgi_conn_connecting states */
#define CONNECTING_TCP 1
#define CONNECTING_TLS 2
#define CONNECTING_RESOLVE 3

/* The host a TLS connection checks the certificate against. */
static const char *tls_host(const bgi_endpoint *ep) { return ep->url.is_unix ? "localhost" : ep->url.host; }

int bgi_conn_start(bgi_conn *c, const bgi_endpoint *ep, int notify_fd, bgi_err *err) {
  bgi_conn_drop(c);
  if (!c->track) c->track = &c->own_track;
  c->broken = 0;
  c->calls = 0;
  int st;
  if (needs_resolving(ep)) {
    if ((st = bgi_resolve_start(&c->resolving, ep->url.host, notify_fd, label(ep), err)) != BG_OK) return st;
    c->connecting = CONNECTING_RESOLVE;
    return BG_OK;
  }
  if ((st = start_connect(c, ep, ep->url.host, err)) != BG_OK) {
    bgi_conn_drop(c);
    return st;
  }
  c->connecting = CONNECTING_TCP;
  return BG_OK;
}

int bgi_conn_resolving(const bgi_conn *c) { return c->connecting == CONNECTING_RESOLVE; }

int bgi_conn_connect_step(bgi_conn *c, const bgi_endpoint *ep, short *want, bgi_err *err) {
  int st = BG_OK;
  if (c->connecting == CONNECTING_RESOLVE) {
    char addr[BGI_RESOLVE_ADDR_MAX];
    if (!bgi_resolve_done(c->resolving)) {
      *want = 0;
      return 1;
    }
    st = bgi_resolve_result(c->resolving, addr, err);
    bgi_resolve_release(c->resolving);
    c->resolving = NULL;
    if (st == BG_OK) st = start_connect(c, ep, addr, err);
    if (st != BG_OK) return st;
    c->connecting = CONNECTING_TCP;
    *want = POLLOUT;
    return 1;
  }
  if (c->connecting == CONNECTING_TCP) {
    if ((st = connect_done(c, ep, 0, err)) != BG_OK) return st;
    c->connecting = 0;
    if (ep->tls) {
      if ((st = bgi_tls_start(ep->tls, c->ctx, tls_host(ep), label(ep), err)) != BG_OK) {
        bgi_err_prefix(err, label(ep));
        return st;
      }
      c->connecting = CONNECTING_TLS;
    }
  }
  if (c->connecting == CONNECTING_TLS) {
    if ((st = bgi_tls_step(c->ctx, want, err)) == 1) return 1;
    if (st != BG_OK) {
      bgi_err_prefix(err, label(ep));
      return st;
    }
    c->connecting = 0;
    c->tls = 1;
  }
  bgi_reply_attach(c->ctx, &c->arena);
  return BG_OK;
}

int bgi_conn_open(bgi_conn *c, const bgi_endpoint *ep, uint64_t deadline_ns, int flags, bgi_err *err) {
  uint64_t until = bgi_deadline_capped(deadline_ns, ep->connect_timeout_ms);
  /* which bound ends the connect: the connect timeout (the server is not reachable) or the call's */
  int timeout_st = deadline_ns && deadline_ns <= until ? BG_ETIMEOUT : BG_ECONN;
  int64_t budget_ms = bgi_ms_until(until, bgi_now_ns());
  int st;
  bgi_conn_drop(c);
  if (!c->track) c->track = &c->own_track;
  c->broken = 0;
  c->calls = 0;
  c->tls = 0;
  if ((st = tcp_connect(c, ep, until, timeout_st, budget_ms, err)) != BG_OK) goto fail;
  /* a call with no deadline of its own: the handshakes are a round trip like any other of its */
  if (!deadline_ns) until = bgi_deadline_in_ms(ep->command_timeout_ms);
  if (ep->tls) {
    if ((st = bgi_tls_connect(ep->tls, c->ctx, tls_host(ep), label(ep), until, err)) != BG_OK) {
      if (st != BG_ECANCELED) bgi_err_prefix(err, label(ep));
      goto fail;
    }
    c->tls = 1;
  }
  bgi_reply_attach(c->ctx, &c->arena);
  st = handshake(c, ep, flags, until, err);
  if (st == BG_ECONN || st == BG_ETIMEOUT || st == BG_ESERVER || st == BG_ETLS) bgi_err_prefix(err, label(ep));
  if (st != BG_OK) goto fail;
  return BG_OK;
fail:
  bgi_conn_drop(c);
  return st;
}

/* A connection that was up goes: uncounted, and told when it broke. */
static void went_down(bgi_conn *c) {
  bgi_obs *o = c->up_obs;
  c->up = 0;
  c->up_obs = NULL;
  if (!o) return;
  bgi_obs_add(o, BGI_OBS_CONNS, -1);
  if (!c->broken) return;
  bgi_obs_add(o, BGI_OBS_CONNS_LOST, 1);
  if (bgi_obs_on(o)) {
    int st = c->lost_status ? c->lost_status : BG_ECONN;
    int64_t v[BG_EVENT_NVALUES] = {0};
    v[BG_EV_STATUS] = st;
    v[BG_EV_COUNT] = (int64_t)c->calls;
    bgi_obs_emit(o, BG_EVENT_CONNECTION_LOST, "", v, "connection to %s lost after %llu round trips (%s: %s); the "
                 "next call reconnects", label(c->up_ep), (unsigned long long)c->calls, bg_status_name(st),
                 bg_strerror(st));
  }
}

void bgi_conn_drop(bgi_conn *c) {
  if (c->up) went_down(c);
  c->lost_status = 0;
  if (c->ctx) redisFree(c->ctx);   /* and a TLS handshake's state under way (bgi_tls_start) */
  c->ctx = NULL;
  bgi_resolve_release(c->resolving);   /* its thread, if it still runs, frees it */
  c->resolving = NULL;
  c->tls = 0;
  c->connecting = 0;
  if (c->track) bgi_tracking_reset(c->track);
  c->no_verdict = 0;
  c->broken = 0;
}

void bgi_conn_abandon(bgi_conn *c) {
  /* redisFree closes the fd and frees the TLS object with SSL_free, never SSL_shutdown (redis/tls.c):
   * it writes nothing */
  c->broken = 0;
  bgi_conn_drop(c);
}

void bgi_conn_free(bgi_conn *c) {
  bgi_conn_drop(c);
  bgi_arena_free(&c->arena);
  bgi_buf_free(&c->out);
  bgi_buf_free(&c->alt);
  free(c->is_asking);
  c->is_asking = NULL;
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
