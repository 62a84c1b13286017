/*
 * bench_native_rotate: rebuilding a big native filter (RedisBloom BF.*) of N items, three ways, on
 * one redis-server with RedisBloom loaded, in the same run:
 *  (a) lib       bg_rotation SWAP on a native handle: the items hashed here into the next generation
 *                with the server's MurmurHash and uploaded with BF.LOADCHUNK (nload.c), then RENAME
 *  (b) insert    the same rotation with the bulk load turned off (bgi_nload_fault_no_dump(1)): every
 *                item sent by BF.INSERT into the staging key, as on a server without BF.LOADCHUNK
 *  (c) naive     what users run over raw hiredis: DEL + BF.RESERVE + BF.MADD of --batch items per
 *                command, --depth commands in flight (a pipeline refilled as replies come back)
 * All three build capacity N at --error into a key that held an empty filter of the same parameters
 * (reserved outside the timing). Timed per side: wall clock from the first command to the last
 * reply (for (a)/(b): bg_rotation_begin to the end of bg_rotation_commit), the server's CPU (INFO
 * cpu before and after) and this process' CPU (getrusage; (a) hashes on BG_OPT_ROTATE_THREADS
 * threads). After each side the filter is checked: --check items sampled evenly from the N must all
 * be present and as many never added must show a false-positive rate within 3x --error + 0.5%, so
 * a broken build cannot look fast; a failed check ends the run (exit 1).
 *
 * Items are generated ("i:%010llu"), never stored beyond one 10,000-item chunk.
 * Rounds run the sides in rotating order; the table gives medians of rounds, and the ratios
 * (c)/(a) and (b)/(a) are medians of per-round ratios. Target: (a) at least 20x faster (wall) and
 * 50x less server CPU than (c).
 *
 *   bench_native_rotate [--url redis://host:port] [--n N (10000000)] [--error P (0.01)]
 *                       [--batch B (1000)] [--depth D (16)] [--rounds R (3)] [--threads T (library
 *                       default)] [--check S (10000)] [--sides a,b,c]
 * Exit status: 0 both targets met, 3 a target missed, 1 or 2 on errors.
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"
#include "rotation/rotation.h" /* bgi_nload_fault_no_dump */

#define CHUNK 10000
#define MAX_ROUNDS 21 /* <= BGB_MAX_SAMPLES */
#define MAX_BATCH 100000

enum { S_LIB, S_INSERT, S_NAIVE, NSIDES };
static const char *side_name[NSIDES] = {"(a) lib LOADCHUNK", "(b) lib BF.INSERT", "(c) naive BF.MADD"};

static char name[64];
static long long n_items = 10000000, batch = 1000, depth = 16;
static double error = 0.01;
static int threads = 0;

/* chunk i's items: buf of CHUNK x 16 bytes */
static size_t gen(char *buf, const char **ptrs, size_t *lens, char tag, long long from, long long n) {
  for (long long i = 0; i < n; i++) {
    char *p = buf + i * 16;
    lens[i] = (size_t)snprintf(p, 16, "%c:%010lld", tag, from + i);
    ptrs[i] = p;
  }
  return (size_t)n;
}

static void raw_ok(redisContext *c, redisReply *r, const char *what) {
  if (!r) bgb_die("%s: %s", what, c->errstr);
  if (r->type == REDIS_REPLY_ERROR) bgb_die("%s: %s", what, r->str);
  freeReplyObject(r);
}

/* the live key: an empty filter of the same parameters, so every side replaces the same thing */
static void reset_live(redisContext *c) {
  char cap[24], e[32];
  snprintf(cap, sizeof cap, "%lld", n_items);
  snprintf(e, sizeof e, "%.17g", error);
  raw_ok(c, redisCommand(c, "DEL %s", name), "DEL");
  raw_ok(c, redisCommand(c, "BF.RESERVE %s %s %s", name, e, cap), "BF.RESERVE");
}

typedef struct result {
  double wall, srv, cpu;
} result;

static void run_lib(bg_filter *f, int insert_only, char *buf, const char **ptrs, size_t *lens) {
  bg_options *o = NULL;
  bg_rotation *r = NULL;
  bg_options_new(&o);
  if (threads > 0) bg_options_set_int(o, BG_OPT_ROTATE_THREADS, threads);
  bgi_nload_fault_no_dump(insert_only);
  if (bg_rotation_begin(&r, f, n_items, error, BG_ROTATE_SWAP, o) != BG_OK)
    bgb_die("bg_rotation_begin: %s%s", bg_filter_errmsg(f), NULL);
  for (long long from = 0; from < n_items; from += CHUNK) {
    size_t n = gen(buf, ptrs, lens, 'i', from, n_items - from < CHUNK ? n_items - from : CHUNK);
    if (bg_rotation_add_many(r, (const void *const *)ptrs, lens, n) != BG_OK)
      bgb_die("bg_rotation_add_many: %s%s", bg_rotation_errmsg(r), NULL);
  }
  if (bg_rotation_commit(r) != BG_OK) bgb_die("bg_rotation_commit: %s%s", bg_rotation_errmsg(r), NULL);
  bg_rotation_free(r);
  bgi_nload_fault_no_dump(0);
  bg_options_free(o);
}

static void naive_reply(redisContext *c) {
  redisReply *r = NULL;
  if (redisGetReply(c, (void **)&r) != REDIS_OK) bgb_die("naive: %s%s", c->errstr, NULL);
  if (r->type != REDIS_REPLY_ARRAY) bgb_die("naive: BF.MADD answered %s%s", r->type == REDIS_REPLY_ERROR ? r->str : "?", NULL);
  freeReplyObject(r);
}

static void run_naive(redisContext *c, char *buf, const char **ptrs, size_t *lens) {
  const char **argv = malloc((size_t)(batch + 2) * sizeof *argv);
  size_t *argl = malloc((size_t)(batch + 2) * sizeof *argl);
  if (!argv || !argl) bgb_die("out of memory%s%s", NULL, NULL);
  char cap[24], e[32];
  snprintf(cap, sizeof cap, "%lld", n_items);
  snprintf(e, sizeof e, "%.17g", error);
  raw_ok(c, redisCommand(c, "DEL %s", name), "DEL");
  raw_ok(c, redisCommand(c, "BF.RESERVE %s %s %s", name, e, cap), "BF.RESERVE");
  argv[0] = "BF.MADD", argl[0] = 7, argv[1] = name, argl[1] = strlen(name);
  long long pending = 0;
  /* commands are copied into hiredis' output buffer at append: the chunk buffer is reused at once */
  for (long long from = 0; from < n_items;) {
    long long n = n_items - from < CHUNK ? n_items - from : CHUNK;
    gen(buf, ptrs, lens, 'i', from, n);
    for (long long off = 0; off < n; off += batch) {
      long long m = n - off < batch ? n - off : batch;
      for (long long j = 0; j < m; j++) argv[2 + j] = ptrs[off + j], argl[2 + j] = lens[off + j];
      if (redisAppendCommandArgv(c, 2 + (int)m, argv, argl) != REDIS_OK) bgb_die("naive: append: %s%s", c->errstr, NULL);
      if (++pending >= depth) naive_reply(c), pending--;
    }
    from += n;
  }
  while (pending > 0) naive_reply(c), pending--;
  free(argv);
  free(argl);
}

/* --check present items sampled evenly must all be there; as many absent ones bound the fp rate */
static void check(redisContext *c, long long samples, const char *side) {
  long long missing = 0, fp = 0;
  for (int absent = 0; absent < 2; absent++) {
    for (long long s = 0; s < samples; s += 100) {
      const char *argv[102];
      size_t argl[102];
      char bufs[100][32];
      int m = 0;
      argv[0] = "BF.MEXISTS", argl[0] = 10, argv[1] = name, argl[1] = strlen(name);
      for (; m < 100 && s + m < samples; m++) {
        long long k = absent ? s + m : (s + m) * (n_items / samples);
        argl[2 + m] = (size_t)snprintf(bufs[m], sizeof bufs[m], "%c:%010lld", absent ? 'x' : 'i', k);
        argv[2 + m] = bufs[m];
      }
      redisReply *r = redisCommandArgv(c, 2 + m, argv, argl);
      if (!r || r->type != REDIS_REPLY_ARRAY || (int)r->elements != m)
        bgb_die("check: BF.MEXISTS failed after %s%s", side, NULL);
      for (int j = 0; j < m; j++) {
        if (absent) fp += r->element[j]->integer == 1;
        else missing += r->element[j]->integer != 1;
      }
      freeReplyObject(r);
    }
  }
  double rate = (double)fp / (double)samples;
  if (missing || rate > 3 * error + 0.005) {
    fprintf(stderr, "bench_native_rotate: %s built a wrong filter: %lld of %lld sampled items absent, false-positive "
                    "rate %.4f (error %g)\n", side, missing, samples, rate, error);
    exit(1);
  }
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--url redis://host:port] [--n N (10000000)] [--error P (0.01)] [--batch B (1000)]\n"
                  "          [--depth D (16)] [--rounds R (1..%d, 3)] [--threads T] [--check S (10000)] [--sides a,b,c]\n",
          argv0, MAX_ROUNDS);
  exit(2);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int rounds = 3, want[NSIDES] = {1, 1, 1};
  long long samples = 10000;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc) n_items = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--error") && i + 1 < argc) error = atof(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--depth") && i + 1 < argc) depth = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--check") && i + 1 < argc) samples = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--sides") && i + 1 < argc) {
      const char *s = argv[++i];
      want[S_LIB] = strchr(s, 'a') != NULL, want[S_INSERT] = strchr(s, 'b') != NULL, want[S_NAIVE] = strchr(s, 'c') != NULL;
    } else usage(argv[0]);
  }
  if (n_items < 1000 || n_items > 2000000000LL || !(error > 0 && error < 1) || batch < 1 || batch > MAX_BATCH ||
      depth < 1 || depth > 100000 || rounds < 1 || rounds > MAX_ROUNDS || threads < 0 || samples < 100 ||
      samples > n_items)
    usage(argv[0]);

  bgb_server srv = {0};
  url = bgb_server_or_bloom(url, &srv);
  snprintf(name, sizeof name, "bloomguard-bench:nrotate:%ld", (long)getpid());

  bg_client *cl = NULL;
  bg_filter *f = NULL;
  char err[512];
  if (bgt_client_open(&cl, url, NULL, err, sizeof err) != BG_OK) bgb_die("bg_client_open %s: %s", url, err);
  if (bg_filter_open_native(&f, cl, name) != BG_OK) bgb_die("bg_filter_open_native: %s%s", bg_client_errmsg(cl), NULL);
  redisContext *raw = bgb_raw_connect(url), *info = bgb_raw_connect(url);
  char *buf = malloc((size_t)CHUNK * 16);
  const char **ptrs = malloc(CHUNK * sizeof *ptrs);
  size_t *lens = malloc(CHUNK * sizeof *lens);
  if (!buf || !ptrs || !lens) bgb_die("out of memory%s%s", NULL, NULL);

  printf("bench_native_rotate: server %s%s; N=%lld error %g; naive: BF.MADD x %lld, %lld in flight; %d round(s)\n",
         url, srv.pid ? " (started by the benchmark, RedisBloom loaded)" : "", n_items, error, batch, depth, rounds);
  result res[NSIDES][MAX_ROUNDS];
  double ratio_wall[NSIDES][MAX_ROUNDS], ratio_srv[NSIDES][MAX_ROUNDS];
  memset(res, 0, sizeof res);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < NSIDES; k++) {
      int s = (r + k) % NSIDES;
      if (!want[s]) continue;
      reset_live(raw);
      double srv0 = bgb_server_cpu_s(info), cpu0 = bgb_cpu_s(), t0 = bgb_now_s();
      if (s == S_NAIVE) run_naive(raw, buf, ptrs, lens);
      else run_lib(f, s == S_INSERT, buf, ptrs, lens);
      res[s][r].wall = bgb_now_s() - t0;
      res[s][r].cpu = bgb_cpu_s() - cpu0;
      res[s][r].srv = bgb_server_cpu_s(info) - srv0;
      check(raw, samples, side_name[s]);
      fprintf(stderr, "  round %d %-18s wall %8.3f s  server CPU %8.3f s  client CPU %8.3f s  (checked)\n", r + 1,
              side_name[s], res[s][r].wall, res[s][r].srv, res[s][r].cpu);
    }
    for (int s = 0; s < NSIDES; s++) {
      ratio_wall[s][r] = want[s] && want[S_LIB] ? res[s][r].wall / res[S_LIB][r].wall : 0;
      ratio_srv[s][r] = want[s] && want[S_LIB] && res[S_LIB][r].srv > 0 ? res[s][r].srv / res[S_LIB][r].srv : 0;
    }
  }

  printf("\n%-18s %10s %12s %12s %10s %10s\n", "side", "wall s", "server CPU s", "client CPU s", "wall/(a)", "srv/(a)");
  for (int s = 0; s < NSIDES; s++) {
    if (!want[s]) continue;
    double w[MAX_ROUNDS], sv[MAX_ROUNDS], c[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) w[r] = res[s][r].wall, sv[r] = res[s][r].srv, c[r] = res[s][r].cpu;
    printf("%-18s %10.3f %12.3f %12.3f %9.2fx %9.2fx\n", side_name[s], bgb_median(w, rounds), bgb_median(sv, rounds),
           bgb_median(c, rounds), bgb_median(ratio_wall[s], rounds), bgb_median(ratio_srv[s], rounds));
  }
  int pass = 1;
  if (want[S_LIB] && want[S_NAIVE]) {
    double rw = bgb_median(ratio_wall[S_NAIVE], rounds), rs = bgb_median(ratio_srv[S_NAIVE], rounds);
    pass = rw >= 20 && rs >= 50;
    printf("\n(c)/(a): wall %.2fx (target >= 20x: %s), server CPU %.2fx (target >= 50x: %s)\n", rw,
           rw >= 20 ? "pass" : "MISS", rs, rs >= 50 ? "pass" : "MISS");
  }
  if (want[S_LIB] && want[S_INSERT])
    printf("(b)/(a): wall %.2fx, server CPU %.2fx (no target: what a server without BF.LOADCHUNK costs)\n",
           bgb_median(ratio_wall[S_INSERT], rounds), bgb_median(ratio_srv[S_INSERT], rounds));
  printf("every side's filter checked after it: %lld sampled items present, false-positive rate of %lld absent "
         "within 3x error + 0.5%%\n", samples, samples);

  raw_ok(raw, redisCommand(raw, "DEL %s", name), "DEL");
  bg_filter_close(f);
  bg_client_close(cl);
  redisFree(raw);
  redisFree(info);
  free(buf);
  free(ptrs);
  free(lens);
  bgb_server_stop(&srv);
  return pass ? 0 : 3;
}
