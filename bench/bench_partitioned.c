/*
 * bench_partitioned: a partitioned filter (bg_filter_init_partitioned, P partitions spread over the
 * masters) against a plain filter of the same (n, p), on the same Redis Cluster, the same client,
 * in the same run. Run by hand (bench/README.md); not a test.
 *
 *   bench_partitioned [--url redis://h:p[,h:p...]] [--items N (1000000)] [--fpp P (0.01)]
 *                     [--partitions P (128)] [--added A (200000)] [--rounds R (5)] [--seconds S (0.5)]
 *                     [--slices K (4)] [--threads T (8)] [--inflight Q (256)] [--batch-inflight B (8)]
 *                     [--cpu-queries N (200000)] [--cpu-reps R (3)] [--rot-reps R (3)]
 *                     [--server-cpu C (0)] [--client-cpu C (1)] [--no-pin] [--no-spread]
 *
 * Without --url it starts a 6-node cluster of its own (3 masters + 3 replicas, the C tests'
 * fixture: children of this process, killed with it) and pins every node to --server-cpu and
 * itself to --client-cpu. With --url it pins only itself (the servers are not its children).
 * --url of a cluster with ONE master is the control: the same code paths with nothing to spread
 * over (no spread side, no part 2), so what is left of the ratio is the partitioned path's cost.
 *
 * 1. Throughput. Both filters hold the same A added items; the queries walk one fixed sequence
 *    that alternates added and never-added items. Cases: single-item blocking calls on 1 and T
 *    threads, single items on a submission queue (bg_queue, Q in flight, one thread), batches of
 *    100 and 1000 by a blocking call, batches of 100 on a queue (B in flight). Each round gives
 *    each side S seconds cut into K slices taken in turn (the side that starts alternates), so both
 *    see the same background load; the ratio partitioned / plain is the median of the per-round
 *    ratios; target >= 0.95. Also client CPU (getrusage) and server CPU (INFO cpu summed over the
 *    masters) per item.
 * 2. Server CPU per master under a one-filter load: N single-item queries on a queue (Q in
 *    flight) at ONE plain filter, then at ONE partitioned filter (R repetitions, alternating), each
 *    master's used_cpu_sys + used_cpu_user before and after. Each master's share of the CPU the
 *    masters spent, raw and net of their idle rate (measured for 1 s before); target for the
 *    partitioned filter: every master's net share within +-20 % of an even share.
 * 3. Rotation (SWAP) of a plain filter of one partition's size (n/P, p, holding A/P items) against
 *    the partitioned filter's rotation (n, p, P, holding A items): total and per partition. A
 *    library whose rotation refuses a partitioned filter (BG_ENOTSUP) is reported and skipped.
 *
 * Exit status: 0 if every target is met, 3 if one is missed, 1 or 2 on errors (a false negative,
 * a failed call).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity (bg_test_support defines it for its users) */
#endif
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomguard.h"
#include "cluster_fixture.h"

#define MAX_ROUNDS 21
#define MAX_SLICES 20
#define MAX_THREADS 64
#define MAX_MASTERS 16
#define MAX_BATCH 1000
#define MAX_INFLIGHT 4096
#define TARGET_RATIO 0.95
#define EVEN_TOLERANCE 0.20

/* PLAIN and PART are compared; SPREAD (single-item cases) is the reference that tells what the
 * topology costs apart from the partitioned code path: one plain filter on each master, of
 * (n / masters, p), each item routed to one of them by the benchmark (item i to filter i mod M). */
enum { PLAIN, PART, SPREAD, NSIDES, N_ONE = SPREAD /* the one-filter sides */ };
static const char *side_name[NSIDES] = {"plain", "partitioned", "spread"};

typedef struct target {
  int nf;
  bg_filter *f[MAX_MASTERS];
} target;

/* The filter that holds the item at sequence position pos. */
static bg_filter *pick(const target *t, size_t pos) { return t->f[(pos / 2) % (size_t)t->nf]; }

/* ---- items ------------------------------------------------------------------------------------ */

/* seq[j]: j even -> added item j/2, j odd -> never-added item; the first MAX_BATCH entries repeat
 * at the end, so a batch starting anywhere below 2A is one contiguous slice. */
static char (*text)[16];
static const void **seq;
static size_t *seq_len;
static size_t n_added, n_seq;

static void make_items(size_t added) {
  n_added = added;
  n_seq = 2 * added;
  text = malloc(n_seq * sizeof *text);
  seq = malloc((n_seq + MAX_BATCH) * sizeof *seq);
  seq_len = malloc((n_seq + MAX_BATCH) * sizeof *seq_len);
  if (!text || !seq || !seq_len) bgb_die("out of memory%s%s", NULL, NULL);
  for (size_t j = 0; j < n_seq; j++) {
    seq_len[j] = (size_t)snprintf(text[j], sizeof text[j], "%c:%08zu", j % 2 ? 'a' : 'p', j / 2);
    seq[j] = text[j];
  }
  for (size_t j = 0; j < MAX_BATCH; j++) seq[n_seq + j] = seq[j], seq_len[n_seq + j] = seq_len[j];
}

/* ---- the masters' CPU ------------------------------------------------------------------------- */

static int n_masters;
static int with_spread = 1;   /* --no-spread, or one master */
static char master_addr[MAX_MASTERS][400];   /* a host (< 256) and a port */
static redisContext *master_info[MAX_MASTERS];

/* The live masters from CLUSTER NODES of the first seed, each with a raw connection for INFO. */
static void find_masters(const char *url) {
  char first[256];
  snprintf(first, sizeof first, "%.*s", (int)strcspn(url, ","), url);
  redisContext *c = bgb_raw_connect(first);
  redisReply *r = redisCommand(c, "CLUSTER NODES");
  if (!r || r->type != REDIS_REPLY_STRING) bgb_die("CLUSTER NODES failed on %s%s (not a cluster?)", first, NULL);
  for (char *line = strtok(r->str, "\n"); line && n_masters < MAX_MASTERS; line = strtok(NULL, "\n")) {
    char id[64], addr[128], flags[128];
    if (sscanf(line, "%63s %127s %127s", id, addr, flags) != 3) continue;
    if (!strstr(flags, "master") || strstr(flags, "fail")) continue;
    addr[strcspn(addr, "@")] = 0;
    if (addr[0] == ':') {   /* a node that never met another does not know its own IP: the seed's */
      const char *host = strstr(first, "://") ? strstr(first, "://") + 3 : first;
      snprintf(master_addr[n_masters], sizeof master_addr[0], "%.*s%s", (int)(strrchr(host, ':') - host), host, addr);
    } else {
      snprintf(master_addr[n_masters], sizeof master_addr[0], "%s", addr);
    }
    n_masters++;
  }
  freeReplyObject(r);
  redisFree(c);
  /* a stable order, by address */
  for (int i = 0; i < n_masters; i++)
    for (int j = i + 1; j < n_masters; j++)
      if (strcmp(master_addr[j], master_addr[i]) < 0) {
        char t[sizeof master_addr[0]];
        memcpy(t, master_addr[i], sizeof t), memcpy(master_addr[i], master_addr[j], sizeof t),
            memcpy(master_addr[j], t, sizeof t);
      }
  for (int i = 0; i < n_masters; i++) {
    char u[sizeof master_addr[0] + 8];
    snprintf(u, sizeof u, "redis://%.399s", master_addr[i]);
    master_info[i] = bgb_raw_connect(u);
  }
  if (n_masters < 1) bgb_die("the cluster has no master%s%s", NULL, NULL);
  /* one master (--url): the control that separates the partitioned code path's cost from what
   * spreading costs; there is nothing to spread over, so no spread side and no part 2 */
  if (n_masters == 1) with_spread = 0;
}

/* Each master's CPU seconds into per[]; returns their sum. */
static double masters_cpu(double *per) {
  double sum = 0;
  for (int i = 0; i < n_masters; i++) sum += per[i] = bgb_server_cpu_s(master_info[i]);
  return sum;
}

static int master_index(const char *addr) {
  for (int i = 0; i < n_masters; i++)
    if (!strcmp(master_addr[i], addr)) return i;
  return -1;
}

/* The masters' INFO commandstats summed: calls and usec per command. */
#define MAX_CMDS 64
typedef struct cmdstats {
  int n;
  char name[MAX_CMDS][40];
  double calls[MAX_CMDS], usec[MAX_CMDS];
} cmdstats;

static void cmdstats_read(cmdstats *cs) {
  memset(cs, 0, sizeof *cs);
  for (int i = 0; i < n_masters; i++) {
    redisReply *r = redisCommand(master_info[i], "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) bgb_die("INFO commandstats failed on %s%s", master_addr[i], NULL);
    for (char *p = strstr(r->str, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
      char name[40];
      double calls = 0, usec = 0;
      if (sscanf(p, "cmdstat_%39[^:]:calls=%lf,usec=%lf", name, &calls, &usec) != 3) continue;
      int j = 0;
      while (j < cs->n && strcmp(cs->name[j], name)) j++;
      if (j == cs->n) {
        if (cs->n == MAX_CMDS) continue;
        snprintf(cs->name[cs->n++], sizeof cs->name[0], "%s", name);
      }
      cs->calls[j] += calls, cs->usec[j] += usec;
    }
    freeReplyObject(r);
  }
}

/* Prints the commands the masters ran between a and b, per query, leaving out the benchmark's own
 * INFO. */
static void cmdstats_print(const char *label, const cmdstats *a, const cmdstats *b, double queries) {
  printf("%s, per query:", label);
  for (int j = 0; j < b->n; j++) {
    double calls = b->calls[j], usec = b->usec[j];
    for (int i = 0; i < a->n; i++)
      if (!strcmp(a->name[i], b->name[j])) calls -= a->calls[i], usec -= a->usec[i];
    if (calls <= 0 || !strcmp(b->name[j], "info")) continue;
    printf(" %s %.3f (%.2f µs inside)", b->name[j], calls / queries, usec / queries);
  }
  printf("\n");
}

/* ---- loads ------------------------------------------------------------------------------------ */

typedef struct load {
  const char *label;
  int queue;      /* 0: blocking calls on `threads` threads; 1: one thread driving a bg_queue */
  int threads;
  int batch;      /* items per call (1: bg_filter_contains / _submit) */
  int inflight;   /* queue: operations kept in flight */
} load;

typedef struct tally {
  uint64_t items, false_neg, errors;
  char first_error[256];
} tally;

/* Checks one answer: an added item (even position) must be present; an absent one may be. */
static void check(tally *t, size_t pos, int present) {
  if (pos % 2 == 0 && !present) t->false_neg++;
}

static void note_error(tally *t, const char *msg) {
  if (!t->errors++) snprintf(t->first_error, sizeof t->first_error, "%s", msg);
}

typedef struct worker {
  const target *tg;
  const load *l;
  double end;
  size_t pos;
  tally t;
} worker;

static void *blocking_worker(void *arg) {
  worker *w = arg;
  uint8_t present[MAX_BATCH];
  size_t b = (size_t)w->l->batch;
  while (bgb_now_s() < w->end) {
    for (int j = 0; j < (b == 1 ? 32 : 1); j++) {
      size_t pos = w->pos;
      w->pos = (w->pos + b) % n_seq;
      if (b == 1) {
        int yes = 0;
        bg_filter *f = pick(w->tg, pos);
        if (bg_filter_contains(f, seq[pos], seq_len[pos], &yes) != BG_OK) {
          note_error(&w->t, bg_filter_errmsg(f));
          continue;
        }
        check(&w->t, pos, yes);
      } else {
        bg_filter *f = w->tg->f[0];   /* batches: PLAIN and PART only (one filter) */
        if (bg_filter_contains_many(f, seq + pos, seq_len + pos, b, present) != BG_OK) {
          note_error(&w->t, bg_filter_errmsg(f));
          continue;
        }
        for (size_t i = 0; i < b; i++) check(&w->t, (pos + i) % n_seq, present[i]);
      }
      w->t.items += b;
    }
  }
  return NULL;
}

static int submit(const target *tg, bg_queue *q, const load *l, size_t pos) {
  if (l->batch == 1) return bg_filter_contains_submit(pick(tg, pos), q, pos, seq[pos], seq_len[pos]);
  return bg_filter_contains_many_submit(tg->f[0], q, pos, seq + pos, seq_len + pos, (size_t)l->batch);
}

/* One thread keeps l->inflight operations in flight on a queue until `end`, or until `limit`
 * items were asked (0: no limit), then drains. */
static void run_queue(const target *tg, bg_client *c, const load *l, double end, uint64_t limit, size_t *pos,
                      tally *t) {
  bg_queue *q = NULL;
  if (bg_queue_open(&q, c) != BG_OK) bgb_die("bg_queue_open: %s%s", bg_client_errmsg(c), NULL);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, bg_queue_fd(q), &ev);
  size_t b = (size_t)l->batch;
  uint64_t pending = 0, asked = 0;
  int stopping = 0;
  for (int i = 0; i < l->inflight && (!limit || asked < limit); i++) {
    if (submit(tg, q, l, *pos) != BG_OK) bgb_die("submit: %s%s", bg_queue_errmsg(q), NULL);
    *pos = (*pos + b) % n_seq, pending++, asked += b;
  }
  while (pending > 0) {
    struct epoll_event got;
    epoll_wait(ep, &got, 1, 100);
    bg_completion *cs[256];
    size_t n = 0;
    bg_queue_poll(q, 0, cs, 256, &n);
    if (!stopping && ((limit && asked >= limit) || bgb_now_s() >= end)) stopping = 1;
    for (size_t i = 0; i < n; i++) {
      size_t at = (size_t)bg_completion_tag(cs[i]);
      pending--;
      if (bg_completion_status(cs[i]) != BG_OK) {
        note_error(t, bg_completion_errmsg(cs[i]));
      } else if (b == 1) {
        check(t, at, bg_completion_value(cs[i]) != 0);
        t->items++;
      } else {
        size_t m = 0;
        const uint8_t *p = bg_completion_present(cs[i], &m);
        for (size_t k = 0; k < m; k++) check(t, (at + k) % n_seq, p[k]);
        t->items += m;
      }
      if (!stopping) {
        if (submit(tg, q, l, *pos) != BG_OK) bgb_die("submit: %s%s", bg_queue_errmsg(q), NULL);
        *pos = (*pos + b) % n_seq, pending++, asked += b;
      }
    }
  }
  bg_queue_close(q);
  close(ep);
}

/* Runs load l on f for `seconds`; adds to *t. pos[] carries each thread's place in the sequence
 * from one slice to the next. */
static void run_load(const target *tg, bg_client *c, const load *l, double seconds, size_t *pos, tally *t) {
  double end = bgb_now_s() + seconds;
  if (l->queue) {
    run_queue(tg, c, l, end, 0, &pos[0], t);
    return;
  }
  worker w[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  for (int i = 0; i < l->threads; i++) {
    w[i] = (worker){.tg = tg, .l = l, .end = end, .pos = pos[i]};
    if (pthread_create(&th[i], NULL, blocking_worker, &w[i]) != 0) bgb_die("pthread_create failed%s%s", NULL, NULL);
  }
  for (int i = 0; i < l->threads; i++) {
    pthread_join(th[i], NULL);
    pos[i] = w[i].pos;
    t->items += w[i].t.items, t->false_neg += w[i].t.false_neg;
    if (w[i].t.errors && !t->errors) snprintf(t->first_error, sizeof t->first_error, "%s", w[i].t.first_error);
    t->errors += w[i].t.errors;
  }
}

static int bad_answers(const char *what, const tally *t) {
  if (!t->false_neg && !t->errors) return 0;
  fprintf(stderr, "bench: %s: %llu false negatives, %llu failed calls%s%s\n", what, (unsigned long long)t->false_neg,
          (unsigned long long)t->errors, t->errors ? "; first: " : "", t->first_error);
  return 1;
}

/* ---- part 1: throughput ----------------------------------------------------------------------- */

static int rounds = 5, slices = 4;
static double seconds = 0.5;

/* "1.234" of a ratio's median, or "-" when the side did not run. */
static void print_range(const double *v, int n) {
  double lo = v[0], hi = v[0];
  for (int r = 1; r < n; r++) lo = v[r] < lo ? v[r] : lo, hi = v[r] > hi ? v[r] : hi;
  printf(" (%.3f-%.3f)", lo, hi);
}

/* Returns 1 if the target is met, 0 if missed; exits on wrong answers. */
static int throughput_case(const target *tg, bg_client *c, const load *l) {
  double rate[NSIDES][MAX_ROUNDS], cli_us[NSIDES][MAX_ROUNDS], srv_us[NSIDES][MAX_ROUNDS];
  double ratio[NSIDES][MAX_ROUNDS];
  size_t pos[NSIDES][MAX_THREADS];
  int sides[NSIDES] = {PLAIN, PART, SPREAD}, nsides = with_spread && l->batch == 1 ? 3 : 2;
  for (int s = 0; s < NSIDES; s++)
    for (int i = 0; i < MAX_THREADS; i++) pos[s][i] = (n_seq / MAX_THREADS * (size_t)i) & ~(size_t)1;
  for (int o = 0; o < nsides; o++) {   /* warm: connections, tracking verdicts */
    tally t = {0};
    run_load(&tg[sides[o]], c, l, 0.2, pos[sides[o]], &t);
    if (bad_answers(l->label, &t)) exit(1);
  }
  double per[MAX_MASTERS];
  for (int r = 0; r < rounds; r++) {
    tally t[NSIDES] = {{0}};
    double wall[NSIDES] = {0}, cli[NSIDES] = {0}, srv[NSIDES] = {0};
    for (int k = 0; k < slices; k++) {
      for (int o = 0; o < nsides; o++) {
        int s = sides[(r + k + o) % nsides];
        double s0 = masters_cpu(per), c0 = bgb_cpu_s(), t0 = bgb_now_s();
        run_load(&tg[s], c, l, seconds / slices, pos[s], &t[s]);
        wall[s] += bgb_now_s() - t0, cli[s] += bgb_cpu_s() - c0, srv[s] += masters_cpu(per) - s0;
      }
    }
    for (int o = 0; o < nsides; o++) {
      int s = sides[o];
      if (bad_answers(l->label, &t[s])) exit(1);
      rate[s][r] = (double)t[s].items / wall[s];
      cli_us[s][r] = cli[s] * 1e6 / (double)t[s].items;
      srv_us[s][r] = srv[s] * 1e6 / (double)t[s].items;
      ratio[s][r] = rate[s][r] / rate[PLAIN][r];
    }
  }
  double med = bgb_median(ratio[PART], rounds);
  int met = med >= TARGET_RATIO;
  printf("| %s | %.0f | %.0f | **%.3fx**", l->label, bgb_median(rate[PLAIN], rounds), bgb_median(rate[PART], rounds),
         med);
  print_range(ratio[PART], rounds);
  printf(" %s |", met ? "met" : "MISS");
  if (nsides == 3) {
    printf(" %.0f | %.3fx", bgb_median(rate[SPREAD], rounds), bgb_median(ratio[SPREAD], rounds));
    print_range(ratio[SPREAD], rounds);
    printf(" |");
  } else {
    printf(" - | - |");
  }
  for (int u = 0; u < 2; u++) {
    double (*v)[MAX_ROUNDS] = u ? srv_us : cli_us;
    printf(" %.2f / %.2f", bgb_median(v[PLAIN], rounds), bgb_median(v[PART], rounds));
    if (nsides == 3) printf(" / %.2f", bgb_median(v[SPREAD], rounds));
    printf(" |");
  }
  printf("\n");
  return met;
}

/* ---- part 2: the CPU of each master under one filter's load ----------------------------------- */

static int cpu_per_master(const target *tg, bg_client *c, int inflight, uint64_t queries, int reps,
                          const char *plain_node) {
  load l = {.label = "cpu", .queue = 1, .batch = 1, .inflight = inflight};
  double idle0[MAX_MASTERS], idle1[MAX_MASTERS], idle_rate[MAX_MASTERS];
  double t0 = bgb_now_s();
  masters_cpu(idle0);
  usleep(1000000);
  masters_cpu(idle1);
  double idle_wall = bgb_now_s() - t0;
  for (int i = 0; i < n_masters; i++) idle_rate[i] = (idle1[i] - idle0[i]) / idle_wall;

  double used[N_ONE][MAX_MASTERS] = {{0}}, wall[N_ONE] = {0};
  cmdstats cs0[N_ONE], cs1[N_ONE];
  uint64_t done[N_ONE] = {0};
  size_t pos[N_ONE] = {0, 0};
  for (int r = 0; r < reps; r++) {
    for (int o = 0; o < N_ONE; o++) {
      int s = (r + o) % 2;
      double a[MAX_MASTERS], b[MAX_MASTERS];
      tally t = {0};
      if (r == 0) cmdstats_read(&cs0[s]);
      masters_cpu(a);
      double w0 = bgb_now_s();
      run_queue(&tg[s], c, &l, w0 + 30.0, queries, &pos[s], &t);   /* bounded: 30 s at most */
      wall[s] += bgb_now_s() - w0;
      masters_cpu(b);
      if (r == 0) cmdstats_read(&cs1[s]);
      if (bad_answers("cpu load", &t)) exit(1);
      done[s] += t.items;
      for (int i = 0; i < n_masters; i++) used[s][i] += b[i] - a[i];
    }
  }
  printf("\n%d x %llu single-item queries per side on a queue (%d in flight), one filter each; plain filter on %s.\n",
         reps, (unsigned long long)queries, inflight, plain_node);
  printf("Share = the master's CPU / all masters' CPU; net = minus its idle rate x the load's wall time.\n\n");
  printf("| master | idle µs/s |");
  for (int s = 0; s < N_ONE; s++) printf(" %s CPU ms | share | net share |", side_name[s]);
  printf("\n|---|---:|");
  for (int s = 0; s < N_ONE; s++) printf("---:|---:|---:|");
  printf("\n");
  double tot[N_ONE] = {0}, net_tot[N_ONE] = {0}, net[N_ONE][MAX_MASTERS];
  for (int s = 0; s < N_ONE; s++)
    for (int i = 0; i < n_masters; i++) {
      net[s][i] = used[s][i] - idle_rate[i] * wall[s];
      if (net[s][i] < 0) net[s][i] = 0;
      tot[s] += used[s][i], net_tot[s] += net[s][i];
    }
  int even = 1;
  for (int i = 0; i < n_masters; i++) {
    printf("| %s%s | %.0f |", master_addr[i], !strcmp(master_addr[i], plain_node) ? " (plain's)" : "",
           idle_rate[i] * 1e6);
    for (int s = 0; s < N_ONE; s++)
      printf(" %.1f | %.1f %% | %.1f %% |", used[s][i] * 1e3, 100 * used[s][i] / tot[s], 100 * net[s][i] / net_tot[s]);
    printf("\n");
    double dev = net[PART][i] / net_tot[PART] * n_masters - 1;
    if (dev > EVEN_TOLERANCE || dev < -EVEN_TOLERANCE) even = 0;
  }
  double worst = 0;
  for (int i = 0; i < n_masters; i++) {
    double dev = net[PART][i] / net_tot[PART] * n_masters - 1;
    if (dev < 0) dev = -dev;
    if (dev > worst) worst = dev;
  }
  printf("\nserver CPU per query (all masters): plain %.2f µs, partitioned %.2f µs; queries/s plain %.0f, "
         "partitioned %.0f\n",
         tot[PLAIN] * 1e6 / (double)done[PLAIN], tot[PART] * 1e6 / (double)done[PART], (double)done[PLAIN] / wall[PLAIN],
         (double)done[PART] / wall[PART]);
  for (int s = 0; s < N_ONE; s++) {
    uint64_t q1 = (uint64_t)(done[s] / (uint64_t)reps);
    cmdstats_print(side_name[s], &cs0[s], &cs1[s], (double)q1);
  }
  printf("partitioned: the largest deviation of a master's net share from even (1/%d): %.1f %% "
         "(target <= %.0f %%: %s)\n",
         n_masters, 100 * worst, 100 * EVEN_TOLERANCE, even ? "met" : "MISS");
  return even;
}

/* ---- part 3: rotation ------------------------------------------------------------------------- */

/* One SWAP rotation of f to (n, p) fed with the first `count` added items (seq[0], seq[2], ...);
 * seconds, or -1 with the status in *st and the message in msg. Afterwards every one of those
 * items must answer present (a false negative ends the benchmark). */
static double rotate_once(bg_filter *f, int64_t n, double p, size_t count, int *st, char *msg, size_t cap) {
  enum { CHUNK = 10000 };
  static const void *items[CHUNK];
  static size_t lens[CHUNK];
  static uint8_t present[CHUNK];
  bg_rotation *r = NULL;
  double t0 = bgb_now_s();
  *st = bg_rotation_begin(&r, f, n, p, BG_ROTATE_SWAP, NULL);
  if (*st != BG_OK) {
    snprintf(msg, cap, "%s", bg_filter_errmsg(f));
    return -1;
  }
  for (size_t done = 0; done < count && *st == BG_OK;) {
    size_t m = 0;
    for (; m < CHUNK && done < count; m++, done++) items[m] = seq[2 * done], lens[m] = seq_len[2 * done];
    *st = bg_rotation_add_many(r, items, lens, m);
  }
  if (*st == BG_OK) *st = bg_rotation_commit(r);
  if (*st != BG_OK) snprintf(msg, cap, "%s", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  if (*st != BG_OK) return -1;
  double took = bgb_now_s() - t0;
  for (size_t done = 0; done < count;) {
    size_t m = 0, at = done;
    for (; m < CHUNK && done < count; m++, done++) items[m] = seq[2 * done], lens[m] = seq_len[2 * done];
    if (bg_filter_contains_many(f, items, lens, m, present) != BG_OK)
      bgb_die("contains after the rotation: %s%s", bg_filter_errmsg(f), NULL);
    for (size_t i = 0; i < m; i++)
      if (!present[i]) bgb_die("after the rotation an added item answers absent: %s%s", text[2 * (at + i)], NULL);
  }
  return took;
}

/*
 * ==== ROTATION: partitioned vs plain of one partition's size ====================================
 * A partitioned filter's rotation (rotation.h) is being implemented; until it lands,
 * bg_rotation_begin refuses one with BG_ENOTSUP and this part reports that and goes on. Nothing
 * here needs to change when it lands: the same bg_rotation_begin / add_many / commit.
 */
static void rotation_part(bg_client *c, bg_filter *pf, const char *prefix, int64_t n, double p, int64_t parts,
                          uint64_t part_bits, int reps) {
  char name[160];
  snprintf(name, sizeof name, "%s:rot-plain", prefix);
  bg_filter *sf = NULL;
  if (bg_filter_open(&sf, c, name) != BG_OK) bgb_die("open: %s%s", bg_client_errmsg(c), NULL);
  bg_filter_delete(sf, NULL);
  int64_t n_small = n / parts > 0 ? n / parts : 1;
  size_t items_small = n_added / (size_t)parts;
  double t_plain[MAX_ROUNDS], t_part[MAX_ROUNDS];
  int st = BG_OK, part_ok = 1, np = 0;
  char msg[512] = "";
  if (reps > MAX_ROUNDS) reps = MAX_ROUNDS;
  for (int r = 0; r < reps; r++) {
    t_plain[r] = rotate_once(sf, n_small, p, items_small, &st, msg, sizeof msg);
    if (t_plain[r] < 0) bgb_die("plain rotation failed: %s%s", msg, NULL);
    if (part_ok) {
      double t = rotate_once(pf, n, p, n_added, &st, msg, sizeof msg);
      if (t < 0) {
        part_ok = 0;
        if (st != BG_ENOTSUP) bgb_die("partitioned rotation failed: %s%s", msg, NULL);
      } else {
        t_part[np++] = t;
      }
    }
  }
  uint64_t small_bits = 0;
  bg_filter_info(sf, &small_bits, NULL, NULL, NULL);
  printf("\nRotation (SWAP, begin + add_many + commit, median of %d):\n\n", reps);
  printf("| filter | bits | items | total ms | ms per partition |\n|---|---:|---:|---:|---:|\n");
  printf("| plain (%lld, %g) - one partition's size | %llu | %zu | %.2f | %.2f |\n", (long long)n_small, p,
         (unsigned long long)small_bits, items_small, 1e3 * bgb_median(t_plain, reps), 1e3 * bgb_median(t_plain, reps));
  if (!part_ok) {
    printf("| partitioned (%lld, %g, P = %lld) | %llu per partition | %zu | - | - |\n\n", (long long)n, p,
           (long long)parts, (unsigned long long)part_bits, n_added);
    printf("partitioned rotation: not supported by this library build (BG_ENOTSUP: %s)\n", msg);
  } else {
    double med = bgb_median(t_part, np);
    printf("| partitioned (%lld, %g, P = %lld) | %llu per partition | %zu | %.2f | %.2f |\n", (long long)n, p,
           (long long)parts, (unsigned long long)part_bits, n_added, 1e3 * med, 1e3 * med / (double)parts);
    printf("\npartitioned / plain, per partition: %.2fx; total: %.1fx for %lld partitions\n",
           med / (double)parts / bgb_median(t_plain, reps), med / bgb_median(t_plain, reps), (long long)parts);
  }
  bg_filter_delete(sf, NULL);
  bg_filter_close(sf);
}

/* A fresh plain filter named <prefix>:spread:<i>:<attempt> whose slot master i serves. */
static bg_filter *on_master(bg_client *c, const char *prefix, int i) {
  char name[200], node[160];
  for (int attempt = 0; attempt < 100000; attempt++) {
    bg_filter *f = NULL;
    snprintf(name, sizeof name, "%s:spread:%d:%d", prefix, i, attempt);
    if (bg_filter_open(&f, c, name) != BG_OK) bgb_die("open: %s%s", bg_client_errmsg(c), NULL);
    if (bg_filter_node(f, node, sizeof node, NULL) == BG_OK && !strcmp(node, master_addr[i])) {
      bg_filter_delete(f, NULL);
      return f;
    }
    bg_filter_close(f);
  }
  bgb_die("no filter name lands on %s%s", master_addr[i], NULL);
  return NULL;
}

/* ---- main ------------------------------------------------------------------------------------- */

static void pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(pid, sizeof set, &set) != 0) perror("sched_setaffinity");
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--url redis://h:p[,h:p...]] [--items N] [--fpp P] [--partitions P] [--added A]\n"
          "       [--rounds R (1..%d)] [--seconds S] [--slices K] [--threads T] [--inflight Q] [--batch-inflight B]\n"
          "       [--cpu-queries N] [--cpu-reps R] [--rot-reps R] [--server-cpu C] [--client-cpu C] [--no-pin]\n"
          "       [--no-spread]\n",
          argv0, MAX_ROUNDS);
  exit(2);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  int64_t n = 1000000, parts = 128;
  double fpp = 0.01;
  long added = 200000, cpu_queries = 200000;
  int threads = 8, inflight = 256, batch_inflight = 8, cpu_reps = 3, rot_reps = 3;
  int server_cpu = 0, client_cpu = 1, do_pin = 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-pin")) { do_pin = 0; continue; }
    if (!strcmp(a, "--no-spread")) { with_spread = 0; continue; }
    if (!v) usage(argv[0]);
    i++;
    if (!strcmp(a, "--url")) url = v;
    else if (!strcmp(a, "--items")) n = atoll(v);
    else if (!strcmp(a, "--fpp")) fpp = atof(v);
    else if (!strcmp(a, "--partitions")) parts = atoll(v);
    else if (!strcmp(a, "--added")) added = atol(v);
    else if (!strcmp(a, "--rounds")) rounds = atoi(v);
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--slices")) slices = atoi(v);
    else if (!strcmp(a, "--threads")) threads = atoi(v);
    else if (!strcmp(a, "--inflight")) inflight = atoi(v);
    else if (!strcmp(a, "--batch-inflight")) batch_inflight = atoi(v);
    else if (!strcmp(a, "--cpu-queries")) cpu_queries = atol(v);
    else if (!strcmp(a, "--cpu-reps")) cpu_reps = atoi(v);
    else if (!strcmp(a, "--rot-reps")) rot_reps = atoi(v);
    else if (!strcmp(a, "--server-cpu")) server_cpu = atoi(v);
    else if (!strcmp(a, "--client-cpu")) client_cpu = atoi(v);
    else usage(argv[0]);
  }
  if (rounds < 1 || rounds > MAX_ROUNDS || slices < 1 || slices > MAX_SLICES || !(seconds > 0.01) ||
      seconds > 10 || threads < 1 || threads > MAX_THREADS || inflight < 1 || inflight > MAX_INFLIGHT ||
      batch_inflight < 1 || batch_inflight > MAX_INFLIGHT || added < 2 * MAX_BATCH || added > 10000000 ||
      cpu_queries < 1000 || cpu_queries > 10000000 || cpu_reps < 1 || cpu_reps > 9 || rot_reps < 1 ||
      rot_reps > MAX_ROUNDS || parts < 2 || n < added)
    usage(argv[0]);
  make_items((size_t)added);

  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (do_pin && (server_cpu >= ncpu || client_cpu >= ncpu || server_cpu == client_cpu)) do_pin = 0;
  bgt_cluster cl;
  int own = !url;
  if (own) {
    bgt_cluster_start(&cl);   /* from the main thread: its nodes die with it */
    url = cl.seeds;
    if (do_pin)
      for (int i = 0; i < cl.n; i++) pin(cl.node[i].pid, server_cpu);
  }
  if (do_pin) pin(0, client_cpu);   /* before any thread of ours or the library's starts */
  char pinning[160];
  if (!do_pin) snprintf(pinning, sizeof pinning, "not pinned (%ld CPUs)", ncpu);
  else if (own) snprintf(pinning, sizeof pinning, "all 6 nodes on CPU %d, this client on CPU %d", server_cpu, client_cpu);
  else snprintf(pinning, sizeof pinning, "this client on CPU %d; the servers (--url) as they were started", client_cpu);
  find_masters(url);

  bg_client *c = NULL;
  bg_options *o = NULL;
  char msg[512];
  bg_options_new(&o);
  bg_options_set_int(o, BG_OPT_POOL_SIZE, threads > 4 ? threads : 4);
  bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000);
  if (bgt_client_open(&c, url, o, msg, sizeof msg) != BG_OK) bgb_die("open %s: %s", url, msg);
  bg_options_free(o);

  char prefix[96], name[160];
  snprintf(prefix, sizeof prefix, "bloomguard-bench:part:%ld", (long)getpid());
  target tg[NSIDES];
  memset(tg, 0, sizeof tg);
  tg[PLAIN].nf = tg[PART].nf = 1;
  tg[SPREAD].nf = with_spread ? n_masters : 0;
  for (int s = PLAIN; s <= PART; s++) {
    snprintf(name, sizeof name, "%s:%s", prefix, side_name[s]);
    if (bg_filter_open(&tg[s].f[0], c, name) != BG_OK) bgb_die("open: %s%s", bg_client_errmsg(c), NULL);
    bg_filter_delete(tg[s].f[0], NULL);
  }
  for (int i = 0; i < tg[SPREAD].nf; i++) tg[SPREAD].f[i] = on_master(c, prefix, i);
  bg_filter *pf = tg[PART].f[0];
  if (bg_filter_init(tg[PLAIN].f[0], n, fpp, NULL) != BG_OK) bgb_die("init: %s%s", bg_filter_errmsg(tg[PLAIN].f[0]), NULL);
  if (bg_filter_init_partitioned(pf, n, fpp, parts, NULL) != BG_OK)
    bgb_die("init partitioned: %s%s", bg_filter_errmsg(pf), NULL);
  for (int i = 0; i < tg[SPREAD].nf; i++)
    if (bg_filter_init(tg[SPREAD].f[i], n / n_masters, fpp, NULL) != BG_OK)
      bgb_die("init: %s%s", bg_filter_errmsg(tg[SPREAD].f[i]), NULL);
  double t_add[NSIDES] = {0};
  for (int s = 0; s < NSIDES; s++)
    for (int i = 0; i < tg[s].nf; i++) {
      double t0 = bgb_now_s();
      enum { CHUNK = 10000 };
      static const void *items[CHUNK];
      static size_t lens[CHUNK];
      for (size_t at = (size_t)i; at < n_added;) {   /* the items pick() routes to this filter */
        size_t m = 0;
        for (; m < CHUNK && at < n_added; m++, at += (size_t)tg[s].nf) items[m] = seq[2 * at], lens[m] = seq_len[2 * at];
        if (bg_filter_add_many(tg[s].f[i], items, lens, m, NULL) != BG_OK)
          bgb_die("add: %s%s", bg_filter_errmsg(tg[s].f[i]), NULL);
      }
      t_add[s] += bgb_now_s() - t0;
    }
  uint64_t size[NSIDES] = {0};
  uint32_t k[NSIDES] = {0}, got_parts = 0;
  bg_filter_info(tg[PLAIN].f[0], &size[PLAIN], &k[PLAIN], NULL, NULL);
  bg_filter_info_partitioned(pf, &size[PART], &k[PART], NULL, NULL, &got_parts);
  if (tg[SPREAD].nf) bg_filter_info(tg[SPREAD].f[0], &size[SPREAD], &k[SPREAD], NULL, NULL);
  char plain_node[128] = "?";
  bg_filter_node(tg[PLAIN].f[0], plain_node, sizeof plain_node, NULL);
  const char *v = bg_version_string();

  printf("bench_partitioned: library %s; %d masters:", v ? v : "?", n_masters);
  for (int i = 0; i < n_masters; i++) printf(" %s", master_addr[i]);
  printf(" (%s)\n", own ? "a cluster of its own: 3 masters + 3 replicas" : "--url");
  printf("pinning: %s\n", pinning);
  printf("filters (n %lld, p %g): plain %llu bits, k %u, on %s; partitioned P %u, %llu bits in all, k %u; "
         "%zu items added to each by add_many of 10,000 (plain %.2f s, partitioned %.2f s)\n",
         (long long)n, fpp, (unsigned long long)size[PLAIN], k[PLAIN], plain_node, got_parts,
         (unsigned long long)size[PART], k[PART], n_added, t_add[PLAIN], t_add[PART]);
  if (tg[SPREAD].nf)
    printf("spread (the reference, single items only): %d plain filters of (%lld, %g), %llu bits, one on each master; "
           "item i in filter i mod %d\n",
           tg[SPREAD].nf, (long long)(n / n_masters), fpp, (unsigned long long)size[SPREAD], tg[SPREAD].nf);
  printf("queries alternate added and never-added items; %d rounds x %.2f s per side in %d slices, sides in turn\n\n",
         rounds, seconds, slices);

  load cases[6];
  char lab[6][80];
  int nc = 0;
  snprintf(lab[nc], sizeof lab[0], "single, blocking, 1 thread");
  cases[nc] = (load){lab[nc], 0, 1, 1, 0}, nc++;
  snprintf(lab[nc], sizeof lab[0], "single, blocking, %d threads", threads);
  cases[nc] = (load){lab[nc], 0, threads, 1, 0}, nc++;
  snprintf(lab[nc], sizeof lab[0], "single, queue, %d in flight", inflight);
  cases[nc] = (load){lab[nc], 1, 1, 1, inflight}, nc++;
  snprintf(lab[nc], sizeof lab[0], "batch 100, blocking, 1 thread");
  cases[nc] = (load){lab[nc], 0, 1, 100, 0}, nc++;
  snprintf(lab[nc], sizeof lab[0], "batch 1000, blocking, 1 thread");
  cases[nc] = (load){lab[nc], 0, 1, 1000, 0}, nc++;
  snprintf(lab[nc], sizeof lab[0], "batch 100, queue, %d in flight", batch_inflight);
  cases[nc] = (load){lab[nc], 1, 1, 100, batch_inflight}, nc++;

  printf("| case | plain items/s | partitioned items/s | **partitioned / plain** (rounds' range) | spread items/s | "
         "spread / plain | client µs/item plain / part. / spread | server µs/item plain / part. / spread |\n"
         "|---|---:|---:|---|---:|---|---:|---:|\n");
  int all_met = 1;
  for (int i = 0; i < nc; i++) all_met &= throughput_case(tg, c, &cases[i]);

  for (int s = PLAIN; s <= PART; s++) {
    int64_t tracked = 0, queries = 0;
    bg_filter_stat(tg[s].f[0], BG_STAT_TRACKED_READS, &tracked);
    bg_filter_stat(tg[s].f[0], BG_STAT_QUERIES, &queries);
    printf("%s%s: %lld query calls, %lld round trips that read the bits alone (tracking)", s ? "; " : "\n",
           side_name[s], (long long)queries, (long long)tracked);
  }
  printf("\n");
  if (master_index(plain_node) < 0) fprintf(stderr, "bench: the plain filter's node %s is not a master seen\n", plain_node);
  if (n_masters > 1) all_met &= cpu_per_master(tg, c, inflight, (uint64_t)cpu_queries, cpu_reps, plain_node);
  else printf("\nCPU per master: not measured (one master)\n");

  rotation_part(c, pf, prefix, n, fpp, parts, got_parts ? size[PART] / got_parts : 0, rot_reps);

  FILE *la = fopen("/proc/loadavg", "r");
  char load_avg[128] = "?";
  if (la) {
    if (!fgets(load_avg, sizeof load_avg, la)) snprintf(load_avg, sizeof load_avg, "?");
    load_avg[strcspn(load_avg, "\n")] = 0;
    fclose(la);
  }
  printf("\nload average at the end: %s\n", load_avg);
  printf("targets: %s\n", all_met ? "all met" : "at least one MISSED");

  for (int s = 0; s < NSIDES; s++)
    for (int i = 0; i < tg[s].nf; i++) {
      bg_filter_delete(tg[s].f[i], NULL);
      bg_filter_close(tg[s].f[i]);
    }
  bg_client_close(c);
  for (int i = 0; i < n_masters; i++) redisFree(master_info[i]);
  if (own) bgt_cluster_stop(&cl);
  return all_met ? 0 : 3;
}
