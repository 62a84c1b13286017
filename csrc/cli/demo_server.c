/*
 * demo_server.c - the demo's (and the benchmarks') own redis-server: found on PATH, started on a free loopback port
 * without persistence, stopped by its pid (never by name: other servers on the machine are not
 * ours). The degrade scenario stops it mid-run and starts it again on the same port.
 */
#define _DEFAULT_SOURCE 1 /* mkdtemp under the strict C11 build */

#include "demo_server.h"

#include <stdio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int demo_server_find(demo_server *s) {
  const char *env = getenv("BLOOMGUARD_REDIS_SERVER");
  if (env && *env) {
    snprintf(s->bin, sizeof s->bin, "%s", env);
    return access(s->bin, X_OK) == 0 ? 0 : -1;
  }
  const char *path = getenv("PATH");
  if (!path) return -1;
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && n + 14 < sizeof s->bin) {
      snprintf(s->bin, sizeof s->bin, "%.*s/redis-server", (int)n, path);
      struct stat st;
      if (stat(s->bin, &st) == 0 && S_ISREG(st.st_mode) && access(s->bin, X_OK) == 0) return 0;
    }
    if (!end) break;
    path = end + 1;
  }
  s->bin[0] = 0;
  return -1;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* 1 when something accepts TCP connections on the port (redis-server listens once it is ready). */
static int accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

/* Forks and execs the server on s->port; waits up to 5 s for it to listen. */
static int launch(demo_server *s, char *err, size_t errlen) {
  char port[16];
  snprintf(port, sizeof port, "%d", s->port);
  const char *argv[] = {s->bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", s->dir, "--logfile", "redis.log", "--daemonize", "no", NULL};
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the demo, even if it crashes */
#endif
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    execv(s->bin, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 250; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      s->pid = 0;
      snprintf(err, errlen, "%s exited at start (status %d; see %s/redis.log)", s->bin,
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), s->dir);
      return -1;
    }
    if (accepts(s->port)) return 0;
    sleep_ms(20);
  }
  demo_server_stop(s);
  snprintf(err, errlen, "%s did not listen on port %d within 5 s", s->bin, s->port);
  return -1;
}

int demo_server_start(demo_server *s, char *err, size_t errlen) {
  snprintf(s->dir, sizeof s->dir, "%s/bloomguard-redis-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(s->dir)) {
    snprintf(err, errlen, "mkdtemp %s: %s", s->dir, strerror(errno));
    s->dir[0] = 0;
    return -1;
  }
  /* the free port may be taken by someone else before the server binds it: try a few */
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = free_port();
    if (s->port < 0) continue;
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    if (launch(s, err, errlen) == 0) return 0;
  }
  return -1;
}

void demo_server_stop(demo_server *s) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGCONT); /* in case it was paused */
  kill(s->pid, SIGTERM);
  for (int i = 0; i < 250; i++) {
    if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0;
      return;
    }
    sleep_ms(20);
  }
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

void demo_server_kill(demo_server *s) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

int demo_server_restart(demo_server *s, char *err, size_t errlen) {
  /* the port was just released by our own server; another process grabbing it in between would
   * make the restart fail, reported as a harness failure */
  for (int attempt = 0; attempt < 3; attempt++) {
    if (launch(s, err, errlen) == 0) return 0;
    sleep_ms(100);
  }
  return -1;
}

void demo_server_cleanup(demo_server *s) {
  demo_server_stop(s);
  if (s->dir[0]) {
    char path[512];
    snprintf(path, sizeof path, "%s/redis.log", s->dir);
    unlink(path);
    rmdir(s->dir);
    s->dir[0] = 0;
  }
}
