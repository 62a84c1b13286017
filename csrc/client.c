#include "client.h"

#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Replies of one call: a batch sends a few commands per chunk of items. */
#define BGI_MAX_REPLIES 4096

void bgi_client_ref(bg_client *c) { atomic_fetch_add(&c->refs, 1); }

static void client_free(bg_client *c) {
  bgi_pool_destroy(&c->pool);
  bgi_url_free(&c->ep.url);
  bgi_options_clear(&c->opts);
  bgi_errslot_destroy(&c->err);
  free(c);
}

void bgi_client_unref(bg_client *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) client_free(c);
}

static int open_client(bg_client **out, const char *url, const bg_options *opts, bgi_err *err) {
  bg_client *c;
  int st;
  if (!out) return bgi_err_set(err, BG_EINVAL, "bg_client_open: out must not be NULL");
  *out = NULL;
  if (!url) return bgi_err_set(err, BG_EINVAL, "bg_client_open: url must not be NULL");
  if (!(c = calloc(1, sizeof *c))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  atomic_init(&c->refs, 1);
  bgi_errslot_init(&c->err);
  if (bgi_options_copy(&c->opts, opts) != BG_OK) {
    bgi_errslot_destroy(&c->err);
    free(c);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  if ((st = bgi_url_parse(url, &c->ep.url, err)) != BG_OK) {
    bgi_options_clear(&c->opts);
    bgi_errslot_destroy(&c->err);
    free(c);
    return st;
  }
  c->ep.user = c->opts.username ? c->opts.username : c->ep.url.user;
  c->ep.password = c->opts.password ? c->opts.password : c->ep.url.password;
  c->ep.db = c->opts.db >= 0 ? (int)c->opts.db : c->ep.url.db;
  c->ep.connect_timeout_ms = c->opts.connect_timeout_ms;
  c->ep.command_timeout_ms = c->opts.command_timeout_ms;
  c->ep.client_name = c->opts.client_name;
  c->ep.tracking = c->opts.tracking != 0;
  if (bgi_pool_init(&c->pool, (size_t)c->opts.pool_size, &c->ep) != BG_OK) {
    bgi_url_free(&c->ep.url);
    bgi_options_clear(&c->opts);
    bgi_errslot_destroy(&c->err);
    free(c);
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  }
  /* connect one now so a wrong address or password is reported by open, not by the first query */
  bgi_conn *conn;
  if ((st = bgi_pool_acquire(&c->pool, 0, &conn, err)) != BG_OK) {
    client_free(c);
    return st;
  }
  bgi_pool_release(&c->pool, conn);
  *out = c;
  return BG_OK;
}

BG_API int bg_client_open_ex(bg_client **out, const char *url, const bg_options *opts, char *errbuf,
                             size_t errbuf_size) {
  bgi_err err = {0};
  int st = open_client(out, url, opts, &err);
  if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", st == BG_OK ? "" : err.msg);
  return st;
}

BG_API int bg_client_open(bg_client **out, const char *url, const bg_options *opts) {
  return bg_client_open_ex(out, url, opts, NULL, 0);
}

BG_API void bg_client_close(bg_client *c) { bgi_client_unref(c); }

BG_API const char *bg_client_errmsg(const bg_client *c) { return c ? bgi_errslot_view((bgi_errslot *)&c->err) : "client handle is NULL"; }

BG_API size_t bg_client_errmsg_copy(const bg_client *c, char *buf, size_t cap) {
  if (!c) return 0;
  return bgi_errslot_copy((bgi_errslot *)&c->err, buf, cap);
}

static int build_ping(bgi_conn *c, void *ctx, size_t *n, bgi_err *err) {
  (void)ctx;
  if (bgi_buf_reserve(&c->out, 32) != BG_OK) return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, 1);
  bgi_resp_cstr(&c->out, "PING");
  *n = 1;
  return BG_OK;
}

static int parse_ping(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  (void)c, (void)n, (void)ctx;
  if (rep[0]->type == REDIS_REPLY_ERROR) return bgi_reply_error(rep[0], "PING", err);
  return BG_OK;
}

BG_API int bg_client_ping_ex(bg_client *c, bg_call *call) {
  bgi_err err = {0};
  if (!c) return bgi_call_null_handle(call, "client");
  err.status = bgi_client_call(c, bgi_call_deadline(call), build_ping, parse_ping, NULL, &err);
  return bgi_call_finish(call, &c->err, &err, BG_SOURCE_REDIS);
}

BG_API int bg_client_ping(bg_client *c) { return bg_client_ping_ex(c, NULL); }

int bgi_client_call(bg_client *cl, uint64_t deadline_ns, bgi_build_fn build, bgi_parse_fn parse, void *ctx,
                    bgi_err *err) {
  bgi_reply *rep[BGI_MAX_REPLIES];
  for (int attempt = 0;; attempt++) {
    bgi_conn *c;
    size_t n = 0;
    int64_t timeout_ms = 0, wait_ms = cl->ep.command_timeout_ms;
    if (deadline_ns) {
      uint64_t now = bgi_now_ns();
      if (now >= deadline_ns) return bgi_err_set(err, BG_ETIMEOUT, "the call's deadline passed");
      /* round up: a deadline 0.4 ms away still deserves one try */
      timeout_ms = wait_ms = (int64_t)((deadline_ns - now + 999999u) / 1000000u);
    }
    int st = bgi_pool_acquire(&cl->pool, timeout_ms, &c, err);
    if (st != BG_OK) return st;
    uint64_t earlier_calls = c->calls;
    bgi_buf_reset(&c->out);
    st = build(c, ctx, &n, err);
    if (st == BG_OK && n > BGI_MAX_REPLIES) st = bgi_err_set(err, BG_EINVAL, "internal: too many replies");
    if (st == BG_OK) st = bgi_conn_roundtrip(c, rep, n, wait_ms, err);
    if (st == BG_OK) st = parse(c, rep, n, ctx, err);
    int stale = st == BG_ECONN && c->broken && earlier_calls > 0;
    bgi_pool_release(&cl->pool, c);
    /* what killed one idle connection (a restart, CLIENT KILL) likely killed the others too: try
     * each pooled one at most once, then a fresh one; a failure on a fresh connection is final */
    if (stale && (size_t)attempt < cl->pool.size) continue;
    return st;
  }
}

int bgi_client_call_script(bg_client *cl, uint64_t deadline_ns, bgi_script_run *run, const char *what,
                           bgi_build_fn build, bgi_parse_fn parse, void *ctx, bgi_err *err) {
  run->use_body = 0;
  for (;;) {
    run->noscript = 0;
    int st = bgi_client_call(cl, deadline_ns, build, parse, ctx, err);
    if (st != BG_OK || !run->noscript) return st;
    if (run->use_body) return bgi_err_set(err, BG_EPROTO, "%s: the server keeps answering NOSCRIPT to EVAL", what);
    run->use_body = 1;
  }
}
