/* Internal: Redis Cluster hash slots (CRC16/XMODEM of the key or of its {hash tag}, mod 16384). */
#ifndef BG_INTERNAL_KEYSLOT_H
#define BG_INTERNAL_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

unsigned bgi_keyslot(const char *key, size_t len);

/* The smallest n whose decimal digits hash to slot: "{n}" in a key puts it in that slot (the
 * table of all 16384 is made at the first call: about 110,000 CRCs, once per process). */
unsigned bgi_slot_tag(unsigned slot);

#endif
