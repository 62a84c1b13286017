/* The monotonic clock (clock.h). */
#include "common/clock.h"

uint64_t bgi_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * BGI_NS_PER_S + (uint64_t)ts.tv_nsec;
}
