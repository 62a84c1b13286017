/* events.c - the library's events (include/bloomguard/observe.h) printed as they come, one line
 * each on stderr: "demo: SCENARIO event +T s WHO: KIND: MESSAGE". The observer runs on the thread
 * of the event (a query thread, the rotator, a renewal or map thread): one fprintf per event, no
 * lock of the demo's. */
#include "demo.h"

#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_event(void *ud, int kind, const char *name, const int64_t *values, size_t nvalues, const char *msg) {
  const demo_events *e = ud;
  (void)name, (void)values, (void)nvalues;
  const char *k = bg_event_name(kind);
  fprintf(stderr, "demo: %-8s event +%6.2f s %s: %s: %s\n", e->scenario, (double)(now_ns() - e->t0_ns) / 1e9, e->who,
          k ? k : "?", msg);
}

void demo_events_attach(demo_events *e, bg_client *c, const char *scenario, const char *who) {
  e->scenario = scenario;
  e->who = who;
  e->t0_ns = now_ns();
  bg_client_set_observer(c, on_event, e);
}
