#include "redis_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    perror("free_port");
    exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

static int ping_ok(int port) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = 0;
  if (c && !c->err) {
    redisReply *rep = redisCommand(c, "PING");
    /* any answer means it is up; a server with requirepass answers NOAUTH */
    ok = rep && (rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_ERROR);
    if (rep) freeReplyObject(rep);
  }
  if (c) redisFree(c);
  return ok;
}

static int try_start(bgt_redis *r, const char *const *extra) {
  const char *bin = getenv("BG_REDIS_SERVER");
  char port[16];
  const char *argv[64];
  int n = 0;
  if (!bin || !*bin) bin = "redis-server";
  r->port = free_port();
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

  pid_t pid = fork();
  if (pid < 0) { perror("fork"); exit(2); }
  if (pid == 0) {
    /* the server must not outlive a test that crashed or exited early, nor hold ctest's pipes */
    int devnull = open("/dev/null", O_RDWR);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    execvp(bin, (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s (install redis-server or set BG_REDIS_SERVER)\n", bin, strerror(errno));
    _exit(127);
  }
  r->pid = pid;
  for (int i = 0; i < 250; i++) {  /* up to 5 s */
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) { r->pid = 0; return 0; }
    if (ping_ok(r->port)) return 1;
    usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  r->pid = 0;
  return 0;
}

void bgt_redis_start(bgt_redis *r, const char *const *extra_args) {
  memset(r, 0, sizeof *r);
  snprintf(r->dir, sizeof r->dir, "/tmp/bgt-redis-XXXXXX");
  if (!mkdtemp(r->dir)) { perror("mkdtemp"); exit(2); }
  for (int attempt = 0; attempt < 5; attempt++)   /* the free port may be taken before redis binds it */
    if (try_start(r, extra_args)) return;
  fprintf(stderr, "could not start redis-server (see %s/redis.log)\n", r->dir);
  exit(2);
}

void bgt_redis_stop(bgt_redis *r) {
  if (r->pid > 0) {
    kill(r->pid, SIGTERM);
    for (int i = 0; i < 250; i++) {
      if (waitpid(r->pid, NULL, WNOHANG) == r->pid) { r->pid = 0; break; }
      usleep(20000);
    }
    if (r->pid > 0) { kill(r->pid, SIGKILL); waitpid(r->pid, NULL, 0); r->pid = 0; }
  }
  if (r->dir[0]) {
    char path[512];
    snprintf(path, sizeof path, "%s/redis.log", r->dir); unlink(path);
    unlink(r->sock);
    rmdir(r->dir);
    r->dir[0] = 0;
  }
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
