/*
 * The common/ runtime kit without a server: the clock's deadline arithmetic, random ids, and the
 * periodic worker (rounds, idle and wake, exit, stop during a long round), the error plumbing's
 * messages. Waits are bounded in time and asserted only as "happened" or "did not happen", never
 * as a speed.
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "common/call.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/random.h"
#include "common/worker.h"
#include "harness.h"

/* Waits up to 10 s for *v >= want (polling every ms); returns the value seen. */
static int wait_for(atomic_int *v, int want) {
  for (int i = 0; i < 10000 && atomic_load(v) < want; i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
  return atomic_load(v);
}

static void nap_ms(long ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

static void test_clock(void) {
  CHECK_EQ_U64(bgi_ms_ns(3), 3000000u);
  CHECK_EQ_U64(bgi_ms_ns(0), 0);
  CHECK_EQ_U64(bgi_ms_ns(-5), 0);
  CHECK_EQ_U64(bgi_after_ms(100, 2), 2000100u);
  CHECK_EQ_U64(bgi_after_ms(UINT64_MAX - 5, 1), UINT64_MAX);   /* saturates, never wraps to the past */
  CHECK_EQ_INT(bgi_ms_until(1000000, 1000000), 0);
  CHECK_EQ_INT(bgi_ms_until(1000000, 2000000), 0);
  CHECK_EQ_INT(bgi_ms_until(1400000, 1000000), 1);            /* 0.4 ms left: still one ms */
  CHECK_EQ_INT(bgi_ms_until(3000000, 1000000), 2);
  CHECK_EQ_INT(bgi_ns_ms_ceil(1), 1);
  struct timespec ts = bgi_timespec(3 * BGI_NS_PER_S + 7);
  CHECK(ts.tv_sec == 3 && ts.tv_nsec == 7);
  uint64_t a = bgi_now_ns(), b = bgi_now_ns();
  CHECK(b >= a);
  CHECK(bgi_deadline_in_ms(1000) >= b + bgi_ms_ns(1000));
}

static void test_random_ids(void) {
  char u1[37], u2[37], h1[33], h2[33];
  bgi_random_uuid(u1);
  bgi_random_uuid(u2);
  CHECK_EQ_U64(strlen(u1), 36);
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) CHECK_MSG(u1[i] == '-', "uuid %s: no '-' at %d", u1, i);
    else CHECK_MSG(strchr("0123456789abcdef", u1[i]) != NULL, "uuid %s: %c at %d", u1, u1[i], i);
  }
  CHECK_MSG(u1[14] == '4', "uuid %s: not version 4", u1);
  CHECK_MSG(strchr("89ab", u1[19]) != NULL, "uuid %s: not the IETF variant", u1);
  CHECK(strcmp(u1, u2) != 0);
  bgi_random_hex(h1, 16);
  bgi_random_hex(h2, 16);
  CHECK_EQ_U64(strlen(h1), 32);
  CHECK(strspn(h1, "0123456789abcdef") == 32);
  CHECK(strcmp(h1, h2) != 0);
  unsigned char big[300] = {0}, zero[300] = {0};
  bgi_random_bytes(big, sizeof big);
  CHECK(memcmp(big, zero, sizeof big) != 0);
}

typedef struct counter {
  atomic_int rounds;
  int64_t next;          /* what each round returns */
  int exit_after;        /* > 0: BGI_WORKER_EXIT from this round on */
  bgi_worker *w;
  atomic_int saw_stop;   /* the long round read the stop flag */
  int long_round;
} counter;

static int64_t count_round(void *arg) {
  counter *c = arg;
  int n = atomic_fetch_add(&c->rounds, 1) + 1;
  if (c->long_round) {
    /* a round that would last 10 s: returns as soon as the stop flag is set */
    for (int i = 0; i < 10000 && !atomic_load(bgi_worker_stop_flag(c->w)); i++) nap_ms(1);
    atomic_store(&c->saw_stop, atomic_load(bgi_worker_stop_flag(c->w)));
  }
  if (c->exit_after && n >= c->exit_after) return BGI_WORKER_EXIT;
  return c->next;
}

static void test_worker_periodic(void) {
  bgi_worker w = {0};
  counter c = {.next = 2};
  bgi_worker_stop(&w);                       /* a zeroed worker: nothing to stop */
  CHECK_OK(bgi_worker_start(&w, 0, count_round, &c));
  CHECK(wait_for(&c.rounds, 3) >= 3);
  bgi_worker_stop(&w);
  int after = atomic_load(&c.rounds);
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), after); /* no round after stop returned */
  bgi_worker_stop(&w);                       /* idempotent */
  /* restartable */
  CHECK_OK(bgi_worker_start(&w, 0, count_round, &c));
  CHECK(wait_for(&c.rounds, after + 1) > after);
  bgi_worker_stop(&w);
}

static void test_worker_first_wait_and_wake(void) {
  bgi_worker w = {0};
  counter c = {.next = 3600000};             /* an hour between rounds: only wakes run them */
  CHECK_OK(bgi_worker_start(&w, 3600000, count_round, &c));
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), 0);   /* the first round waits its first_ms */
  bgi_worker_wake(&w);
  CHECK_EQ_INT(wait_for(&c.rounds, 1), 1);
  bgi_worker_wake(&w);
  CHECK_EQ_INT(wait_for(&c.rounds, 2), 2);
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), 2);   /* one wake, one round */
  bgi_worker_stop(&w);                       /* ends the hour's wait at once */
}

static void test_worker_idle(void) {
  bgi_worker w = {0};
  counter c = {.next = BGI_WORKER_IDLE};
  CHECK_OK(bgi_worker_start(&w, BGI_WORKER_IDLE, count_round, &c));
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), 0);
  bgi_worker_wake(&w);
  CHECK_EQ_INT(wait_for(&c.rounds, 1), 1);
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), 1);   /* idle: no round until the next wake */
  bgi_worker_wake(&w);
  CHECK_EQ_INT(wait_for(&c.rounds, 2), 2);
  bgi_worker_stop(&w);
}

static void test_worker_exit_and_long_round(void) {
  bgi_worker w = {0};
  counter c = {.next = 0, .exit_after = 3};
  CHECK_OK(bgi_worker_start(&w, 0, count_round, &c));
  CHECK_EQ_INT(wait_for(&c.rounds, 3), 3);
  nap_ms(20);
  CHECK_EQ_INT(atomic_load(&c.rounds), 3);   /* the thread ended after the EXIT round */
  bgi_worker_stop(&w);                       /* still joins it */

  counter l = {.next = 0, .long_round = 1, .w = &w};
  CHECK_OK(bgi_worker_start(&w, 0, count_round, &l));
  CHECK_EQ_INT(wait_for(&l.rounds, 1), 1);
  uint64_t t0 = bgi_now_ns();
  bgi_worker_stop(&w);
  CHECK_EQ_INT(atomic_load(&l.saw_stop), 1); /* the round read the flag and returned early */
  CHECK(bgi_now_ns() - t0 < bgi_ms_ns(9000)); /* not the round's 10 s: a bound, not a speed */
  CHECK_EQ_INT(atomic_load(&l.rounds), 1);
}

/* A failure that recorded no message still reaches the handle's slot and the bg_call with one
 * (the status's text); a recorded message is passed on as it is, and success clears the call's. */
static void test_failures_always_carry_a_message(void) {
  bgi_errslot slot;
  bgi_errslot_init(&slot);
  bgi_err bare = {.status = BG_ECONN}, said = {0};
  bgi_err_set(&said, BG_ETIMEOUT, "the server did not answer within %d ms", 5);
  char buf[BGI_ERRMSG_MAX];
  CHECK_EQ_INT(bgi_errslot_store(&slot, &bare), BG_ECONN);
  bgi_errslot_copy(&slot, buf, sizeof buf);
  CHECK_EQ_STR(buf, bg_strerror(BG_ECONN));
  CHECK_EQ_INT(bgi_errslot_store(&slot, &said), BG_ETIMEOUT);
  bgi_errslot_copy(&slot, buf, sizeof buf);
  CHECK_EQ_STR(buf, "the server did not answer within 5 ms");
  bg_call *call = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_EQ_INT(bgi_call_finish(call, &slot, &bare, 0), BG_ECONN);
  CHECK_EQ_STR(bg_call_errmsg(call), bg_strerror(BG_ECONN));
  bgi_err ok = {0};
  CHECK_EQ_INT(bgi_call_finish(call, &slot, &ok, 0), BG_OK);
  CHECK_EQ_STR(bg_call_errmsg(call), "");
  bg_call_free(call);
  bgi_errslot_destroy(&slot);
}

BGT_RUN(BGT_CASE(test_clock), BGT_CASE(test_random_ids), BGT_CASE(test_worker_periodic),
        BGT_CASE(test_worker_first_wait_and_wake), BGT_CASE(test_worker_idle),
        BGT_CASE(test_worker_exit_and_long_round), BGT_CASE(test_failures_always_carry_a_message))
