/*
 * Internal: Redisson's naming rules, the one place they live, and the key type every derived key
 * travels in. Which keys exist, their fields and who uses them: redis/layout.h (the names) and
 * docs/layout.md (the map).
 */
#ifndef BG_INTERNAL_NAMES_H
#define BG_INTERNAL_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "redis/resp.h"

/* A key (or channel) name: bytes, length, and a NUL after them (for messages). Owns s. */
typedef struct bgi_key {
  char *s;
  size_t len;
} bgi_key;

/* A copy of name[0..len) as a key. BG_OK or BG_ENOMEM (then k is empty). */
int bgi_key_copy(bgi_key *k, const char *name, size_t len);

/* name[0..len) + tail, plainly (no hash tag added). BG_OK or BG_ENOMEM. */
int bgi_key_cat(bgi_key *k, const char *name, size_t len, const char *tail);

/*
 * Redisson's suffixName(name, suffix): name + ":" + suffix if name contains '{', else
 * "{" + name + "}:" + suffix - so the key shares name's cluster slot. BG_OK or BG_ENOMEM.
 */
int bgi_key_suffix(bgi_key *k, const char *name, size_t len, const char *suffix);

/*
 * Redisson's prefixName(prefix, name): prefix + ":" + name if name contains '{', else
 * prefix + ":{" + name + "}" (the lock channel). BG_OK or BG_ENOMEM.
 */
int bgi_key_prefix(bgi_key *k, const char *prefix, const char *name, size_t len);

/*
 * name as its own hash tag: name if it contains '{', else "{" + name + "}"; so that
 * tag + ":" + s == suffix(name, s) (how a filter's lock is opened by name). BG_OK or BG_ENOMEM.
 */
int bgi_key_tagged(bgi_key *k, const char *name, size_t len);

/*
 * A key of partition `part` of generation `gen` of the partitioned filter `name`:
 * "{" T "}" name ":g" gen ":p" part ":" what, where T is the smallest decimal whose CRC16 slot is
 * `slot` (redis/keyslot.h) - so the key lives in that slot whatever the name holds (the first
 * "{...}" of a key is its hash tag, and this one comes first). Writes it at dst when dst is not
 * NULL (room: BGI_PKEY_MAX(name->len)) and returns its length.
 */
#define BGI_PKEY_MAX(name_len) ((name_len) + 64)
size_t bgi_pkey_write(char *dst, const bgi_key *name, unsigned slot, uint64_t gen, uint32_t part, char what);
/* Appends that key as a bulk string (reserve BGI_RESP_BULK_OVERHEAD + BGI_PKEY_MAX(name->len)). */
void bgi_resp_pkey(bgi_buf *b, const bgi_key *name, unsigned slot, uint64_t gen, uint32_t part, char what);

/* Frees the name; k is empty after (freeing an empty key is fine). */
void bgi_key_free(bgi_key *k);

/* Appends the key as a bulk string (reserve room first, bgi_resp_bound). */
static inline void bgi_resp_key(bgi_buf *b, const bgi_key *k) { bgi_resp_bulk(b, k->s, k->len); }

#endif
