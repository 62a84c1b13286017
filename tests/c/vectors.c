#include "vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *bgt_vectors_load(const char *file) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", BG_VECTORS_DIR, file);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "cannot open vectors file %s\n", path);
    exit(2);
  }
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  buf[n] = 0;
  fclose(fp);
  cJSON *root = cJSON_Parse(buf);
  free(buf);
  if (!root) {
    fprintf(stderr, "%s is not valid JSON\n", path);
    exit(2);
  }
  return root;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

unsigned char *bgt_hex_decode(const char *hex, size_t *len) {
  size_t n = strlen(hex) / 2;
  unsigned char *out = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) out[i] = (unsigned char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
  *len = n;
  return out;
}

uint64_t bgt_hex_u64(const char *hex) {
  uint64_t v = 0;
  for (const char *p = hex; *p; p++) v = v << 4 | (uint64_t)hexval(*p);
  return v;
}
