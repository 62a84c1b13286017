/*
 * Starts a real redis-server for a test on a free loopback port (and a unix socket), and stops it.
 * The binary is $BG_REDIS_SERVER or redis-server from PATH.
 */
#ifndef BG_TEST_REDIS_FIXTURE_H
#define BG_TEST_REDIS_FIXTURE_H

#include <sys/types.h>

typedef struct bgt_redis {
  pid_t pid;
  int port;
  char url[128];      /* redis://127.0.0.1:PORT */
  char sock[108];     /* unix socket path */
  char dir[256];      /* scratch directory (removed on stop) */
} bgt_redis;

/*
 * Starts a server; extra_args is NULL or a NULL-terminated list of extra "--option", "value" strings.
 * Exits the test binary with status 2 (and a message) if redis-server cannot be started.
 */
void bgt_redis_start(bgt_redis *r, const char *const *extra_args);
void bgt_redis_stop(bgt_redis *r);

/* Runs one command on a fresh raw hiredis connection; returns the reply as a malloc'd string
 * ("(nil)", "(error) ...", integers in decimal, arrays space-separated). Caller frees. */
char *bgt_redis_cmd(const bgt_redis *r, const char *fmt, ...);
/* Renders a hiredis reply the way bgt_redis_cmd does (malloc'd; caller frees); NULL renders as
 * "(io error)". Shared with cluster_fixture.c. */
struct redisReply;
char *bgt_redis_render(const struct redisReply *rep);
/* Binary-safe GET: returns malloc'd bytes and length (NULL if the key is missing). */
unsigned char *bgt_redis_get(const bgt_redis *r, const char *key, size_t *len);

#endif
