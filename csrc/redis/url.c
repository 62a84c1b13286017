#include "redis/url.h"

#include <arpa/inet.h>
#include <netinet/in.h>   /* FreeBSD: arpa/inet.h leaves out in6_addr and AF_INET* */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bloomguard/options.h"

/*
 * Why no message quotes the URL: a damaged URL (a lost '@', a password holding '/', a mistyped
 * scheme) leaves no reliable way to tell where the userinfo ends, so any echo of its text may
 * print the password. Messages name the part that is wrong instead; and once a URL parsed, its
 * hosts are named by bgi_url_host_label (a host can be the password itself).
 */
#define EXPECTED "expected redis://[user[:password]@]host1[:port1][,host2[:port2],...][/db][?db=N&...], " \
                 "redis-sentinel://[user[:password]@]host1[:port1][,...][/db]#MASTER or unix:///path/to.sock[?db=N]"
#define MAX_DB 1000000

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

static int fail(bgi_url *u, bgi_err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(bgi_url *u, bgi_err *err, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  bgi_url_free(u);
  return bgi_err_set(err, BG_EBADURL, "bad server URL: %s (" EXPECTED ")", what);
}

/* Host names as DNS has them, and IP addresses: what a host can be, so a password that lost its
 * '@' is refused as a host instead of being looked up (and printed in "cannot connect to"). */
static int host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}
/* An IPv6 address: hex digits, ':' and '.' (an embedded IPv4), then an optional zone id after
 * '%' (fe80::1%eth0). */
static int ipv6_ok(const char *s, size_t n) {
  size_t i = 0;
  for (; i < n && s[i] != '%'; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F') ||
          s[i] == ':' || s[i] == '.'))
      return 0;
  if (i < n && ++i == n) return 0; /* an empty zone */
  for (; i < n; i++)
    if (!host_char(s[i])) return 0;
  return 1;
}

/* One seed s[0..n): host, [ipv6], host:port or [ipv6]:port. `where` prefixes messages. */
static int parse_seed(const char *s, size_t n, bgi_hostport *hp, const char *where, bgi_url *u,
                      bgi_err *err) {
  const char *end = s + n, *port_colon = NULL;
  size_t hlen;
  hp->port = u->is_sentinel ? 26379 : 6379;
  if (n == 0)
    return fail(u, err, "%sempty (two commas in a row, or a comma at the start or the end?)",
                where);
  if (*s == '[') {
    const char *rb = memchr(s, ']', n);
    if (!rb) return fail(u, err, "%sunterminated [IPv6] host", where);
    hlen = (size_t)(rb - s - 1);
    if (hlen == 0 || hlen >= sizeof hp->host) return fail(u, err, "%sbad [IPv6] host", where);
    if (!ipv6_ok(s + 1, hlen))
      return fail(u, err, "%sbad [IPv6] host: it may hold only hex digits, ':' and '.' (and a %%zone)",
                  where);
    memcpy(hp->host, s + 1, hlen);
    if (rb + 1 < end) {
      if (rb[1] != ':') return fail(u, err, "%sunexpected text after ] (expected :port)", where);
      port_colon = rb + 1;
    }
  } else {
    port_colon = memchr(s, ':', n);
    hlen = (size_t)((port_colon ? port_colon : end) - s);
    if (hlen == 0) return fail(u, err, "%smissing host", where);
    if (hlen >= sizeof hp->host) return fail(u, err, "%shost name too long", where);
    for (size_t i = 0; i < hlen; i++)
      if (!host_char(s[i]))
        return fail(u, err,
                    "%sbad host: a host name may hold only letters, digits, '.', '-' and '_' "
                    "(IPv6 goes in [brackets]; %%-escape '@', '/' or ':' in a password)", where);
    memcpy(hp->host, s, hlen);
  }
  hp->host[hlen] = 0;
  if (port_colon) {
    long port = parse_num(port_colon + 1, (size_t)(end - port_colon - 1), 1, 65535);
    if (port < 0) return fail(u, err, "%sport must be a number from 1 to 65535", where);
    hp->port = (int)port;
  }
  return BG_OK;
}

/* A duration in s[0..n): seconds ("0.5", "2", as redis-py takes them) or with a unit ("500ms",
 * "2s", as go-redis takes them), into whole ms (rounded up, at least 1); -1 if not one. */
static int64_t parse_duration_ms(const char *s, size_t n) {
  double scale = 1000.0;
  if (n > 2 && memcmp(s + n - 2, "ms", 2) == 0) scale = 1.0, n -= 2;
  else if (n > 1 && s[n - 1] == 's') n -= 1;
  if (n == 0 || n > 16) return -1;
  char buf[17];
  memcpy(buf, s, n);
  buf[n] = 0;
  for (size_t i = 0; i < n; i++)
    if (!((buf[i] >= '0' && buf[i] <= '9') || buf[i] == '.')) return -1;
  char *end = NULL;
  double v = strtod(buf, &end) * scale;
  if (!end || *end || !(v > 0) || v > 1e12) return -1;
  int64_t ms = (int64_t)v;
  return (double)ms < v ? ms + 1 : ms;
}

/* The client options a query may give, by every name redis-py and go-redis use for them. */
static const struct query_option {
  const char *name;
  int option; /* BG_OPT_* */
  char kind;  /* 'd' duration, 'i' integer, 's' string */
} query_options[] = {
  {"connect_timeout", BG_OPT_CONNECT_TIMEOUT_MS, 'd'}, {"socket_connect_timeout", BG_OPT_CONNECT_TIMEOUT_MS, 'd'},
  {"dial_timeout", BG_OPT_CONNECT_TIMEOUT_MS, 'd'},    {"timeout", BG_OPT_COMMAND_TIMEOUT_MS, 'd'},
  {"socket_timeout", BG_OPT_COMMAND_TIMEOUT_MS, 'd'},  {"read_timeout", BG_OPT_COMMAND_TIMEOUT_MS, 'd'},
  {"pool_size", BG_OPT_POOL_SIZE, 'i'},                {"max_connections", BG_OPT_POOL_SIZE, 'i'},
  {"client_name", BG_OPT_CLIENT_NAME, 's'},
};
#define QUERY_KNOWN "db, client_name, pool_size (max_connections), connect_timeout (socket_connect_timeout, " \
                    "dial_timeout), timeout (socket_timeout, read_timeout)"

/* Whether a message may quote a query parameter's name: one that looks like a name (a damaged
 * URL may leave its password where a parameter stands) and is not the URL's user or password. */
static int quotable(const char *name, size_t nn, const bgi_url *u) {
  if (nn == 0 || nn > 40) return 0;
  for (size_t i = 0; i < nn; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || name[i] == '_' || (i && name[i] >= '0' && name[i] <= '9'))) return 0;
  if (u->password && strlen(u->password) == nn && memcmp(u->password, name, nn) == 0) return 0;
  if (u->user && strlen(u->user) == nn && memcmp(u->user, name, nn) == 0) return 0;
  return 1;
}

/* Parameter number pos, name=value (the value v[0..vn)), of the query, other than db. */
static int parse_param(int pos, const char *name, size_t nn, const char *v, size_t vn, bgi_url *u, bgi_err *err) {
  if (nn == 8 && memcmp(name, "protocol", 8) == 0)
    return fail(u, err, "protocol is not taken from the URL: bloomguard picks each connection's protocol itself "
                "(RESP2, and RESP3 on the connections that track reads); remove it");
  const struct query_option *qo = NULL;
  for (size_t i = 0; i < sizeof query_options / sizeof query_options[0]; i++)
    if (strlen(query_options[i].name) == nn && memcmp(query_options[i].name, name, nn) == 0) qo = &query_options[i];
  if (!qo && quotable(name, nn, u))
    return fail(u, err, "query parameter \"%.*s\" is not understood (known: " QUERY_KNOWN ")", (int)nn, name);
  if (!qo) return fail(u, err, "query parameter %d is not understood (known: " QUERY_KNOWN ")", pos);
  for (size_t i = 0; i < u->nparams; i++)
    if (u->params[i].option == qo->option)
      return fail(u, err, "query parameter %s gives an option the query gave already", qo->name);
  if (u->nparams == sizeof u->params / sizeof u->params[0]) return fail(u, err, "too many query parameters");
  struct bgi_url_param *p = &u->params[u->nparams];
  memset(p, 0, sizeof *p);
  p->name = qo->name;
  p->option = qo->option;
  if (qo->kind == 's') {
    int bad = 0;
    if (vn == 0 || !(p->text = pct_decode(v, vn, &bad)))
      return bad || vn == 0 ? fail(u, err, "%s: an empty value or a bad %%-escape", qo->name) : BG_ENOMEM;
  } else {
    p->value = qo->kind == 'd' ? parse_duration_ms(v, vn) : parse_num(v, vn, 0, 999999999);
    if (p->value < 0)
      return fail(u, err, "%s must be %s", qo->name,
                  qo->kind == 'd' ? "a duration: seconds (0.5) or with a unit (500ms, 2s)" : "a whole number");
  }
  u->nparams++;
  return BG_OK;
}

/* The query q[0..n) after '?': '&'-separated parameters: db=N, and the client options above. */
static int parse_query(const char *q, size_t n, bgi_url *u, bgi_err *err) {
  const char *end = q + n;
  int pos = 0;
  while (q <= end) {
    const char *amp = memchr(q, '&', (size_t)(end - q));
    const char *stop = amp ? amp : end;
    pos++;
    if (stop > q) { /* an empty parameter ("?&db=1", a trailing '&') is ignored */
      const char *eq = memchr(q, '=', (size_t)(stop - q));
      size_t nn = eq ? (size_t)(eq - q) : (size_t)(stop - q);
      const char *v = eq ? eq + 1 : stop;
      size_t vn = (size_t)(stop - v);
      int st;
      if (nn == 2 && memcmp(q, "db", 2) == 0) {
        long db = parse_num(v, vn, 0, MAX_DB);
        if (db < 0) return fail(u, err, "db must be a number from 0 to %d", MAX_DB);
        if (u->db_given && u->db != db) return fail(u, err, "the database is given twice, with different numbers");
        u->db = (int)db;
        u->db_given = 1;
      } else if ((st = parse_param(pos, q, nn, v, vn, u, err)) != BG_OK) {
        return st;
      }
    }
    if (!amp) break;
    q = amp + 1;
  }
  return BG_OK;
}

static int parse_unix(const char *rest, bgi_url *u, bgi_err *err) {
  const char *q = strchr(rest, '?');
  size_t plen = q ? (size_t)(q - rest) : strlen(rest);
  int st;
  if (plen == 0 || rest[0] != '/') return fail(u, err, "the socket path must be absolute (unix:///path)");
  if (plen >= sizeof u->path) return fail(u, err, "the socket path is too long");
  memcpy(u->path, rest, plen);
  u->path[plen] = 0;
  if (q && (st = parse_query(q + 1, strlen(q + 1), u, err)) != BG_OK) return st;
  u->is_unix = 1;
  return BG_OK;
}

/* Sets user and password from the userinfo s[0..n) (before the last '@'). Empty parts stay
 * NULL: "redis://:@h" sends no AUTH rather than an empty password the server refuses. */
static int parse_userinfo(const char *s, size_t n, bgi_url *u, bgi_err *err) {
  const char *colon = memchr(s, ':', n);
  size_t ulen = colon ? (size_t)(colon - s) : n;
  int bad = 0;
  if (ulen) { /* non-empty text decodes to a non-empty name: "%00" is refused */
    u->user = pct_decode(s, ulen, &bad);
    if (!u->user) return bad ? fail(u, err, "bad %%-escape in the user name") : BG_ENOMEM;
  }
  if (colon && colon + 1 < s + n) {
    u->password = pct_decode(colon + 1, (size_t)(s + n - colon - 1), &bad);
    if (!u->password) return bad ? fail(u, err, "bad %%-escape in the password") : BG_ENOMEM;
  }
  return BG_OK;
}

/* "#NAME" at the end of a Sentinel URL: the master's name as the sentinels know it. */
static int parse_master_name(const char *s, size_t n, bgi_url *u, bgi_err *err) {
  if (n == 0)
    return fail(u, err, "a Sentinel URL names the master after '#' (redis-sentinel://host:26379#mymaster)");
  if (n >= sizeof u->master_name) return fail(u, err, "the master name after '#' is too long");
  for (size_t i = 0; i < n; i++)
    if (!host_char(s[i]))
      return fail(u, err, "the master name after '#' may hold only letters, digits, '.', '-' and '_'");
  memcpy(u->master_name, s, n);
  u->master_name[n] = 0;
  return BG_OK;
}

static int parse_redis(const char *p, bgi_url *u, bgi_err *err) {
  const char *at = strrchr(p, '@'); /* the LAST '@': passwords may hold '@', '/', '?' unescaped */
  const char *hp = at ? at + 1 : p;
  const char *frag = u->is_sentinel ? strchr(hp, '#') : NULL;
  const char *auth_end = hp + strcspn(hp, u->is_sentinel ? "/?#" : "/?");
  size_t nseeds = 1;
  int st;

  if (at && (st = parse_userinfo(p, (size_t)(at - p), u, err)) != BG_OK) return st;

  for (const char *s = hp; s < auth_end; s++)
    if (*s == ',') nseeds++;
  if (nseeds > BGI_URL_MAX_HOSTS)
    return fail(u, err, "%zu seeds in the host list; at most %d", nseeds, BGI_URL_MAX_HOSTS);
  if (hp == auth_end) return fail(u, err, "missing host");
  const char *s = hp;
  for (size_t i = 0; i < nseeds; i++) {
    const char *comma = memchr(s, ',', (size_t)(auth_end - s));
    const char *e = comma ? comma : auth_end;
    char where[48] = "";
    if (nseeds > 1) snprintf(where, sizeof where, "seed %zu of %zu: ", i + 1, nseeds);
    if ((st = parse_seed(s, (size_t)(e - s), &u->hosts[i], where, u, err)) != BG_OK) return st;
    s = e + 1;
  }
  u->nhosts = nseeds;
  memcpy(u->host, u->hosts[0].host, sizeof u->host);
  u->port = u->hosts[0].port;

  if (u->is_sentinel) {
    if (!frag) return fail(u, err, "a Sentinel URL names the master after '#' (redis-sentinel://host:26379#mymaster)");
    if ((st = parse_master_name(frag + 1, strlen(frag + 1), u, err)) != BG_OK) return st;
  }
  const char *q = memchr(auth_end, '?', (size_t)((frag ? frag : auth_end + strlen(auth_end)) - auth_end));
  if (*auth_end == '/') {
    const char *path = auth_end + 1, *pend = q ? q : frag ? frag : path + strlen(path);
    if (pend > path) {
      long db = parse_num(path, (size_t)(pend - path), 0, MAX_DB);
      if (db < 0) return fail(u, err, "the path must be a database number (/0, /1, ...)");
      u->db = (int)db;
      u->db_given = 1;
    }
  }
  if (q && (st = parse_query(q + 1, (size_t)((frag ? frag : q + 1 + strlen(q + 1)) - (q + 1)), u, err)) != BG_OK)
    return st;
  return BG_OK;
}

int bgi_url_parse(const char *url, bgi_url *u, bgi_err *err) {
  memset(u, 0, sizeof *u);
  u->port = 6379;
  if (!url) return fail(u, err, "URL is NULL");
  if (strncmp(url, "unix://", 7) == 0) return parse_unix(url + 7, u, err);
  if (strncmp(url, "rediss://", 9) == 0) {
    u->tls = 1;
    return parse_redis(url + 9, u, err);
  }
  if (strncmp(url, "redis://", 8) == 0) return parse_redis(url + 8, u, err);
  if (strncmp(url, "redis-sentinel://", 17) == 0) {
    u->is_sentinel = 1;
    return parse_redis(url + 17, u, err);
  }
  if (strncmp(url, "rediss-sentinel://", 18) == 0) {
    u->is_sentinel = u->tls = 1;
    return parse_redis(url + 18, u, err);
  }
  /* nothing of the text is shown: a mistyped scheme ("redis:/:pw@h") leaves the password in it */
  return fail(u, err, "unknown scheme: the URL must start with redis://, rediss://, redis-sentinel://, "
              "rediss-sentinel:// or unix://");
}

void bgi_url_host_label(const char *host, int port, const char *what, char *buf, size_t cap) {
  unsigned char addr[16];
  int v4 = inet_pton(AF_INET, host, addr) == 1, v6 = !v4 && inet_pton(AF_INET6, host, addr) == 1;
  if (v4 || strcmp(host, "localhost") == 0) snprintf(buf, cap, "%s:%d", host, port);
  else if (v6) snprintf(buf, cap, "[%s]:%d", host, port);
  else snprintf(buf, cap, "%s (port %d)", what, port);
}

void bgi_url_free(bgi_url *u) {
  free(u->user);
  if (u->password) {
    volatile char *s = u->password;
    while (*s) *s++ = 0;
    free(u->password);
  }
  u->user = u->password = NULL;
  for (size_t i = 0; i < u->nparams; i++) free(u->params[i].text);
  u->nparams = 0;
}
