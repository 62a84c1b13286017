/* Internal: server URLs. */
#ifndef BG_INTERNAL_URL_H
#define BG_INTERNAL_URL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A seed list (redis://h1:p1,h2:p2,...) holds at most this many hosts. */
#define BGI_URL_MAX_HOSTS 16

typedef struct bgi_hostport {
  char host[256];      /* without brackets for IPv6 */
  int port;
} bgi_hostport;

typedef struct bgi_url {
  int is_unix;
  char host[256];      /* the first seed, without brackets for IPv6 */
  int port;
  char path[108];      /* unix socket path (sun_path size) */
  char *user;          /* NULL if absent or empty; %-decoded */
  char *password;      /* NULL if absent or empty; %-decoded */
  int db;
  size_t nhosts;                         /* seeds in URL order: >= 1 for redis://, 0 for unix:// */
  bgi_hostport hosts[BGI_URL_MAX_HOSTS]; /* hosts[0] equals host/port */
  int db_given;                          /* 1 when the URL named a database (path or ?db=) */
  int is_sentinel;                       /* redis-sentinel://: hosts are the sentinels */
  int tls;                               /* rediss:// or rediss-sentinel:// */
  char master_name[128];                 /* redis-sentinel://...#NAME: the master they watch */
  /* client options given in the query, as redis-py and go-redis take them (?timeout=0.5,
   * ?pool_size=8, ?client_name=x): the option (BG_OPT_*) and its value; applied by the client
   * unless the option was set explicitly (bgi_options_take_from_url) */
  struct bgi_url_param {
    const char *name;    /* the parameter's name as the URL gave it (a static string) */
    int option;
    int64_t value;       /* integer options (durations in ms) */
    char *text;          /* string options: %-decoded, owned */
  } params[8];
  size_t nparams;
} bgi_url;

/*
 * redis://[user[:password]@]host[:port][,host:port...][/db][?db=N] or unix:///path[?db=N], or
 * Lettuce's Sentinel form redis-sentinel://[[user:]password@]host[:port][,host[:port]...][/db]#MASTER
 * (sentinel ports default to 26379; the userinfo is the data nodes' credentials).
 * The userinfo ends at the LAST '@' of the URL, so a password may hold '@', '/', '?' and ','
 * unescaped. An empty user or password counts as none.
 * BG_EBADURL or BG_ENOMEM; on failure nothing needs freeing. A message never quotes the URL: it
 * names the part that is wrong (a seed by its position), so no password can leak through it.
 */
int bgi_url_parse(const char *url, bgi_url *out, bgi_err *err);
void bgi_url_free(bgi_url *u);

/*
 * How a message names a server given by a URL (its host, a seed, a sentinel), into buf: an IP
 * address or "localhost" as it is ("127.0.0.1:6379", "[::1]:7000"), any other name by its place,
 * `what` ("the URL's host", "seed 2 of the URL"), with its port. The one home of the rule that no
 * message echoes a host a URL gave: a URL whose '@' went missing holds the password in its host
 * ("redis://S3cr3t127.0.0.1"), and no parse can tell such a host from a name. Hosts that servers
 * name (CLUSTER SLOTS, MOVED, a sentinel's answer) are shown as they are.
 */
void bgi_url_host_label(const char *host, int port, const char *what, char *buf, size_t cap);

#endif
