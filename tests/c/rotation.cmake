# Rotation: guarantees one by one, crash tests, and the rotate-vs-query race with its negative control.
bg_add_test(test_rotation SOURCES test_rotation.c LABELS "redis;rotation")
bg_add_test(test_race SOURCES test_race.c LABELS "redis;rotation;race")
bg_add_test(test_locked SOURCES test_locked.c LABELS "redis;rotation;lock")
# 3 x 200 rotations against 4 querier threads: minutes under TSan on 2 loaded cores
set_tests_properties(test_race PROPERTIES TIMEOUT 1200)
# Keys a rotation depends on that expire or vanish under it (issue 11): a few seconds of waits
bg_add_test(test_rotation_expiry SOURCES test_rotation_expiry.c LABELS "redis;rotation")
