/*
 * A filter in front of a "database", asked from an epoll event loop that never blocks: every
 * query is submitted to a bg_queue, whose one fd sits in the loop's epoll set beside the loop's
 * own timer; completions arrive when the fd is readable.
 *
 * The loop keeps IN_FLIGHT lookups going for a few seconds, each for an id that is (even ids) or
 * is not (odd ids) in the database, while a rebuild of the filter runs on another thread (the
 * hourly rebuild, compressed). It checks every answer against the truth and exits non-zero on an
 * error or a false negative.
 *
 *   event_loop redis://127.0.0.1:6379 [seconds]
 */
#define _GNU_SOURCE
#include <bloomguard.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define IDS 20000        /* the database: ids 0, 2, 4, ... exist */
#define IN_FLIGHT 256
#define FILTER "example:users"

static void key_of(uint64_t id, char *buf, size_t cap) { snprintf(buf, cap, "user:%" PRIu64, id); }

/* The rebuild: a swap rotation that loads every existing id, then commits. */
typedef struct rebuild {
  bg_client *c;
  int rounds, failed;
  volatile int stop;
} rebuild;

static void *rebuild_loop(void *p) {
  rebuild *r = p;
  bg_filter *f = NULL;
  if (bg_filter_open(&f, r->c, FILTER) != BG_OK) return NULL;
  do {
    bg_rotation *rot = NULL;
    char key[32];
    int st = bg_rotation_begin(&rot, f, IDS, 0.001, BG_ROTATE_SWAP, NULL);
    for (uint64_t id = 0; st == BG_OK && id < IDS; id += 2) {
      key_of(id, key, sizeof key);
      st = bg_rotation_add(rot, key, strlen(key));
    }
    if (st == BG_OK) st = bg_rotation_commit(rot);
    if (st != BG_OK) {
      fprintf(stderr, "rebuild: %s\n", rot ? bg_rotation_errmsg(rot) : bg_filter_errmsg(f));
      r->failed++;
    }
    bg_rotation_free(rot);
    r->rounds++;
  } while (!r->stop);
  bg_filter_close(f);
  return NULL;
}

int main(int argc, char **argv) {
  const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  int seconds = argc > 2 ? atoi(argv[2]) : 3;
  bg_client *c = NULL;
  bg_filter *f = NULL;
  bg_queue *q = NULL;
  if (bg_client_open(&c, url, NULL) != BG_OK || bg_filter_open(&f, c, FILTER) != BG_OK ||
      bg_queue_open(&q, c) != BG_OK) {
    fprintf(stderr, "open: %s\n", c ? bg_client_errmsg(c) : "cannot open the client");
    return 1;
  }
  /* the first build, before any lookup; then one after another on a thread of their own */
  rebuild r = {.c = c, .stop = 1};
  rebuild_loop(&r);
  r.stop = 0;
  pthread_t th;
  pthread_create(&th, NULL, rebuild_loop, &r);

  /* the event loop: the queue's fd and a one-shot timer for the end */
  int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec end = {.it_value = {.tv_sec = seconds}};
  timerfd_settime(tfd, 0, &end, NULL);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = bg_queue_fd(q)};
  epoll_ctl(ep, EPOLL_CTL_ADD, bg_queue_fd(q), &ev);
  ev.data.fd = tfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);

  uint64_t next_id = 0, answered = 0, errors = 0, false_negatives = 0, false_positives = 0;
  size_t in_flight = 0;
  char key[32];
  int running = 1;
  for (; in_flight < IN_FLIGHT; in_flight++, next_id++) {
    key_of(next_id % IDS, key, sizeof key);
    bg_filter_contains_submit(f, q, next_id % IDS, key, strlen(key));
  }
  while (in_flight > 0) {
    struct epoll_event got[4];
    int n = epoll_wait(ep, got, 4, 1000);
    for (int i = 0; i < n; i++) {
      if (got[i].data.fd == tfd) {
        running = 0;   /* no new lookups; the ones in flight finish */
        continue;
      }
      bg_completion *done[64];
      size_t k = 0;
      bg_queue_poll(q, 0, done, 64, &k);
      for (size_t j = 0; j < k; j++) {
        uint64_t id = bg_completion_tag(done[j]);
        int exists = id % 2 == 0;
        in_flight--;
        if (bg_completion_status(done[j]) != BG_OK) {
          if (errors++ < 5) fprintf(stderr, "lookup %" PRIu64 ": %s\n", id, bg_completion_errmsg(done[j]));
        } else {
          int maybe = bg_completion_value(done[j]) != 0;
          answered++;
          false_negatives += exists && !maybe;
          false_positives += !exists && maybe;
          /* a "maybe" would now ask the database; a "no" skips it */
        }
        if (running) {
          key_of(next_id % IDS, key, sizeof key);
          if (bg_filter_contains_submit(f, q, next_id % IDS, key, strlen(key)) == BG_OK) in_flight++;
          next_id++;
        }
      }
    }
  }
  r.stop = 1;
  pthread_join(th, NULL);
  printf("%" PRIu64 " lookups answered during %d rebuilds: %" PRIu64 " errors, %" PRIu64 " false negatives, "
         "%" PRIu64 " false positives (the database skipped for the rest)\n",
         answered, r.rounds, errors, false_negatives, false_positives);
  bg_queue_close(q);
  bg_filter_close(f);
  bg_client_close(c);
  close(ep);
  close(tfd);
  return errors || false_negatives || r.failed || r.rounds < 1 || answered == 0 ? 1 : 0;
}
