/* Code that includes the umbrella header alone. */
#include <bloomguard.h>

int stats_via_umbrella(const bg_filter *f, int64_t *v) {
  return bg_filter_stat(f, BG_STAT_QUERIES, v) + (BG_STAT_FAIL_OTHER == 108 ? 0 : 1000);
}
