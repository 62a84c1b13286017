#include "lateness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "harness.h"

#define PROBE_NAP_MS 2
#define PROBE_RING 4096   /* 8 s of naps at least */

static struct {
  _Atomic uint64_t at_ns[PROBE_RING], late_ns[PROBE_RING];
  atomic_uint next;
  atomic_int stop, running;
  pthread_t thread;
} probe;

static void *probe_main(void *arg) {
  (void)arg;
  while (!atomic_load(&probe.stop)) {
    uint64_t t0 = bgt_now_ns();
    struct timespec ts = {0, PROBE_NAP_MS * 1000000L};
    nanosleep(&ts, NULL);
    uint64_t t1 = bgt_now_ns(), want = t0 + PROBE_NAP_MS * 1000000ull;
    unsigned i = atomic_fetch_add(&probe.next, 1) % PROBE_RING;
    atomic_store(&probe.late_ns[i], t1 > want ? t1 - want : 0);
    atomic_store(&probe.at_ns[i], t1);
  }
  return NULL;
}

void bgt_lateness_start(void) {
  if (atomic_exchange(&probe.running, 1)) return;
  atomic_store(&probe.stop, 0);
  pthread_create(&probe.thread, NULL, probe_main, NULL);
}

void bgt_lateness_stop(void) {
  if (!atomic_exchange(&probe.running, 0)) return;
  atomic_store(&probe.stop, 1);
  pthread_join(probe.thread, NULL);
}

double bgt_late_ms(double ms) {
  uint64_t since = bgt_now_ns() - (uint64_t)((ms + 50) * 1e6), worst = 0;
  for (unsigned i = 0; i < PROBE_RING; i++)
    if (atomic_load(&probe.at_ns[i]) >= since && atomic_load(&probe.late_ns[i]) > worst) worst = atomic_load(&probe.late_ns[i]);
  return (double)worst / 1e6;
}
