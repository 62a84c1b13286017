#include "redis_fixture.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_proc.h"

/* Starts the server on r->port and r->dir; 1 once it answers PING (LOADING counts: it is up). */
static int launch(bgt_redis *r, const char *const *extra, int timeout_ms) {
  const char *bin = bgt_server_bin();
  char port[16];
  const char *argv[64];
  int n = 0;
  snprintf(port, sizeof port, "%d", r->port);
  snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
  snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
  argv[n++] = bin;
  argv[n++] = "--port"; argv[n++] = port;
  argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
  argv[n++] = "--unixsocket"; argv[n++] = r->sock;
  argv[n++] = "--unixsocketperm"; argv[n++] = "700";
  argv[n++] = "--save"; argv[n++] = "";
  argv[n++] = "--appendonly"; argv[n++] = "no";
  argv[n++] = "--dir"; argv[n++] = r->dir;
  argv[n++] = "--logfile"; argv[n++] = "redis.log";
  argv[n++] = "--enable-debug-command"; argv[n++] = "local";
  for (; extra && *extra && n < 62; extra++) argv[n++] = *extra;
  argv[n] = NULL;

  if (bgt_spawn((char *const *)argv, NULL, &r->pid) != 0) exit(2);
  if (bgt_wait_ping(&r->pid, r->port, timeout_ms) == 0) return 1;
  bgt_stop_pid(&r->pid, SIGKILL);  /* it exited (reaped already) or did not answer in time */
  return 0;
}

static int try_start(bgt_redis *r, const char *const *extra) {
  r->port = bgt_free_port();
  return launch(r, extra, 5000);
}

void bgt_redis_start(bgt_redis *r, const char *const *extra_args) {
  memset(r, 0, sizeof *r);
  bgt_scratch_dir(r->dir, sizeof r->dir, "bgt-redis");
  for (int attempt = 0; attempt < 5; attempt++)   /* the free port may be taken before redis binds it */
    if (try_start(r, extra_args)) return;
  fprintf(stderr, "could not start redis-server (see %s/redis.log)\n", r->dir);
  exit(2);
}

void bgt_redis_stop(bgt_redis *r) {
  bgt_stop_pid(&r->pid, SIGTERM);
  if (r->dir[0]) {
    bgt_rm_tree(r->dir);   /* the log, the socket, and what persistence left (appendonlydir, dump.rdb) */
    r->dir[0] = 0;
  }
}

void bgt_redis_kill(bgt_redis *r) {
  kill(r->pid, SIGCONT);   /* a paused server dies too */
  bgt_stop_pid(&r->pid, SIGKILL);
}

int bgt_redis_restart(bgt_redis *r, const char *const *extra_args) {
  if (r->pid > 0 || !r->dir[0]) {
    fprintf(stderr, "redis fixture: restart: the server on port %d is running or was stopped\n", r->port);
    return -1;
  }
  /* the port was just released by our own server (redis binds with SO_REUSEADDR, so TIME_WAIT
   * does not hold it); someone else taking it in between fails the restart: a harness failure */
  for (int attempt = 0; attempt < 5; attempt++) {
    if (launch(r, extra_args, 10000)) return 0;   /* 10 s: it may load a big AOF */
    bgt_sleep_ms(100);
  }
  fprintf(stderr, "redis fixture: could not restart redis-server on port %d (see %s/redis.log)\n", r->port, r->dir);
  return -1;
}

static void append(char **buf, size_t *len, const char *s, size_t n) {
  *buf = realloc(*buf, *len + n + 1);
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = 0;
}

static void render(const redisReply *rep, char **buf, size_t *len) {
  char tmp[64];
  switch (rep->type) {
    case REDIS_REPLY_NIL: append(buf, len, "(nil)", 5); break;
    case REDIS_REPLY_INTEGER:
      snprintf(tmp, sizeof tmp, "%lld", rep->integer);
      append(buf, len, tmp, strlen(tmp));
      break;
    case REDIS_REPLY_ERROR:
      append(buf, len, "(error) ", 8);
      append(buf, len, rep->str, rep->len);
      break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < rep->elements; i++) {
        if (i) append(buf, len, " ", 1);
        render(rep->element[i], buf, len);
      }
      break;
    default: append(buf, len, rep->str, rep->len); break;
  }
}

char *bgt_redis_render(const struct redisReply *rep) {
  char *out = NULL;
  size_t len = 0;
  append(&out, &len, "", 0);
  if (rep) render(rep, &out, &len);
  else append(&out, &len, "(io error)", 10);
  return out;
}

static redisContext *raw_connect(const bgt_redis *r) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
  if (!c || c->err) {
    fprintf(stderr, "raw connection to port %d failed\n", r->port);
    exit(2);
  }
  return c;
}

char *bgt_redis_cmd(const bgt_redis *r, const char *fmt, ...) {
  redisContext *c = raw_connect(r);
  va_list ap;
  va_start(ap, fmt);
  redisReply *rep = redisvCommand(c, fmt, ap);
  va_end(ap);
  char *out = bgt_redis_render(rep);
  if (rep) freeReplyObject(rep);
  redisFree(c);
  return out;
}

int bgt_redis_wait_pong(const bgt_redis *r, int timeout_ms) {
  long long end = bgt_now_ms() + timeout_ms;
  for (;;) {
    char *got = bgt_redis_cmd(r, "PING");
    int pong = !strcmp(got, "PONG");
    free(got);
    if (pong) return 0;
    if (bgt_now_ms() >= end) return -1;
    bgt_sleep_ms(5);
  }
}

unsigned char *bgt_redis_get(const bgt_redis *r, const char *key, size_t *len) {
  redisContext *c = raw_connect(r);
  redisReply *rep = redisCommand(c, "GET %s", key);
  unsigned char *out = NULL;
  *len = 0;
  if (rep && rep->type == REDIS_REPLY_STRING) {
    out = malloc(rep->len ? rep->len : 1);
    memcpy(out, rep->str, rep->len);
    *len = rep->len;
  }
  if (rep) freeReplyObject(rep);
  redisFree(c);
  return out;
}
