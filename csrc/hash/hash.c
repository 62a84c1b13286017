/*
 * HighwayHash dispatch: pick the fastest compiled target this CPU can run, once.
 *
 * The choice lives in one relaxed atomic pointer: every thread that races on the first call
 * computes the same answer, so no lock or once-flag is needed, and afterwards the hot path is
 * a plain load and an indirect call.
 */
#include "hash/hash.h"

#include <stdatomic.h>
#include <string.h>
#ifdef BGI_HH_X86
#include <cpuid.h>
#endif

typedef void (*bgi_hh_fn)(const void *data, size_t len, uint64_t out[2]);

typedef struct bgi_hh_impl {
  const char *name;
  bgi_hh_fn fn;
} bgi_hh_impl;

/* Fastest first. BGI_HH_X86 is set by hash.cmake when the SSE4.1/AVX2 units are compiled. */
static const bgi_hh_impl impls[] = {
#ifdef BGI_HH_X86
  {"avx2", bgi_hh128_avx2},
  {"sse41", bgi_hh128_sse41},
#endif
  {"portable", bgi_hh128_portable},
};
#define NIMPLS (sizeof impls / sizeof impls[0])

static _Atomic(const bgi_hh_impl *) current;

#ifdef BGI_HH_X86
/* CPUID read here rather than through __builtin_cpu_supports: that needs the compiler runtime's
 * CPU model, which zig's (the release wheels' compiler, scripts/release.sh) never fills in, so every
 * target but the portable one looked unsupported. */
static int x86_has(int want_avx2) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!want_avx2) return (c >> 19) & 1; /* SSE4.1 */
  /* AVX2 also needs the OS to save the YMM state: OSXSAVE and AVX, then XCR0's SSE and AVX bits */
  if (!((c >> 27) & 1) || !((c >> 28) & 1)) return 0;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  if ((xcr0_lo & 6u) != 6u) return 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (b >> 5) & 1; /* AVX2 */
}
#endif

static int cpu_has(const bgi_hh_impl *impl) {
#ifdef BGI_HH_X86
  if (impl->fn == bgi_hh128_avx2) return x86_has(1);
  if (impl->fn == bgi_hh128_sse41) return x86_has(0);
#endif
  (void)impl;
  return 1;
}

static const bgi_hh_impl *best(void) {
  for (size_t i = 0; i < NIMPLS; i++)
    if (cpu_has(&impls[i])) return &impls[i];
  return &impls[NIMPLS - 1];
}

static const bgi_hh_impl *get(void) {
  const bgi_hh_impl *impl = atomic_load_explicit(&current, memory_order_relaxed);
  if (__builtin_expect(impl == NULL, 0)) {
    impl = best();
    atomic_store_explicit(&current, impl, memory_order_relaxed);
  }
  return impl;
}

void bgi_hash128(const void *data, size_t len, uint64_t out[2]) {
  get()->fn(data, len, out);
}

const char *bgi_hash_impl_name(void) {
  return get()->name;
}

int bgi_hash_force(const char *name) {
  if (name && strcmp(name, "auto") == 0) {
    atomic_store_explicit(&current, best(), memory_order_relaxed);
    return 0;
  }
  for (size_t i = 0; name && i < NIMPLS; i++) {
    if (strcmp(name, impls[i].name) == 0) {
      if (!cpu_has(&impls[i])) return -1;
      atomic_store_explicit(&current, &impls[i], memory_order_relaxed);
      return 0;
    }
  }
  return -1;
}
