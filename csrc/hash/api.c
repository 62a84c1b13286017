/* Public hashing and sizing functions (bloomguard/hash.h): argument checks around hash/hash.h. */
#include "bloomguard/hash.h"

#include <stddef.h>

#include "bloomguard/errors.h"
#include "common/call.h"
#include "hash/hash.h"

int bg_hash128(const void *data, size_t len, uint64_t *h1, uint64_t *h2) {
  if (!h1 || !h2 || (!data && len > 0) || len > (size_t)PTRDIFF_MAX) return BG_EINVAL;
  uint64_t h[2];
  bgi_hash128(data, len, h);
  *h1 = h[0];
  *h2 = h[1];
  return BG_OK;
}

int bg_indexes(const void *data, size_t len, uint64_t size, uint32_t k, uint64_t *out) {
  if (!out || (!data && len > 0) || len > (size_t)PTRDIFF_MAX || k == 0) return BG_EINVAL;
  /* No Redisson filter is bigger (tryInit refuses it), and Redis could not SETBIT past it:
     a larger size can only come from a corrupt config, so say so rather than compute. */
  if (size == 0 || size > BG_MAX_SIZE) return BG_EINVAL;
  uint64_t h[2];
  bgi_hash128(data, len, h);
  bgi_indexes_from_hash(h[0], h[1], size, k, out);
  return BG_OK;
}

int bg_optimal_params(int64_t expected_insertions, double fpp, uint64_t *size, uint32_t *k) {
  return bg_optimal_params_ex(NULL, expected_insertions, fpp, size, k);
}

int bg_optimal_params_ex(bg_call *call, int64_t expected_insertions, double fpp, uint64_t *size, uint32_t *k) {
  bgi_err err = {0};
  if (!size || !k) bgi_err_set(&err, BG_EINVAL, "optimal params: size and k must not be NULL");
  else if (bgi_params(expected_insertions, fpp, size, k, err.msg, sizeof err.msg) != BG_OK)
    err.status = BG_EBADPARAMS;  /* err.msg holds Redisson's message */
  return call ? bgi_call_finish(call, NULL, &err, BG_SOURCE_NONE) : err.status;
}

const char *bg_hash_impl(void) {
  return bgi_hash_impl_name();
}
