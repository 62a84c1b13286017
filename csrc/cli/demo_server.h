/*
 * demo_server.h - a private redis-server on a free loopback port, started and stopped by pid:
 * the demo's (demo.h), and the benchmarks' too (bench/bench_util.c). Only libc; no bloomguard.
 */
#ifndef BG_CLI_DEMO_SERVER_H
#define BG_CLI_DEMO_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct demo_server {
  pid_t pid;          /* 0 when not running */
  int port;
  char url[64];       /* redis://127.0.0.1:PORT */
  char bin[4096];     /* the redis-server binary found on PATH */
  char dir[256];      /* scratch directory: its log (removed at the end) */
} demo_server;

/* Looks for redis-server on PATH (or $BLOOMGUARD_REDIS_SERVER). 0 when found. */
int  demo_server_find(demo_server *s);
/* Starts it on a free 127.0.0.1 port, without persistence; 0 once it accepts connections. */
int  demo_server_start(demo_server *s, char *err, size_t errlen);
/* Stops it (SIGTERM, then SIGKILL after 5 s), by its pid; keeps port and dir for a restart. */
void demo_server_stop(demo_server *s);
/* Kills it at once (SIGKILL: a crash, the outage of the degrade scenario) and reaps it. */
void demo_server_kill(demo_server *s);
/* Starts it again on the same port (it comes back empty: the demo runs it without persistence). */
int  demo_server_restart(demo_server *s, char *err, size_t errlen);
/* Stops it if running and removes its scratch directory. */
void demo_server_cleanup(demo_server *s);

#endif
