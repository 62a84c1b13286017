/*
 * bench_queue: one thread keeping N queries in flight (one item each), through a bg_queue driven
 * from epoll, against a baseline of hiredis's asynchronous API (redisAsyncContext on the same
 * kind of epoll loop, one connection) sending the raw BITFIELD_RO of the same k bits of the same
 * items (indexes from bg_indexes) to the same server. Same run, sides interleaved per round (the
 * order alternates), so both see the same background load. Run by hand (see bench/README.md); pin
 * the server and this process to different CPUs (taskset) for figures that mean something.
 *
 * Prints per N: queries/s of each side (median over rounds), the ratio queue/hiredis (median of
 * per-round ratios), the client's CPU per query (getrusage) and the server's (INFO cpu).
 *
 *   bench_queue [--url redis://host:port] [--inflight 64,1024] [--rounds N (5)] [--seconds S (1.0)]
 */
#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define N_ITEMS 4000       /* even: added; odd: never added */
#define MAX_ROUNDS 21
#define MAX_SIZES 8
#define NAME "bloomguard-bench:queue"

enum { SIDE_QUEUE, SIDE_HIREDIS, NSIDES };
static const char *side_name[NSIDES] = {"bg_queue", "hiredis async"};

static char items[N_ITEMS][24];
static size_t lens[N_ITEMS];
static uint64_t fsize;
static uint32_t fk;
static const char *url;

typedef struct result {
  double qps, cpu_us, srv_us;
  int failed;
} result;

/* ---- bloomguard: a bg_queue on epoll ---------------------------------------------------------- */

static void run_queue(bg_filter *f, bg_client *c, int inflight, double seconds, redisContext *info, result *out) {
  bg_queue *q = NULL;
  if (bg_queue_open(&q, c) != BG_OK) bgb_die("bg_queue_open: %s", bg_client_errmsg(c), NULL);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, bg_queue_fd(q), &ev);
  uint64_t next = 0, done = 0;
  for (int i = 0; i < inflight; i++, next++) bg_filter_contains_submit(f, q, next, items[next % N_ITEMS], lens[next % N_ITEMS]);
  double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s(), end = t0 + seconds;
  int stopping = 0;
  for (uint64_t pending = (uint64_t)inflight; pending > 0;) {
    struct epoll_event got;
    epoll_wait(ep, &got, 1, 100);
    bg_completion *cs[256];
    size_t n = 0;
    bg_queue_poll(q, 0, cs, 256, &n);
    if (!stopping && bgb_now_s() >= end) stopping = 1;
    for (size_t i = 0; i < n; i++) {
      pending--;
      done++;
      if (bg_completion_status(cs[i]) != BG_OK) out->failed++;
      else if (bg_completion_value(cs[i]) != (int64_t)(bg_completion_tag(cs[i]) % N_ITEMS % 2 == 0)) out->failed++;
      if (!stopping) {
        bg_filter_contains_submit(f, q, next, items[next % N_ITEMS], lens[next % N_ITEMS]);
        next++;
        pending++;
      }
    }
  }
  double wall = bgb_now_s() - t0;
  out->qps = (double)done / wall;
  out->cpu_us = (bgb_cpu_s() - cpu0) * 1e6 / (double)done;
  out->srv_us = (bgb_server_cpu_s(info) - srv0) * 1e6 / (double)done;
  bg_queue_close(q);
  close(ep);
}

/* ---- hiredis async on epoll -------------------------------------------------------------------- */

typedef struct hloop {
  int ep;
  redisAsyncContext *ac;
  uint32_t events;
  uint64_t next, done, pending;
  int stopping, failed;
} hloop;

static void set_events(hloop *l, uint32_t events) {
  if (events == l->events) return;
  struct epoll_event ev = {.events = events, .data.ptr = l};
  epoll_ctl(l->ep, l->events ? (events ? EPOLL_CTL_MOD : EPOLL_CTL_DEL) : EPOLL_CTL_ADD, l->ac->c.fd, &ev);
  l->events = events;
}
static void add_read(void *p) { hloop *l = p; set_events(l, l->events | EPOLLIN); }
static void del_read(void *p) { hloop *l = p; set_events(l, l->events & ~(uint32_t)EPOLLIN); }
static void add_write(void *p) { hloop *l = p; set_events(l, l->events | EPOLLOUT); }
static void del_write(void *p) { hloop *l = p; set_events(l, l->events & ~(uint32_t)EPOLLOUT); }
static void cleanup(void *p) { hloop *l = p; set_events(l, 0); }

static void send_raw(hloop *l);

static void on_reply(redisAsyncContext *ac, void *r, void *priv) {
  hloop *l = ac->data;
  redisReply *rep = r;
  uint64_t tag = (uint64_t)(uintptr_t)priv;
  l->pending--;
  l->done++;
  if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != fk) {
    l->failed++;
  } else {
    int all = 1;
    for (size_t b = 0; b < rep->elements; b++) all &= rep->element[b]->integer == 1;
    if (all != (tag % N_ITEMS % 2 == 0)) l->failed++;
  }
  if (!l->stopping) send_raw(l);
}

static void send_raw(hloop *l) {
  uint64_t idx[64];
  const char *argv[2 + 3 * 64];
  size_t argl[2 + 3 * 64];
  char nums[64][24];
  size_t i = l->next % N_ITEMS;
  bg_indexes(items[i], lens[i], fsize, fk, idx);
  argv[0] = "BITFIELD_RO", argl[0] = 11;
  argv[1] = NAME, argl[1] = strlen(NAME);
  for (uint32_t b = 0; b < fk; b++) {
    argv[2 + 3 * b] = "GET", argl[2 + 3 * b] = 3;
    argv[3 + 3 * b] = "u1", argl[3 + 3 * b] = 2;
    argl[4 + 3 * b] = (size_t)snprintf(nums[b], sizeof nums[b], "%llu", (unsigned long long)idx[b]);
    argv[4 + 3 * b] = nums[b];
  }
  redisAsyncCommandArgv(l->ac, on_reply, (void *)(uintptr_t)l->next, 2 + 3 * (int)fk, argv, argl);
  l->next++;
  l->pending++;
}

static void run_hiredis(int inflight, double seconds, redisContext *info, const char *host, int port, result *out) {
  hloop l = {.ep = epoll_create1(0)};
  l.ac = redisAsyncConnect(host, port);
  if (!l.ac || l.ac->err) bgb_die("redisAsyncConnect: %s", l.ac ? l.ac->errstr : "out of memory", NULL);
  l.ac->data = &l;
  l.ac->ev.data = &l;
  l.ac->ev.addRead = add_read;
  l.ac->ev.delRead = del_read;
  l.ac->ev.addWrite = add_write;
  l.ac->ev.delWrite = del_write;
  l.ac->ev.cleanup = cleanup;
  for (int i = 0; i < inflight; i++) send_raw(&l);
  double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s(), end = t0 + seconds;
  while (l.pending > 0) {
    struct epoll_event got[4];
    int n = epoll_wait(l.ep, got, 4, 100);
    for (int i = 0; i < n; i++) {
      if (got[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) redisAsyncHandleRead(l.ac);
      if (got[i].events & EPOLLOUT) redisAsyncHandleWrite(l.ac);
    }
    if (!l.stopping && bgb_now_s() >= end) l.stopping = 1;
  }
  double wall = bgb_now_s() - t0;
  out->qps = (double)l.done / wall;
  out->cpu_us = (bgb_cpu_s() - cpu0) * 1e6 / (double)l.done;
  out->srv_us = (bgb_server_cpu_s(info) - srv0) * 1e6 / (double)l.done;
  out->failed = l.failed;
  redisAsyncFree(l.ac);
  close(l.ep);
}

/* ---- main -------------------------------------------------------------------------------------- */

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--url redis://host:port] [--inflight 64,1024] [--rounds N] [--seconds S]\n", argv0);
  exit(2);
}

int main(int argc, char **argv) {
  int sizes[MAX_SIZES] = {64, 1024}, nsizes = 2, rounds = 5;
  double seconds = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) {
      url = argv[++i];
    } else if (!strcmp(argv[i], "--inflight") && i + 1 < argc) {
      nsizes = 0;
      for (char *tok = strtok(argv[++i], ","); tok && nsizes < MAX_SIZES; tok = strtok(NULL, ",")) sizes[nsizes++] = atoi(tok);
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || seconds <= 0) usage(argv[0]);
  bgb_server srv = {0};
  url = bgb_server_or(url, &srv);
  char host[128] = "127.0.0.1";
  int port = 6379;
  if (sscanf(url, "redis://%127[^:]:%d", host, &port) < 1) bgb_die("--url must be redis://host:port, not %s", url, NULL);

  bg_client *c = NULL;
  bg_filter *f = NULL;
  char msg[256];
  if (bgt_client_open(&c, url, NULL, msg, sizeof msg) != BG_OK) bgb_die("open: %s", msg, NULL);
  if (bg_filter_open(&f, c, NAME) != BG_OK) bgb_die("filter: %s", bg_client_errmsg(c), NULL);
  bg_filter_delete(f, NULL);
  if (bg_filter_init(f, N_ITEMS, 0.001, NULL) != BG_OK) bgb_die("init: %s", bg_filter_errmsg(f), NULL);
  for (int i = 0; i < N_ITEMS; i++) {
    lens[i] = (size_t)snprintf(items[i], sizeof items[i], "item-%d", i);
    if (i % 2 == 0) bg_filter_add(f, items[i], lens[i], NULL);
  }
  bg_filter_info(f, &fsize, &fk, NULL, NULL);
  redisContext *info = bgb_raw_connect(url);

  printf("one thread, N single-item queries in flight; %d rounds of %.1f s, sides interleaved\n", rounds, seconds);
  printf("%-6s %-14s %12s %10s %14s %14s\n", "N", "side", "queries/s", "ratio", "client us/q", "server us/q");
  for (int s = 0; s < nsizes; s++) {
    double qps[NSIDES][MAX_ROUNDS], cpu[NSIDES][MAX_ROUNDS], srvc[NSIDES][MAX_ROUNDS], ratio[MAX_ROUNDS];
    int failed = 0;
    for (int r = 0; r < rounds; r++) {
      result res[NSIDES];
      memset(res, 0, sizeof res);
      for (int k = 0; k < NSIDES; k++) {
        int side = (r + k) % 2 ? SIDE_HIREDIS : SIDE_QUEUE;
        if (side == SIDE_QUEUE) run_queue(f, c, sizes[s], seconds, info, &res[side]);
        else run_hiredis(sizes[s], seconds, info, host, port, &res[side]);
      }
      for (int k = 0; k < NSIDES; k++) {
        qps[k][r] = res[k].qps, cpu[k][r] = res[k].cpu_us, srvc[k][r] = res[k].srv_us;
        failed += res[k].failed;
      }
      ratio[r] = res[SIDE_QUEUE].qps / res[SIDE_HIREDIS].qps;
    }
    for (int k = 0; k < NSIDES; k++) {
      char rs[16] = "";
      if (k == SIDE_QUEUE) snprintf(rs, sizeof rs, "%.2fx", bgb_median(ratio, rounds));
      printf("%-6d %-14s %12.0f %10s %14.2f %14.2f\n", sizes[s], side_name[k], bgb_median(qps[k], rounds), rs,
             bgb_median(cpu[k], rounds), bgb_median(srvc[k], rounds));
    }
    if (failed) printf("  !! %d wrong or failed answers\n", failed);
  }
  redisFree(info);
  bg_filter_close(f);
  bg_client_close(c);
  bgb_server_stop(&srv);
  return 0;
}
