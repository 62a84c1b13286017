/* Internal: server URLs. */
#ifndef BG_INTERNAL_URL_H
#define BG_INTERNAL_URL_H

#include "common/err.h"

#define BGI_URL_MAX_HOSTS 16
typedef struct bgi_hostport { char host[256]; int port; } bgi_hostport;

typedef struct bgi_url {
  int is_unix;
  char host[256];      /* without brackets for IPv6 */
  int port;
  char path[108];      /* unix socket path (sun_path size) */
  char *user;          /* NULL if absent; %-decoded */
  char *password;      /* NULL if absent; %-decoded */
  int db;
  char display[400];   /* the URL with the password replaced by "***", for messages */
  size_t nhosts;                             /* seeds in URL order: >= 1 for redis://, 0 for unix:// */
  bgi_hostport hosts[BGI_URL_MAX_HOSTS];     /* hosts[0] equals host/port */
  int db_given;                              /* 1 when the URL named a database (path or ?db=) */
} bgi_url;

/* BG_EBADURL (message says what is wrong) or BG_ENOMEM; on failure nothing needs freeing. */
int bgi_url_parse(const char *url, bgi_url *out, bgi_err *err);
void bgi_url_free(bgi_url *u);

#endif
