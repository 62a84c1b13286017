#include "redis/keyslot.h"

#include <stdio.h>
#include <string.h>

/* CRC16-CCITT (XMODEM): poly 0x1021, init 0, no reflection - the checksum Redis Cluster uses. */
static uint16_t crc16(const char *buf, size_t len) {
  uint16_t crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (uint16_t)((unsigned char)buf[i] << 8);
    for (int b = 0; b < 8; b++) crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

unsigned bgi_keyslot(const char *key, size_t len) {
  const char *open = memchr(key, '{', len);
  if (open) {
    size_t rest = len - (size_t)(open - key) - 1;
    const char *close = memchr(open + 1, '}', rest);
    /* an empty tag "{}" does not count: the whole key is hashed */
    if (close && close > open + 1) return crc16(open + 1, (size_t)(close - open - 1)) & 16383u;
  }
  return crc16(key, len) & 16383u;
}

unsigned bgi_slot_tag(unsigned slot) {
  static unsigned memo[16384];   /* tag + 1; 0: not searched yet (races are benign: same answer) */
  slot &= 16383u;
  unsigned m = __atomic_load_n(&memo[slot], __ATOMIC_RELAXED);
  if (m) return m - 1;
  char buf[16];
  for (unsigned n = 0;; n++) {
    int len = snprintf(buf, sizeof buf, "%u", n);
    if (bgi_keyslot(buf, (size_t)len) == slot) {
      __atomic_store_n(&memo[slot], n + 1, __ATOMIC_RELAXED);
      return n;
    }
  }
}
