/* Redisson's naming rules (design in names.h). */
#include "redis/names.h"

#include <stdlib.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "redis/keyslot.h"

/* parts[0..n) joined into a fresh key */
static int join(bgi_key *k, const char *const *parts, const size_t *lens, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += lens[i];
  k->s = malloc(total + 1);
  k->len = 0;
  if (!k->s) return BG_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    memcpy(k->s + k->len, parts[i], lens[i]);
    k->len += lens[i];
  }
  k->s[k->len] = 0;
  return BG_OK;
}

static int has_tag(const char *name, size_t len) { return memchr(name, '{', len) != NULL; }

int bgi_key_copy(bgi_key *k, const char *name, size_t len) {
  const char *parts[] = {name};
  size_t lens[] = {len};
  return join(k, parts, lens, 1);
}

int bgi_key_cat(bgi_key *k, const char *name, size_t len, const char *tail) {
  const char *parts[] = {name, tail};
  size_t lens[] = {len, strlen(tail)};
  return join(k, parts, lens, 2);
}

int bgi_key_tagged(bgi_key *k, const char *name, size_t len) {
  if (has_tag(name, len)) return bgi_key_copy(k, name, len);
  const char *parts[] = {"{", name, "}"};
  size_t lens[] = {1, len, 1};
  return join(k, parts, lens, 3);
}

int bgi_key_suffix(bgi_key *k, const char *name, size_t len, const char *suffix) {
  int tagged = has_tag(name, len);
  const char *parts[] = {"{", name, tagged ? ":" : "}:", suffix};
  size_t lens[] = {1, len, tagged ? 1 : 2, strlen(suffix)};
  return tagged ? join(k, parts + 1, lens + 1, 3) : join(k, parts, lens, 4);
}

int bgi_key_prefix(bgi_key *k, const char *prefix, const char *name, size_t len) {
  int tagged = has_tag(name, len);
  const char *parts[] = {prefix, tagged ? ":" : ":{", name, "}"};
  size_t lens[] = {strlen(prefix), tagged ? 1 : 2, len, 1};
  return join(k, parts, lens, tagged ? 3 : 4);
}

void bgi_key_free(bgi_key *k) {
  free(k->s);
  k->s = NULL;
  k->len = 0;
}

size_t bgi_pkey_write(char *dst, const bgi_key *name, unsigned slot, uint64_t gen, uint32_t part, char what) {
  char head[32], tail[64];
  size_t hn = 0, tn = 0;
  head[hn++] = '{';
  hn += bgi_u64_to_dec(bgi_slot_tag(slot), head + hn);
  head[hn++] = '}';
  tail[tn++] = ':';
  tail[tn++] = 'g';
  tn += bgi_u64_to_dec(gen, tail + tn);
  tail[tn++] = ':';
  tail[tn++] = 'p';
  tn += bgi_u64_to_dec(part, tail + tn);
  tail[tn++] = ':';
  tail[tn++] = what;
  if (dst) {
    memcpy(dst, head, hn);
    memcpy(dst + hn, name->s, name->len);
    memcpy(dst + hn + name->len, tail, tn);
  }
  return hn + name->len + tn;
}

void bgi_resp_pkey(bgi_buf *b, const bgi_key *name, unsigned slot, uint64_t gen, uint32_t part, char what) {
  size_t n = bgi_pkey_write(NULL, name, slot, gen, part, what);
  b->data[b->len++] = '$';
  b->len += bgi_u64_to_dec(n, b->data + b->len);
  b->data[b->len++] = '\r';
  b->data[b->len++] = '\n';
  b->len += bgi_pkey_write(b->data + b->len, name, slot, gen, part, what);
  b->data[b->len++] = '\r';
  b->data[b->len++] = '\n';
}
