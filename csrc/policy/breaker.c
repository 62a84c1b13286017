/*
 * The circuit breaker and the token bucket: small state machines with the time passed in, so
 * they are tested without sleeping (tests/c/test_policy_unit.c).
 *
 * Breaker: CLOSED --(threshold consecutive connection/timeout failures)--> OPEN
 *          OPEN --(cooldown passed; the next call is the probe)--> HALF_OPEN
 *          HALF_OPEN --(probe: connection/timeout failure)--> OPEN (a new cooldown)
 *          any state --(a call that reached the server: success or an error reply)--> CLOSED
 * A probe that never reports (it cannot: every admitted call records its outcome, but to be
 * safe) is replaced by another after one more cooldown.
 */
#include "policy/guard.h"

#include <stdio.h>
#include <string.h>

void bgi_breaker_init(bgi_breaker *b) {
  memset(b, 0, sizeof *b);
  atomic_init(&b->state, BG_BREAKER_CLOSED);
  atomic_init(&b->consecutive, 0);
  atomic_init(&b->threshold, 0);
  atomic_init(&b->cooldown_ns, 0);
  atomic_init(&b->trips, 0);
  atomic_init(&b->rejected, 0);
  atomic_init(&b->probes, 0);
  pthread_mutex_init(&b->mu, NULL);
}

void bgi_breaker_destroy(bgi_breaker *b) { pthread_mutex_destroy(&b->mu); }

void bgi_breaker_reset(bgi_breaker *b, int64_t threshold, int64_t cooldown_ms) {
  pthread_mutex_lock(&b->mu);
  atomic_store(&b->threshold, threshold);
  atomic_store(&b->cooldown_ns, cooldown_ms * 1000000);
  atomic_store(&b->consecutive, 0);
  atomic_store(&b->state, BG_BREAKER_CLOSED);
  b->since_ns = 0;
  b->left_closed_ns = 0;
  b->trip_status = 0;
  b->trip_msg[0] = 0;
  pthread_mutex_unlock(&b->mu);
}

int bgi_breaker_admit(bgi_breaker *b, uint64_t now, bgi_err *err) {
  if (atomic_load_explicit(&b->state, memory_order_acquire) == BG_BREAKER_CLOSED) return 1;
  pthread_mutex_lock(&b->mu);
  int s = atomic_load(&b->state);
  uint64_t cooldown = (uint64_t)atomic_load(&b->cooldown_ns), waited = now > b->since_ns ? now - b->since_ns : 0;
  if (s == BG_BREAKER_CLOSED) {
    pthread_mutex_unlock(&b->mu);
    return 1;
  }
  if (waited >= cooldown) {
    /* the first call after the cooldown is the probe; the others keep being answered at once */
    atomic_store(&b->state, BG_BREAKER_HALF_OPEN);
    b->since_ns = now;
    pthread_mutex_unlock(&b->mu);
    atomic_fetch_add_explicit(&b->probes, 1, memory_order_relaxed);
    return 2;
  }
  bgi_err_set(err, b->trip_status ? b->trip_status : BG_ECONN,
              "circuit breaker %s after %lld consecutive connection/timeout failures (no call sent; next probe "
              "in %llu ms); it opened on: %s",
              s == BG_BREAKER_OPEN ? "open" : "open, probe under way", (long long)atomic_load(&b->threshold),
              (unsigned long long)bgi_ns_ms_ceil(cooldown - waited), b->trip_msg);
  pthread_mutex_unlock(&b->mu);
  atomic_fetch_add_explicit(&b->rejected, 1, memory_order_relaxed);
  return 0;
}

int bgi_breaker_record(bgi_breaker *b, uint64_t now, int status, const char *msg) {
  int moved = -1;
  if (status != BG_ECONN && status != BG_ETIMEOUT) {
    /* the server answered: nothing to do in the common case (read-only, no cache line written) */
    if (atomic_load_explicit(&b->consecutive, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&b->state, memory_order_relaxed) == BG_BREAKER_CLOSED)
      return -1;
    pthread_mutex_lock(&b->mu);
    atomic_store(&b->consecutive, 0);
    if (atomic_load(&b->state) != BG_BREAKER_CLOSED) moved = BG_BREAKER_CLOSED;
    atomic_store(&b->state, BG_BREAKER_CLOSED);
    pthread_mutex_unlock(&b->mu);
    return moved;
  }
  int64_t threshold = atomic_load(&b->threshold);
  if (threshold == 0) return -1;
  pthread_mutex_lock(&b->mu);
  int n = atomic_fetch_add(&b->consecutive, 1) + 1;
  int s = atomic_load(&b->state);
  if (s == BG_BREAKER_HALF_OPEN || (s == BG_BREAKER_CLOSED && n >= threshold)) {
    if (s == BG_BREAKER_CLOSED) {
      atomic_fetch_add_explicit(&b->trips, 1, memory_order_relaxed);
      b->left_closed_ns = now;
    }
    b->since_ns = now;
    b->trip_status = status;
    snprintf(b->trip_msg, sizeof b->trip_msg, "%s", msg ? msg : "");
    atomic_store_explicit(&b->state, BG_BREAKER_OPEN, memory_order_release);
    moved = BG_BREAKER_OPEN;
  }
  pthread_mutex_unlock(&b->mu);
  return moved;
}

void bgi_breaker_describe(bgi_breaker *b, uint64_t now, int *status, char *msg, size_t cap, int64_t *consecutive,
                          int64_t *cooldown_ms, int64_t *not_closed_us) {
  pthread_mutex_lock(&b->mu);
  *status = b->trip_status;
  snprintf(msg, cap, "%s", b->trip_msg);
  *consecutive = atomic_load(&b->consecutive);
  *cooldown_ms = (int64_t)(atomic_load(&b->cooldown_ns) / 1000000);
  *not_closed_us = b->left_closed_ns && now > b->left_closed_ns ? (int64_t)((now - b->left_closed_ns) / 1000) : 0;
  pthread_mutex_unlock(&b->mu);
}

/* ---- token bucket ------------------------------------------------------------------------------ */

void bgi_bucket_init(bgi_bucket *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
}

void bgi_bucket_destroy(bgi_bucket *b) { pthread_mutex_destroy(&b->mu); }

void bgi_bucket_reset(bgi_bucket *b, int64_t rate, int64_t burst, uint64_t now) {
  pthread_mutex_lock(&b->mu);
  b->rate = rate;
  b->burst = burst;
  b->micro = burst * 1000000;
  b->last_ns = now;
  pthread_mutex_unlock(&b->mu);
}

int bgi_bucket_take(bgi_bucket *b, uint64_t now) {
  int ok;
  pthread_mutex_lock(&b->mu);
  if (b->rate == 0) {
    pthread_mutex_unlock(&b->mu);
    return 1;
  }
  if (now > b->last_ns) {
    /* rate tokens per second = rate * 1e6 micro-tokens per 1e9 ns; capped at the burst (in double:
     * a long idle time times a high rate would overflow 64 bits) */
    int64_t cap = b->burst * 1000000;
    double refill = (double)(now - b->last_ns) * (double)b->rate / 1000.0;
    b->micro = refill >= (double)(cap - b->micro) ? cap : b->micro + (int64_t)refill;
    b->last_ns = now;   /* what is lost to truncation is below a micro-token per call */
  }
  ok = b->micro >= 1000000;
  if (ok) b->micro -= 1000000;
  pthread_mutex_unlock(&b->mu);
  return ok;
}
