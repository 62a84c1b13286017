/*
 * bench_roundtrip: what one single-item contains costs per round trip, by command shape, on one
 * connection each - to separate the price of the atomic shape from the library's own overhead.
 * Run by hand (see bench/README.md).
 *
 * Shapes (items alternate present / absent; the hand-built ones hash with bg_indexes per call):
 *  ping      PING (the bare round trip)
 *  bitfield  BITFIELD_RO name GET u1 i1 .. GET u1 i7 (bench_contains' raw baseline at batch 1)
 *  multi     MULTI; HMGET config size hashIterations; BITFIELD_RO ...; EXEC, hand-built: the block
 *            bg_filter_contains sent before BG_ROTATE_LOCKED (2 commands), hiredis' default replies
 *  multi3    MULTI; HMGET config size hashIterations bgRebuilding; HGET {NAME}:lock mode;
 *            BITFIELD_RO ...; EXEC, hand-built: the bytes bg_filter_contains sends now (the write
 *            lock read in the same block), so multi3 vs multi is the price of the lock check
 *  pipe2     HMGET ...; BITFIELD_RO ... pipelined WITHOUT MULTI (not atomic: reference only)
 *  evalsha   EVALSHA of a script doing the HMGET check then one BITFIELD_RO call (atomic)
 *  bg        bg_filter_contains on a client with BG_OPT_POOL_SIZE 1 (tracking on: with hiredis >= 1.0
 *            it sends BITFIELD_RO alone after the first check, see filter.h)
 *  bgfull    the same with BG_OPT_TRACKING 0: every call sends multi3's block
 * Each round gives every shape --seconds, cut into --slices slices taken in turn, so all shapes
 * see the same background load; ratios are medians of per-round ratios to `bitfield`. Client CPU
 * (getrusage) and server CPU (INFO cpu) per call are medians too. When the benchmark started the
 * server itself, it then runs each shape 5000 times more and prints the server's time inside each
 * command per call of the shape (INFO commandstats, reset before each shape).
 *
 *   bench_roundtrip [--url redis://host:port | unix:///path] [--rounds N (5)] [--seconds S (1.0)]
 *                   [--slices N (20)]
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"

#define N_ITEMS 2000 /* query sequence: even = added, odd = never added */
#define K_MAX 64
#define MAX_ROUNDS 21

static const char LUA[] =
    "local c = redis.call('HMGET', KEYS[2], 'size', 'hashIterations') "
    "if c[1] ~= ARGV[1] or c[2] ~= ARGV[2] then return {c[1], c[2]} end "
    "return redis.call('BITFIELD_RO', KEYS[1], unpack(ARGV, 3))";

typedef struct rt {
  redisContext *raw;
  bg_filter *f, *f_full;
  char items[N_ITEMS][16];
  size_t lens[N_ITEMS];
  size_t cursor;
  uint64_t size;
  uint32_t k;
  char name[64], config_key[80], lock_key[80], size_s[24], k_s[24], sha[48];
  char out[8192];
  uint64_t sink;
} rt;

typedef void (*shape_fn)(rt *t);

static char *put(char *p, const char *s, size_t n) {
  memcpy(p, s, n);
  return p + n;
}

static char *bulk(char *p, const char *s, size_t n) {
  *p++ = '$';
  p = bgb_put_u64(p, n);
  p = put(p, "\r\n", 2);
  p = put(p, s, n);
  return put(p, "\r\n", 2);
}

static char *str(char *p, const char *s) { return bulk(p, s, strlen(s)); }

static char *array(char *p, size_t n) {
  *p++ = '*';
  p = bgb_put_u64(p, n);
  return put(p, "\r\n", 2);
}

/* " GET u1 i" for the next item's k indexes */
static char *get_ops(rt *t, char *p) {
  uint64_t idx[K_MAX];
  size_t i = t->cursor;
  t->cursor = (t->cursor + 1) % N_ITEMS;
  bg_indexes(t->items[i], t->lens[i], t->size, t->k, idx);
  for (uint32_t j = 0; j < t->k; j++) {
    char d[24];
    p = put(p, "$3\r\nGET\r\n$2\r\nu1\r\n", 17);
    p = bulk(p, d, (size_t)(bgb_put_u64(d, idx[j]) - d));
  }
  return p;
}

static char *bitfield(rt *t, char *p) {
  p = array(p, 2 + 3 * (size_t)t->k);
  p = str(p, "BITFIELD_RO");
  p = str(p, t->name);
  return get_ops(t, p);
}

static char *hmget(rt *t, char *p) {
  p = array(p, 4);
  p = str(p, "HMGET");
  p = str(p, t->config_key);
  p = str(p, "size");
  return str(p, "hashIterations");
}

/* the current query block's config read (with the in-place rebuild mark) and write-lock read */
static char *hmget3_hget(rt *t, char *p) {
  p = array(p, 5);
  p = str(p, "HMGET");
  p = str(p, t->config_key);
  p = str(p, "size");
  p = str(p, "hashIterations");
  p = str(p, "bgRebuilding");
  p = array(p, 3);
  p = str(p, "HGET");
  p = str(p, t->lock_key);
  return str(p, "mode");
}

static void roundtrip(rt *t, char *end, int nreplies) {
  if (redisAppendFormattedCommand(t->raw, t->out, (size_t)(end - t->out)) != REDIS_OK)
    bgb_die("append: %s%s", t->raw->errstr, NULL);
  for (int i = 0; i < nreplies; i++) {
    redisReply *r = NULL;
    if (redisGetReply(t->raw, (void **)&r) != REDIS_OK) bgb_die("raw: %s%s", t->raw->errstr, NULL);
    if (r->type == REDIS_REPLY_ERROR) bgb_die("server: %s%s", r->str, NULL);
    t->sink += r->elements;
    freeReplyObject(r);
  }
}

static void shape_ping(rt *t) {
  char *p = array(t->out, 1);
  roundtrip(t, str(p, "PING"), 1);
}

static void shape_bitfield(rt *t) { roundtrip(t, bitfield(t, t->out), 1); }

static void shape_multi(rt *t) {
  char *p = str(array(t->out, 1), "MULTI");
  p = bitfield(t, hmget(t, p));
  roundtrip(t, str(array(p, 1), "EXEC"), 4);
}

static void shape_multi3(rt *t) {
  char *p = str(array(t->out, 1), "MULTI");
  p = bitfield(t, hmget3_hget(t, p));
  roundtrip(t, str(array(p, 1), "EXEC"), 5);
}

static void shape_pipe2(rt *t) { roundtrip(t, bitfield(t, hmget(t, t->out)), 2); }

static void shape_evalsha(rt *t) {
  char *p = array(t->out, 7 + 3 * (size_t)t->k);
  p = str(p, "EVALSHA");
  p = str(p, t->sha);
  p = str(p, "2");
  p = str(p, t->name);
  p = str(p, t->config_key);
  p = str(p, t->size_s);
  p = str(p, t->k_s);
  roundtrip(t, get_ops(t, p), 1);
}

static void contains_one(rt *t, bg_filter *f) {
  size_t i = t->cursor;
  int present = 0;
  t->cursor = (t->cursor + 1) % N_ITEMS;
  if (bg_filter_contains(f, t->items[i], t->lens[i], &present) != BG_OK)
    bgb_die("bloomguard: %s%s", bg_filter_errmsg(f), NULL);
  t->sink += (uint64_t)present;
}

static void shape_bg(rt *t) { contains_one(t, t->f); }
static void shape_bgfull(rt *t) { contains_one(t, t->f_full); }

static const struct {
  const char *name;
  shape_fn fn;
  const char *what;
} SHAPES[] = {
    {"ping", shape_ping, "PING"},
    {"bitfield", shape_bitfield, "BITFIELD_RO (raw baseline)"},
    {"multi", shape_multi, "MULTI/HMGET/BITFIELD_RO/EXEC (old, 2 cmds)"},
    {"multi3", shape_multi3, "MULTI/HMGET/HGET lock/BITFIELD_RO/EXEC (now)"},
    {"pipe2", shape_pipe2, "HMGET+BITFIELD_RO, no MULTI (not atomic)"},
    {"evalsha", shape_evalsha, "EVALSHA: HMGET check + BITFIELD_RO"},
    {"bg", shape_bg, "bg_filter_contains (tracking on)"},
    {"bgfull", shape_bgfull, "bg_filter_contains, BG_OPT_TRACKING 0"},
};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0], BASE = 1 };

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--url redis://host:port | unix:///path] [--rounds N (1..%d, default 5)] "
                  "[--seconds S per shape per round (default 1.0)] [--slices N (default 20)]\n", argv0, MAX_ROUNDS);
  exit(2);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int rounds = 5, slices = 20;
  double seconds = 1.0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = strtod(argv[++i], NULL);
    else if (!strcmp(argv[i], "--slices") && i + 1 < argc) slices = atoi(argv[++i]);
    else usage(argv[0]);
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0.01 && seconds <= 30) || slices < 1 || slices > 1000)
    usage(argv[0]);

  bgb_server srv = {0};
  url = bgb_server_or(url, &srv);
  static rt t;
  bg_options *o;
  bg_client *cl, *cl_full;
  char err[512];
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_POOL_SIZE, 1);
  if (bgt_client_open(&cl, url, o, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  bg_options_set_int(o, BG_OPT_TRACKING, 0);
  if (bgt_client_open(&cl_full, url, o, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  bg_options_free(o);
  snprintf(t.name, sizeof t.name, "bloomguard-bench:roundtrip:%ld", (long)getpid());
  snprintf(t.config_key, sizeof t.config_key, "{%s}:config", t.name);
  snprintf(t.lock_key, sizeof t.lock_key, "{%s}:lock", t.name); /* as bgi_key_suffix names it */
  if (bg_filter_open(&t.f, cl, t.name) != BG_OK || bg_filter_open(&t.f_full, cl_full, t.name) != BG_OK)
    bgb_die("bg_filter_open: %s%s", bg_client_errmsg(cl), NULL);
  bg_filter_delete(t.f, NULL);
  if (bg_filter_init(t.f, 1000000, 0.01, NULL) != BG_OK || bg_filter_info(t.f, &t.size, &t.k, NULL, NULL) != BG_OK)
    bgb_die("init: %s%s", bg_filter_errmsg(t.f), NULL);
  if (t.k > K_MAX) bgb_die("k too large%s%s", NULL, NULL);
  snprintf(t.size_s, sizeof t.size_s, "%llu", (unsigned long long)t.size);
  snprintf(t.k_s, sizeof t.k_s, "%u", t.k);
  for (int i = 0; i < N_ITEMS; i++) {
    t.lens[i] = (size_t)snprintf(t.items[i], sizeof t.items[i], "%c:%08d", i % 2 ? 'a' : 'p', i / 2);
    if (i % 2 == 0 && bg_filter_add(t.f, t.items[i], t.lens[i], NULL) != BG_OK)
      bgb_die("add: %s%s", bg_filter_errmsg(t.f), NULL);
  }
  t.raw = bgb_raw_connect(url);
  redisContext *info = bgb_raw_connect(url);
  redisReply *r = redisCommand(t.raw, "SCRIPT LOAD %s", LUA);
  if (!r || r->type != REDIS_REPLY_STRING) bgb_die("SCRIPT LOAD failed%s%s", NULL, NULL);
  snprintf(t.sha, sizeof t.sha, "%s", r->str);
  freeReplyObject(r);

  printf("bench_roundtrip: one item (k=%u) per round trip, one connection per side; server %s%s\n"
         "%d rounds x %.2f s per shape, each cut into %d interleaved slices\n", t.k, url,
         srv.pid ? " (started by the benchmark)" : "", rounds, seconds, slices);

  static double rate[NSHAPES][MAX_ROUNDS], ccpu[NSHAPES][MAX_ROUNDS], scpu[NSHAPES][MAX_ROUNDS];
  for (int i = 0; i < NSHAPES; i++) /* warm-up */
    for (double t0 = bgb_now_s(); bgb_now_s() - t0 < 0.05;) SHAPES[i].fn(&t);
  for (int rd = 0; rd < rounds; rd++) {
    double calls[NSHAPES] = {0}, wall[NSHAPES] = {0}, cpu[NSHAPES] = {0}, sc[NSHAPES] = {0};
    for (int s = 0; s < slices; s++)
      for (int j = 0; j < NSHAPES; j++) {
        int i = (j + s + rd) % NSHAPES;
        double s0 = bgb_server_cpu_s(info), c0 = bgb_cpu_s(), t0 = bgb_now_s(), t1;
        long n = 0;
        do SHAPES[i].fn(&t), n++;
        while ((t1 = bgb_now_s()) - t0 < seconds / slices);
        cpu[i] += bgb_cpu_s() - c0;
        calls[i] += (double)n, wall[i] += t1 - t0;
        sc[i] += bgb_server_cpu_s(info) - s0;
      }
    for (int i = 0; i < NSHAPES; i++) {
      rate[i][rd] = calls[i] / wall[i];
      ccpu[i][rd] = cpu[i] * 1e6 / calls[i];
      scpu[i][rd] = sc[i] * 1e6 / calls[i];
    }
    fprintf(stderr, "  round %d: bitfield %.0f/s, multi %.0f/s, multi3 %.0f/s, bg %.0f/s\n", rd + 1, rate[BASE][rd],
            rate[2][rd], rate[3][rd], rate[NSHAPES - 1][rd]);
  }

  printf("\n%-9s %-42s %9s %8s %9s %11s %11s\n", "shape", "what", "calls/s", "us/call", "ratio", "client us",
         "server us");
  for (int i = 0; i < NSHAPES; i++) {
    double ratio[MAX_ROUNDS];
    for (int rd = 0; rd < rounds; rd++) ratio[rd] = rate[i][rd] / rate[BASE][rd];
    double m = bgb_median(rate[i], rounds);
    printf("%-9s %-42s %9.0f %8.1f %8.3fx %11.2f %11.2f\n", SHAPES[i].name, SHAPES[i].what, m, 1e6 / m,
           bgb_median(ratio, rounds), bgb_median(ccpu[i], rounds), bgb_median(scpu[i], rounds));
  }
  printf("ratio = median of per-round calls/s ratios to `bitfield`; client/server us = CPU per call (medians)\n");

  if (srv.pid) { /* our own server: where its time goes inside the commands, per shape */
    const int n = 5000;
    printf("\nserver time inside the commands (INFO commandstats after %d calls of each shape; EXEC's time\n"
           "includes the commands it runs, EVALSHA's the commands the script calls):\n", n);
    for (int i = 1; i < NSHAPES; i++) {
      r = redisCommand(info, "CONFIG RESETSTAT");
      if (r) freeReplyObject(r);
      for (int j = 0; j < n; j++) SHAPES[i].fn(&t);
      r = redisCommand(info, "INFO commandstats");
      if (!r || r->type != REDIS_REPLY_STRING) bgb_die("INFO commandstats failed%s%s", NULL, NULL);
      printf("  %-9s", SHAPES[i].name);
      for (char *line = strtok(r->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char cmd[64];
        long calls = 0;
        const char *u = strstr(line, "usec=");
        if (sscanf(line, "cmdstat_%63[^:]:calls=%ld", cmd, &calls) == 2 && u && strncmp(cmd, "config", 6) &&
            strcmp(cmd, "info"))
          printf(" %s %.2f", cmd, strtod(u + 5, NULL) / n);
      }
      printf("  (us per call of the shape)\n");
      freeReplyObject(r);
    }
  }

  int64_t tracked = 0;
  bg_filter_stat(t.f, BG_STAT_TRACKED_READS, &tracked);
  printf("\nhiredis %d.%d: the bg shape read the bits alone on %lld calls\n", HIREDIS_MAJOR, HIREDIS_MINOR,
         (long long)tracked);
  bg_filter_delete(t.f, NULL);
  bg_filter_close(t.f_full);
  bg_filter_close(t.f);
  bg_client_close(cl_full);
  bg_client_close(cl);
  redisFree(t.raw);
  redisFree(info);
  if (t.sink == 42) fputc(' ', stderr);
  bgb_server_stop(&srv);
  return 0;
}
