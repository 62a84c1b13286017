/* Internal: SHA-1, only to name Lua scripts for EVALSHA (Redis identifies scripts by it). */
#ifndef BG_INTERNAL_SHA1_H
#define BG_INTERNAL_SHA1_H

#include <stddef.h>

/* Writes the 40 lowercase hex digits and a NUL to hex. */
void bgi_sha1_hex(const void *data, size_t len, char hex[41]);

#endif
