#include "fault_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define MAX_PENDING (4u << 20)

typedef struct relay {
  int c, s;                 /* the client's socket; the server's (proxy), -1 for the fake */
  char *pend;               /* the server's bytes not yet passed on */
  size_t len, off;
  uint64_t next_ns;         /* trickling: when the next byte is due */
  int server_gone;
  redisReader *rd;          /* fake: the client's commands */
} relay;

struct bgt_fault {
  int lfd, port, target;
  bgt_fault_answer fn;
  void *ud;
  atomic_int trickle_us, stop, accepted, drops_asked, drops_done;
  pthread_t thr;
  relay l[MAX_CONNS];
  int n;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

static void drop(bgt_fault *f, int i) {
  relay *l = &f->l[i];
  close(l->c);
  if (l->s >= 0) close(l->s);
  free(l->pend);
  if (l->rd) redisReaderFree(l->rd);
  f->l[i] = f->l[--f->n];
}

static int connect_target(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void accept_one(bgt_fault *f) {
  int c = accept(f->lfd, NULL, NULL);
  if (c < 0) return;
  if (f->n == MAX_CONNS) {
    close(c);
    return;
  }
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  relay *l = &f->l[f->n];
  memset(l, 0, sizeof *l);
  l->c = c;
  l->s = -1;
  if (f->fn) {
    l->rd = redisReaderCreate();
  } else if ((l->s = connect_target(f->target)) < 0) {
    close(c);
    return;
  }
  f->n++;
  atomic_fetch_add(&f->accepted, 1);
}

/* The fake: answers every complete command; -1 to close. */
static int answer_commands(bgt_fault *f, relay *l, const char *buf, size_t n) {
  redisReaderFeed(l->rd, buf, n);
  for (;;) {
    void *obj = NULL;
    if (redisReaderGetReply(l->rd, &obj) != REDIS_OK) return -1;
    if (!obj) return 0;
    redisReply *r = obj;
    char *argv[16];
    int argc = 0;
    if (r->type == REDIS_REPLY_ARRAY)
      for (size_t i = 0; i < r->elements && argc < 16; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING) argv[argc++] = r->element[i]->str;
    const char *ans = argc ? f->fn(f->ud, argc, argv) : "-ERR empty command\r\n";
    freeReplyObject(r);
    if (!ans || send_all(l->c, ans, strlen(ans)) != 0) return -1;
  }
}

/* Passes on what is pending: all of it, or one byte when it is due. -1 once the relay is over. */
static int pass_on(bgt_fault *f, relay *l, uint64_t now) {
  int us = atomic_load(&f->trickle_us);
  if (l->off < l->len) {
    if (!us) {
      if (send_all(l->c, l->pend + l->off, l->len - l->off) != 0) return -1;
      l->off = l->len;
    } else if (now >= l->next_ns) {
      if (send_all(l->c, l->pend + l->off, 1) != 0) return -1;
      l->off++;
      l->next_ns = now + (uint64_t)us * 1000u;
    }
  }
  if (l->off == l->len) l->off = l->len = 0;
  return l->server_gone && l->len == 0 ? -1 : 0;
}

static void *run(void *arg) {
  bgt_fault *f = arg;
  char buf[65536];
  while (!atomic_load(&f->stop)) {
    int asked = atomic_load(&f->drops_asked);
    if (asked != atomic_load(&f->drops_done)) {
      while (f->n) drop(f, f->n - 1);
      atomic_store(&f->drops_done, asked);
    }
    struct pollfd p[1 + 2 * MAX_CONNS];
    int np = 0, timeout = 20;
    uint64_t now = now_ns();
    p[np++] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
    for (int i = 0; i < f->n; i++) {
      relay *l = &f->l[i];
      p[np++] = (struct pollfd){.fd = l->c, .events = POLLIN};
      p[np++] = (struct pollfd){.fd = l->s, .events = (short)(l->s >= 0 && !l->server_gone && l->len < MAX_PENDING ? POLLIN : 0)};
      if (l->off < l->len) {
        int64_t wait_ms = l->next_ns > now ? (int64_t)((l->next_ns - now) / 1000000u) : 0;
        if (wait_ms < timeout) timeout = (int)wait_ms;
      }
    }
    if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) break;
    now = now_ns();
    for (int i = f->n - 1; i >= 0; i--) {
      relay *l = &f->l[i];
      struct pollfd *pc = &p[1 + 2 * i], *ps = &p[2 + 2 * i];
      int gone = 0;
      if (pc->revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = recv(l->c, buf, sizeof buf, 0);
        if (k <= 0) gone = 1;
        else if (f->fn) gone = answer_commands(f, l, buf, (size_t)k) != 0;
        else gone = send_all(l->s, buf, (size_t)k) != 0;
      }
      if (!gone && l->s >= 0 && (ps->revents & (POLLIN | POLLHUP | POLLERR))) {
        char *np2 = realloc(l->pend, l->len + sizeof buf);
        if (np2) {
          l->pend = np2;
          ssize_t k = recv(l->s, l->pend + l->len, sizeof buf, 0);
          if (k <= 0) l->server_gone = 1;
          else l->len += (size_t)k;
        }
      }
      if (!gone && f->fn == NULL) gone = pass_on(f, l, now) != 0;
      if (gone) drop(f, i);
    }
    if (p[0].revents & POLLIN) accept_one(f);
  }
  while (f->n) drop(f, f->n - 1);
  return NULL;
}

static bgt_fault *start(int target, bgt_fault_answer fn, void *ud) {
  bgt_fault *f = calloc(1, sizeof *f);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  f->target = target;
  f->fn = fn;
  f->ud = ud;
  f->lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(f->lfd, 64) != 0 ||
      getsockname(f->lfd, (struct sockaddr *)&a, &alen) != 0) {
    fprintf(stderr, "fault server: cannot listen: %s\n", strerror(errno));
    if (f->lfd >= 0) close(f->lfd);
    free(f);
    return NULL;
  }
  f->port = ntohs(a.sin_port);
  if (pthread_create(&f->thr, NULL, run, f) != 0) {
    close(f->lfd);
    free(f);
    return NULL;
  }
  return f;
}

bgt_fault *bgt_proxy_start(int target_port) { return start(target_port, NULL, NULL); }
bgt_fault *bgt_fake_start(bgt_fault_answer fn, void *userdata) { return start(0, fn, userdata); }
int bgt_fault_port(const bgt_fault *f) { return f->port; }
void bgt_fault_trickle(bgt_fault *f, int us) { atomic_store(&f->trickle_us, us); }
void bgt_fault_drop_all(bgt_fault *f) {
  int want = atomic_fetch_add(&f->drops_asked, 1) + 1;
  while (atomic_load(&f->drops_done) != want) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

int bgt_fault_accepted(const bgt_fault *f) { return atomic_load(&((bgt_fault *)f)->accepted); }

void bgt_fault_stop(bgt_fault *f) {
  if (!f) return;
  atomic_store(&f->stop, 1);
  pthread_join(f->thr, NULL);
  close(f->lfd);
  free(f);
}
