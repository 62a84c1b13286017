#include "redis/script.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "bloomguard/errors.h"
#include "redis/sha1.h"

static pthread_mutex_t sha_mu = PTHREAD_MUTEX_INITIALIZER;

const char *bgi_script_sha(bgi_script *s) {
  /* written once under the lock, then published with release/acquire: no lock on the hot path */
  if (atomic_load_explicit(&s->sha_ready, memory_order_acquire)) return s->sha;
  pthread_mutex_lock(&sha_mu);
  if (!atomic_load_explicit(&s->sha_ready, memory_order_relaxed)) {
    bgi_sha1_hex(s->body, strlen(s->body), s->sha);
    atomic_store_explicit(&s->sha_ready, 1, memory_order_release);
  }
  pthread_mutex_unlock(&sha_mu);
  return s->sha;
}

int bgi_script_begin(bgi_buf *b, bgi_script *s, int use_body, size_t numkeys, size_t nargs) {
  const char *what = use_body ? s->body : bgi_script_sha(s);
  if (bgi_buf_reserve(b, bgi_resp_bound(3, strlen(what) + 32)) != BG_OK) return BG_ENOMEM;
  bgi_resp_array(b, 3 + numkeys + nargs);
  bgi_resp_cstr(b, use_body ? "EVAL" : "EVALSHA");
  bgi_resp_cstr(b, what);
  bgi_resp_u64(b, numkeys);
  return BG_OK;
}
