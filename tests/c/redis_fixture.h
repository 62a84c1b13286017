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
/* Stops it (SIGTERM, SIGKILL after 5 s) and removes its directory with everything in it. */
void bgt_redis_stop(bgt_redis *r);
/* kill -9 (a crash) and reap; the port and the directory (its AOF / RDB) stay for bgt_redis_restart. */
void bgt_redis_kill(bgt_redis *r);
/*
 * Starts a killed server again on its port and directory, with extra_args (pass the start's own
 * for the same configuration: with "--appendonly yes --appendfsync always" it comes back with every
 * write it acknowledged). Returns once it answers PING or LOADING (it may still be loading); 0, or
 * -1 with a message (the server was not killed, or it did not come back within 10 s, 5 tries).
 */
int bgt_redis_restart(bgt_redis *r, const char *const *extra_args);

/* Runs one command on a fresh raw hiredis connection; returns the reply as a malloc'd string
 * ("(nil)", "(error) ...", integers in decimal, arrays space-separated). Caller frees. */
char *bgt_redis_cmd(const bgt_redis *r, const char *fmt, ...);
/* Waits until the server answers PING with PONG (a pause or a DEBUG SLEEP is over): 0, or -1 after
 * timeout_ms (a PING held by a pause counts as waiting). */
int bgt_redis_wait_pong(const bgt_redis *r, int timeout_ms);
/* Renders a hiredis reply the way bgt_redis_cmd does (malloc'd; caller frees); NULL renders as
 * "(io error)". Shared with cluster_fixture.c. */
struct redisReply;
char *bgt_redis_render(const struct redisReply *rep);
/* Binary-safe GET: returns malloc'd bytes and length (NULL if the key is missing). */
unsigned char *bgt_redis_get(const bgt_redis *r, const char *key, size_t *len);

#endif
