# Core tests: client, filter operations, bad input, Redisson's bitmap example (real redis-server).
bg_add_test(test_filter SOURCES test_filter.c LABELS redis)
bg_add_test(test_url SOURCES test_url.c INTERNAL)
bg_add_test(test_bad_input SOURCES test_bad_input.c LABELS redis)
bg_add_test(test_bitmap_example SOURCES test_bitmap_example.c LABELS redis)
