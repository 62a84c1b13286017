#include "redis/redirect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"

static int starts(const bgi_reply *r, const char *word) {
  size_t n = strlen(word);
  return r->len >= n && memcmp(r->str, word, n) == 0 && (r->len == n || r->str[n] == ' ');
}

/* "<slot> <host>:<port>" after MOVED / ASK; the host may be empty or an IPv6 address. */
static int parse_target(const char *s, size_t len, bgi_redirect *out) {
  char buf[300];
  if (len >= sizeof buf) return -1;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *sp = strchr(buf, ' ');
  if (!sp) return -1;
  *sp = 0;
  char *end;
  unsigned long slot = strtoul(buf, &end, 10);
  if (end == buf || *end || slot >= 16384) return -1;
  char *addr = sp + 1, *colon = strrchr(addr, ':');
  if (!colon) return -1;
  long port = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end || port < 1 || port > 65535) return -1;
  size_t hlen = (size_t)(colon - addr);
  if (hlen >= 2 && addr[0] == '[' && addr[hlen - 1] == ']') addr++, hlen -= 2;
  if (hlen >= sizeof out->host) return -1;
  memcpy(out->host, addr, hlen);
  out->host[hlen] = 0;
  out->slot = (unsigned)slot;
  out->port = (int)port;
  return 0;
}

int bgi_redirect_parse(const bgi_reply *r, bgi_redirect *out) {
  out->kind = BGI_REDIR_NONE;
  if (r->type != REDIS_REPLY_ERROR || !r->str) return BGI_REDIR_NONE;
  int kind = BGI_REDIR_NONE;
  size_t skip = 0;
  if (starts(r, "MOVED")) kind = BGI_REDIR_MOVED, skip = 6;
  else if (starts(r, "ASK")) kind = BGI_REDIR_ASK, skip = 4;
  else if (starts(r, "TRYAGAIN") || starts(r, "CLUSTERDOWN") || starts(r, "LOADING")) kind = BGI_REDIR_BUSY;
  if (kind == BGI_REDIR_NONE) return BGI_REDIR_NONE;
  if (kind != BGI_REDIR_BUSY && (r->len <= skip || parse_target(r->str + skip, r->len - skip, out) != 0))
    return BGI_REDIR_NONE;
  snprintf(out->what, sizeof out->what, "%.*s", (int)(r->len < 63 ? r->len : 63), r->str);
  out->kind = kind;
  return kind;
}

int bgi_redirect_scan(bgi_reply *const *rep, size_t n, int readonly_busy, bgi_redirect *out) {
  bgi_redirect r;
  out->kind = BGI_REDIR_NONE;
  for (size_t i = 0; i < n; i++) {
    if (rep[i]->type != REDIS_REPLY_ERROR) continue;
    if (bgi_redirect_parse(rep[i], &r) == BGI_REDIR_NONE) {
      if (!readonly_busy || !starts(rep[i], "READONLY")) continue;
      r.kind = BGI_REDIR_BUSY;
      snprintf(r.what, sizeof r.what, "%.*s", (int)(rep[i]->len < 63 ? rep[i]->len : 63), rep[i]->str);
    }
    if (r.kind != BGI_REDIR_BUSY) {
      *out = r;
      return out->kind;
    }
    if (out->kind == BGI_REDIR_NONE) *out = r;
  }
  return out->kind;
}

/* Reads "<c><decimal>\r\n" at *p; -1 if malformed. */
static long long read_header(const char **p, const char *end, char c) {
  const char *s = *p;
  long long v = 0;
  if (s >= end || *s++ != c) return -1;
  if (s >= end || *s < '0' || *s > '9') return -1;
  while (s < end && *s >= '0' && *s <= '9') {
    v = v * 10 + (*s++ - '0');
    if (v > (1LL << 40)) return -1;
  }
  if (end - s < 2 || s[0] != '\r' || s[1] != '\n') return -1;
  *p = s + 2;
  return v;
}

static const char ASKING[] = "*1\r\n$6\r\nASKING\r\n";

int bgi_asking_rewrite(const bgi_buf *in, bgi_buf *out, unsigned char *is_asking, size_t cap, size_t *added) {
  const char *p = in->data, *end = in->data + in->len;
  size_t replies = 0;
  int in_multi = 0;
  *added = 0;
  bgi_buf_reset(out);
  while (p < end) {
    const char *start = p;
    long long argc = read_header(&p, end, '*');
    if (argc < 1) return BG_EPROTO;
    const char *name = NULL;
    long long name_len = 0;
    for (long long i = 0; i < argc; i++) {
      long long len = read_header(&p, end, '$');
      if (len < 0 || end - p < len + 2) return BG_EPROTO;
      if (i == 0) name = p, name_len = len;
      p += len + 2;
    }
    int is_multi = name_len == 5 && strncasecmp(name, "MULTI", 5) == 0;
    int is_exec = (name_len == 4 && strncasecmp(name, "EXEC", 4) == 0) ||
                  (name_len == 7 && strncasecmp(name, "DISCARD", 7) == 0);
    if (!in_multi) {
      if (bgi_buf_reserve(out, sizeof ASKING - 1) != BG_OK) return BG_ENOMEM;
      memcpy(out->data + out->len, ASKING, sizeof ASKING - 1);
      out->len += sizeof ASKING - 1;
      if (replies < cap) is_asking[replies] = 1;
      replies++;
      (*added)++;
    }
    if (bgi_buf_reserve(out, (size_t)(p - start)) != BG_OK) return BG_ENOMEM;
    memcpy(out->data + out->len, start, (size_t)(p - start));
    out->len += (size_t)(p - start);
    if (replies < cap) is_asking[replies] = 0;
    replies++;
    if (is_multi) in_multi = 1;
    else if (is_exec) in_multi = 0;
  }
  return BG_OK;
}
