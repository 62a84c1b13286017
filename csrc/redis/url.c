#include "redis/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* %-decodes s[0..n) into a new string; NULL on a bad escape or a decoded NUL. */
static char *pct_decode(const char *s, size_t n, int *bad) {
  char *out = malloc(n + 1), *o = out;
  *bad = 0;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0 ||
          (hexval(s[i + 1]) == 0 && hexval(s[i + 2]) == 0)) {
        *bad = 1;
        free(out);
        return NULL;
      }
      *o++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
      i += 2;
    } else {
      *o++ = s[i];
    }
  }
  *o = 0;
  return out;
}

/* Parses a decimal in s[0..n) within [lo, hi]; -1 if not. */
static long parse_num(const char *s, size_t n, long lo, long hi) {
  long v = 0;
  if (n == 0 || n > 9) return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v < lo || v > hi ? -1 : v;
}

static int fail(bgi_url *u, bgi_err *err, const char *what) {
  bgi_url_free(u);
  return bgi_err_set(err, BG_EBADURL, "bad server URL \"%s\": %s (expected "
                     "redis://[user[:password]@]host[:port][/db] or unix:///path/to.sock[?db=N])",
                     u->display[0] ? u->display : "", what);
}

static int parse_unix(const char *rest, bgi_url *u, bgi_err *err) {
  const char *q = strchr(rest, '?');
  size_t plen = q ? (size_t)(q - rest) : strlen(rest);
  snprintf(u->display, sizeof u->display, "unix://%.*s%s%s", (int)plen, rest, q ? "?" : "", q ? q + 1 : "");
  if (plen == 0 || rest[0] != '/') return fail(u, err, "the socket path must be absolute (unix:///path)");
  if (plen >= sizeof u->path) return fail(u, err, "the socket path is too long");
  memcpy(u->path, rest, plen);
  u->path[plen] = 0;
  if (q) {
    if (strncmp(q + 1, "db=", 3) != 0) return fail(u, err, "the only query parameter is db=N");
    long db = parse_num(q + 4, strlen(q + 4), 0, 1000000);
    if (db < 0) return fail(u, err, "db must be a number from 0");
    u->db = (int)db;
  }
  u->is_unix = 1;
  return BG_OK;
}

int bgi_url_parse(const char *url, bgi_url *u, bgi_err *err) {
  memset(u, 0, sizeof *u);
  u->port = 6379;
  if (!url) return fail(u, err, "URL is NULL");
  if (strncmp(url, "unix://", 7) == 0) return parse_unix(url + 7, u, err);
  if (strncmp(url, "rediss://", 9) == 0) {
    snprintf(u->display, sizeof u->display, "rediss://...");
    return fail(u, err, "TLS (rediss://) is not supported yet");
  }
  if (strncmp(url, "redis://", 8) != 0) {
    const char *colon = strstr(url, "://");
    snprintf(u->display, sizeof u->display, "%.*s://...", colon ? (int)(colon - url) : 0, url);
    if (!colon) snprintf(u->display, sizeof u->display, "%.40s", url);
    return fail(u, err, "unknown scheme");
  }
  const char *p = url + 8;
  const char *slash = strchr(p, '/');
  const char *end = slash ? slash : p + strlen(p);
  /* userinfo is up to the LAST '@' before the path: passwords may contain '@' unescaped */
  const char *at = NULL;
  for (const char *s = p; s < end; s++)
    if (*s == '@') at = s;
  const char *hp = at ? at + 1 : p;

  /* display form first, so every later message can use it without the password */
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    size_t ulen = colon ? (size_t)(colon - p) : (size_t)(at - p);
    snprintf(u->display, sizeof u->display, "redis://%.*s%s@%s", (int)ulen, p, colon ? ":***" : "", hp);
  } else {
    snprintf(u->display, sizeof u->display, "redis://%s", p);
  }

  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    int bad = 0;
    size_t ulen = colon ? (size_t)(colon - p) : (size_t)(at - p);
    if (ulen) {
      u->user = pct_decode(p, ulen, &bad);
      if (!u->user) return bad ? fail(u, err, "bad %-escape in the user name") : BG_ENOMEM;
    }
    if (colon) {
      u->password = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad);
      if (!u->password) return bad ? fail(u, err, "bad %-escape in the password") : BG_ENOMEM;
    }
  }

  const char *port_colon = NULL;
  size_t hlen;
  if (*hp == '[') {
    const char *rb = memchr(hp, ']', (size_t)(end - hp));
    if (!rb) return fail(u, err, "unterminated [IPv6] host");
    hlen = (size_t)(rb - hp - 1);
    if (hlen == 0 || hlen >= sizeof u->host) return fail(u, err, "bad [IPv6] host");
    memcpy(u->host, hp + 1, hlen);
    if (rb + 1 < end) {
      if (rb[1] != ':') return fail(u, err, "unexpected text after ]");
      port_colon = rb + 1;
    }
  } else {
    port_colon = memchr(hp, ':', (size_t)(end - hp));
    hlen = (size_t)((port_colon ? port_colon : end) - hp);
    if (hlen == 0) return fail(u, err, "missing host");
    if (hlen >= sizeof u->host) return fail(u, err, "host name too long");
    memcpy(u->host, hp, hlen);
  }
  u->host[hlen] = 0;
  if (port_colon) {
    long port = parse_num(port_colon + 1, (size_t)(end - port_colon - 1), 1, 65535);
    if (port < 0) return fail(u, err, "port must be a number from 1 to 65535");
    u->port = (int)port;
  }
  if (slash && slash[1]) {
    long db = parse_num(slash + 1, strlen(slash + 1), 0, 1000000);
    if (db < 0) return fail(u, err, "the path must be a database number (/0, /1, ...)");
    u->db = (int)db;
    u->db_given = 1;
  }
  u->nhosts = 1;
  memcpy(u->hosts[0].host, u->host, sizeof u->host);
  u->hosts[0].port = u->port;
  return BG_OK;
}

void bgi_url_free(bgi_url *u) {
  free(u->user);
  if (u->password) {
    volatile char *s = u->password;
    while (*s) *s++ = 0;
    free(u->password);
  }
  u->user = u->password = NULL;
}
