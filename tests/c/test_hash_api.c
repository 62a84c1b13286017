/* Argument checks of the public hashing functions (bloomguard/hash.h), through the shared library. */
#include <math.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "bloomguard/hash.h"
#include "harness.h"

static void test_hash128_args(void) {
  uint64_t h1 = 7, h2 = 7;
  CHECK_STATUS(bg_hash128("a", 1, NULL, &h2), BG_EINVAL);
  CHECK_STATUS(bg_hash128("a", 1, &h1, NULL), BG_EINVAL);
  CHECK_STATUS(bg_hash128(NULL, 1, &h1, &h2), BG_EINVAL);
  CHECK_EQ_U64(h1, 7); /* untouched on failure */
  CHECK_OK(bg_hash128(NULL, 0, &h1, &h2));
  uint64_t e1, e2;
  CHECK_OK(bg_hash128("", 0, &e1, &e2));
  CHECK_EQ_U64(e1, h1);
  CHECK_EQ_U64(e2, h2);
  CHECK_EQ_U64(h1, 0xb7aad9c226c6a36bULL); /* Redisson's hash of the empty item */
}

static void test_indexes_args(void) {
  uint64_t out[8] = {0};
  CHECK_STATUS(bg_indexes("a", 1, 100, 3, NULL), BG_EINVAL);
  CHECK_STATUS(bg_indexes(NULL, 1, 100, 3, out), BG_EINVAL);
  CHECK_STATUS(bg_indexes("a", 1, 0, 3, out), BG_EINVAL);
  CHECK_STATUS(bg_indexes("a", 1, 100, 0, out), BG_EINVAL);
  CHECK_STATUS(bg_indexes("a", 1, BG_MAX_SIZE + 1, 3, out), BG_EINVAL);
  CHECK_STATUS(bg_indexes("a", 1, UINT64_MAX, 3, out), BG_EINVAL);
  CHECK_OK(bg_indexes("a", 1, BG_MAX_SIZE, 3, out));
  CHECK_OK(bg_indexes(NULL, 0, 1, 8, out));
  for (int i = 0; i < 8; i++) CHECK_EQ_U64(out[i], 0); /* size 1: every index is 0 */

  /* Indexes are the documented function of bg_hash128's words. */
  uint64_t h1, h2;
  CHECK_OK(bg_hash128("abc", 3, &h1, &h2));
  CHECK_OK(bg_indexes("abc", 3, 1000003, 5, out));
  uint64_t h = h1;
  for (uint32_t i = 0; i < 5; i++) {
    CHECK_EQ_U64(out[i], (h & INT64_MAX) % 1000003);
    h += (i % 2 == 0) ? h2 : h1;
  }
}

static void test_optimal_params_args(void) {
  uint64_t size = 0;
  uint32_t k = 0;
  CHECK_STATUS(bg_optimal_params(100, 0.01, NULL, &k), BG_EINVAL);
  CHECK_STATUS(bg_optimal_params(100, 0.01, &size, NULL), BG_EINVAL);
  CHECK_OK(bg_optimal_params(100, 0.01, &size, &k));
  CHECK_EQ_U64(size, 958);
  CHECK_EQ_U64(k, 7);
  CHECK_STATUS(bg_optimal_params(100, 1.5, &size, &k), BG_EBADPARAMS);
  CHECK_STATUS(bg_optimal_params(100, -0.5, &size, &k), BG_EBADPARAMS);
  CHECK_STATUS(bg_optimal_params(100, NAN, &size, &k), BG_EBADPARAMS);
  CHECK_STATUS(bg_optimal_params(0, 0.01, &size, &k), BG_EBADPARAMS);
  CHECK_STATUS(bg_optimal_params(-1, 0.01, &size, &k), BG_EBADPARAMS);
  CHECK_EQ_U64(size, 958); /* untouched on failure */
}

static void test_impl_name(void) {
  const char *name = bg_hash_impl();
  CHECK(name != NULL);
  CHECK_MSG(name && (!strcmp(name, "avx2") || !strcmp(name, "sse41") || !strcmp(name, "portable")),
            "unexpected implementation name %s", name ? name : "(null)");
}

BGT_RUN(BGT_CASE(test_hash128_args), BGT_CASE(test_indexes_args),
        BGT_CASE(test_optimal_params_args), BGT_CASE(test_impl_name))
