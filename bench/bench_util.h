/*
 * Helpers shared by the Redis benchmarks: clocks, medians, and a redis-server of their own on a
 * free 127.0.0.1 port - the launcher of the tests and the demo (tools/server_proc; killed with the
 * benchmark: PR_SET_PDEATHSIG).
 */
#ifndef BG_BENCH_UTIL_H
#define BG_BENCH_UTIL_H

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

#include "bloomguard.h"
#include "client_open.h"   /* bgt_client_open */
#include "server_proc.h"

#define BGB_MAX_SAMPLES 64

double bgb_now_s(void);    /* CLOCK_MONOTONIC seconds */
double bgb_cpu_s(void);    /* this process' user + system CPU seconds */
/* Prints "bench: " + fmt (with up to two string arguments) and exits 1. */
void bgb_die(const char *fmt, const char *a, const char *b);
/* Median of n <= BGB_MAX_SAMPLES values. */
double bgb_median(const double *v, int n);
/* Writes v in decimal at p; returns the new end. */
char *bgb_put_u64(char *p, uint64_t v);

/* pid 0 when not started by us; url redis://127.0.0.1:PORT */
typedef bgt_server bgb_server;

/* Starts $BG_REDIS_SERVER or redis-server (no persistence, 127.0.0.1 only); exits on failure. */
void bgb_server_start(bgb_server *s);
/* url itself, or the URL of a server of our own started into s when url is NULL (--url not given). */
const char *bgb_server_or(const char *url, bgb_server *s);
/* Stops the server we started (by pid) and removes its directory; no-op otherwise. */
void bgb_server_stop(bgb_server *s);
/* The path of redisbloom.so: $BG_REDISBLOOM, else what scripts/redisbloom.sh prints (it installs
 * the pinned wheel once, as for the native tests); exits when there is none. */
const char *bgb_redisbloom_path(void);
/* bgb_server_or with RedisBloom loaded (--loadmodule) into the server we start. */
const char *bgb_server_or_bloom(const char *url, bgb_server *s);
/* A raw hiredis connection for redis://host[:port] or unix:///path (no auth, db 0); exits on failure. */
redisContext *bgb_raw_connect(const char *url);
/* The server's CPU seconds (used_cpu_user + used_cpu_sys of INFO cpu). */
double bgb_server_cpu_s(redisContext *c);

#endif
