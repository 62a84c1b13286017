/* Native filters (BF.*) against a real redis-server 7.0 with RedisBloom 2.8.2 loaded (native_fixture.c). */
#include <bloomguard.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "filters.h"
#include "native_fixture.h"
#include "rotation/rotation.h"

static bgt_redis srv;
static bg_client *cl;

static bg_filter *open_native(const char *name) {
  bg_filter *f = NULL;
  CHECK_OK(bg_filter_open_native(&f, cl, name));
  CHECK_EQ_INT(bg_filter_is_native(f), 1);
  return f;
}

static void test_init_add_contains_count_info(void) {
  bg_filter *f = open_native("nat");
  int created = -1, added = -1, present = -1;
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, 4, &created));
  CHECK_EQ_INT(created, 1);
  char *t = bgt_redis_cmd(&srv, "TYPE nat");
  CHECK_EQ_STR(t, "MBbloom--");
  free(t);
  /* tryInit's meaning: the filter there is kept */
  CHECK_OK(bg_filter_init_native(f, 50, 0.1, 0, &created));
  CHECK_EQ_INT(created, 0);
  CHECK_OK(bg_filter_add(f, "apple", 5, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_add(f, "apple", 5, &added));
  CHECK_EQ_INT(added, 0);
  CHECK_OK(bg_filter_contains(f, "apple", 5, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_contains(f, "pear", 4, &present));
  CHECK_EQ_INT(present, 0);
  /* what the server itself answers for the same items */
  t = bgt_redis_cmd(&srv, "BF.MEXISTS nat apple pear");
  CHECK_EQ_STR(t, "1 0");
  free(t);
  /* batches: 3000 items over 3 chunks of one window, half of them added */
  enum { N = 3000 };
  static char buf[N][16];
  static const void *items[N];
  static size_t lens[N];
  static uint8_t pres[N];
  for (int i = 0; i < N; i++) {
    lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "item-%d", i);
    items[i] = buf[i];
  }
  size_t nadded = 0;
  CHECK_OK(bg_filter_add_many(f, items, lens, N / 2, &nadded));
  /* an item whose bits were all set already is not new to the server either (a false positive) */
  CHECK_MSG(nadded <= N / 2 && nadded >= N / 2 - N / 2 / 10, "%zu of %d new", nadded, N / 2);
  CHECK_OK(bg_filter_contains_many(f, items, lens, N, pres));
  int in = 0, fp = 0;
  for (int i = 0; i < N; i++) (i < N / 2 ? (in += pres[i]) : (fp += pres[i]));
  CHECK_EQ_INT(in, N / 2);
  CHECK_MSG(fp < N / 2 / 10, "%d false positives of %d at 1%%", fp, N / 2);
  int64_t count = 0;
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_EQ_INT(count, 1 + (int64_t)nadded);
  int64_t cap = 0, bytes = 0, links = 0, nitems = 0, exp = 0;
  CHECK_OK(bg_filter_info_native(f, &cap, &bytes, &links, &nitems, &exp));
  CHECK_EQ_INT(nitems, 1 + (int64_t)nadded);
  CHECK_EQ_INT(exp, 4);
  CHECK_MSG(links >= 2 && cap > 1000 && bytes > 0, "links %lld cap %lld bytes %lld", (long long)links, (long long)cap,
            (long long)bytes);
  uint64_t size = 0;
  int64_t expected = 0;
  CHECK_OK(bg_filter_info(f, &size, NULL, &expected, NULL));
  CHECK_EQ_INT(expected, cap);
  CHECK_EQ_U64(size, (uint64_t)bytes * 8);
  int applied = -1, deleted = -1;
  CHECK_OK(bg_filter_expire(f, 100000, &applied));
  CHECK_EQ_INT(applied, 1);
  t = bgt_redis_cmd(&srv, "PTTL nat");
  CHECK_MSG(atol(t) > 0, "PTTL %s", t);
  free(t);
  CHECK_OK(bg_filter_persist(f, &applied));
  CHECK_EQ_INT(applied, 1);
  CHECK_OK(bg_filter_delete(f, &deleted));
  CHECK_EQ_INT(deleted, 1);
  CHECK_OK(bg_filter_delete(f, &deleted));
  CHECK_EQ_INT(deleted, 0);
  /* the handle stays native after a delete: made again, it answers from the new filter */
  CHECK_OK(bg_filter_init_native(f, 100, 0.01, -1, &created));
  CHECK_EQ_INT(created, 1);
  CHECK_OK(bg_filter_add(f, "again", 5, &added));
  CHECK_EQ_INT(added, 1);
  CHECK_OK(bg_filter_contains(f, "again", 5, &present));
  CHECK_EQ_INT(present, 1);
  t = bgt_redis_cmd(&srv, "TYPE nat");
  CHECK_EQ_STR(t, "MBbloom--");
  free(t);
  bg_filter_close(f);
}

/* A missing key is never an answer of 0: BG_ENOTINIT to the policy (which by default assumes present). */
static void test_missing_key_goes_to_policy(void) {
  bg_filter *f = open_native("nat-missing");
  bg_call *call = NULL;
  bg_policy *p = NULL;
  CHECK_OK(bg_call_new(&call));
  CHECK_OK(bg_policy_new(&p));
  int assume[] = {BG_ACT_ASSUME_PRESENT};
  CHECK_OK(bg_policy_set_chain(p, BG_FAIL_NOTINIT, assume, 1));
  CHECK_OK(bg_filter_set_policy(f, p));
  bg_policy_free(p);
  int present = -1;
  CHECK_OK(bg_filter_contains_ex(f, call, "x", 1, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_EQ_INT(bg_call_source(call), BG_SOURCE_ASSUMED_PRESENT);
  CHECK_CONTAINS(bg_call_errmsg(call), "not initialized");
  bgt_policy_errors_only(f);
  CHECK_STATUS(bg_filter_contains(f, "x", 1, &present), BG_ENOTINIT);
  CHECK_CONTAINS(bg_filter_errmsg(f), "nat-missing");
  /* an add does not create it (BF.ADD would, with the server's default capacity) */
  CHECK_STATUS(bg_filter_add(f, "x", 1, NULL), BG_ENOTINIT);
  char *t = bgt_redis_cmd(&srv, "EXISTS nat-missing");
  CHECK_EQ_STR(t, "0");
  free(t);
  int64_t count = -1;
  CHECK_STATUS(bg_filter_count(f, &count), BG_ENOTINIT);
  CHECK_STATUS(bg_filter_info_native(f, NULL, NULL, NULL, NULL, NULL), BG_ENOTINIT);
  bg_call_free(call);
  bg_filter_close(f);
}

/* A key of the other kind, both ways, refused by name. */
static void test_other_kind_refused(void) {
  bg_filter *r = NULL, *f = open_native("both");
  CHECK_OK(bg_filter_open(&r, cl, "both"));
  CHECK_OK(bg_filter_init(r, 1000, 0.01, NULL));
  bgt_policy_errors_only(f);
  int present = -1;
  /* a Redisson config without a bitmap yet */
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &present), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(f), "Redisson-layout filter");
  CHECK_STATUS(bg_filter_init_native(f, 100, 0.01, -1, NULL), BG_EWRONGTYPE);
  CHECK_OK(bg_filter_add(r, "a", 1, NULL));
  /* its bitmap: a Redis string at the name */
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &present), BG_EWRONGTYPE);
  CHECK_STATUS(bg_filter_add(f, "a", 1, NULL), BG_EWRONGTYPE);
  CHECK_STATUS(bg_filter_delete(f, NULL), BG_EWRONGTYPE);
  char *t = bgt_redis_cmd(&srv, "TYPE both");
  CHECK_EQ_STR(t, "string");
  free(t);
  /* a string under a name without a config */
  free(bgt_redis_cmd(&srv, "SET plainstr hello"));
  bg_filter *s = open_native("plainstr");
  bgt_policy_errors_only(s);
  CHECK_STATUS(bg_filter_contains(s, "a", 1, &present), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(s), "holds a Redis string");
  bg_filter_close(s);
  bg_filter_close(f);
  bg_filter_close(r);
  /* a native filter is not a Redisson one: the plain handle does not answer 0 from it */
  bg_filter *n = open_native("nat-only");
  CHECK_OK(bg_filter_init_native(n, 100, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(n, "a", 1, NULL));
  CHECK_OK(bg_filter_open(&r, cl, "nat-only"));
  bgt_policy_errors_only(r);
  CHECK_STATUS(bg_filter_contains(r, "a", 1, &present), BG_EWRONGTYPE);
  CHECK_CONTAINS(bg_filter_errmsg(r), "\"nat-only\" is a native Bloom filter (TYPE MBbloom--)");
  CHECK_STATUS(bg_filter_add(r, "b", 1, NULL), BG_EWRONGTYPE);
  /* and a name holding nothing is still just not initialized */
  bg_filter *none = NULL;
  CHECK_OK(bg_filter_open(&none, cl, "nothing-here"));
  bgt_policy_errors_only(none);
  CHECK_STATUS(bg_filter_contains(none, "a", 1, &present), BG_ENOTINIT);
  CHECK_CONTAINS(bg_filter_errmsg(none), "not initialized");
  bg_filter_close(none);
  bg_filter_close(r);
  bg_filter_close(n);
}

static void test_nonscaling_full_reported(void) {
  bg_filter *f = open_native("full");
  bgt_policy_errors_only(f);
  CHECK_OK(bg_filter_init_native(f, 10, 0.01, 0, NULL));
  const void *items[15];
  size_t lens[15];
  char buf[15][8];
  for (int i = 0; i < 15; i++) {
    lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "f%d", i);
    items[i] = buf[i];
  }
  size_t added = 0;
  CHECK_STATUS(bg_filter_add_many(f, items, lens, 15, &added), BG_EFULL);
  CHECK_CONTAINS(bg_filter_errmsg(f), "item 10 of this call and the 4 after it were not added");
  CHECK_CONTAINS(bg_filter_errmsg(f), "10 before it were new");
  CHECK_STATUS(bg_filter_add(f, "late", 4, NULL), BG_EFULL);
  int64_t count = 0;
  CHECK_OK(bg_filter_count(f, &count));
  CHECK_EQ_INT(count, 10);
  int64_t exp = -1;
  CHECK_OK(bg_filter_info_native(f, NULL, NULL, NULL, NULL, &exp));
  CHECK_EQ_INT(exp, 0);
  bg_filter_close(f);
}

/* The line of INFO that starts with `key` is the same in both (or absent from both). */
static int same_line(const char *a, const char *b, const char *key) {
  const char *x = strstr(a, key), *y = strstr(b, key);
  if (!x || !y) return !x == !y;
  size_t n = strcspn(x, "\r\n");
  return n == strcspn(y, "\r\n") && !strncmp(x, y, n);
}

static void test_sizes_refused_before_sending(void) {
  bg_filter *f = open_native("huge");
  char *before = bgt_redis_cmd(&srv, "INFO commandstats");
  /* 1e11 items at 1e-6: ~450 GB, the reservation that got a server OOM-killed */
  CHECK_STATUS(bg_filter_init_native(f, 100000000000LL, 1e-6, -1, NULL), BG_EBADPARAMS);
  CHECK_CONTAINS(bg_filter_errmsg(f), "BG_OPT_NATIVE_MAX_BYTES");
  CHECK_STATUS(bg_filter_init(f, 100000000000LL, 1e-6, NULL), BG_EBADPARAMS);
  CHECK_STATUS(bg_filter_init_native(f, 100, 0, -1, NULL), BG_EBADPARAMS);
  CHECK_STATUS(bg_filter_init_native(f, 0, 0.1, -1, NULL), BG_EBADPARAMS);
  CHECK_STATUS(bg_filter_init_native(f, 100, 0.1, -2, NULL), BG_EBADPARAMS);
  char *after = bgt_redis_cmd(&srv, "INFO commandstats");
  CHECK_MSG(same_line(before, after, "cmdstat_evalsha") && same_line(before, after, "cmdstat_eval:") &&
                same_line(before, after, "cmdstat_bf.reserve"), "a refused init reached the server");
  free(before);
  free(after);
  /* the bound follows the option: 1e6 at 1% (~1.2 MB) refused under a 1 MB cap */
  bg_options *o = NULL;
  bg_client *c2 = NULL;
  bg_filter *g = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_NATIVE_MAX_BYTES, 1 << 20));
  CHECK_OK(bg_client_open(&c2, srv.url, o));
  CHECK_OK(bg_filter_open_native(&g, c2, "capped"));
  CHECK_STATUS(bg_filter_init_native(g, 1000000, 0.01, -1, NULL), BG_EBADPARAMS);
  CHECK_OK(bg_filter_init_native(g, 100000, 0.01, -1, NULL));
  bg_filter_close(g);
  bg_client_close(c2);
  bg_options_free(o);
  /* not native: its own init */
  bg_filter *r = NULL;
  CHECK_OK(bg_filter_open(&r, cl, "plainone"));
  CHECK_STATUS(bg_filter_init_native(r, 100, 0.01, -1, NULL), BG_EINVAL);
  bg_filter_close(r);
  bg_filter_close(f);
}

static int one(bg_queue *q, int64_t *value, const uint8_t **present) {
  bg_completion *c[1];
  size_t n = 0;
  CHECK_OK(bg_queue_poll(q, 5000, c, 1, &n));
  if (n != 1) return -1000;
  if (value) *value = bg_completion_value(c[0]);
  if (present) *present = bg_completion_present(c[0], &n);
  return bg_completion_status(c[0]);
}

/* The same steps through a submission queue. */
static void test_queue(void) {
  bg_queue *q = NULL;
  CHECK_OK(bg_queue_open(&q, cl));
  bg_filter *f = open_native("natq");
  bgt_policy_errors_only(f);
  int64_t v = -1;
  CHECK_OK(bg_filter_contains_submit(f, q, 1, "a", 1));
  CHECK_STATUS(one(q, NULL, NULL), BG_ENOTINIT);
  CHECK_OK(bg_filter_init_submit(f, q, 2, 1000, 0.01));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  const void *items[] = {"a", "b", "c"};
  size_t lens[] = {1, 1, 1};
  CHECK_OK(bg_filter_add_many_submit(f, q, 3, items, lens, 2));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 2);
  const uint8_t *pres = NULL;
  CHECK_OK(bg_filter_contains_many_submit(f, q, 4, items, lens, 3));
  CHECK_OK(one(q, NULL, &pres));
  CHECK(pres && pres[0] == 1 && pres[1] == 1 && pres[2] == 0);
  CHECK_OK(bg_filter_count_submit(f, q, 5));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 2);
  CHECK_OK(bg_filter_delete_submit(f, q, 6));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  /* init with an expansion: NONSCALING, so the 11th item is refused per item (BG_EFULL) */
  bg_filter *g = open_native("natq-full");
  bgt_policy_errors_only(g);
  CHECK_OK(bg_filter_init_native_submit(g, q, 7, 10, 0.01, 0));
  CHECK_OK(one(q, &v, NULL));
  CHECK_EQ_INT(v, 1);
  const void *many[12];
  size_t mlens[12];
  char mb[12][8];
  for (int i = 0; i < 12; i++) {
    mlens[i] = (size_t)snprintf(mb[i], sizeof mb[i], "q%d", i);
    many[i] = mb[i];
  }
  CHECK_OK(bg_filter_add_many_submit(g, q, 8, many, mlens, 12));
  CHECK_STATUS(one(q, NULL, NULL), BG_EFULL);
  CHECK_STATUS(bg_filter_init_native_submit(g, q, 9, 10, 0.01, -7), BG_EBADPARAMS);
  bg_filter *plain = NULL;
  CHECK_OK(bg_filter_open(&plain, cl, "natq-plain"));
  CHECK_STATUS(bg_filter_init_native_submit(plain, q, 10, 10, 0.01, 0), BG_EINVAL);
  bg_filter_close(plain);
  bg_filter_close(g);
  bg_filter_close(f);
  bg_queue_close(q);
}

/* A server without the module: one clear error naming it. */
static void test_server_without_module(void) {
  bgt_redis plain;
  bg_client *c = NULL;
  bg_filter *f = NULL;
  bgt_redis_start(&plain, NULL);
  CHECK_OK(bg_client_open(&c, plain.url, NULL));
  CHECK_OK(bg_filter_open_native(&f, c, "nomod"));
  bgt_policy_errors_only(f);
  CHECK_STATUS(bg_filter_init_native(f, 100, 0.01, -1, NULL), BG_ENOTSUP);
  CHECK_CONTAINS(bg_filter_errmsg(f), "no Bloom filter module");
  CHECK_CONTAINS(bg_filter_errmsg(f), "RedisBloom");
  int present = -1;
  CHECK_STATUS(bg_filter_contains(f, "a", 1, &present), BG_ENOTSUP);
  CHECK_CONTAINS(bg_filter_errmsg(f), "no Bloom filter module");
  bg_filter_close(f);
  bg_client_close(c);
  bgt_redis_stop(&plain);
}


/* ---- rotation ---------------------------------------------------------------------------------- */

static int key_exists(const char *key) {
  char *t = bgt_redis_cmd(&srv, "EXISTS %s", key);
  int e = !strcmp(t, "1");
  free(t);
  return e;
}

static void fill(char (*buf)[24], const void **items, size_t *lens, int n, const char *prefix) {
  for (int i = 0; i < n; i++) {
    lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "%s%d", prefix, i);
    items[i] = buf[i];
  }
}

static void test_rotation_swap(void) {
  enum { N = 2500 };
  static char oldb[N][24], newb[N][24];
  static const void *olds[N], *news[N];
  static size_t oldl[N], newl[N];
  static uint8_t pres[N];
  fill(oldb, olds, oldl, N, "old-");
  fill(newb, news, newl, N, "new-");
  bg_filter *f = open_native("rot");
  bgt_policy_errors_only(f);
  CHECK_OK(bg_filter_init_native(f, 5000, 0.001, 3, NULL));
  CHECK_OK(bg_filter_add_many(f, olds, oldl, N, NULL));
  CHECK_OK(bg_filter_expire(f, 600000, NULL));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 6000, 0.001, BG_ROTATE_SWAP, NULL));
  /* an add made while the rotation runs goes to the live filter and into the delta */
  int added = 0, present = 0;
  CHECK_OK(bg_filter_add(f, "during", 6, &added));
  CHECK_EQ_INT(added, 1);
  char *t = bgt_redis_cmd(&srv, "LRANGE {rot}:delta 0 -1");
  CHECK_EQ_STR(t, "during");
  free(t);
  CHECK_OK(bg_rotation_add_many(r, news, newl, N));
  /* readers still see the old generation */
  CHECK_OK(bg_filter_contains(f, olds[7], oldl[7], &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_contains(f, news[7], newl[7], &present));
  CHECK_EQ_INT(present, 0);
  CHECK_OK(bg_rotation_commit(r));
  uint64_t items = 0;
  CHECK_OK(bg_rotation_stats(r, &items, NULL, NULL));
  CHECK_EQ_U64(items, N);
  bg_rotation_free(r);
  CHECK_OK(bg_filter_contains_many(f, news, newl, N, pres));
  int in = 0;
  for (int i = 0; i < N; i++) in += pres[i];
  CHECK_EQ_INT(in, N);
  CHECK_OK(bg_filter_contains(f, "during", 6, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_contains_many(f, olds, oldl, N, pres));
  in = 0;
  for (int i = 0; i < N; i++) in += pres[i];
  CHECK_MSG(in < N / 50, "%d of %d old items still present", in, N);
  /* the next generation's parameters, the live one's expansion and time to live */
  int64_t cap = 0, exp = 0, nitems = 0;
  CHECK_OK(bg_filter_info_native(f, &cap, NULL, NULL, &nitems, &exp));
  CHECK_EQ_INT(cap, 6000);
  CHECK_EQ_INT(exp, 3);
  CHECK_EQ_INT(nitems, N + 1);
  t = bgt_redis_cmd(&srv, "PTTL rot");
  CHECK_MSG(atol(t) > 500000, "PTTL %s", t);
  free(t);
  /* nothing of the rotation is left */
  t = bgt_redis_cmd(&srv, "KEYS {rot}:*");
  CHECK_EQ_STR(t, "");
  free(t);
  bg_filter_close(f);
}

/* The rotation's bulk load: the first link built here and uploaded with BF.LOADCHUNK; past its
 * capacity the rest goes by BF.INSERT (the server opens links); and the BF.INSERT fallback for a
 * server without BF.SCANDUMP / BF.LOADCHUNK, forced here by the fault hook. */
static void rotate_bulk(const char *name, int no_dump, int n, uint64_t *uploaded, int64_t *links, int64_t *nitems) {
  static char buf[6000][24];
  static const void *items[6000];
  static size_t lens[6000];
  static uint8_t pres[6000];
  fill(buf, items, lens, n, "b-");
  bg_filter *f = open_native(name);
  bgt_policy_errors_only(f);
  CHECK_OK(bg_filter_init_native(f, 100, 0.01, -1, NULL));
  bgi_nload_fault_no_dump(no_dump);
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 2000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_OK(bg_filter_add(f, "meanwhile", 9, NULL));
  CHECK_OK(bg_rotation_add_many(r, items, lens, (size_t)n));
  CHECK_OK(bg_rotation_commit(r));
  bgi_nload_fault_no_dump(0);
  CHECK_OK(bg_rotation_stats(r, NULL, uploaded, NULL));
  bg_rotation_free(r);
  CHECK_OK(bg_filter_contains_many(f, items, lens, (size_t)n, pres));
  int in = 0;
  for (int i = 0; i < n; i++) in += pres[i];
  CHECK_EQ_INT(in, n);
  int present = 0;
  CHECK_OK(bg_filter_contains(f, "meanwhile", 9, &present));
  CHECK_EQ_INT(present, 1);
  CHECK_OK(bg_filter_info_native(f, NULL, NULL, links, nitems, NULL));
  bg_filter_close(f);
}

static void test_rotation_bulk_load(void) {
  uint64_t up = 0;
  int64_t links = 0, nitems = 0;
  /* within the first link's capacity: all of it uploaded, one link; the server counts the items */
  rotate_bulk("bulk-fit", 0, 1500, &up, &links, &nitems);
  CHECK_MSG(up > 0, "nothing uploaded: the rotation did not load chunks");
  CHECK_EQ_INT(links, 1);
  CHECK_MSG(nitems >= 1480 && nitems <= 1501, "the server counts %lld items", (long long)nitems);
  /* past it: the link uploaded full, the rest added by the server into new links */
  rotate_bulk("bulk-past", 0, 5000, &up, &links, &nitems);
  CHECK_MSG(up > 0 && links >= 2, "uploaded %llu bytes, %lld links", (unsigned long long)up, (long long)links);
  CHECK_MSG(nitems >= 4900 && nitems <= 5001, "the server counts %lld items", (long long)nitems);
  /* the fallback: nothing uploaded, the same answers */
  rotate_bulk("bulk-fallback", 1, 1500, &up, &links, &nitems);
  CHECK_EQ_U64(up, 0);
  CHECK_MSG(nitems >= 1480 && nitems <= 1501, "the server counts %lld items", (long long)nitems);
}

/* A rotation big enough for the bucketed build (several regions, calls of 10,000 items pending
 * between them, two hashing threads) and past the first link's capacity, with repeated items: the
 * rotated filter dumps (BF.SCANDUMP: every link's bits and the header's counts) exactly as one the
 * server built from the same items with BF.INSERT. The control: a reference with one item less
 * differs. */
static int same_dump(redisContext *c, const char *a, const char *b) {
  long long ia = 0, ib = 0;
  int same = 1;
  for (int round = 0; round < 4096; round++) {
    redisReply *ra = redisCommand(c, "BF.SCANDUMP %s %lld", a, ia), *rb = redisCommand(c, "BF.SCANDUMP %s %lld", b, ib);
    CHECK(ra && rb && ra->type == REDIS_REPLY_ARRAY && rb->type == REDIS_REPLY_ARRAY);
    if (!ra || !rb || ra->type != REDIS_REPLY_ARRAY || rb->type != REDIS_REPLY_ARRAY) return 0;
    ia = ra->element[0]->integer, ib = rb->element[0]->integer;
    same &= ia == ib && ra->element[1]->len == rb->element[1]->len &&
            memcmp(ra->element[1]->str, rb->element[1]->str, ra->element[1]->len) == 0;
    freeReplyObject(ra);
    freeReplyObject(rb);
    if (ia == 0 || ib == 0) return same && ia == ib;
  }
  return 0;
}

static void insert_all(redisContext *c, const char *key, const void **items, const size_t *lens, int n) {
  enum { B = 1000 };
  const char *argv[3 + B];
  size_t alen[3 + B];
  for (int i = 0; i < n; i += B) {
    int m = n - i < B ? n - i : B;
    argv[0] = "BF.INSERT", alen[0] = 9;
    argv[1] = key, alen[1] = strlen(key);
    argv[2] = "ITEMS", alen[2] = 5;
    for (int j = 0; j < m; j++) argv[3 + j] = items[i + j], alen[3 + j] = lens[i + j];
    redisReply *r = redisCommandArgv(c, 3 + m, argv, alen);
    CHECK(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
  }
}

static void test_rotation_bulk_bucketed(void) {
  enum { CAP = 100000, N = 130000, CHUNK = 10000 };
  static char buf[N][24];
  static const void *items[N];
  static size_t lens[N];
  for (int i = 0; i < N; i++) {
    lens[i] = (size_t)snprintf(buf[i], sizeof buf[i], "k-%d", i % 5 == 4 ? i / 5 : i);   /* a fifth repeat */
    items[i] = buf[i];
  }
  redisContext *c = redisConnect("127.0.0.1", srv.port);
  CHECK(c && !c->err);
  bg_filter *f = open_native("bucketed");
  bgt_policy_errors_only(f);
  CHECK_OK(bg_filter_init_native(f, 100, 0.01, -1, NULL));
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_THREADS, 2));
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, CAP, 0.01, BG_ROTATE_SWAP, o));
  for (int i = 0; i < N; i += CHUNK) CHECK_OK(bg_rotation_add_many(r, items + i, lens + i, CHUNK));
  CHECK_OK(bg_rotation_commit(r));
  uint64_t up = 0;
  CHECK_OK(bg_rotation_stats(r, NULL, &up, NULL));
  CHECK_MSG(up > 0, "nothing uploaded: the rotation did not load chunks");
  bg_rotation_free(r);
  bg_options_free(o);
  int64_t links = 0;
  CHECK_OK(bg_filter_info_native(f, NULL, NULL, &links, NULL, NULL));
  CHECK_MSG(links >= 2, "%lld links: the items did not pass the first link's capacity", (long long)links);
  redisReply *x = redisCommand(c, "BF.RESERVE bucketed-ref 0.01 %d", CAP);
  freeReplyObject(x);
  insert_all(c, "bucketed-ref", items, lens, N);
  CHECK_MSG(same_dump(c, "bucketed", "bucketed-ref"), "the rotated filter dumps otherwise than the server-built one");
  /* the control */
  x = redisCommand(c, "BF.RESERVE bucketed-ctl 0.01 %d", CAP);
  freeReplyObject(x);
  insert_all(c, "bucketed-ctl", items, lens, N - 1);
  CHECK_MSG(!same_dump(c, "bucketed", "bucketed-ctl"), "the control: a filter short of an item dumps alike");
  bg_filter_close(f);
  redisFree(c);
}

/* A rotator that died (its lease gone) leaves its staging key: the next begin deletes it, and the
 * dead one can write nothing more. */
static void test_rotation_leftovers_cleaned(void) {
  bg_filter *f = open_native("crash");
  CHECK_OK(bg_filter_init_native(f, 1000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add(f, "live", 4, NULL));
  bg_rotation *dead = NULL, *next = NULL;
  CHECK_OK(bg_rotation_begin(&dead, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  const void *it[] = {"x"};
  size_t len[] = {1};
  CHECK_OK(bg_rotation_add_many(dead, it, len, 1));
  char *staged = bgt_redis_cmd(&srv, "SMEMBERS {crash}:stagings");
  CHECK_CONTAINS(staged, "{crash}:next:");
  CHECK(key_exists(staged));
  /* its lease ran out (the process died): another rotation may begin */
  free(bgt_redis_cmd(&srv, "DEL {crash}:rotation"));
  CHECK_OK(bg_rotation_begin(&next, f, 1000, 0.01, BG_ROTATE_SWAP, NULL));
  CHECK_MSG(!key_exists(staged), "the dead rotator's staging key %s is still there", staged);
  /* (its add may be built in memory: what it can no longer do is write to the server) */
  int st = bg_rotation_add_many(dead, it, len, 1);
  CHECK_MSG(st == BG_OK || st == BG_EROTATING, "the dead rotator's add: %d", st);
  CHECK_STATUS(bg_rotation_commit(dead), BG_EROTATING);
  bg_rotation_free(dead);
  CHECK_OK(bg_rotation_add_many(next, it, len, 1));
  CHECK_OK(bg_rotation_commit(next));
  bg_rotation_free(next);
  int present = 0;
  CHECK_OK(bg_filter_contains(f, "x", 1, &present));
  CHECK_EQ_INT(present, 1);
  free(staged);
  char *t = bgt_redis_cmd(&srv, "KEYS {crash}:*");
  CHECK_EQ_STR(t, "");
  free(t);
  /* LOCKED has no meaning for a server-built filter */
  bg_rotation *r = NULL;
  CHECK_STATUS(bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_LOCKED, NULL), BG_ENOTSUP);
  bg_filter_close(f);
}

/* Readers through rotations: the swap never shows a present item as absent or the filter as
 * missing; the naive rebuild (DEL, RESERVE, re-add) does - the control that the harness can see it. */
enum { RN = 400 };
static char rbuf[RN][24];
static const void *ritems[RN];
static size_t rlens[RN];

typedef struct reader {
  bg_filter *f;
  atomic_int stop;
  atomic_long queries, bad_absent, bad_notinit, other;
} reader;

static void *read_loop(void *arg) {
  reader *rd = arg;
  uint8_t pres[RN];
  while (!atomic_load(&rd->stop)) {
    int st = bg_filter_contains_many(rd->f, ritems, rlens, RN, pres);
    atomic_fetch_add(&rd->queries, 1);
    if (st == BG_ENOTINIT) atomic_fetch_add(&rd->bad_notinit, 1);
    else if (st != BG_OK) atomic_fetch_add(&rd->other, 1);
    else
      for (int i = 0; i < RN; i++)
        if (!pres[i]) {
          atomic_fetch_add(&rd->bad_absent, 1);
          break;
        }
  }
  return NULL;
}

/* Rotations of `strategy` until `rounds` ran (or, with until_bad, until a reader saw a failure,
 * at most rounds): the readers' failures. */
static long rotate_under_readers(const char *name, int strategy, int rounds, int until_bad, long *queries) {
  bg_filter *f = open_native(name), *rf = open_native(name);
  bgt_policy_errors_only(rf);
  CHECK_OK(bg_filter_init_native(f, 20000, 0.01, -1, NULL));
  CHECK_OK(bg_filter_add_many(f, ritems, rlens, RN, NULL));
  reader rd = {.f = rf};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, read_loop, &rd) == 0);
  for (int i = 0; i < rounds; i++) {
    bg_rotation *r = NULL;
    CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, strategy, NULL));
    CHECK_OK(bg_rotation_add_many(r, ritems, rlens, RN));
    CHECK_OK(bg_rotation_commit(r));
    bg_rotation_free(r);
    if (until_bad && atomic_load(&rd.bad_absent) + atomic_load(&rd.bad_notinit) > 0) break;
  }
  atomic_store(&rd.stop, 1);
  pthread_join(th, NULL);
  CHECK_EQ_INT(atomic_load(&rd.other), 0);
  *queries = atomic_load(&rd.queries);
  fprintf(stderr, "  %s: %ld queries, %ld answered absent, %ld not initialized\n", name, *queries,
          atomic_load(&rd.bad_absent), atomic_load(&rd.bad_notinit));
  bg_filter_close(rf);
  bg_filter_close(f);
  return atomic_load(&rd.bad_absent) + atomic_load(&rd.bad_notinit);
}

static void test_readers_through_rotations(void) {
  fill(rbuf, ritems, rlens, RN, "r-");
  long q = 0;
  long bad = rotate_under_readers("race-swap", BG_ROTATE_SWAP, 40, 0, &q);
  CHECK_EQ_INT(bad, 0);
  CHECK_MSG(q > 40, "only %ld queries during 40 rotations", q);
  /* negative control: the naive rebuild is seen failing readers */
  bad = rotate_under_readers("race-naive", BG_ROTATE_NAIVE, 400, 1, &q);
  CHECK_MSG(bad > 0, "the naive rebuild showed no reader a missing filter or an absent item in %ld queries", q);
}

static void setup(void) {
  bgt_redis_start_bloom(&srv, NULL);
  CHECK_OK(bg_client_open(&cl, srv.url, NULL));
}

static void teardown(void) {
  bg_client_close(cl);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_init_add_contains_count_info), BGT_CASE(test_missing_key_goes_to_policy),
        BGT_CASE(test_other_kind_refused), BGT_CASE(test_nonscaling_full_reported),
        BGT_CASE(test_sizes_refused_before_sending), BGT_CASE(test_queue), BGT_CASE(test_server_without_module),
        BGT_CASE(test_rotation_swap), BGT_CASE(test_rotation_bulk_load), BGT_CASE(test_rotation_bulk_bucketed),
        BGT_CASE(test_rotation_leftovers_cleaned), BGT_CASE(test_readers_through_rotations),
        BGT_CASE(teardown))
