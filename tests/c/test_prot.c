/*
 * Rotating a partitioned filter (rotation/pswap.c) on a real standalone redis-server:
 *  - a swap to other n, p and P: every item of the new generation answers, the old generation's
 *    keys are gone, the config names only the new one; items added by another handle during the
 *    rotation (never given to it) are in the new generation (the delta);
 *  - abort: the live generation untouched, nothing of the rotation left;
 *  - a rotator killed (SIGKILL) after begin, mid-upload, mid-commit (half the partitions
 *    forwarding) and right after the flip: the filter keeps answering every item, adds made then
 *    are kept, leftovers expire or go with the next rotation, which succeeds;
 *  - a handle that read the config before the flip: its query of an item added only to the new
 *    generation answers true, and its add reaches the new generation - with their negative
 *    control (bgi_pop_fault_ignore_forward): the same steps then answer false / lose the add;
 *  - LOCKED: the live partitions rewritten in place (no second generation), adds during it kept; a
 *    rotator killed mid-rewrite leaves that partition answering BG_ELOCKED, never half-written
 *    bits, until the next rotation;
 *  - the options' checks: BG_OPT_ROTATE_PARTITIONS refused for a plain filter, LOCKED refused when
 *    the geometry would change.
 */
#include <bloomguard.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filter/partitioned.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"
#include "rotation/rotation.h"

static bgt_redis srv;

static bg_client *open_client(void) {
  bg_client *c = NULL;
  bg_options *o = NULL;
  char msg[256];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000));
  CHECK_MSG(bgt_client_open(&c, srv.url, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  return c;
}

static char *cmd(const char *fmt, const char *arg) {
  char *r = bgt_redis_cmd(&srv, fmt, arg);
  CHECK(r != NULL);
  return r;
}

/* Keys of generation gen of `name` (any partition, any kind). */
static long long gen_keys(const char *name, int gen) {
  char pattern[128];
  snprintf(pattern, sizeof pattern, "*%s:g%d:p*", name, gen);
  char *r = bgt_redis_cmd(&srv, "EVAL %s 0 %s", "return #redis.call('KEYS', ARGV[1])", pattern);
  long long v = r ? atoll(r) : -1;
  free(r);
  return v;
}

static char *config_field(const char *name, const char *field) {
  char key[128];
  snprintf(key, sizeof key, "{%s}:config", name);
  char *r = bgt_redis_cmd(&srv, "HGET %s %s", key, field);
  CHECK(r != NULL);
  return r;
}

static size_t present(bg_filter *f, const items *it) {
  uint8_t *p = calloc(it->n, 1);
  CHECK_OK(bg_filter_contains_many(f, PTRS(*it), it->len, it->n, p));
  size_t n = 0;
  for (size_t i = 0; i < it->n; i++) n += p[i];
  free(p);
  return n;
}

static int one(bg_filter *f, const char *item) {
  int yes = -1;
  CHECK_OK(bg_filter_contains(f, item, strlen(item), &yes));
  return yes;
}

static bg_filter *fresh(bg_client *c, const char *name, int64_t n, int64_t parts, const items *base) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open(&f, c, name));
  bg_filter_delete(f, NULL);
  CHECK_OK(bg_filter_init_partitioned(f, n, 0.01, parts, NULL));
  if (base && base->n) CHECK_OK(bg_filter_add_many(f, PTRS(*base), base->len, base->n, NULL));
  return f;
}

static bg_options *rotate_opts(int64_t parts, int64_t lease_ms, int64_t ttl_ms) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  if (parts) CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_PARTITIONS, parts));
  if (lease_ms) CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, lease_ms));
  if (ttl_ms) CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_STAGING_TTL_MS, ttl_ms));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096));
  return o;
}

static void rotate(bg_filter *f, int64_t n, int64_t parts, const items *it) {
  bg_options *o = rotate_opts(parts, 0, 0);
  bg_rotation *r = NULL;
  CHECK_MSG(bg_rotation_begin(&r, f, n, 0.01, BG_ROTATE_SWAP, o) == BG_OK, "begin: %s", bg_filter_errmsg(f));
  CHECK_OK(bg_rotation_add_many(r, PTRS(*it), it->len, it->n));
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "commit: %s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  bg_options_free(o);
}

/* ---- swap, deltas, abort ------------------------------------------------------------------- */

static void swap_changes_n_p_and_partitions(void) {
  bg_client *c = open_client(), *c2 = open_client();
  items base = make_items("pr-base", 3000), next = make_items("pr-next", 5000), during = make_items("pr-during", 800);
  bg_filter *f = fresh(c, "prs", 10000, 8, &base), *g = NULL;
  CHECK_OK(bg_filter_open(&g, c2, "prs"));
  CHECK_EQ_U64(present(g, &base), base.n);   /* g read the config of generation 1 */

  bg_options *o = rotate_opts(16, 0, 0);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 30000, 0.001, BG_ROTATE_SWAP, o));
  char *next_gen = config_field("prs", "bgNext");
  CHECK_EQ_STR(next_gen, "2");
  free(next_gen);
  CHECK_EQ_INT(gen_keys("prs", 2), 16);   /* the staged metas */
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  /* another handle adds items the rotation is never given: the marks record them */
  CHECK_OK(bg_filter_add_many(g, PTRS(during), during.len, during.n, NULL));
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "commit: %s", bg_rotation_errmsg(r));
  bg_rotation_free(r);

  CHECK_EQ_U64(present(f, &next), next.n);
  CHECK_EQ_U64(present(f, &during), during.n);
  CHECK_EQ_U64(present(g, &next), next.n);    /* g finds generation 1 gone and reads the config again */
  CHECK_EQ_U64(present(g, &during), during.n);
  /* the old items are not in the new generation (a few false positives at most) */
  CHECK(present(f, &base) < base.n / 20);
  uint32_t parts = 0;
  uint64_t size = 0;
  CHECK_OK(bg_filter_info_partitioned(f, &size, NULL, NULL, NULL, &parts));
  CHECK_EQ_INT(parts, 16);
  CHECK_EQ_INT(gen_keys("prs", 1), 0);
  char *live = config_field("prs", "bgLive"), *nx = config_field("prs", "bgNext"),
       *sw = config_field("prs", "bgSweep"), *old = config_field("prs", "g1:partitions");
  CHECK_EQ_STR(live, "2");
  CHECK_EQ_STR(nx, "(nil)");
  CHECK_EQ_STR(sw, "(nil)");
  CHECK_EQ_STR(old, "(nil)");
  free(live), free(nx), free(sw), free(old);
  char *rot = cmd("EXISTS %s", "{prs}:rotation");
  CHECK_EQ_STR(rot, "0");
  free(rot);

  /* and again, back to 4 partitions: generation 3 */
  rotate(f, 10000, 4, &base);
  CHECK_EQ_U64(present(g, &base), base.n);
  CHECK_EQ_INT(gen_keys("prs", 2), 0);
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_EQ_INT(gen_keys("prs", 3), 0);
  bg_options_free(o);
  items_free(&base), items_free(&next), items_free(&during);
  bg_filter_close(f), bg_filter_close(g);
  bg_client_close(c), bg_client_close(c2);
}

static void abort_leaves_nothing(void) {
  bg_client *c = open_client();
  items base = make_items("pa-base", 2000), next = make_items("pa-next", 2000);
  bg_filter *f = fresh(c, "pra", 5000, 4, &base);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 8000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  CHECK_OK(bg_rotation_abort(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(present(f, &base), base.n);
  CHECK_EQ_INT(gen_keys("pra", 2), 0);
  /* generation 1: 4 metas and 4 bitmaps, no mark, no delta */
  CHECK_EQ_INT(gen_keys("pra", 1), 8);
  char *nx = config_field("pra", "bgNext");
  CHECK_EQ_STR(nx, "(nil)");
  free(nx);
  bg_filter_delete(f, NULL);
  items_free(&base), items_free(&next);
  bg_filter_close(f);
  bg_client_close(c);
}

static void options_checked(void) {
  bg_client *c = open_client();
  bg_filter *f = NULL;
  bg_rotation *r = NULL;
  CHECK_OK(bg_filter_open(&f, c, "prp"));
  bg_filter_delete(f, NULL);
  CHECK_OK(bg_filter_init(f, 1000, 0.01, NULL));
  bg_options *o = rotate_opts(4, 0, 0);
  CHECK_STATUS(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_SWAP, o), BG_EINVAL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "BG_OPT_ROTATE_PARTITIONS is for a partitioned filter");
  CHECK_OK(bg_filter_delete(f, NULL));
  CHECK_OK(bg_filter_init_partitioned(f, 1000, 0.01, 2, NULL));
  /* in place: the partitions' geometry must stay */
  CHECK_STATUS(bg_rotation_begin(&r, f, 2000, 0.01, BG_ROTATE_LOCKED, NULL), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_filter_errmsg(f), "keep (n, p) or use BG_ROTATE_SWAP");
  CHECK(r == NULL);
  /* too many partitions for the items: the message says how many fit, nothing was changed */
  bg_options_free(o);
  o = rotate_opts(16384, 0, 0);
  CHECK_STATUS(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_SWAP, o), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_filter_errmsg(f), "rotation: ");
  CHECK_CONTAINS(bg_filter_errmsg(f), "use at most");
  /* beyond Redisson's cap is fine for a partitioned filter (the check of n and p still applies) */
  CHECK_STATUS(bg_rotation_begin(&r, f, 0, 0.01, BG_ROTATE_SWAP, NULL), BG_EBADPARAMS);
  CHECK(r == NULL);
  bg_filter_delete(f, NULL);
  bg_options_free(o);
  bg_filter_close(f);
  bg_client_close(c);
}

/* the dead rotators' lease and staging TTL: what the next rotation waits for */
#define LEASE_MS 1000
#define STAGING_TTL_MS 1000

/* ---- locked: in place ------------------------------------------------------------------------ */

static void locked_rewrites_in_place(void) {
  bg_client *c = open_client(), *c2 = open_client();
  items base = make_items("pl-base", 3000), next = make_items("pl-next", 3000), during = make_items("pl-during", 500);
  bg_filter *f = fresh(c, "prl", 10000, 8, &base), *g = NULL;
  CHECK_OK(bg_filter_open(&g, c2, "prl"));
  CHECK_EQ_U64(present(g, &base), base.n);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 10000, 0.01, BG_ROTATE_LOCKED, NULL));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  CHECK_OK(bg_filter_add_many(g, PTRS(during), during.len, during.n, NULL));   /* recorded by the marks */
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "commit: %s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  CHECK_EQ_U64(present(g, &next), next.n);
  CHECK_EQ_U64(present(g, &during), during.n);
  CHECK(present(g, &base) < base.n / 20);   /* the old bits are gone: rewritten, zeros included */
  char *live = config_field("prl", "bgLive");
  CHECK_EQ_STR(live, "1");   /* the same generation, no second copy */
  free(live);
  CHECK_EQ_INT(gen_keys("prl", 2), 0);
  CHECK_EQ_INT(gen_keys("prl", 1), 16);   /* 8 metas, 8 bitmaps: no mark, no delta left */
  char key[128];
  snprintf(key, sizeof key, "{%s}:rotation", "prl");
  char *lease = cmd("EXISTS %s", key);
  CHECK_EQ_STR(lease, "0");
  free(lease);
  bg_filter_delete(f, NULL);
  items_free(&base), items_free(&next), items_free(&during);
  bg_filter_close(f), bg_filter_close(g);
  bg_client_close(c), bg_client_close(c2);
}

/* A locked rotation whose begin fails after it took the lease (a partition's meta no longer
 * matches: the filter changed under it) undoes only its own marks: the live partitions stay. */
static void locked_begin_failure_keeps_the_filter(void) {
  bg_client *c = open_client();
  items base = make_items("plf-base", 2000);
  bg_filter *f = fresh(c, "plf", 5000, 4, &base);
  char *keys = bgt_redis_cmd(&srv, "KEYS %s", "*plf:g1:p3:m"), key[128], *size = NULL;
  CHECK(keys && keys[0]);
  snprintf(key, sizeof key, "%s", keys);
  free(keys);
  size = bgt_redis_cmd(&srv, "HGET %s size", key);
  free(bgt_redis_cmd(&srv, "HSET %s size 12345", key));
  bg_rotation *r = NULL;
  CHECK_STATUS(bg_rotation_begin(&r, f, 5000, 0.01, BG_ROTATE_LOCKED, NULL), BG_ECONFIG);
  CHECK(r == NULL);
  CHECK_EQ_INT(gen_keys("plf", 1), 8);   /* 4 metas, 4 bitmaps: no mark left, nothing deleted */
  char *lease = cmd("EXISTS %s", "{plf}:rotation");
  CHECK_EQ_STR(lease, "0");               /* and the lease given back */
  free(lease);
  free(bgt_redis_cmd(&srv, "HSET %s size %s", key, size));
  free(size);
  CHECK_EQ_U64(present(f, &base), base.n);
  bg_filter_delete(f, NULL);
  items_free(&base);
  bg_filter_close(f);
  bg_client_close(c);
}

/* A locked rotator killed mid-rewrite: the partition it was writing answers BG_ELOCKED (after the
 * write-lock wait) and never from half-written bits; the others answer; the next locked rotation
 * rewrites it and the filter is whole again. */
static void locked_killed_mid_rewrite(void) {
  bg_client *c = NULL;
  bg_options *o = NULL;
  char msg[256];
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 100));
  CHECK_MSG(bgt_client_open(&c, srv.url, o, msg, sizeof msg) == BG_OK, "open: %s", msg);
  bg_options_free(o);
  items base = make_items("plk-base", 2000);
  bg_filter *f = fresh(c, "plk", 5000, 8, &base);
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *cc = NULL;
    bg_filter *cf = NULL;
    bg_rotation *r = NULL;
    bg_options *ro = NULL;
    bg_options_new(&ro);
    bg_options_set_int(ro, BG_OPT_ROTATE_LEASE_MS, LEASE_MS);
    bgi_prot_fault_die_at(BGI_PROT_DIE_REWRITING);
    if (bg_client_open(&cc, srv.url, NULL) || bg_filter_open(&cf, cc, "plk") ||
        bg_rotation_begin(&r, cf, 5000, 0.01, BG_ROTATE_LOCKED, ro))
      _exit(3);
    bg_rotation_add_many(r, PTRS(base), base.len, base.n);
    bg_rotation_commit(r);
    _exit(4);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "rotator exited with status %d", st);
  /* partition 4 of 8 is being rewritten: a batch touching it fails, naming why */
  uint8_t *p = calloc(base.n, 1);
  CHECK_STATUS(bg_filter_contains_many(f, PTRS(base), base.len, base.n, p), BG_ELOCKED);
  CHECK_CONTAINS(bg_filter_errmsg(f), "a locked rotation rewrites some of its 8 partitions in place");
  free(p);
  bg_options *ro = rotate_opts(0, 0, 0);
  CHECK_OK(bg_options_set_int(ro, BG_OPT_ROTATE_WAIT_MS, 10000));
  bg_rotation *r = NULL;
  CHECK_MSG(bg_rotation_begin(&r, f, 5000, 0.01, BG_ROTATE_LOCKED, ro) == BG_OK, "begin: %s", bg_filter_errmsg(f));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "commit: %s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  bg_options_free(ro);
  CHECK_EQ_U64(present(f, &base), base.n);
  bg_filter_delete(f, NULL);
  items_free(&base);
  bg_filter_close(f);
  bg_client_close(c);
}

/* ---- a rotator killed ------------------------------------------------------------------------ */


/* Runs a rotation of `name` to `next` items (P 8) in a child that kills itself at `point`. */
static void rotate_and_die(const char *name, const items *next, int point) {
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *c = NULL;
    bg_filter *cf = NULL;
    bg_rotation *r = NULL;
    bg_options *o = NULL;
    bg_options_new(&o);
    bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, LEASE_MS);
    bg_options_set_int(o, BG_OPT_ROTATE_STAGING_TTL_MS, STAGING_TTL_MS);
    bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096);
    bg_options_set_int(o, BG_OPT_ROTATE_PARTITIONS, 8);
    bgi_prot_fault_die_at(point);
    if (bg_client_open(&c, srv.url, NULL) || bg_filter_open(&cf, c, name) ||
        bg_rotation_begin(&r, cf, 5000, 0.01, BG_ROTATE_SWAP, o))
      _exit(3);
    bg_rotation_add_many(r, PTRS(*next), next->len, next->n);
    bg_rotation_commit(r);
    _exit(4);   /* not reached: the rotation killed us */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s: rotator exited with status %d", name, st);
}

/* Waits (bounded) until generation gen of name has no key left. */
static void wait_gone(const char *name, int gen) {
  uint64_t t0 = bgt_now_ns();
  while (gen_keys(name, gen) != 0) {
    CHECK_MSG(bgt_now_ns() - t0 < 20000000000ull, "%s: generation %d still has %lld keys after 20 s", name, gen,
              gen_keys(name, gen));
    usleep(50000);
  }
}

static void killed_at(int point, const char *name) {
  bg_client *c = open_client(), *c2 = open_client();
  items base = make_items("pk-base", 2000), next = make_items("pk-next", 2000), later = make_items("pk-later", 300);
  bg_filter *f = fresh(c, name, 5000, 4, &base), *stale = NULL;
  CHECK_OK(bg_filter_open(&stale, c2, name));
  CHECK_EQ_U64(present(stale, &base), base.n);   /* it holds generation 1's config */
  rotate_and_die(name, &next, point);
  int flipped = point == BGI_PROT_DIE_FLIPPED;
  /* what answers: generation 1 (its items) until the flip, generation 2 (the rotation's) after */
  const items *live = flipped ? &next : &base;
  CHECK_EQ_U64(present(f, live), live->n);
  CHECK_EQ_U64(present(stale, live), live->n);
  char *gen = config_field(name, "bgLive");
  CHECK_EQ_STR(gen, flipped ? "2" : "1");
  free(gen);
  /* adds made now, through a handle that read the config before: kept */
  CHECK_OK(bg_filter_add_many(stale, PTRS(later), later.len, later.n, NULL));
  CHECK_EQ_U64(present(f, &later), later.n);
  if (point == BGI_PROT_DIE_BEGUN || point == BGI_PROT_DIE_UPLOADING) wait_gone(name, 2);   /* staged: TTLs */
  /* the next rotation goes through once the dead lease ran out, and cleans what was left */
  bg_options *o = rotate_opts(0, 0, 0);
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_WAIT_MS, 10000));
  bg_rotation *r = NULL;
  CHECK_MSG(bg_rotation_begin(&r, f, 5000, 0.01, BG_ROTATE_SWAP, o) == BG_OK, "%s: begin: %s", name,
            bg_filter_errmsg(f));
  CHECK_OK(bg_rotation_add_many(r, PTRS(base), base.len, base.n));
  CHECK_OK(bg_rotation_add_many(r, PTRS(later), later.len, later.n));
  CHECK_MSG(bg_rotation_commit(r) == BG_OK, "%s: commit: %s", name, bg_rotation_errmsg(r));
  bg_rotation_free(r);
  bg_options_free(o);
  CHECK_EQ_U64(present(stale, &base), base.n);
  CHECK_EQ_U64(present(stale, &later), later.n);
  CHECK_EQ_INT(gen_keys(name, 1), 0);
  CHECK_EQ_INT(gen_keys(name, 2), 0);
  char *sw = config_field(name, "bgSweep");
  CHECK_EQ_STR(sw, "(nil)");
  free(sw);
  bg_filter_delete(f, NULL);
  items_free(&base), items_free(&next), items_free(&later);
  bg_filter_close(f), bg_filter_close(stale);
  bg_client_close(c), bg_client_close(c2);
}

static void killed_after_begin(void) { killed_at(BGI_PROT_DIE_BEGUN, "pkb"); }
static void killed_uploading(void) { killed_at(BGI_PROT_DIE_UPLOADING, "pku"); }
static void killed_forwarding(void) { killed_at(BGI_PROT_DIE_FORWARDING, "pkf"); }
static void killed_after_flip(void) { killed_at(BGI_PROT_DIE_FLIPPED, "pkx"); }

/* Handles holding generation 1's config after a flip: a query finds an item added only to
 * generation 2, an add reaches generation 2. With forwards ignored (the control) neither. */
static void stale_handle(int ignore_forward, const char *name) {
  bg_client *c = open_client(), *c2 = open_client();
  items base = make_items("ps-base", 1000), next = make_items("ps-next", 1000);
  bg_filter *f = fresh(c, name, 5000, 4, &base), *reader = NULL, *adder = NULL, *fresh_one = NULL;
  CHECK_OK(bg_filter_open(&reader, c2, name));
  CHECK_OK(bg_filter_open(&adder, c2, name));
  CHECK_EQ_U64(present(reader, &base), base.n);
  CHECK_EQ_U64(present(adder, &base), base.n);
  rotate_and_die(name, &next, BGI_PROT_DIE_FLIPPED);   /* generation 1's keys stay, forwarding */
  CHECK_OK(bg_filter_open(&fresh_one, c, name));         /* reads generation 2 at its first step */
  CHECK_OK(bg_filter_add(fresh_one, "ps-only-new", 11, NULL));
  bgi_pop_fault_ignore_forward(ignore_forward);
  int found = one(reader, "ps-only-new");
  CHECK_OK(bg_filter_add(adder, "ps-from-stale", 13, NULL));
  bgi_pop_fault_ignore_forward(0);
  int reached = one(fresh_one, "ps-from-stale");
  if (ignore_forward) {
    CHECK_MSG(!found && !reached, "the control did not fail: found %d, reached %d", found, reached);
  } else {
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(reached, 1);
  }
  bg_filter_delete(f, NULL);
  items_free(&base), items_free(&next);
  bg_filter_close(f), bg_filter_close(reader), bg_filter_close(adder), bg_filter_close(fresh_one);
  bg_client_close(c), bg_client_close(c2);
}

/* The flip runs but its answer is lost: commit finds the flip in the config and succeeds, the
 * rotation's generation answers, the old one is gone. The control (the config not asked) fails
 * the commit, and its abort then deletes the generation the config made live. */
static void lost_flip_answer(int unchecked, const char *name) {
  bg_client *c = open_client();
  items base = make_items("pl-base", 1000), next = make_items("pl-next", 1000);
  bg_filter *f = fresh(c, name, 5000, 4, &base), *g = NULL;
  bg_options *o = rotate_opts(8, 0, 0);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 5000, 0.01, BG_ROTATE_SWAP, o));
  CHECK_OK(bg_rotation_add_many(r, PTRS(next), next.len, next.n));
  bgi_prot_fault_lose_flip(unchecked ? BGI_PROT_FLIP_LOST_UNCHECKED : BGI_PROT_FLIP_LOST);
  int st = bg_rotation_commit(r);
  bgi_prot_fault_lose_flip(0);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  CHECK_OK(bg_filter_open(&g, c, name));   /* a handle that knows nothing yet */
  uint8_t *p = calloc(next.n, 1);
  size_t found = 0;
  int qst = bg_filter_contains_many(g, PTRS(next), next.len, next.n, p);
  for (size_t i = 0; qst == BG_OK && i < next.n; i++) found += p[i];
  free(p);
  char *live = config_field(name, "bgLive");
  printf("  %s: commit %d, bgLive %s, %zu of %zu items found (query %d)\n", unchecked ? "control" : "lost answer", st,
         live, found, next.n, qst);
  if (unchecked) {
    CHECK_MSG(st != BG_OK && found < next.n, "the control did not fail: commit %d, %zu of %zu found (query %d)", st,
              found, next.n, qst);
  } else {
    CHECK_MSG(st == BG_OK, "commit: %s", msg);
    CHECK_EQ_STR(live, "2");
    CHECK_EQ_INT(qst, BG_OK);
    CHECK_EQ_U64(found, next.n);
    CHECK_EQ_INT(gen_keys(name, 1), 0);
  }
  free(live);
  bg_filter_delete(f, NULL);
  bg_options_free(o);
  items_free(&base), items_free(&next);
  bg_filter_close(f), bg_filter_close(g);
  bg_client_close(c);
}

static void stale_handle_after_flip(void) { stale_handle(0, "pst"); }
static void stale_handle_control(void) { stale_handle(1, "psc"); }

static void with_server(void (*fn)(void)) {
  bgt_redis_start(&srv, NULL);
  fn();
  bgt_redis_stop(&srv);
}

static void swap(void) { with_server(swap_changes_n_p_and_partitions); }
static void abort_(void) { with_server(abort_leaves_nothing); }
static void options(void) { with_server(options_checked); }
static void locked(void) {
  bgt_redis_start(&srv, NULL);
  locked_rewrites_in_place();
  locked_begin_failure_keeps_the_filter();
  locked_killed_mid_rewrite();
  bgt_redis_stop(&srv);
}
static void killed(void) {
  bgt_redis_start(&srv, NULL);
  killed_after_begin();
  killed_uploading();
  killed_forwarding();
  killed_after_flip();
  bgt_redis_stop(&srv);
}
static void stale(void) {
  bgt_redis_start(&srv, NULL);
  stale_handle_after_flip();
  stale_handle_control();
  bgt_redis_stop(&srv);
}
static void lost_flip(void) {
  bgt_redis_start(&srv, NULL);
  lost_flip_answer(0, "plf");
  lost_flip_answer(1, "plc");
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(swap), BGT_CASE(abort_), BGT_CASE(options), BGT_CASE(locked), BGT_CASE(killed), BGT_CASE(stale),
        BGT_CASE(lost_flip))
