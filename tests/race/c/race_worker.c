/*
 * race_worker.c - the C worker of the cross-language race suite (tests/race/README.md).
 *
 *   query:  queries base items and items whose add already returned OK (read from the added
 *           file before they are queried), one at a time and in batches; counts calls, errors
 *           and false negatives.
 *   add:    for each new item: append it to the database file, add it, and only once the add
 *           returned OK append it to the added file (a service writing its database first).
 *   rotate: `count` rotations one after the other; each reads the database file AFTER
 *           bg_rotation_begin (as rotation.h requires), feeds it, pauses hold_ms, commits.
 *
 * Prints one JSON line of counts; exits 2 only on a harness failure (bad arguments, unreadable
 * files, no server at start), never because the library misbehaved: the suite judges that.
 */
#include <bloomguard.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "worker_kit.h"

#define BATCH 64

static int strategy_code(const char *s) {
  if (!strcmp(s, "swap")) return BG_ROTATE_SWAP;
  if (!strcmp(s, "locked")) return BG_ROTATE_LOCKED;
  if (!strcmp(s, "naive")) return BG_ROTATE_NAIVE;
  fprintf(stderr, "race worker: unknown strategy %s\n", s);
  exit(2);
}

static const void *const *cv(char **v) { return (const void *const *)v; }

static void run_query(const worker_args *a, bg_filter *f, counts *c) {
  item_list pool = {0};
  long base_off = 0, added_off = 0;
  if (kit_read_lines(a->items, &base_off, &pool) != 0 || pool.n == 0) {
    fprintf(stderr, "race worker: cannot read base items from %s\n", a->items);
    exit(2);
  }
  unsigned seed = (unsigned)getpid();
  const void *batch[BATCH];
  size_t lens[BATCH];
  uint8_t present[BATCH];
  double started = kit_now(), refreshed = 0;
  for (long iter = 0; !kit_should_stop(a, started); iter++) {
    if (kit_now() - refreshed > 0.02) { /* items added meanwhile: checked from now on */
      kit_read_lines(a->added, &added_off, &pool);
      refreshed = kit_now();
    }
    size_t i = (size_t)rand_r(&seed) % pool.n;
    int p = 0, st = bg_filter_contains(f, pool.v[i], pool.len[i], &p);
    c->queries++;
    c->checked++;
    if (st != BG_OK) {
      c->errors++;
      c->locked += st == BG_ELOCKED;
      kit_note_error(c->first_error, sizeof c->first_error, "contains", st, bg_filter_errmsg(f));
    } else if (!p) {
      c->false_negatives++;
      kit_note_error(c->first_error, sizeof c->first_error, "false negative", 0, pool.v[i]);
    }
    for (int j = 0; j < BATCH; j++) {
      size_t k = (size_t)rand_r(&seed) % pool.n;
      batch[j] = pool.v[k];
      lens[j] = pool.len[k];
    }
    st = bg_filter_contains_many(f, batch, lens, BATCH, present);
    c->queries++;
    c->checked += BATCH;
    if (st != BG_OK) {
      c->errors++;
      c->locked += st == BG_ELOCKED;
      kit_note_error(c->first_error, sizeof c->first_error, "contains_many", st, bg_filter_errmsg(f));
    } else {
      for (int j = 0; j < BATCH; j++)
        if (!present[j]) {
          c->false_negatives++;
          kit_note_error(c->first_error, sizeof c->first_error, "false negative", 0, (const char *)batch[j]);
        }
    }
    if (iter == 0) kit_touch(a->ready);
    if (a->pause_us) usleep((useconds_t)a->pause_us);
  }
  int64_t tracked = 0;
  if (bg_filter_stat(f, BG_STAT_TRACKED_READS, &tracked) == BG_OK) c->tracked = (long)tracked;
  kit_list_free(&pool);
}

static void run_add(const worker_args *a, bg_filter *f, counts *c) {
  int db = kit_open_append(a->db), added = kit_open_append(a->added);
  if (db < 0 || added < 0) {
    fprintf(stderr, "race worker: cannot open %s or %s\n", a->db, a->added);
    exit(2);
  }
  kit_touch(a->ready);
  double started = kit_now();
  for (long seq = 0; seq < a->count && !kit_should_stop(a, started); seq++) {
    char item[128];
    int len = snprintf(item, sizeof item, "add-%s-%ld", a->id, seq);
    if (kit_append_line(db, item, (size_t)len) != 0) exit(2); /* the database first */
    int st = bg_filter_add(f, item, (size_t)len, NULL);
    if (st == BG_OK) {
      c->adds++;
      if (kit_append_line(added, item, (size_t)len) != 0) exit(2);
    } else {
      c->add_errors++;
      kit_note_error(c->first_error, sizeof c->first_error, "add", st, bg_filter_errmsg(f));
    }
    if (a->pause_us) usleep((useconds_t)a->pause_us);
  }
  close(db);
  close(added);
}

static int rotate_once(const worker_args *a, bg_filter *f, long expected, counts *c) {
  bg_rotation *r = NULL;
  int st = bg_rotation_begin(&r, f, expected, a->fpp, strategy_code(a->strategy), NULL);
  if (st != BG_OK) {
    kit_note_error(c->first_error, sizeof c->first_error, "rotation begin", st, bg_filter_errmsg(f));
    return st;
  }
  item_list db = {0};
  long off = 0;
  if (kit_read_lines(a->db, &off, &db) != 0) exit(2); /* read after begin, as rotation.h asks */
  for (size_t done = 0; done < db.n && st == BG_OK; done += 1000) {
    size_t m = db.n - done < 1000 ? db.n - done : 1000;
    st = bg_rotation_add_many(r, cv(db.v + done), db.len + done, m);
  }
  if (a->hold_ms) usleep((useconds_t)a->hold_ms * 1000); /* adds and queries land meanwhile */
  if (st == BG_OK) st = bg_rotation_commit(r);
  if (st != BG_OK) kit_note_error(c->first_error, sizeof c->first_error, "rotation", st, bg_rotation_errmsg(r));
  bg_rotation_free(r);
  kit_list_free(&db);
  return st;
}

static void run_rotate(const worker_args *a, bg_filter *f, counts *c) {
  kit_touch(a->ready);
  double started = kit_now();
  for (long i = 0; i < a->count && !kit_should_stop(a, started); i++) {
    long expected = a->expected[i % a->n_expected];
    if (rotate_once(a, f, expected, c) == BG_OK) {
      c->rotations++;
      c->last_expected = expected;
    } else {
      c->rotation_errors++;
      usleep(10000);
    }
  }
}

/* The client's redirect counters (client-wide, read through its one filter; 0 standalone). */
static void cluster_counts(bg_filter *f, counts *c) {
  static const int stat[4] = {BG_STAT_CLUSTER_MOVED, BG_STAT_CLUSTER_ASK, BG_STAT_CLUSTER_BUSY_RETRIES,
                              BG_STAT_CLUSTER_MAP_RELOADS};
  long *out[4] = {&c->cluster_moved, &c->cluster_ask, &c->cluster_busy, &c->cluster_reloads};
  for (int i = 0; i < 4; i++) {
    int64_t v = 0;
    if (bg_filter_stat(f, stat[i], &v) == BG_OK) *out[i] = (long)v;
  }
}

/* --partitions: a service's start-up, Redisson's tryInit - here of a partitioned filter, which
 * keeps the config already there (the harness made it: *created 0) - then info(), whose P the
 * harness compares. A failure is the harness's (exit 2), as a failed open is. */
static int init_partitioned(const worker_args *a, bg_filter *f, counts *c) {
  int created = 0;
  uint32_t parts = 0;
  int st = bg_filter_init_partitioned(f, a->expected[0], a->fpp, a->partitions, &created);
  if (st == BG_OK) st = bg_filter_info_partitioned(f, NULL, NULL, NULL, NULL, &parts);
  if (st != BG_OK) {
    fprintf(stderr, "race worker: init --partitions %ld of %s: %s\n", a->partitions, a->filter, bg_filter_errmsg(f));
    return -1;
  }
  c->init_created = created;
  c->partitions = parts;
  return 0;
}

int main(int argc, char **argv) {
  worker_args a;
  kit_parse_args(&a, argc, argv);
  counts c;
  memset(&c, 0, sizeof c);

  bg_options *o = NULL;
  char err[512];
  bg_client *client = NULL;
  bg_filter *f = NULL;
  /* generous timeouts: the suite judges correctness, not latency on a loaded machine; a query
   * waits out a LOCKED rewrite (default 100 ms: a rotator descheduled on a busy machine outlasts
   * that, and the answer would be BG_ELOCKED for the policy - no policy here) */
  if (bg_options_new(&o) != BG_OK || bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, 10000) != BG_OK ||
      bg_options_set_int(o, BG_OPT_CONNECT_TIMEOUT_MS, 10000) != BG_OK ||
      bg_options_set_int(o, BG_OPT_WRITE_LOCK_WAIT_MS, 10000) != BG_OK ||
      /* tests/race/README.md, "Config retries" */
      bg_options_set_int(o, BG_OPT_CONFIG_RETRIES, 20) != BG_OK ||
      /* the fault reaches into the cluster map, which a lazy open makes only at the first call */
      bg_options_set_int(o, BG_OPT_CONNECT_AT_OPEN, 1) != BG_OK) return 2;
  bg_call *call = NULL;
  int st = bg_call_new(&call);
  if (st == BG_OK) st = bg_client_open_ex(&client, call, a.url, o);
  snprintf(err, sizeof err, "%s", call && st != BG_OK ? bg_call_errmsg(call) : "");
  bg_call_free(call);
  bg_options_free(o);
  if (st != BG_OK) {
    fprintf(stderr, "race worker: connect %s: %s\n", a.url, err);
    return 2;
  }
  if (a.fault && race_fault_set(client, a.fault) != 0) {
    fprintf(stderr, "race worker: --fault %s: unknown, not a cluster, or not the bg_race_worker_fault build\n",
            a.fault);
    return 2;
  }
  if ((a.native ? bg_filter_open_native(&f, client, a.filter) : bg_filter_open(&f, client, a.filter)) != BG_OK) {
    fprintf(stderr, "race worker: open %s: %s\n", a.filter, bg_client_errmsg(client));
    return 2;
  }
  if (a.partitions && init_partitioned(&a, f, &c) != 0) return 2;
  if (!strcmp(a.role, "query")) run_query(&a, f, &c);
  else if (!strcmp(a.role, "add")) run_add(&a, f, &c);
  else if (!strcmp(a.role, "rotate")) run_rotate(&a, f, &c);
  else {
    fprintf(stderr, "race worker: unknown role %s\n", a.role);
    return 2;
  }
  cluster_counts(f, &c);
  kit_print_counts(&a, &c);
  bg_filter_close(f);
  bg_client_close(client);
  return 0;
}
