/* Random ids (random.h). */
#include "common/random.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/platform.h"

#if defined(__linux__)
#include <sys/syscall.h>
#else
#include <stdlib.h>   /* arc4random_buf: macOS and the BSDs, from the kernel's generator; never fails */
#endif

static const char hex[] = "0123456789abcdef";

void bgi_random_bytes(void *buf, size_t n) {
#if !defined(__linux__)
  arc4random_buf(buf, n);
#else
  unsigned char *p = buf;
  size_t got = 0;
  while (got < n) {
    /* getrandom(2) through syscall(2): glibc wraps it only from 2.25 on, and the Python wheels
     * are linked against glibc 2.17 (manylinux2014); a kernel older than 3.17 says ENOSYS and
     * the fallback below takes over */
#ifdef SYS_getrandom
    long r = syscall(SYS_getrandom, p + got, n - got, 0);
#else
    long r = -1;
#endif
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (got == n) return;
  /* no entropy source: time, pid, address and a counter still keep live handles apart */
  static atomic_uint_fast64_t counter;
  uint64_t state = bgi_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)buf ^
                   (atomic_fetch_add(&counter, 1) + 1) * 0xd1b54a32d192ed03u, z = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0) {
      /* splitmix64: each 8 bytes depend on all of the state */
      z = (state += 0x9e3779b97f4a7c15u);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
      z ^= z >> 31;
    }
    p[i] = (unsigned char)(z >> (8 * (i % 8)));
  }
#endif
}

void bgi_random_hex(char *out, size_t nbytes) {
  unsigned char raw[64];
  size_t done = 0;
  while (done < nbytes) {
    size_t m = nbytes - done < sizeof raw ? nbytes - done : sizeof raw;
    bgi_random_bytes(raw, m);
    for (size_t i = 0; i < m; i++, done++) out[2 * done] = hex[raw[i] >> 4], out[2 * done + 1] = hex[raw[i] & 15];
  }
  out[2 * nbytes] = 0;
}

void bgi_random_uuid(char out[37]) {
  unsigned char b[16];
  bgi_random_bytes(b, sizeof b);
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* IETF variant */
  char *p = out;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = hex[b[i] >> 4];
    *p++ = hex[b[i] & 15];
  }
  *p = 0;
}
