/* Filter set-ups the integration tests share (header-only: the tests link the library shared or
 * static, and a helper library would sit on the wrong side of that link order). */
#ifndef BG_TEST_FILTERS_H
#define BG_TEST_FILTERS_H

#include <bloomguard.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "items.h"

/* The filter NAME on c, deleted, initialised with (n, p), then given its items (it may be NULL). */
static inline bg_filter *bgt_fresh_filter(bg_client *c, const char *name, int64_t n, double p, const items *it) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, name));
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init(f, n, p, NULL));
  if (it) CHECK_OK(bg_filter_add_many(f, PTRS(*it), it->len, it->n, NULL));
  return f;
}

/* How many of its items the filter says are present (one batch query). */
static inline size_t bgt_count_present(bg_filter *f, const items *it) {
  uint8_t *present = calloc(it->n ? it->n : 1, 1);
  size_t c = 0;
  CHECK_OK(bg_filter_contains_many(f, PTRS(*it), it->len, it->n, present));
  for (size_t i = 0; i < it->n; i++) c += present[i];
  free(present);
  return c;
}

/* A policy that fails every class with an error, so a call returns what the step itself said. */
static inline void bgt_policy_errors_only(bg_filter *f) {
  bg_policy *p = NULL;
  CHECK_OK(bg_policy_new(&p));
  int err_only[] = {BG_ACT_ERROR};
  for (int c = BG_FAIL_NOTINIT; c <= BG_FAIL_OTHER; c++) CHECK_OK(bg_policy_set_chain(p, c, err_only, 1));
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
}

#endif
