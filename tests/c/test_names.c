/*
 * Redisson's naming rules (redis/names.h), pure logic: suffixName and prefixName as Redisson 3.45.1
 * writes them (RedissonObject.suffixName / prefixName), the tag form a filter's lock is opened
 * with, and the keys a filter and a lock get from them (docs/layout.md).
 */
#include <string.h>

#include "harness.h"
#include "redis/keyslot.h"
#include "redis/layout.h"
#include "redis/names.h"

#define CHECK_KEY(expr, want)                                                            \
  do {                                                                                   \
    bgi_key k_ = {0};                                                                    \
    CHECK_OK(expr);                                                                      \
    CHECK_EQ_STR(k_.s, want);                                                            \
    CHECK_EQ_U64(k_.len, strlen(want));                                                  \
    bgi_key_free(&k_);                                                                   \
  } while (0)

static void test_suffix(void) {
  CHECK_KEY(bgi_key_suffix(&k_, "users", 5, BGI_KEY_CONFIG), "{users}:config");
  CHECK_KEY(bgi_key_suffix(&k_, "a{b}c", 5, BGI_KEY_CONFIG), "a{b}c:config");
  /* any '{' counts, closed or not (Redisson: name.contains("{")) */
  CHECK_KEY(bgi_key_suffix(&k_, "a{b", 3, "lock"), "a{b:lock");
  CHECK_KEY(bgi_key_suffix(&k_, "", 0, "x"), "{}:x");
  /* only the first len bytes are the name */
  CHECK_KEY(bgi_key_suffix(&k_, "users{zzz}", 5, BGI_KEY_DELTA), "{users}:delta");
  CHECK_KEY(bgi_key_suffix(&k_, "p:lock", 6, BGI_KEY_FENCE), "{p:lock}:fence");
}

static void test_prefix(void) {
  CHECK_KEY(bgi_key_prefix(&k_, BGI_LOCK_CHANNEL, "products:lock", 13), "redisson_lock__channel:{products:lock}");
  CHECK_KEY(bgi_key_prefix(&k_, BGI_LOCK_CHANNEL, "{products}:lock", 15), "redisson_lock__channel:{products}:lock");
}

static void test_tagged_and_cat(void) {
  CHECK_KEY(bgi_key_tagged(&k_, "users", 5), "{users}");
  CHECK_KEY(bgi_key_tagged(&k_, "u{s}", 4), "u{s}");
  CHECK_KEY(bgi_key_cat(&k_, "users", 5, ":" BGI_KEY_LOCK), "users:lock");
  CHECK_KEY(bgi_key_copy(&k_, "abc", 2), "ab");
  /* tag + ":" + s is suffix(name, s): how bg_lock_open_filter reaches the filter's own lock key */
  const char *names[] = {"users", "u{s}", "a{}b", "x:y"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    bgi_key t, viaopen, suffix;
    CHECK_OK(bgi_key_tagged(&t, names[i], strlen(names[i])));
    CHECK_OK(bgi_key_cat(&viaopen, t.s, t.len, ":" BGI_KEY_LOCK));
    CHECK_OK(bgi_key_suffix(&suffix, names[i], strlen(names[i]), BGI_KEY_LOCK));
    CHECK_EQ_STR(viaopen.s, suffix.s);
    bgi_key_free(&t);
    bgi_key_free(&viaopen);
    bgi_key_free(&suffix);
  }
}

/* Every key of a filter shares its bitmap's slot (the point of the rule), unless the name's tag is empty. */
static void test_same_slot(void) {
  const char *suffixes[] = {BGI_KEY_CONFIG, BGI_KEY_ROTATION, BGI_KEY_DELTA, BGI_KEY_SPARE, BGI_KEY_LOCK,
                            BGI_KEY_NEXT "0123456789abcdef0123456789abcdef"};
  const char *names[] = {"users", "users{tag}", "{x}"};
  for (size_t n = 0; n < 3; n++)
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
      bgi_key k;
      CHECK_OK(bgi_key_suffix(&k, names[n], strlen(names[n]), suffixes[i]));
      CHECK_MSG(bgi_keyslot(k.s, k.len) == bgi_keyslot(names[n], strlen(names[n])), "%s vs %s", k.s, names[n]);
      bgi_key_free(&k);
    }
  bgi_key k = {0};
  bgi_key_free(&k);   /* an empty key frees to nothing */
  bgi_key_free(&k);
  CHECK(k.s == NULL && k.len == 0);
}

BGT_RUN(BGT_CASE(test_suffix), BGT_CASE(test_prefix), BGT_CASE(test_tagged_and_cat), BGT_CASE(test_same_slot))
