/*
 * RedisBloom's hashing done here (hash/murmur.h) against the server's own: for many (capacity,
 * error rate) pairs, a filter built by the server (BF.RESERVE + BF.MADD) is read back with
 * BF.SCANDUMP, and its bit array must equal, byte for byte, the one built here from the same items.
 * Then the other way: a bit array built here, uploaded with BF.LOADCHUNK under the header of an
 * empty template, answers BF.MEXISTS item for item as the server-built filter does.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hash/murmur.h"
#include "native_fixture.h"

static bgt_redis srv;
static redisContext *rc;

/* BF.SCANDUMP key from start to end: the header (malloc'd) and the data chunks concatenated; the
 * iterators of each chunk in iters (up to 16). */
typedef struct dump {
  unsigned char *header, *data;
  size_t header_len, data_len;
  long long iters[16];
  size_t chunk_lens[16];
  int nchunks;
} dump;

static void scandump(const char *key, dump *d) {
  memset(d, 0, sizeof *d);
  long long it = 0;
  for (int round = 0; round < 64; round++) {
    redisReply *r = redisCommand(rc, "BF.SCANDUMP %s %lld", key, it);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    if (!r || r->type != REDIS_REPLY_ARRAY) return;
    it = r->element[0]->integer;
    redisReply *chunk = r->element[1];
    if (it == 0) {
      freeReplyObject(r);
      return;
    }
    if (round == 0) {
      d->header = malloc(chunk->len);
      memcpy(d->header, chunk->str, chunk->len);
      d->header_len = chunk->len;
      d->iters[15] = it;   /* the header's own iterator */
    }
    else {
      d->data = realloc(d->data, d->data_len + chunk->len);
      memcpy(d->data + d->data_len, chunk->str, chunk->len);
      d->data_len += chunk->len;
      if (d->nchunks < 15) {
        d->iters[d->nchunks] = it;
        d->chunk_lens[d->nchunks++] = chunk->len;
      }
    }
    freeReplyObject(r);
  }
}

static void free_dump(dump *d) {
  free(d->header);
  free(d->data);
}

static void cmd_ok(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  CHECK_MSG(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt, r && r->str ? r->str : "(no reply)");
  freeReplyObject(r);
}

static void test_bits_match_scandump(void) {
  static const struct { uint64_t cap; double err; int n; } pairs[] = {
    {100, 0.01, 80}, {1000, 0.001, 900}, {5000, 0.05, 3000}, {777, 0.1, 700}, {10000, 0.0001, 5000},
    {3, 0.5, 3}, {64, 0.2, 50}, {20000, 0.01, 15000}, {123457, 0.003, 1000}, {50, 1e-6, 40}};
  char item[32];
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    char key[32];
    snprintf(key, sizeof key, "vec-%zu", p);
    cmd_ok("BF.RESERVE %s %.17g %llu", key, pairs[p].err, (unsigned long long)pairs[p].cap);
    uint64_t bits;
    uint32_t k;
    bgi_rbloom_geometry(pairs[p].cap, pairs[p].err, &bits, &k);
    uint8_t *mine = calloc(bits / 8, 1);
    for (int i = 0; i < pairs[p].n; i++) {
      /* items of every length 0..31 bytes, binary too: each tail length of the hash */
      size_t len = (size_t)snprintf(item, sizeof item, "%d:%.*s", i, i % 24, "abcdefghijklmnopqrstuvwxyz");
      if (i % 7 == 0) item[1] = '\0';
      cmd_ok("BF.ADD %s %b", key, item, len);
      bgi_rbloom_add(mine, bits, k, item, len);
    }
    dump d;
    scandump(key, &d);
    CHECK_MSG(d.data_len == bits / 8, "(%llu, %g): the server's link has %zu bytes, %llu computed here",
              (unsigned long long)pairs[p].cap, pairs[p].err, d.data_len, (unsigned long long)bits / 8);
    CHECK_MSG(d.data_len == bits / 8 && memcmp(d.data, mine, d.data_len) == 0,
              "(%llu, %g): the server's bits differ from the ones built here", (unsigned long long)pairs[p].cap,
              pairs[p].err);
    free_dump(&d);
    free(mine);
  }
}

/* A client-built filter uploaded with BF.LOADCHUNK answers as the server-built one. */
static void test_loadchunk_answers_alike(void) {
  enum { N = 3000, Q = 6000 };
  cmd_ok("BF.RESERVE built 0.01 5000");
  cmd_ok("BF.RESERVE tmpl 0.01 5000");
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry(5000, 0.01, &bits, &k);
  uint8_t *mine = calloc(bits / 8, 1);
  char item[32];
  for (int i = 0; i < N; i++) {
    size_t len = (size_t)snprintf(item, sizeof item, "u%d", i);
    cmd_ok("BF.ADD built %b", item, len);
    bgi_rbloom_add(mine, bits, k, item, len);
  }
  dump t;
  scandump("tmpl", &t);
  CHECK(t.nchunks >= 1 && t.data_len == bits / 8);
  cmd_ok("BF.LOADCHUNK loaded %lld %b", t.iters[15], t.header, t.header_len);
  size_t off = 0;
  for (int c = 0; c < t.nchunks; c++) {
    cmd_ok("BF.LOADCHUNK loaded %lld %b", t.iters[c], mine + off, t.chunk_lens[c]);
    off += t.chunk_lens[c];
  }
  int same = 0, present = 0;
  for (int i = 0; i < Q; i++) {
    size_t len = (size_t)snprintf(item, sizeof item, "u%d", i);
    redisReply *a = redisCommand(rc, "BF.EXISTS built %b", item, len), *b = redisCommand(rc, "BF.EXISTS loaded %b", item, len);
    same += a && b && a->type == REDIS_REPLY_INTEGER && b->type == REDIS_REPLY_INTEGER && a->integer == b->integer;
    present += i < N && b && b->type == REDIS_REPLY_INTEGER && b->integer == 1;
    freeReplyObject(a);
    freeReplyObject(b);
  }
  CHECK_EQ_INT(same, Q);
  CHECK_EQ_INT(present, N);
  free_dump(&t);
  free(mine);
}

/* The control: one bit off in the local array is seen (the comparison can fail). */
static void test_control_one_bit_off(void) {
  cmd_ok("BF.RESERVE ctl 0.01 100");
  cmd_ok("BF.ADD ctl x");
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry(100, 0.01, &bits, &k);
  uint8_t *mine = calloc(bits / 8, 1);
  bgi_rbloom_add(mine, bits, k, "x", 1);
  dump d;
  scandump("ctl", &d);
  CHECK(d.data_len == bits / 8 && memcmp(d.data, mine, d.data_len) == 0);
  mine[0] ^= 0x10;
  CHECK_MSG(memcmp(d.data, mine, d.data_len) != 0, "a flipped bit was not seen");
  free_dump(&d);
  free(mine);
}

static void setup(void) {
  bgt_redis_start_bloom(&srv, NULL);
  rc = redisConnect("127.0.0.1", srv.port);
  CHECK(rc && !rc->err);
}

static void teardown(void) {
  redisFree(rc);
  bgt_redis_stop(&srv);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_bits_match_scandump), BGT_CASE(test_loadchunk_answers_alike),
        BGT_CASE(test_control_one_bit_off), BGT_CASE(teardown))
