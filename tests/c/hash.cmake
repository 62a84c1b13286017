# Tests of the hashing unit (csrc/hash, csrc/common/jdouble.c). Pure computation: no redis-server.
bg_add_test(test_hash_vectors SOURCES test_hash_vectors.c INTERNAL LABELS hash)
bg_add_test(test_hash_simd SOURCES test_hash_simd.c INTERNAL LABELS hash)
bg_add_test(test_hash_api SOURCES test_hash_api.c LABELS hash)
bg_add_test(test_params SOURCES test_params.c INTERNAL LABELS hash)
bg_add_test(test_jdouble SOURCES test_jdouble.c INTERNAL LABELS hash)
