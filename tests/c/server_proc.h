#ifndef BGT_SERVER_PROC_H
#define BGT_SERVER_PROC_H

/*
 * Process and port handling shared by the test fixtures (redis, cluster, sentinel, TLS): one home
 * for how a test server is started, waited for and stopped, so the four fixtures cannot drift.
 */

#include <stddef.h>
#include <sys/types.h>

long long bgt_now_ms(void);  /* CLOCK_MONOTONIC */
void bgt_sleep_ms(int ms);

const char *bgt_server_bin(void);  /* $BG_REDIS_SERVER or redis-server */
const char *bgt_cli_bin(void);     /* $BG_REDIS_CLI or redis-cli */

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

#endif
