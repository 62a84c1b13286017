/*
 * Redisson's own bitmap + config example (tests/vectors/redisson_bitmap_example.json), reproduced
 * through the library against a real server: the same adds must leave the same bytes.
 */
#include <bloomguard.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "redis_fixture.h"
#include "vectors.h"

static void test_bitmap_and_config_byte_for_byte(void) {
  bgt_redis srv;
  bg_client *c = NULL;
  bg_filter *f = NULL;
  cJSON *root = bgt_vectors_load("redisson_bitmap_example.json");
  cJSON *filter = cJSON_GetObjectItem(root, "filter");
  const char *name = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "redis_keys"), "bitmap")->valuestring;
  const char *cfg_key = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "redis_keys"), "config_hash")->valuestring;
  int64_t n = (int64_t)cJSON_GetObjectItem(filter, "expectedInsertions")->valuedouble;
  double p = cJSON_GetObjectItem(filter, "falseProbability")->valuedouble;

  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&c, srv.url, NULL));
  CHECK_OK(bg_filter_open(&f, c, name));
  int created = 0;
  CHECK_OK(bg_filter_init(f, n, p, &created));
  CHECK_EQ_INT(created, 1);

  cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "items")) {
    const char *text = cJSON_GetObjectItem(item, "text")->valuestring;
    uint64_t idx[64];
    cJSON *want = cJSON_GetObjectItem(item, "indexes");
    CHECK_OK(bg_indexes(text, strlen(text), (uint64_t)cJSON_GetObjectItem(filter, "size")->valuedouble,
                        (uint32_t)cJSON_GetObjectItem(filter, "k")->valuedouble, idx));
    for (int i = 0; i < cJSON_GetArraySize(want); i++)
      CHECK_EQ_U64(idx[i], (uint64_t)cJSON_GetArrayItem(want, i)->valuedouble);
    int added = 0;
    CHECK_OK(bg_filter_add(f, text, strlen(text), &added));
    CHECK_EQ_INT(added, cJSON_GetObjectItem(item, "newly_set_bits")->valuedouble > 0);
  }

  size_t want_len, got_len;
  unsigned char *want = bgt_hex_decode(cJSON_GetObjectItem(root, "bitmap_redis_hex")->valuestring, &want_len);
  unsigned char *got = bgt_redis_get(&srv, name, &got_len);
  CHECK_EQ_U64(got_len, (uint64_t)cJSON_GetObjectItem(root, "bitmap_redis_len")->valuedouble);
  CHECK_EQ_U64(got_len, want_len);
  CHECK_MSG(got && got_len == want_len && memcmp(got, want, want_len) == 0, "bitmap bytes differ from Redisson's");
  char *bits = bgt_redis_cmd(&srv, "BITCOUNT %s", name);
  CHECK_EQ_INT(atoi(bits), (int)cJSON_GetObjectItem(root, "set_bit_count")->valuedouble);
  free(bits);

  cJSON *fields = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config_hash"), "fields_for_this_filter");
  const char *names[] = {"size", "hashIterations", "expectedInsertions", "falseProbability"};
  for (int i = 0; i < 4; i++) {
    char *v = bgt_redis_cmd(&srv, "HGET %s %s", cfg_key, names[i]);
    CHECK_EQ_STR(v, cJSON_GetObjectItem(fields, names[i])->valuestring);
    free(v);
  }
  char *len = bgt_redis_cmd(&srv, "HLEN %s", cfg_key);
  CHECK_EQ_STR(len, "4");
  free(len);

  cJSON_ArrayForEach(item, cJSON_GetObjectItem(root, "items")) {
    const char *text = cJSON_GetObjectItem(item, "text")->valuestring;
    int present = 0;
    CHECK_OK(bg_filter_contains(f, text, strlen(text), &present));
    CHECK_EQ_INT(present, 1);
  }
  int64_t count = 0;
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_EQ_INT(count, 5);

  free(want);
  free(got);
  bg_filter_close(f);
  bg_client_close(c);
  bgt_redis_stop(&srv);
  cJSON_Delete(root);
}

BGT_RUN(BGT_CASE(test_bitmap_and_config_byte_for_byte))
