/*
 * bench_wake: what it costs to wake one blocked thread here - the floor under every blocking call
 * on a multiplexed connection (redis/mux.c: each caller parks and is woken by whoever reads its
 * reply), against what a caller with a connection of its own pays instead (blocked in recv, woken
 * by the peer's send over loopback TCP), measured in the same run.
 *
 * Two threads hand a turn back and forth N times: with the library's parker (common/park.c, the
 * futex word a multiplexed call sleeps on), and with one byte each way over a loopback TCP
 * connection. Each pair runs pinned to one CPU, pinned to two CPUs, and unpinned. Printed per
 * hand-off: wall time and the process's CPU time, and parker / TCP. No server.
 *
 *   bench_wake [hand-offs per run (default 100000)] [runs (default 5)]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"
#include "common/park.h"

typedef struct pair {
  int n, cpu[2];            /* cpu -1: unpinned */
  bgi_parker park[2];       /* parker: each side sleeps on its own */
  atomic_int turn;
  int fd[2];                /* tcp: the two ends */
} pair;

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* side s waits for its turn (side 0 has the first), then hands it to the other side */
static void park_side(pair *p, int s) {
  for (int i = 0; i < p->n; i++) {
    while (atomic_load(&p->turn) != s) {
      unsigned t = bgi_park_ticket(&p->park[s]);
      if (atomic_load(&p->turn) == s) break;
      bgi_park_wait(&p->park[s], t, UINT64_MAX, 0);
    }
    atomic_store(&p->turn, !s);
    bgi_park_wake(&p->park[!s]);
  }
}

static void tcp_side(pair *p, int s) {
  char b = 0;
  for (int i = 0; i < p->n; i++) {
    if ((s == 1 || i > 0) && recv(p->fd[s], &b, 1, MSG_WAITALL) != 1) bgb_die("recv failed", "", "");
    if (send(p->fd[s], &b, 1, MSG_NOSIGNAL) != 1) bgb_die("send failed", "", "");
  }
}

static int use_tcp;

static void *other(void *arg) {
  pair *p = arg;
  pin(p->cpu[1]);
  if (use_tcp) tcp_side(p, 1);
  else park_side(p, 1);
  return NULL;
}

static void tcp_connect(int fd[2]) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
    bgb_die("cannot listen on loopback", "", "");
  fd[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (fd[0] < 0 || connect(fd[0], (struct sockaddr *)&a, sizeof a) || (fd[1] = accept(l, NULL, NULL)) < 0)
    bgb_die("cannot connect on loopback", "", "");
  setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  close(l);
}

/* One run: microseconds of wall and of CPU per hand-off. */
static void run(int tcp, int n, int cpu0, int cpu1, double *wall_us, double *cpu_us) {
  pair p = {.n = n, .cpu = {cpu0, cpu1}};
  bgi_park_init(&p.park[0]);
  bgi_park_init(&p.park[1]);
  atomic_init(&p.turn, 0);
  use_tcp = tcp;
  if (tcp) tcp_connect(p.fd);
  cpu_set_t all;
  pthread_getaffinity_np(pthread_self(), sizeof all, &all);
  pin(cpu0);
  pthread_t t;
  double w0 = bgb_now_s(), c0 = bgb_cpu_s();
  pthread_create(&t, NULL, other, &p);
  if (tcp) tcp_side(&p, 0);
  else park_side(&p, 0);
  pthread_join(t, NULL);
  *wall_us = (bgb_now_s() - w0) * 1e6 / (2.0 * n);
  *cpu_us = (bgb_cpu_s() - c0) * 1e6 / (2.0 * n);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
  if (tcp) close(p.fd[0]), close(p.fd[1]);
  bgi_park_destroy(&p.park[0]);
  bgi_park_destroy(&p.park[1]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000, rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 1 || rounds < 1 || rounds > 64) bgb_die("usage: bench_wake [hand-offs >= 1] [runs 1..64]", "", "");
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  static const struct {
    const char *name;
    int cpu0, cpu1;
  } place[] = {{"one CPU", 0, 0}, {"two CPUs", 0, 1}, {"unpinned", -1, -1}};
  printf("bench_wake: %d hand-offs per run, median of %d runs (interleaved), %d CPUs\n\n", n, rounds, ncpu);
  printf("  %-10s %18s %18s %18s %18s %14s\n", "threads on", "parker wall us", "parker CPU us", "tcp wall us",
         "tcp CPU us", "parker / tcp");
  for (size_t k = 0; k < sizeof place / sizeof place[0]; k++) {
    if (place[k].cpu1 >= ncpu) continue;
    double pw[64], pc[64], tw[64], tc[64], ratio[64];
    for (int r = 0; r < rounds; r++) {
      run(0, n, place[k].cpu0, place[k].cpu1, &pw[r], &pc[r]);
      run(1, n, place[k].cpu0, place[k].cpu1, &tw[r], &tc[r]);
      ratio[r] = pc[r] / tc[r];
    }
    printf("  %-10s %18.2f %18.2f %18.2f %18.2f %13.2fx\n", place[k].name, bgb_median(pw, rounds),
           bgb_median(pc, rounds), bgb_median(tw, rounds), bgb_median(tc, rounds), bgb_median(ratio, rounds));
  }
  printf("\n(per hand-off; parker / tcp compares CPU time: what a woken caller costs the machine)\n");
  return 0;
}
