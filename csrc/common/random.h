/*
 * Internal: random ids - a rotation's lease token, a lock handle's UUID. Drawn from getrandom(2) on
 * Linux, arc4random_buf(3) on macOS and the BSDs (which cannot fail); on Linux without an entropy
 * source (an old kernel, a seccomp filter) from the clock, the pid, the address of the buffer and a
 * process-wide counter, which still keeps the ids of live handles
 * apart - what they are for; none of them is a secret.
 */
#ifndef BG_INTERNAL_RANDOM_H
#define BG_INTERNAL_RANDOM_H

#include <stddef.h>

/* n random bytes into buf. */
void bgi_random_bytes(void *buf, size_t n);

/* 2 * nbytes lower-case hex digits of nbytes random bytes, then a NUL (out holds 2 * nbytes + 1). */
void bgi_random_hex(char *out, size_t nbytes);

/* A random (version 4) UUID in Java's UUID.toString() form, e.g. Redisson's connection manager id:
 * 36 characters and a NUL. */
void bgi_random_uuid(char out[37]);

#endif
