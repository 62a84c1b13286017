/* The timer heap (csrc/common/timers.h): order, re-arming, cancelling from anywhere in the heap,
 * against a brute-force model over random operations. Pure logic: no server. */
#include <stdlib.h>

#include "common/timers.h"
#include "harness.h"

#define N 512

static void test_pops_in_order(void) {
  bgi_timers h;
  bgi_timer t[N];
  bgi_timers_init(&h);
  for (int i = 0; i < N; i++) {
    t[i].slot = 0;
    CHECK_OK(bgi_timers_arm(&h, &t[i], (uint64_t)((i * 7919) % N) + 1));
  }
  CHECK_EQ_U64(bgi_timers_next(&h), 1);
  CHECK(bgi_timers_pop_due(&h, 0) == NULL);   /* nothing due yet */
  uint64_t last = 0;
  for (int i = 0; i < N; i++) {
    bgi_timer *x = bgi_timers_pop_due(&h, UINT64_MAX - 1);
    CHECK(x != NULL);
    if (!x) break;
    CHECK(x->due_ns >= last);
    CHECK(!bgi_timer_armed(x));
    last = x->due_ns;
  }
  CHECK(bgi_timers_pop_due(&h, UINT64_MAX - 1) == NULL);
  CHECK_EQ_U64(bgi_timers_next(&h), UINT64_MAX);
  bgi_timers_free(&h);
}

/* Random arm / re-arm / cancel / pop against a model: the heap's next is always the model's min. */
static void test_against_model(void) {
  bgi_timers h;
  bgi_timer t[N];
  uint64_t model[N];   /* 0: not armed */
  bgi_timers_init(&h);
  srand(42);
  for (int i = 0; i < N; i++) t[i].slot = 0, model[i] = 0;
  for (int step = 0; step < 200000; step++) {
    int i = rand() % N, op = rand() % 4;
    if (op <= 1) {
      uint64_t due = (uint64_t)(rand() % 100000) + 1;
      CHECK_OK(bgi_timers_arm(&h, &t[i], due));
      model[i] = due;
    } else if (op == 2) {
      bgi_timers_cancel(&h, &t[i]);
      model[i] = 0;
    } else {
      uint64_t now = (uint64_t)(rand() % 100000);
      bgi_timer *x = bgi_timers_pop_due(&h, now);
      if (x) {
        size_t k = (size_t)(x - t);
        CHECK(model[k] && model[k] <= now);
        model[k] = 0;
      }
    }
    uint64_t min = UINT64_MAX;
    size_t armed = 0;
    for (int j = 0; j < N; j++)
      if (model[j]) {
        armed++;
        if (model[j] < min) min = model[j];
      }
    if (bgi_timers_next(&h) != min || h.n != armed) {
      CHECK_MSG(0, "step %d: next %llu want %llu, %zu armed want %zu", step,
                (unsigned long long)bgi_timers_next(&h), (unsigned long long)min, h.n, armed);
      break;
    }
  }
  bgi_timers_free(&h);
  for (int i = 0; i < N; i++) CHECK(!bgi_timer_armed(&t[i]));
}

BGT_RUN(BGT_CASE(test_pops_in_order), BGT_CASE(test_against_model))
