/* RESP building (pure logic): the hand-written encoder must match printf for every value. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis/resp.h"

static void check_u64(bgi_buf *b, uint64_t v) {
  char want[64];
  int n = snprintf(NULL, 0, "%llu", (unsigned long long)v);
  snprintf(want, sizeof want, "$%d\r\n%llu\r\n", n, (unsigned long long)v);
  bgi_buf_reset(b);
  bgi_resp_u64(b, v);
  CHECK_MSG(b->len == strlen(want) && !memcmp(b->data, want, b->len), "encoding of %llu", (unsigned long long)v);
  char digits[21];
  size_t d = bgi_u64_to_dec(v, digits);
  CHECK_MSG(d == (size_t)n && !memcmp(digits, want + strlen(want) - 2 - (size_t)n, d), "digits of %llu",
            (unsigned long long)v);
}

static void test_u64_matches_printf(void) {
  bgi_buf b = {0};
  CHECK_OK(bgi_buf_reserve(&b, 64));
  uint64_t p10 = 1;
  for (int i = 0; i < 20; i++, p10 *= 10) {
    check_u64(&b, p10 - 1);
    check_u64(&b, p10);
    check_u64(&b, p10 + 1);
  }
  check_u64(&b, UINT64_MAX);
  unsigned seed = 7;
  for (int i = 0; i < 200000; i++) {
    uint64_t v = ((uint64_t)rand_r(&seed) << 42) ^ ((uint64_t)rand_r(&seed) << 21) ^ (uint64_t)rand_r(&seed);
    check_u64(&b, v >> (rand_r(&seed) % 64));
  }
  bgi_buf_free(&b);
}

static void test_array_and_bulk(void) {
  bgi_buf b = {0};
  CHECK_OK(bgi_buf_reserve(&b, bgi_resp_bound(3, 16)));
  bgi_resp_array(&b, 3);
  bgi_resp_cstr(&b, "GET");
  bgi_resp_bulk(&b, "a\0b", 3);
  bgi_resp_bulk(&b, "", 0);
  const char want[] = "*3\r\n$3\r\nGET\r\n$3\r\na\0b\r\n$0\r\n\r\n";
  CHECK(b.len == sizeof want - 1 && !memcmp(b.data, want, b.len));
  bgi_buf_free(&b);
}

BGT_RUN(BGT_CASE(test_u64_matches_printf), BGT_CASE(test_array_and_bulk))
