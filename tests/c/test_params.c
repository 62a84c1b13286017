/*
 * Redisson's sizing (tests/vectors/redisson_params.json): size and k for every accepted row,
 * BG_EBADPARAMS and Redisson's exact message for every rejected one, plus the edges the file
 * does not cover (NaN, infinities, n <= 0, saturation of Java's (long) cast).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "bloomguard/hash.h"
#include "hash/hash.h"
#include "harness.h"
#include "vectors.h"

static void test_vector_rows(void) {
  cJSON *root = bgt_vectors_load("redisson_params.json");
  CHECK_EQ_U64((uint64_t)cJSON_GetObjectItem(root, "max_size")->valuedouble, BG_MAX_SIZE);
  /* Our Java Math.log(2) constant is the one the file names. */
  double ln2 = 0x1.62e42fefa39efp-1;
  uint64_t bits;
  memcpy(&bits, &ln2, sizeof bits);
  CHECK_EQ_U64(bits, strtoull(cJSON_GetObjectItem(root, "math_log_2_bits")->valuestring, NULL, 16));

  int ok_rows = 0, rejected = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, cJSON_GetObjectItem(root, "rows")) {
    int64_t n = (int64_t)cJSON_GetObjectItem(row, "n")->valuedouble;
    const char *ptext = cJSON_GetObjectItem(row, "p")->valuestring;
    double p = strtod(ptext, NULL); /* the test never calls setlocale: "C" */
    uint64_t want_size = (uint64_t)cJSON_GetObjectItem(row, "size")->valuedouble;
    uint32_t want_k = (uint32_t)cJSON_GetObjectItem(row, "k")->valuedouble;
    const char *verdict = cJSON_GetObjectItem(row, "tryInit")->valuestring;

    uint64_t size = 0;
    uint32_t k = 0;
    char err[256] = "";
    int st = bgi_params(n, p, &size, &k, err, sizeof err);
    uint64_t psize = 0;
    uint32_t pk = 0;
    int pst = bg_optimal_params(n, p, &psize, &pk);
    CHECK_MSG(st == pst, "n=%lld p=%s: bgi_params %d, bg_optimal_params %d", (long long)n, ptext, st, pst);

    if (strcmp(verdict, "ok") == 0) {
      ok_rows++;
      CHECK_MSG(st == BG_OK && size == want_size && k == want_k,
                "n=%lld p=%s: status %d size %llu k %u, want size %llu k %u (%s)", (long long)n, ptext,
                st, (unsigned long long)size, k, (unsigned long long)want_size, want_k, err);
      CHECK_MSG(psize == want_size && pk == want_k, "n=%lld p=%s: public API differs", (long long)n, ptext);
    } else {
      rejected++;
      char want_err[160];
      if (strstr(verdict, "size is 0"))
        snprintf(want_err, sizeof want_err, "Bloom filter calculated size is 0");
      else
        snprintf(want_err, sizeof want_err,
                 "Bloom filter size can't be greater than 4294967294. But calculated size is %llu",
                 (unsigned long long)want_size);
      CHECK_MSG(st == BG_EBADPARAMS, "n=%lld p=%s: status %d, want BG_EBADPARAMS", (long long)n, ptext, st);
      CHECK_MSG(strcmp(err, want_err) == 0, "n=%lld p=%s: message \"%s\", want \"%s\"", (long long)n,
                ptext, err, want_err);
    }
  }
  printf("  %d accepted rows, %d rejected rows\n", ok_rows, rejected);
  CHECK(ok_rows > 0 && rejected > 0);
  cJSON_Delete(root);
}

/* Status and message for one rejected input. */
static void expect_reject(int64_t n, double p, const char *want) {
  uint64_t size = 12345;
  uint32_t k = 678;
  char err[256] = "";
  CHECK_STATUS(bgi_params(n, p, &size, &k, err, sizeof err), BG_EBADPARAMS);
  CHECK_MSG(strcmp(err, want) == 0, "n=%lld p=%g: \"%s\", want \"%s\"", (long long)n, p, err, want);
  CHECK_EQ_U64(size, 12345);
  CHECK_EQ_U64(k, 678);
}

static void test_rejections(void) {
  const char *gt1 = "Bloom filter false probability can't be greater than 1";
  const char *neg = "Bloom filter false probability can't be negative";
  expect_reject(1000, 1.0000000000000002, gt1);
  expect_reject(1000, INFINITY, gt1);
  expect_reject(1000, -DBL_TRUE_MIN, neg);
  expect_reject(1000, -INFINITY, neg);
  /* tryInit checks p before anything looks at n. */
  expect_reject(0, 2.0, gt1);
  /* Java's NaN passes both comparisons and its size casts to 0. */
  expect_reject(1000, NAN, "Bloom filter calculated size is 0");
  expect_reject(1000, 1.0, "Bloom filter calculated size is 0");
  /* Ours: Redisson would store size 0 or a negative size. */
  expect_reject(0, 0.01, "Bloom filter expected insertions must be positive, got 0");
  expect_reject(-5, 0.01, "Bloom filter expected insertions must be positive, got -5");
  expect_reject(INT64_MIN, 0.01,
                "Bloom filter expected insertions must be positive, got -9223372036854775808");
  /* Java's (long) saturates: size is Long.MAX_VALUE in the message. */
  expect_reject(INT64_MAX, 0.5,
                "Bloom filter size can't be greater than 4294967294. But calculated size is "
                "9223372036854775807");
  expect_reject(INT64_MAX, 0.0,
                "Bloom filter size can't be greater than 4294967294. But calculated size is "
                "9223372036854775807");
}

static void test_edges(void) {
  uint64_t size;
  uint32_t k;
  /* p == 0 and -0.0 == 0 both mean Double.MIN_VALUE (the vector file has n=1000, p=0). */
  CHECK_OK(bgi_params(1000, -0.0, &size, &k, NULL, 0));
  CHECK_EQ_U64(size, 1549454);
  CHECK_EQ_U64(k, 1074);
  CHECK_OK(bgi_params(1, 0.0, &size, &k, NULL, 0));
  CHECK_EQ_U64(size, 1549); /* -ln(4.9e-324) / ln2^2 = 1549.45 */
  CHECK_EQ_U64(k, 1074);    /* the largest k Redisson can compute: under BG_MAX_HASH_ITERATIONS */
  CHECK(k <= BG_MAX_HASH_ITERATIONS);
  /* Subnormal p is a probability like any other. */
  CHECK_OK(bgi_params(1, DBL_TRUE_MIN * 2, &size, &k, NULL, 0));
  /* A NULL or zero-sized message buffer is allowed. */
  CHECK_STATUS(bgi_params(1, 2.0, &size, &k, NULL, 0), BG_EBADPARAMS);
  char tiny[8] = "xxxxxxx";
  CHECK_STATUS(bgi_params(1, 2.0, &size, &k, tiny, sizeof tiny), BG_EBADPARAMS);
  CHECK_EQ_STR(tiny, "Bloom f");
  CHECK_STATUS(bgi_params(1, 2.0, &size, &k, tiny, 0), BG_EBADPARAMS);
  /* Largest accepted and smallest rejected n at p = 0.01 (from the vectors, exact boundary). */
  CHECK_OK(bgi_params(448089842, 0.01, &size, &k, NULL, 0));
  CHECK_EQ_U64(size, 4294967293ULL);
  CHECK_STATUS(bgi_params(448089843, 0.01, &size, &k, NULL, 0), BG_EBADPARAMS);
}

BGT_RUN(BGT_CASE(test_vector_rows), BGT_CASE(test_rejections), BGT_CASE(test_edges))
