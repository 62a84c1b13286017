/* Internal: Redis Cluster hash slots (CRC16/XMODEM of the key or of its {hash tag}, mod 16384). */
#ifndef BG_INTERNAL_KEYSLOT_H
#define BG_INTERNAL_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

unsigned bgi_keyslot(const char *key, size_t len);

#endif
