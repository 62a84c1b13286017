/*
 * Rotation keys that expire (or vanish) while the lease that guards them is still held (issue 11,
 * items 1 and 2): a commit never installs what it did not fully upload, and a key the rotation
 * depends on never expires before its lease.
 *  - the rotator stalls 3 s before committing, the staging TTL being 2 s (lease 60 s): the old
 *    items are all there after the commit (the bug: 0 of 1000);
 *  - another client adds an item, the rotator commits 2 s later, the staging TTL being 1 s (lease
 *    30 s): the item is there (the bug: the delta had expired);
 *  - the staging bitmap is deleted between two chunks, or expires after the last one: the commit
 *    refuses with BG_ESERVER and the live filter serves its old generation, unchanged.
 * Each fault is injected from a raw connection inside the progress callback; the callback records
 * that the key existed and was removed, so a test that passes proves the fault really happened.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filters.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"

static bgt_redis srv;
static bg_client *cl;

static char *cmd(const char *fmt, const char *arg) { return bgt_redis_cmd(&srv, fmt, arg); }

static void expect_reply(const char *fmt, const char *arg, const char *want) {
  char *got = cmd(fmt, arg);
  CHECK_MSG(!strcmp(got, want), "%s %s: got \"%s\", want \"%s\"", fmt, arg, got, want);
  free(got);
}

static bg_options *rotation_opts(int64_t lease_ms, int64_t staging_ttl_ms, int64_t chunk) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, lease_ms));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_STAGING_TTL_MS, staging_ttl_ms));
  if (chunk) CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, chunk));
  return o;
}

/* ---- 1. a stall before the commit, longer than the staging TTL, shorter than the lease ---- */

static int stall_phase, stalled;
static int stall_3s(void *data, int phase, uint64_t items, uint64_t done, uint64_t total) {
  (void)data, (void)items, (void)done, (void)total;
  if (phase == stall_phase && !stalled) stalled = 1, usleep(3000000);   /* a GC pause, SIGSTOP, VM freeze */
  return 0;
}

static void stall_before_commit(int strategy, const char *name) {
  items old_items = make_items("old", 1000);
  bg_filter *f = bgt_fresh_filter(cl, name, 1000, 0.01, &old_items);
  bg_options *o = rotation_opts(60000, 2000, 0);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 1000, 0.01, strategy, o));
  stall_phase = BG_PHASE_COMMITTING, stalled = 0;
  CHECK_OK(bg_rotation_set_progress(r, stall_3s, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(old_items), old_items.len, old_items.n));
  CHECK_OK(bg_rotation_commit(r));
  CHECK(stalled);
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &old_items), old_items.n);
  bg_options_free(o);
  bg_filter_close(f);
  items_free(&old_items);
}

static void test_stall_before_swap_commit_keeps_every_item(void) { stall_before_commit(BG_ROTATE_SWAP, "stall-swap"); }

/* ---- 2. an add from another client, the commit 2 s later, the staging TTL 1 s ---- */

static void add_then_commit_later(int strategy, const char *name) {
  items base = make_items("base", 2000), late = make_items("late", 1);
  bg_filter *f = bgt_fresh_filter(cl, name, 10000, 0.01, &base);
  bg_client *other = NULL;
  bg_filter *of = NULL;
  CHECK_OK(bg_client_open(&other, srv.url, NULL));
  CHECK_OK(bg_filter_open(&of, other, name));
  bg_options *o = rotation_opts(30000, 1000, 0);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 10000, 0.01, strategy, o));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_filter_add_many(of, PTRS(late), late.len, late.n, NULL));
  char key[64];
  snprintf(key, sizeof key, "{%s}:delta", name);
  expect_reply("EXISTS %s", key, "1");   /* the add was recorded for the next generation */
  usleep(2000000);
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &late), 1);
  CHECK_EQ_U64(bgt_count_present(of, &late), 1);
  CHECK_EQ_U64(bgt_count_present(f, &base), base.n);
  bg_options_free(o);
  bg_filter_close(of);
  bg_client_close(other);
  bg_filter_close(f);
  items_free(&base), items_free(&late);
}

static void test_add_survives_a_commit_later_than_the_staging_ttl_swap(void) {
  add_then_commit_later(BG_ROTATE_SWAP, "late-add-swap");
}
static void test_add_survives_a_commit_later_than_the_staging_ttl_locked(void) {
  add_then_commit_later(BG_ROTATE_LOCKED, "late-add-locked");
}

/* ---- 3. the staging bitmap vanishes during the upload or before the commit ---- */

typedef struct fault {
  const char *name;
  int phase;            /* BG_PHASE_UPLOADING: after the first chunk; BG_PHASE_COMMITTING: after the last */
  int expire;           /* 1: PEXPIRE 1 ms (it expires); 0: DEL */
  int injected;         /* the key existed and was removed */
} fault;

static int remove_staging(void *data, int phase, uint64_t items, uint64_t done, uint64_t total) {
  fault *ft = data;
  (void)items, (void)total;
  if (ft->injected || phase != ft->phase || (phase == BG_PHASE_UPLOADING && done == 0)) return 0;
  char pattern[64];
  snprintf(pattern, sizeof pattern, "{%s}:next:*", ft->name);
  char *key = cmd("KEYS %s", pattern);
  if (key[0] && !strchr(key, ' ')) {
    char *rep = ft->expire ? bgt_redis_cmd(&srv, "PEXPIRE %s 1", key) : cmd("DEL %s", key);
    if (!strcmp(rep, "1")) ft->injected = 1;
    free(rep);
    if (ft->expire) usleep(20000);
  }
  free(key);
  return 0;
}

static void staging_vanishes(fault *ft) {
  items old_items = make_items("old", 1000), next = make_items("next", 20000);
  bg_filter *f = bgt_fresh_filter(cl, ft->name, 1000, 0.01, &old_items);
  bg_options *o = rotation_opts(30000, 300000, 4096);
  bg_rotation *r = NULL;
  /* 958505 bits, 117 KiB: 30 chunks of 4 KiB */
  CHECK_OK(bg_rotation_begin(&r, f, 100000, 0.01, BG_ROTATE_SWAP, o));
  CHECK_OK(bg_rotation_set_progress(r, remove_staging, ft));
  CHECK_OK(bg_rotation_add_many(r, PTRS(old_items), old_items.len, old_items.n));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  CHECK_STATUS(bg_rotation_commit(r), BG_ESERVER);
  CHECK_MSG(ft->injected, "%s: the fault was never injected", ft->name);
  CHECK_CONTAINS(bg_rotation_errmsg(r), "staging bitmap");
  CHECK_CONTAINS(bg_rotation_errmsg(r), "the live filter is unchanged");
  bg_rotation_free(r);
  /* the live filter: its old generation, whole, and its old config */
  uint64_t size = 0;
  CHECK_OK(bg_filter_info(f, &size, NULL, NULL, NULL));
  CHECK_EQ_U64(size, 9585);
  CHECK_EQ_U64(bgt_count_present(f, &old_items), old_items.n);
  char key[64];
  snprintf(key, sizeof key, "{%s}:rotation", ft->name);
  expect_reply("EXISTS %s", key, "0");
  char pattern[64];
  snprintf(pattern, sizeof pattern, "{%s}:next:*", ft->name);
  expect_reply("KEYS %s", pattern, "");
  /* and the next rotation goes through */
  CHECK_OK(bg_rotation_begin(&r, f, 100000, 0.01, BG_ROTATE_SWAP, o));
  CHECK_OK(bg_rotation_add_many(r, PTRS(old_items), old_items.len, old_items.n));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &old_items), old_items.n);
  CHECK_EQ_U64(bgt_count_present(f, &next), next.n);
  bg_options_free(o);
  bg_filter_close(f);
  items_free(&old_items), items_free(&next);
}

static void test_staging_deleted_between_chunks_commit_refuses(void) {
  fault ft = {"vanish-mid", BG_PHASE_UPLOADING, 0, 0};
  staging_vanishes(&ft);
}
static void test_staging_expired_between_chunks_commit_refuses(void) {
  fault ft = {"expire-mid", BG_PHASE_UPLOADING, 1, 0};
  staging_vanishes(&ft);
}
static void test_staging_expired_before_commit_commit_refuses(void) {
  fault ft = {"expire-end", BG_PHASE_COMMITTING, 1, 0};
  staging_vanishes(&ft);
}

/* LOCKED: the live bitmap deleted between two chunks of the in-place rewrite. The commit refuses;
 * the filter stays marked as being rebuilt, so queries fail with BG_ELOCKED (never a wrong
 * answer from a half-written bitmap) until the next rotation, which goes through. */
static int del_live(void *data, int phase, uint64_t items, uint64_t done, uint64_t total) {
  fault *ft = data;
  (void)items, (void)total;
  if (ft->injected || phase != BG_PHASE_UPLOADING || done == 0) return 0;
  char *rep = cmd("DEL %s", ft->name);
  if (!strcmp(rep, "1")) ft->injected = 1;
  free(rep);
  return 0;
}

static void test_live_bitmap_deleted_during_locked_rewrite_commit_refuses(void) {
  fault ft = {"vanish-locked", BG_PHASE_UPLOADING, 0, 0};
  items old_items = make_items("old", 1000), next = make_items("next", 20000);
  bg_filter *f = bgt_fresh_filter(cl, ft.name, 100000, 0.01, &old_items);
  bg_options *o = rotation_opts(30000, 300000, 4096);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 100000, 0.01, BG_ROTATE_LOCKED, o));
  CHECK_OK(bg_rotation_set_progress(r, del_live, &ft));
  CHECK_OK(bg_rotation_add_many(r, PTRS(old_items), old_items.len, old_items.n));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  CHECK_STATUS(bg_rotation_commit(r), BG_ESERVER);
  CHECK_MSG(ft.injected, "the fault was never injected");
  CHECK_CONTAINS(bg_rotation_errmsg(r), "vanished during the in-place rewrite");
  bg_rotation_free(r);
  int present = 0;
  CHECK_STATUS(bg_filter_contains(f, old_items.p[0], old_items.len[0], &present), BG_ELOCKED);
  CHECK_OK(bg_rotation_begin(&r, f, 100000, 0.01, BG_ROTATE_LOCKED, o));
  CHECK_OK(bg_rotation_add_many(r, PTRS(old_items), old_items.len, old_items.n));
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &old_items), old_items.n);
  bg_options_free(o);
  bg_filter_close(f);
  items_free(&old_items), items_free(&next);
}

/* The invariant itself: from begin on, the staging key exists and every key the lease guards
 * expires no earlier than the lease, whatever the staging TTL (here 1 s under a 30 s lease). */
static void test_guarded_keys_outlive_the_lease(void) {
  items late = make_items("late", 1);
  bg_filter *f = bgt_fresh_filter(cl, "outlive", 1000, 0.01, NULL);
  bg_options *o = rotation_opts(30000, 1000, 0);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_SWAP, o));
  CHECK_OK(bg_filter_add_many(f, PTRS(late), late.len, late.n, NULL));
  /* absolute expiry times (Redis 7), so that the reads one after the other do not matter */
  char *lease_pttl = cmd("PTTL %s", "{outlive}:rotation");
  char *lease = cmd("PEXPIRETIME %s", "{outlive}:rotation");
  char *delta = cmd("PEXPIRETIME %s", "{outlive}:delta");
  char *staging = cmd("KEYS %s", "{outlive}:next:*");
  char *staging_ttl = cmd("PEXPIRETIME %s", staging);
  CHECK_MSG(atol(lease_pttl) > 1000 && atoll(lease) > 0 && atoll(delta) >= atoll(lease) &&
            atoll(staging_ttl) >= atoll(lease), "lease PTTL %s, expires at %s; delta at %s; staging (%s) at %s",
            lease_pttl, lease, delta, staging, staging_ttl);
  free(lease_pttl);
  free(lease), free(delta), free(staging), free(staging_ttl);
  CHECK_OK(bg_rotation_commit(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(bgt_count_present(f, &late), 1);
  bg_options_free(o);
  bg_filter_close(f);
  items_free(&late);
}

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_stall_before_swap_commit_keeps_every_item),
        BGT_CASE(test_add_survives_a_commit_later_than_the_staging_ttl_swap),
        BGT_CASE(test_add_survives_a_commit_later_than_the_staging_ttl_locked),
        BGT_CASE(test_staging_deleted_between_chunks_commit_refuses),
        BGT_CASE(test_staging_expired_between_chunks_commit_refuses),
        BGT_CASE(test_staging_expired_before_commit_commit_refuses),
        BGT_CASE(test_live_bitmap_deleted_during_locked_rewrite_commit_refuses),
        BGT_CASE(test_guarded_keys_outlive_the_lease), BGT_CASE(teardown))
