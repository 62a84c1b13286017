#include "redis/keyslot.h"

#include <pthread.h>
#include <string.h>

#include "redis/resp.h"

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

/* tag + 1 per slot, filled in one pass over 0, 1, 2, ... (the last slot is reached at 109757):
 * the first number seen for a slot is its smallest */
static unsigned tags[16384];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

static void fill_tags(void) {
  char buf[16];
  size_t left = 16384;
  for (unsigned n = 0; left; n++) {
    size_t len = bgi_u64_to_dec(n, buf);
    unsigned s = crc16(buf, len) & 16383u;
    if (!tags[s]) {
      tags[s] = n + 1;
      left--;
    }
  }
}

unsigned bgi_slot_tag(unsigned slot) {
  pthread_once(&tags_once, fill_tags);
  return tags[slot & 16383u] - 1;
}
