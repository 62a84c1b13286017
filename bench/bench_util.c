/* Helpers shared by the Redis benchmarks (see bench_util.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getrusage under -std=c11 */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

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

/* what: " with RedisBloom" or "", for the message */
static void start_with(bgb_server *s, const char *const *extra_args, const char *what) {
  char err[512];
  memset(s, 0, sizeof *s);
  s->extra_args = extra_args;
  if (bgt_server_find(s) != 0) bgb_die("%s not found%s (install redis-server or set BG_REDIS_SERVER)", bgt_server_bin(), "");
  if (bgt_server_start(s, err, sizeof err) != 0) bgb_die("could not start redis-server%s: %s", what, err);
}

void bgb_server_start(bgb_server *s) { start_with(s, NULL, ""); }

const char *bgb_redisbloom_path(void) {
  int rc = 0;
  const char *path = bgt_redisbloom_module(&rc);
  if (!path) bgb_die("scripts/redisbloom.sh gave no redisbloom.so%s%s (set BG_REDISBLOOM to the module's path)", NULL, NULL);
  return path;
}

const char *bgb_server_or_bloom(const char *url, bgb_server *s) {
  static const char *args[3];
  if (url) return url;
  args[0] = "--loadmodule", args[1] = bgb_redisbloom_path(), args[2] = NULL;
  start_with(s, args, " with RedisBloom");
  return s->url;
}

void bgb_server_stop(bgb_server *s) { bgt_server_cleanup(s); }

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


const char *bgb_server_or(const char *url, bgb_server *s) {
  if (url) return url;
  bgb_server_start(s);
  return s->url;
}
