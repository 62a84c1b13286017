/* Code written when the counters were declared in policy.h: it includes that header alone. */
#include <bloomguard/policy.h>

int stats_via_policy(const bg_filter *f, int64_t *v) {
  return bg_filter_stat(f, BG_STAT_ROTATIONS, v) + (BG_STAT_TRACKED_READS == 23 ? 0 : 1000);
}
