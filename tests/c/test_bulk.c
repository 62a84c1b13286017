/*
 * Bulk calls declare themselves before they are built (client.h, BGI_CALL_BULK): with pipelining
 * on (the default), a rotation's upload chunks (1 MiB), a LOCKED rotation's in-place writes and the
 * snapshot download go straight to a pooled connection of their own, instead of being encoded on
 * a multiplexed workspace, found too big (or WATCHing) there and encoded again on a pooled one.
 * The client counts those second builds (bg_client.rebuilt_for_pool); a rotation of a filter
 * that needs several chunks must make none, and neither must batches of adds and queries whose
 * offsets alone outgrow a multiplexed call (a few hundred items). The negative control (bg_client.fault_ignore_bulk:
 * the declaration ignored, as before callers made it) shows the same harness counts them.
 * Against a real redis-server; the rotated filters must answer for their items afterwards.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/client.h"
#include "filters.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;
static items base;

/* ~3.6 MB of bitmap (n = 3M, p = 1%), every 1 MiB chunk of it holding bits of the 50k items */
enum { N = 3000000, NITEMS = 50000 };
#define FPP 0.01
#define CHUNK (1u << 20)

static unsigned long rebuilt(void) { return atomic_load(&cl->rebuilt_for_pool); }

/* Rotates f with the base items; returns how many calls were built twice meanwhile. */
static unsigned long rotate(bg_filter *f, int strategy, int ignore_bulk, uint64_t *uploaded) {
  bg_rotation *r = NULL;
  atomic_store(&cl->fault_ignore_bulk, ignore_bulk);
  unsigned long before = rebuilt();
  CHECK_OK(bg_rotation_begin(&r, f, N, FPP, strategy, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_rotation_commit(r));
  unsigned long twice = rebuilt() - before;
  atomic_store(&cl->fault_ignore_bulk, 0);
  CHECK_OK(bg_rotation_stats(r, NULL, uploaded, NULL));
  bg_rotation_free(r);
  /* the rotation did its job: every item answers present */
  CHECK_EQ_U64(bgt_count_present(f, &base), base.n);
  return twice;
}

static void rotation_case(const char *name, int strategy) {
  bg_filter *f = bgt_fresh_filter(cl, name, N, FPP, NULL);
  uint64_t uploaded = 0;
  unsigned long twice = rotate(f, strategy, 0, &uploaded);
  CHECK_MSG(uploaded >= 3 * (uint64_t)CHUNK, "%s: only %llu bytes uploaded: not several chunks", name,
            (unsigned long long)uploaded);
  CHECK_MSG(twice == 0, "%s: %lu calls of a rotation uploading %llu bytes were built twice (declared bulk, they "
            "must go to a pooled connection at once)", name, twice, (unsigned long long)uploaded);

  /* the negative control: the same rotation, the declaration ignored, is counted */
  twice = rotate(f, strategy, 1, &uploaded);
  CHECK_MSG(twice >= uploaded / CHUNK, "%s control: %lu rebuilds counted for %llu bytes in 1 MiB chunks: the "
            "harness cannot see a call built twice", name, twice, (unsigned long long)uploaded);
  bg_filter_close(f);
}

static void test_swap_upload_chunks_are_built_once(void) { rotation_case("bulk-swap", BG_ROTATE_SWAP); }
static void test_locked_upload_chunks_are_built_once(void) { rotation_case("bulk-locked", BG_ROTATE_LOCKED); }

static void test_snapshot_download_is_built_once(void) {
  bg_filter *f = bgt_fresh_filter(cl, "bulk-snap", N, FPP, &base);
  unsigned long before = rebuilt();
  CHECK_OK(bg_filter_snapshot_refresh(f));
  CHECK_MSG(rebuilt() == before, "the snapshot download was built twice (%lu)", rebuilt() - before);

  /* the control: undeclared, its WATCH sends it to a pooled connection after a first build */
  atomic_store(&cl->fault_ignore_bulk, 1);
  before = rebuilt();
  CHECK_OK(bg_filter_snapshot_refresh(f));
  atomic_store(&cl->fault_ignore_bulk, 0);
  CHECK_MSG(rebuilt() > before, "control: an undeclared download was not counted as built twice");
  bg_filter_close(f);
}

/* contains_many and add_many of windows too big to multiplex: each built once, on a pooled connection. */
static void test_big_batches_are_built_once(void) {
  bg_filter *f = bgt_fresh_filter(cl, "bulk-batch", N, FPP, NULL);
  items fresh = make_items("bulk-batch", 5000);
  uint8_t *present = calloc(base.n, 1);
  size_t added = 0;
  unsigned long before = rebuilt();
  CHECK_OK(bg_filter_add_many(f, PTRS(base), base.len, base.n, &added));
  CHECK_OK(bg_filter_contains_many(f, PTRS(base), base.len, base.n, present));
  CHECK_MSG(rebuilt() == before, "%lu batch calls of %zu items were built twice", rebuilt() - before, base.n);
  size_t missing = 0;
  for (size_t i = 0; i < base.n; i++) missing += !present[i];
  CHECK_EQ_U64(missing, 0);

  /* the control: undeclared, every window is found too big after its first build */
  atomic_store(&cl->fault_ignore_bulk, 1);
  before = rebuilt();
  CHECK_OK(bg_filter_add_many(f, PTRS(fresh), fresh.len, fresh.n, &added));
  CHECK_OK(bg_filter_contains_many(f, PTRS(fresh), fresh.len, fresh.n, present));
  atomic_store(&cl->fault_ignore_bulk, 0);
  CHECK_MSG(rebuilt() >= before + 2, "control: %lu of two undeclared big batches counted as built twice",
            rebuilt() - before);
  free(present);
  items_free(&fresh);
  bg_filter_close(f);
}

static void setup(void) {
  char msg[256];
  bgt_redis_start(&srv, NULL);
  CHECK_MSG(bgt_client_open(&cl, srv.url, NULL, msg, sizeof msg) == BG_OK, "client open: %s", msg);
  /* what this file is about: calls start on multiplexed connections unless declared bulk */
  CHECK_MSG(bgi_muxset_on(&cl->mux), "pipelining (BG_OPT_PIPELINE) is off by default");
  base = make_items("bulk", NITEMS);
}

static void teardown(void) {
  items_free(&base);
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_swap_upload_chunks_are_built_once),
        BGT_CASE(test_locked_upload_chunks_are_built_once), BGT_CASE(test_snapshot_download_is_built_once),
        BGT_CASE(test_big_batches_are_built_once), BGT_CASE(teardown))
