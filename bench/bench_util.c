/* Helpers shared by the Redis benchmarks (see bench_util.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, prctl under -std=c11 */
#endif
#include "bench_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double bgb_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bgb_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

void bgb_die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "bench: ");
  fprintf(stderr, fmt, a ? a : "", b ? b : "");
  fputc('\n', stderr);
  exit(1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bgb_median(const double *v, int n) {
  double t[BGB_MAX_SAMPLES];
  memcpy(t, v, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

char *bgb_put_u64(char *p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do tmp[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    bgb_die("cannot find a free port: %s%s", strerror(errno), NULL);
  close(fd);
  return ntohs(a.sin_port);
}

static int ping_port(int port) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = 0;
  if (c && !c->err) {
    redisReply *r = redisCommand(c, "PING");
    ok = r != NULL;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return ok;
}

void bgb_server_start(bgb_server *s) {
  const char *bin = getenv("BG_REDIS_SERVER");
  if (!bin || !*bin) bin = "redis-server";
  snprintf(s->dir, sizeof s->dir, "/tmp/bg-bench-XXXXXX");
  if (!mkdtemp(s->dir)) bgb_die("mkdtemp: %s%s", strerror(errno), NULL);
  for (int attempt = 0; attempt < 5; attempt++) {
    char port[16];
    s->port = free_port();
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[] = {bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", s->dir, "--logfile", "redis.log", NULL};
    pid_t pid = fork();
    if (pid < 0) bgb_die("fork: %s%s", strerror(errno), NULL);
    if (pid == 0) {
      int devnull = open("/dev/null", O_RDWR);
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the benchmark */
      if (devnull >= 0) dup2(devnull, 0), dup2(devnull, 1);
      execvp(bin, (char *const *)argv);
      fprintf(stderr, "cannot run %s: %s (install redis-server or set BG_REDIS_SERVER)\n", bin, strerror(errno));
      _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 250; i++) { /* up to 5 s */
      if (waitpid(pid, NULL, WNOHANG) == pid) {
        s->pid = 0;
        break;
      }
      if (ping_port(s->port)) {
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
        return;
      }
      usleep(20000);
    }
    if (s->pid) kill(s->pid, SIGKILL), waitpid(s->pid, NULL, 0), s->pid = 0;
  }
  bgb_die("could not start redis-server (see %s/redis.log)%s", s->dir, NULL);
}

void bgb_server_stop(bgb_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 250 && s->pid; i++) {
      if (waitpid(s->pid, NULL, WNOHANG) == s->pid) s->pid = 0;
      else usleep(20000);
    }
    if (s->pid) kill(s->pid, SIGKILL), waitpid(s->pid, NULL, 0), s->pid = 0;
  }
  if (s->dir[0]) {
    char p[128];
    snprintf(p, sizeof p, "%s/redis.log", s->dir);
    unlink(p);
    rmdir(s->dir);
  }
}

redisContext *bgb_raw_connect(const char *url) {
  struct timeval tv = {5, 0};
  redisContext *c = NULL;
  if (!strncmp(url, "unix://", 7)) {
    c = redisConnectUnixWithTimeout(url + 7, tv);
  } else if (!strncmp(url, "redis://", 8)) {
    char host[256];
    int port = 6379;
    const char *h = url + 8, *colon = strrchr(h, ':'), *end = h + strcspn(h, "/?");
    if (strchr(h, '@')) bgb_die("--url: the raw baseline supports no user/password (%s)%s", url, NULL);
    if (colon && colon < end) port = atoi(colon + 1), end = colon;
    snprintf(host, sizeof host, "%.*s", (int)(end - h), h);
    c = redisConnectWithTimeout(host, port, tv);
  } else {
    bgb_die("--url must be redis://host[:port] or unix:///path (got %s)%s", url, NULL);
  }
  if (!c || c->err) bgb_die("cannot connect to %s: %s", url, c ? c->errstr : "out of memory");
  return c;
}

double bgb_server_cpu_s(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO cpu");
  double u = 0, s = 0;
  if (!r || r->type != REDIS_REPLY_STRING) bgb_die("INFO cpu failed%s%s", NULL, NULL);
  const char *p = strstr(r->str, "used_cpu_user:"), *q = strstr(r->str, "used_cpu_sys:");
  if (p) u = strtod(p + 14, NULL);
  if (q) s = strtod(q + 13, NULL);
  freeReplyObject(r);
  return u + s;
}

