/*
 * server_proc.c - the redis-server launcher (server_proc.h). Every child is started with
 * PR_SET_PDEATHSIG, so a crashed test, benchmark or demo leaves no server behind.
 */
#include "server_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long bgt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void bgt_sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

const char *bgt_server_bin(void) {
  const char *b = getenv("BG_REDIS_SERVER");
  if (!b || !*b) b = getenv("BLOOMGUARD_REDIS_SERVER");  /* the demo's old name for it */
  return b && *b ? b : "redis-server";
}

const char *bgt_cli_bin(void) {
  const char *b = getenv("BG_REDIS_CLI");
  return b && *b ? b : "redis-cli";
}

/* ---- which server ---------------------------------------------------------------------------- */

static pthread_once_t version_once = PTHREAD_ONCE_INIT;
static char server_name[16] = "unknown";
static int server_major;

/* `BIN --version` through a pipe: "Redis server v=7.0.15 ..." or "Valkey server v=9.1.2 ...". */
static void ask_version(void) {
  int fd[2];
  if (pipe(fd) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execlp(bgt_server_bin(), bgt_server_bin(), "--version", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char out[256] = "";
  size_t n = 0;
  ssize_t r;
  while (pid > 0 && n < sizeof out - 1 && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fd[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  const char *v = strstr(out, " v=");
  if (!v) return;
  if (!strncmp(out, "Valkey", 6)) snprintf(server_name, sizeof server_name, "valkey");
  else if (!strncmp(out, "Redis", 5)) snprintf(server_name, sizeof server_name, "redis");
  server_major = atoi(v + 3);
}

const char *bgt_server_name(void) {
  pthread_once(&version_once, ask_version);
  return server_name;
}

int bgt_server_major(void) {
  pthread_once(&version_once, ask_version);
  return server_major;
}

int bgt_server_is_valkey(void) { return !strcmp(bgt_server_name(), "valkey"); }

/* ---- ports ---------------------------------------------------------------------------------- */

/* 127.0.0.1:port (0: any port) */
static void loopback(struct sockaddr_in *a, int port) {
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_port = htons((unsigned short)port);
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

int bgt_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  loopback(&a, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    perror("free_port");
    exit(2);
  }
  close(fd);
  return ntohs(a.sin_port);
}

int bgt_bind_test(int port) {
  struct sockaddr_in a;
  int one = 1, ok;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  loopback(&a, port);
  /* redis-server sets SO_REUSEADDR too: a port in TIME_WAIT is free for it */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

/* The highest port (whose port + bus_offset too) stays below the ephemeral range: other tests'
 * free ports (and outgoing connections) come from there, so a port picked here is not taken by a
 * client socket a moment later. */
static int port_top(int lo, int hi, int bus_offset) {
  int elo = 0, ehi = 0, top = hi;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &elo, &ehi) == 2 && elo - 1 - bus_offset >= lo + 100 && elo - 1 - bus_offset < top)
      top = elo - 1 - bus_offset;
    fclose(f);
  }
  return top;
}

int bgt_pick_ports(int *ports, int n, int lo, int hi, int bus_offset, unsigned *seed, const char *who) {
  int top = port_top(lo, hi, bus_offset);
  for (int i = 0; i < n; i++) {
    int tries = 0, p, dup;
    do {
      p = lo + (int)(rand_r(seed) % (unsigned)(top - lo + 1));
      dup = 0;
      for (int j = 0; j < i; j++) dup |= ports[j] == p;
    } while ((dup || !bgt_bind_test(p) || (bus_offset > 0 && !bgt_bind_test(p + bus_offset))) && ++tries < 1000);
    if (tries >= 1000) {
      if (bus_offset > 0)
        fprintf(stderr, "%s: no free port pair P, P+%d in %d..%d\n", who, bus_offset, lo, top);
      else
        fprintf(stderr, "%s: no free port in %d..%d\n", who, lo, top);
      return -1;
    }
    ports[i] = p;
  }
  return 0;
}

/* ---- processes ------------------------------------------------------------------------------ */

int bgt_spawn(char *const *argv, const char *out, pid_t *pid) {
  pid_t parent = getpid();
  pid_t child = fork();
  *pid = 0;
  if (child < 0) { perror("fixture: fork"); return -1; }
  if (child == 0) {
    /* the server must not outlive a test that crashed or exited early, nor hold ctest's pipes */
    int in = open("/dev/null", O_RDWR);
    int o = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600) : in;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  /* the parent died before prctl */
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (o >= 0) dup2(o, STDOUT_FILENO);
    if (out && o >= 0) dup2(o, STDERR_FILENO);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s (install redis-server / redis-tools, or set BG_REDIS_SERVER / "
                    "BG_REDIS_CLI)\n", argv[0], strerror(errno));
    _exit(127);
  }
  *pid = child;
  return 0;
}

int bgt_exited(pid_t *pid) {
  if (*pid <= 0) return 1;
  if (waitpid(*pid, NULL, WNOHANG) == *pid) { *pid = 0; return 1; }
  return 0;
}

void bgt_stop_pid(pid_t *pid, int sig) {
  if (*pid <= 0) return;
  if (sig) kill(*pid, sig);
  for (int k = 0; k < 250; k++) {  /* 5 s for a clean shutdown, then SIGKILL */
    if (waitpid(*pid, NULL, WNOHANG) == *pid) { *pid = 0; return; }
    bgt_sleep_ms(20);
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, NULL, 0);
  *pid = 0;
}

int bgt_ping_ok(int port) {
  struct timeval tv = {0, 200000};
  struct sockaddr_in a;
  char c = 0;
  int ok = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  loopback(&a, port);
  /* a paused or busy server: give up after 200 ms either way */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6 && recv(fd, &c, 1, 0) == 1)
    ok = c == '+' || c == '-';  /* any answer means it is up; a server with requirepass answers -NOAUTH */
  close(fd);
  return ok;
}

int bgt_wait_ping(pid_t *pid, int port, int timeout_ms) {
  long long end = bgt_now_ms() + timeout_ms;
  while (bgt_now_ms() < end) {
    if (bgt_exited(pid)) return -1;
    if (bgt_ping_ok(port)) return 0;
    bgt_sleep_ms(20);
  }
  return -1;
}

/* ---- files and signals ---------------------------------------------------------------------- */

void bgt_scratch_dir(char *buf, size_t cap, const char *prefix) {
  snprintf(buf, cap, "/tmp/%s-XXXXXX", prefix);
  if (!mkdtemp(buf)) {
    fprintf(stderr, "fixture: mkdtemp %s: %s\n", buf, strerror(errno));
    exit(2);
  }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  remove(path);
  return 0;
}

void bgt_rm_tree(const char *dir) {
  nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);  /* the entries, then the directory itself */
}

void bgt_print_file_tail(const char *path) {
  FILE *f = fopen(path, "r");
  char buf[2048];
  size_t n;
  long sz;
  if (!f) return;
  fseek(f, 0, SEEK_END);
  sz = ftell(f);
  fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0, SEEK_SET);
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  fprintf(stderr, "--- %s ---\n%s\n---\n", path, buf);
}

void bgt_ignore_sigpipe(void) {
  struct sigaction old;
  if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

/* ---- one private server -------------------------------------------------------------------- */

int bgt_server_find(bgt_server *s) {
  const char *bin = bgt_server_bin();
  const char *path = getenv("PATH");
  struct stat st;
  s->bin[0] = 0;
  if (strchr(bin, '/')) {
    snprintf(s->bin, sizeof s->bin, "%s", bin);
    if (access(s->bin, X_OK) == 0) return 0;
    s->bin[0] = 0;
    return -1;
  }
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && n + strlen(bin) + 2 < sizeof s->bin) {
      snprintf(s->bin, sizeof s->bin, "%.*s/%s", (int)n, path, bin);
      if (stat(s->bin, &st) == 0 && S_ISREG(st.st_mode) && access(s->bin, X_OK) == 0) return 0;
    }
    if (!end) break;
    path = end + 1;
  }
  s->bin[0] = 0;
  return -1;
}

/* Forks and execs the server on s->port; waits up to 5 s for it to answer PING. */
static int launch(bgt_server *s, char *err, size_t errlen) {
  char port[16];
  snprintf(port, sizeof port, "%d", s->port);
  const char *argv[48] = {s->bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", s->dir, "--logfile", "redis.log", "--daemonize", "no", NULL};
  size_t n = 0;
  while (argv[n]) n++;
  for (size_t i = 0; s->extra_args && s->extra_args[i] && n < 47; i++) argv[n++] = s->extra_args[i];
  argv[n] = NULL;
  if (bgt_spawn((char *const *)argv, NULL, &s->pid) != 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (bgt_wait_ping(&s->pid, s->port, 5000) == 0) return 0;
  if (s->pid == 0) {
    snprintf(err, errlen, "%s exited at start (see %s/redis.log)", s->bin, s->dir);
    return -1;
  }
  bgt_stop_pid(&s->pid, SIGKILL);
  snprintf(err, errlen, "%s did not answer on port %d within 5 s", s->bin, s->port);
  return -1;
}

int bgt_server_start(bgt_server *s, char *err, size_t errlen) {
  if (!s->bin[0] && bgt_server_find(s) != 0) {
    snprintf(err, errlen, "%s not found (install redis-server, or set BG_REDIS_SERVER)", bgt_server_bin());
    return -1;
  }
  bgt_scratch_dir(s->dir, sizeof s->dir, "bloomguard-redis");
  /* the free port may be taken by someone else before the server binds it: try a few */
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = bgt_free_port();
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    if (launch(s, err, errlen) == 0) return 0;
  }
  return -1;
}

void bgt_server_stop(bgt_server *s) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGCONT);  /* in case it was paused */
  bgt_stop_pid(&s->pid, SIGTERM);
}

void bgt_server_kill(bgt_server *s) { bgt_stop_pid(&s->pid, SIGKILL); }

int bgt_server_restart(bgt_server *s, char *err, size_t errlen) {
  /* the port was just released by our own server; another process grabbing it in between makes
   * the restart fail, which the caller reports as its own (harness) failure */
  for (int attempt = 0; attempt < 3; attempt++) {
    if (launch(s, err, errlen) == 0) return 0;
    bgt_sleep_ms(100);
  }
  return -1;
}

void bgt_server_cleanup(bgt_server *s) {
  bgt_server_stop(s);
  if (s->dir[0]) {
    bgt_rm_tree(s->dir);
    s->dir[0] = 0;
  }
}

const char *bgt_redisbloom_module(int *rc) {
  static char path[4096];
  *rc = 0;
  if (path[0]) return path;
  const char *env = getenv("BG_REDISBLOOM");
  if (env && *env) {
    snprintf(path, sizeof path, "%s", env);
    return path;
  }
  FILE *p = popen("bash '" BG_SOURCE_DIR "/scripts/redisbloom.sh'", "r");
  if (!p || !fgets(path, sizeof path, p)) path[0] = 0;
  *rc = p ? pclose(p) : -1;
  path[strcspn(path, "\n")] = 0;
  if (*rc != 0 || !path[0]) {
    path[0] = 0;
    if (!*rc) *rc = -1;
    return NULL;
  }
  return path;
}
