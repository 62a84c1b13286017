# Redis Cluster test infrastructure: the 6-node cluster fixture (cluster_fixture.c) exercised with
# raw hiredis, which also records the replies (ASK, TRYAGAIN, MOVED, CLUSTERDOWN) a cluster client
# must handle. `ctest -L cluster` runs every cluster test.
bg_add_test(test_cluster_fixture SOURCES test_cluster_fixture.c LABELS "redis;cluster;fixture")
target_link_libraries(test_cluster_fixture PRIVATE PkgConfig::HIREDIS)
# The library against a real cluster: routing, redirects, migrations, failovers (INTERNAL: the
# negative control flips a fault switch inside the client).
bg_add_test(test_cluster SOURCES test_cluster.c INTERNAL LABELS "redis;cluster")
set_tests_properties(test_cluster PROPERTIES TIMEOUT 600)
