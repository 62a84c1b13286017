/*
 * Redisson's own hashes and indexes (tests/vectors/redisson_hash_vectors.json), through the
 * public API and through every HighwayHash implementation this CPU can run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "bloomguard/hash.h"
#include "hash/hash.h"
#include "harness.h"
#include "vectors.h"

static const char *const impl_names[] = {"avx2", "sse41", "portable"};

typedef struct vcase {
  const char *id;
  unsigned char *item;
  size_t len;
  uint64_t h1, h2;
  const cJSON *indexes; /* object: config name -> array */
} vcase;

static cJSON *root;
static vcase *cases;
static int ncases;
static const cJSON *configs;

static void unload(void) {
  for (int i = 0; i < ncases; i++) free(cases[i].item);
  free(cases);
  cJSON_Delete(root);
}

static void load(void) {
  if (root) return;
  atexit(unload);
  root = bgt_vectors_load("redisson_hash_vectors.json");
  configs = cJSON_GetObjectItem(root, "configs");
  const cJSON *arr = cJSON_GetObjectItem(root, "cases");
  ncases = cJSON_GetArraySize(arr);
  cases = calloc((size_t)ncases, sizeof *cases);
  int i = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, arr) {
    vcase *v = &cases[i++];
    v->id = cJSON_GetObjectItem(c, "id")->valuestring;
    v->item = bgt_hex_decode(cJSON_GetObjectItem(c, "item_hex")->valuestring, &v->len);
    v->h1 = bgt_hex_u64(cJSON_GetObjectItem(c, "hash1_hex")->valuestring);
    v->h2 = bgt_hex_u64(cJSON_GetObjectItem(c, "hash2_hex")->valuestring);
    v->indexes = cJSON_GetObjectItem(c, "indexes");
    /* The file's two spellings must agree (signed Java long vs unsigned hex). */
    CHECK_EQ_U64((uint64_t)strtoll(cJSON_GetObjectItem(c, "hash1")->valuestring, NULL, 10), v->h1);
    CHECK_EQ_U64((uint64_t)strtoll(cJSON_GetObjectItem(c, "hash2")->valuestring, NULL, 10), v->h2);
    CHECK_EQ_U64(v->len, (uint64_t)cJSON_GetObjectItem(c, "len")->valuedouble);
  }
}

/* Compares out[0..k) with the JSON array of expected indexes. */
static void check_indexes(const vcase *v, const char *cfg, const uint64_t *out, uint32_t k,
                          const char *via) {
  const cJSON *want = cJSON_GetObjectItem(v->indexes, cfg);
  CHECK_MSG(want && cJSON_GetArraySize(want) == (int)k, "%s: no %u indexes for %s", v->id, k, cfg);
  if (!want) return;
  for (uint32_t i = 0; i < k; i++) {
    uint64_t w = (uint64_t)cJSON_GetArrayItem(want, (int)i)->valuedouble;
    CHECK_MSG(out[i] == w, "%s [%s] %s idx[%u]: %llu != %llu", v->id, via, cfg, i,
              (unsigned long long)out[i], (unsigned long long)w);
  }
}

static void test_vector_file_shape(void) {
  load();
  CHECK_EQ_INT(ncases, 43);
  CHECK_EQ_INT(cJSON_GetArraySize(configs), 2);
}

static void test_public_hash128(void) {
  load();
  for (int i = 0; i < ncases; i++) {
    const vcase *v = &cases[i];
    uint64_t h1 = 0, h2 = 0;
    CHECK_OK(bg_hash128(v->item, v->len, &h1, &h2));
    CHECK_MSG(h1 == v->h1 && h2 == v->h2, "%s: got %016llx %016llx", v->id,
              (unsigned long long)h1, (unsigned long long)h2);
  }
  /* Length 0 with a NULL pointer is the empty item. */
  uint64_t h1 = 0, h2 = 0;
  CHECK_OK(bg_hash128(NULL, 0, &h1, &h2));
  CHECK_EQ_U64(h1, cases[0].h1);
  CHECK_EQ_U64(h2, cases[0].h2);
}

static void test_public_indexes(void) {
  load();
  const cJSON *cfg;
  cJSON_ArrayForEach(cfg, configs) {
    const char *name = cJSON_GetObjectItem(cfg, "name")->valuestring;
    uint64_t size = (uint64_t)cJSON_GetObjectItem(cfg, "size")->valuedouble;
    uint32_t k = (uint32_t)cJSON_GetObjectItem(cfg, "k")->valuedouble;
    for (int i = 0; i < ncases; i++) {
      uint64_t out[16];
      CHECK_OK(bg_indexes(cases[i].item, cases[i].len, size, k, out));
      check_indexes(&cases[i], name, out, k, "bg_indexes");
    }
  }
}

/* Every implementation, on an unaligned copy too (vectors decode to malloc'd, aligned memory). */
static void test_each_implementation(void) {
  load();
  int ran = 0;
  unsigned char *shifted = malloc(300);
  for (size_t m = 0; m < sizeof impl_names / sizeof impl_names[0]; m++) {
    if (bgi_hash_force(impl_names[m]) != 0) {
      printf("  (%s not available on this CPU)\n", impl_names[m]);
      continue;
    }
    ran++;
    CHECK_EQ_STR(bgi_hash_impl_name(), impl_names[m]);
    CHECK_EQ_STR(bg_hash_impl(), impl_names[m]);
    for (int i = 0; i < ncases; i++) {
      const vcase *v = &cases[i];
      uint64_t h[2] = {0, 0};
      bgi_hash128(v->item, v->len, h);
      CHECK_MSG(h[0] == v->h1 && h[1] == v->h2, "%s [%s]: got %016llx %016llx", v->id,
                impl_names[m], (unsigned long long)h[0], (unsigned long long)h[1]);
      memcpy(shifted + 3, v->item, v->len);
      uint64_t g[2] = {0, 0};
      bgi_hash128(shifted + 3, v->len, g);
      CHECK_MSG(g[0] == v->h1 && g[1] == v->h2, "%s [%s, offset 3] differs", v->id, impl_names[m]);

      const cJSON *cfg;
      cJSON_ArrayForEach(cfg, configs) {
        uint64_t out[16];
        uint32_t k = (uint32_t)cJSON_GetObjectItem(cfg, "k")->valuedouble;
        bgi_indexes_from_hash(h[0], h[1], (uint64_t)cJSON_GetObjectItem(cfg, "size")->valuedouble,
                              k, out);
        check_indexes(v, cJSON_GetObjectItem(cfg, "name")->valuestring, out, k, impl_names[m]);
        CHECK_OK(bg_indexes(v->item, v->len, (uint64_t)cJSON_GetObjectItem(cfg, "size")->valuedouble,
                            k, out));
        check_indexes(v, cJSON_GetObjectItem(cfg, "name")->valuestring, out, k, "bg_indexes forced");
      }
    }
  }
  free(shifted);
  CHECK(ran >= 1);
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
}

#if defined(__x86_64__)
/* Whether the kernel lists FLAG among the CPU's flags (/proc/cpuinfo; -1: not readable). */
static int cpuinfo_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  char line[8192], word[64];
  int found = -1;
  snprintf(word, sizeof word, " %s ", flag);
  while (found < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    line[strcspn(line, "\n")] = ' ';
    found = strstr(line, word) != NULL;
  }
  fclose(f);
  return found;
}

/* The implementation the CPU should get, by another reading than the library's CPUID: the compiler
 * runtime's CPU model (__builtin_cpu_supports) - unless that model is empty, as zig's compiler-rt
 * leaves it (scripts/test-musl-c.sh builds with zig cc), which shows as no SSE2, a part of every
 * x86-64 CPU: then the kernel's flags in /proc/cpuinfo. */
static const char *expected_impl(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse2"))
    return __builtin_cpu_supports("avx2") ? "avx2" : __builtin_cpu_supports("sse4.1") ? "sse41" : "portable";
  printf("  the compiler runtime's CPU model is empty (no SSE2): /proc/cpuinfo's flags instead\n");
  CHECK_MSG(cpuinfo_has("sse2") == 1, "/proc/cpuinfo lists no sse2 flag (%d): no second reading of the CPU",
            cpuinfo_has("sse2"));
  return cpuinfo_has("avx2") == 1 ? "avx2" : cpuinfo_has("sse4_1") == 1 ? "sse41" : "portable";
}
#endif

/* The automatic choice is the fastest the CPU has, and matches what another reading of the CPU's
 * features says (expected_impl). */
static void test_dispatch_choice(void) {
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
  const char *name = bg_hash_impl();
  printf("  dispatched: %s\n", name);
#if defined(__x86_64__)
  CHECK_EQ_STR(name, expected_impl());
#endif
  CHECK_EQ_INT(bgi_hash_force("portable"), 0);
  CHECK_EQ_STR(bg_hash_impl(), "portable");
  CHECK_EQ_INT(bgi_hash_force("nonsense"), -1);
  CHECK_EQ_INT(bgi_hash_force(NULL), -1);
  CHECK_EQ_STR(bg_hash_impl(), "portable"); /* a failed force changes nothing */
  CHECK_EQ_INT(bgi_hash_force("auto"), 0);
  CHECK_EQ_STR(bg_hash_impl(), name);
}

BGT_RUN(BGT_CASE(test_vector_file_shape), BGT_CASE(test_public_hash128),
        BGT_CASE(test_public_indexes), BGT_CASE(test_each_implementation),
        BGT_CASE(test_dispatch_choice))
