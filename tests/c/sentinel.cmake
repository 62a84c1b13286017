# Redis Sentinel test infrastructure: 1 master + 1 replica + 3 sentinels (sentinel_fixture.c)
# exercised with raw hiredis, which also records what a Sentinel client sees (get-master-addr-by-name,
# +switch-master after kill -9, NOAUTH from a sentinel with requirepass). `ctest -L sentinel` runs
# every Sentinel test.
bg_add_test(test_sentinel_fixture SOURCES test_sentinel_fixture.c LABELS "redis;sentinel;fixture")
target_link_libraries(test_sentinel_fixture PRIVATE PkgConfig::HIREDIS)
# The library behind Sentinel: discovery, kill -9 failover under load, bad input, credentials.
bg_add_test(test_sentinel SOURCES test_sentinel.c LABELS "redis;sentinel")
