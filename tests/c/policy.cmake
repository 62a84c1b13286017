# The degrade policy engine: pure logic without a server (INTERNAL), then against real redis-servers
# (chains, snapshot, counters), then the faults (CLIENT PAUSE, DEBUG SLEEP, CLIENT KILL, stop/restart).
bg_add_test(test_policy_unit SOURCES test_policy_unit.c INTERNAL LABELS policy)
bg_add_test(test_policy SOURCES test_policy.c INTERNAL LABELS "redis;policy")
bg_add_test(test_policy_faults SOURCES test_policy_faults.c LABELS "redis;policy;faults")
# The counters' own header (bloomguard/stats.h): code including only policy.h or bloomguard.h still builds.
bg_add_test(test_stats_headers SOURCES test_stats_headers.c stats_via_policy.c stats_via_umbrella.c LABELS policy)
