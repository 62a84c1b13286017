/*
 * bloomguard/stats.h holds the counters (BG_STAT_*, bg_filter_stat) that policy.h used to declare:
 * code including policy.h alone, or bloomguard.h alone (the other two translation units of this
 * test), must still build and link, and this one needs only stats.h. Building is most of the test;
 * running checks the three see one function and the same pinned ids.
 */
#include <bloomguard/stats.h>
#include <stdio.h>

int stats_via_policy(const bg_filter *f, int64_t *v);
int stats_via_umbrella(const bg_filter *f, int64_t *v);

int main(void) {
  int64_t v = 0;
  int failed = 0;
  /* no filter: BG_EINVAL from each, and no pinned id moved (a moved one adds 1000) */
  if (stats_via_policy(NULL, &v) != BG_EINVAL) printf("FAIL via policy.h\n"), failed = 1;
  if (stats_via_umbrella(NULL, &v) != BG_EINVAL) printf("FAIL via bloomguard.h\n"), failed = 1;
  if (bg_filter_stat(NULL, BG_STAT_CLUSTER_MAP_RELOADS, &v) != BG_EINVAL || BG_STAT_CLUSTER_MAP_RELOADS != 28)
    printf("FAIL via stats.h\n"), failed = 1;
  if (!failed) printf("ok: stats.h, policy.h and bloomguard.h each declare bg_filter_stat and BG_STAT_*\n");
  return failed;
}
