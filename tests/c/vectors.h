/* Loads the Redisson vectors copied into tests/vectors (BG_VECTORS_DIR). */
#ifndef BG_TEST_VECTORS_H
#define BG_TEST_VECTORS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Parses tests/vectors/<file>; aborts the test binary with a message if missing or invalid. */
cJSON *bgt_vectors_load(const char *file);
/* Decodes a hex string into a malloc'd buffer (*len set); NULL-safe for "". Caller frees. */
unsigned char *bgt_hex_decode(const char *hex, size_t *len);
/* Parses 16 hex digits into a uint64. */
uint64_t bgt_hex_u64(const char *hex);

#endif
