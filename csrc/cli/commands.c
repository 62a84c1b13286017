/* commands.c - the subcommands of the bloomguard command. Each returns an exit status. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void json_name(const cli_opts *o) {
  fputs("{\"name\":", stdout);
  cli_json_string(stdout, o->name, strlen(o->name));
}

static const char *jbool(int v) { return v ? "true" : "false"; }

/* ---- version ------------------------------------------------------------------------- */

int cli_cmd_version(const cli_opts *o) {
  const char *lib = bg_version_string();
  const char *impl = bg_hash_impl();
  if (!lib) lib = "?";
  if (!impl) impl = "?";
  if (o->json) {
    printf("{\"cli\":\"%s\",\"library\":", BG_VERSION_STRING);
    cli_json_string(stdout, lib, strlen(lib));
    printf(",\"libraryNumber\":%d,\"hashImpl\":", bg_version());
    cli_json_string(stdout, impl, strlen(impl));
    fputs("}\n", stdout);
  } else {
    printf("bloomguard %s (library %s, hash %s)\n", BG_VERSION_STRING, lib, impl);
    if (o->verbose) {
      /* the license, and where the notices of what is linked in are (licenses.c prints them) */
      fputs("license: Apache-2.0; notices compiled in ('bloomguard licenses' prints them):", stdout);
      for (size_t i = 0; i < cli_nnotices; i++) printf(" %s", cli_notices[i].path);
      fputc('\n', stdout);
    }
  }
  return CLI_EXIT_OK;
}

/* ---- info / init ---------------------------------------------------------------------- */

/* node: where the filter lives (info only; NULL otherwise) */
static void print_config(const cli_opts *o, uint64_t size, uint32_t k, int64_t n, double p, uint32_t parts,
                         int created, int with_created, const char *node, int32_t slot) {
  char pbuf[64];
  cli_fmt_double(pbuf, sizeof pbuf, p);
  if (o->json) {
    json_name(o);
    if (with_created) printf(",\"created\":%s", jbool(created));
    printf(",\"size\":%llu,\"hashIterations\":%lu", (unsigned long long)size, (unsigned long)k);
    if (n > 0) printf(",\"expectedInsertions\":%lld", (long long)n);
    else fputs(",\"expectedInsertions\":null", stdout);
    if (p > 0) printf(",\"falseProbability\":%s", pbuf);
    else fputs(",\"falseProbability\":null", stdout);
    if (parts) printf(",\"partitions\":%lu", (unsigned long)parts);
    if (o->native) fputs(",\"kind\":\"native\"", stdout);
    if (node) {
      fputs(",\"node\":", stdout);
      cli_json_string(stdout, node, strlen(node));
      printf(",\"slot\":%ld", (long)slot);
    }
    fputs("}\n", stdout);
    return;
  }
  if (with_created)
    printf("%s %s\n", created ? "created" : "exists (existing config kept):", o->name);
  else
    printf("name: %s\n", o->name);
  printf("size: %llu\nhashIterations: %lu\n", (unsigned long long)size, (unsigned long)k);
  if (n > 0) printf("expectedInsertions: %lld\n", (long long)n);
  else fputs("expectedInsertions: (not set)\n", stdout);
  if (p > 0) printf("falseProbability: %s\n", pbuf);
  else fputs("falseProbability: (not set)\n", stdout);
  if (parts) printf("partitions: %lu (size is their total)\n", (unsigned long)parts);
  /* a native filter's size is 8 x the server's bytes, expectedInsertions its capacity (filter.h) */
  if (o->native) fputs("kind: native (the server's BF.* filter)\n", stdout);
  if (node) printf("node: %s (hash slot %ld)\n", node[0] ? node : "(no master serves it now)", (long)slot);
}

int cli_cmd_info(const cli_opts *o, bg_filter *f) {
  uint64_t size = 0;
  uint32_t k = 0;
  int64_t n = 0;
  double p = 0;
  uint32_t parts = 0;
  int st = bg_filter_info_partitioned(f, &size, &k, &n, &p, &parts);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  char node[300] = "";
  int32_t slot = 0;
  bg_filter_node(f, node, sizeof node, &slot);
  print_config(o, size, k, n, p, parts, 0, 0, node, slot);
  return CLI_EXIT_OK;
}

int cli_cmd_init(const cli_opts *o, bg_filter *f) {
  int created = 0;
  int st = bg_filter_init_partitioned(f, o->expected, o->fpp, o->partitions, &created);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  /* report the config in force: an existing one is kept even if its parameters differ */
  uint64_t size = 0;
  uint32_t k = 0;
  int64_t n = 0;
  double p = 0;
  uint32_t parts = 0;
  st = bg_filter_info_partitioned(f, &size, &k, &n, &p, &parts);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  print_config(o, size, k, n, p, parts, created, 1, NULL, 0);
  return CLI_EXIT_OK;
}

/* ---- add ------------------------------------------------------------------------------ */

/* How long an add into a filter holding items runs before it hints at `rotate --from`
 * ($BLOOMGUARD_ADD_HINT_MS overrides it, in ms). */
#define CLI_ADD_HINT_MS 3000

typedef struct add_state {
  const cli_opts *o;
  bg_filter *f;
  uint64_t items, added;
  cli_progress bar;
  uint64_t hint_at;   /* when to hint (maybe_hint), 0: never, or already done */
} add_state;

static int add_batch(const void *const *items, const size_t *lens, size_t n, void *ud) {
  add_state *s = ud;
  size_t added = 0;
  int st = bg_filter_add_many(s->f, items, lens, n, &added);
  if (st != BG_OK) {
    cli_progress_clear(&s->bar);
    if (s->items > 0)
      fprintf(stderr, "bloomguard: %s: %llu items were added before the failure\n", s->o->cmd,
              (unsigned long long)s->items);
    return cli_fail_filter(s->o->cmd, st, s->f);
  }
  s->items += n;
  s->added += added;
  s->bar.items = s->items;
  cli_progress_draw(&s->bar, 0);
  return CLI_EXIT_OK;
}

/*
 * A long add into a filter that already holds items goes batch by batch through Redis (one
 * atomic step per batch, ~150k items/s on one server core), where a rebuild from the whole list
 * loads millions of items in seconds: once the add has run CLI_ADD_HINT_MS and the input is far
 * from read, say so once - on a terminal, as the progress bar (not piped, not with --quiet).
 */
static uint64_t hint_after_ns(void) {
  const char *v = getenv("BLOOMGUARD_ADD_HINT_MS");
  char *end = NULL;
  long long ms = v && *v ? strtoll(v, &end, 10) : -1;
  if (ms < 0 || (end && *end)) ms = CLI_ADD_HINT_MS;
  return (uint64_t)ms * 1000000ull;
}

static void maybe_hint(add_state *s) {
  if (!s->hint_at || !s->bar.tty || s->o->json || cli_now_ns() < s->hint_at) return;
  s->hint_at = 0;
  if (s->bar.input_total && s->bar.input_done * 2 > s->bar.input_total) return;   /* the end is near */
  cli_progress_clear(&s->bar);
  fprintf(stderr, "bloomguard: add: %s already holds items, so each batch is added through Redis; if the input "
                  "is the filter's whole list, 'bloomguard rotate %s --from FILE --expected N --fpp P' rebuilds it "
                  "in one bulk load, many times faster\n", s->o->name, s->o->name);
}

static int add_tick(void *ud) {
  add_state *s = ud;
  maybe_hint(s);
  cli_progress_draw(&s->bar, 0);
  return CLI_EXIT_OK;
}

/*
 * The bulk path of `add` from a file or stdin: into a filter that holds no item (or does not exist
 * yet, given --expected and --fpp), the items are loaded as `rotate --from` loads them - hashed
 * into a bitmap in memory, uploaded in chunks, one atomic swap - with the filter's own (n, p), so
 * its size and hash iterations stay. CLI_LOAD_NOT_EMPTY, having read nothing, when that does not
 * apply: the filter holds items, has no config and no (n, p) was given, its config has no
 * Redisson (n, p) or other geometry than they give, it is partitioned, or another rotation holds it.
 */
static int add_bulk(const cli_opts *o, bg_filter *f, cli_load *l) {
  uint64_t size = 0, want_size = 0;
  uint32_t k = 0, want_k = 0;
  int64_t n = 0;
  double p = 0;
  uint32_t parts = 0;
  int st = bg_filter_info_partitioned(f, &size, &k, &n, &p, &parts);
  if (st == BG_OK && parts) return CLI_LOAD_NOT_EMPTY;   /* a rotation knows only Redisson's layout */
  if (st == BG_ENOTINIT) {
    if (!o->have_expected || !o->have_fpp) return CLI_LOAD_NOT_EMPTY;  /* the plain path reports it */
    n = o->expected;
    p = o->fpp;
  } else if (st != BG_OK) {
    return cli_fail_filter(o->cmd, st, f);
  } else if (n <= 0 || p <= 0 || bg_optimal_params(n, p, &want_size, &want_k) != BG_OK || want_size != size ||
             want_k != k) {
    return CLI_LOAD_NOT_EMPTY;
  }
  l->expected = n;
  l->fpp = p;
  l->strategy = BG_ROTATE_SWAP;
  l->only_if_empty = 1;
  return cli_rotation_load(o, f, l);
}

int cli_cmd_add(const cli_opts *o, bg_filter *f) {
  add_state s = {o, f, 0, 0, {0}, 0};
  int rc, bulk = 0;
  if (!o->use_stdin && !o->from) {
    rc = cli_for_each_batch(o, add_batch, &s);  /* ITEM arguments */
  } else {
    cli_load l;
    memset(&l, 0, sizeof l);
    rc = cli_open_lines(o, &l.fd, &l.what);
    if (rc != CLI_EXIT_OK) return rc;
    rc = add_bulk(o, f, &l);
    bulk = rc != CLI_LOAD_NOT_EMPTY;
    if (!bulk) {
      cli_progress_init(&s.bar, o, o->cmd, "adding");
      s.bar.t0 = s.bar.last_draw = cli_now_ns();  /* first drawn after 100 ms: short adds stay silent */
      s.bar.phase = BG_PHASE_BUILDING;
      s.hint_at = s.bar.t0 + hint_after_ns();
      rc = cli_for_each_line_fd(o, l.fd, l.what, o->batch, add_batch, add_tick, &s, &s.bar);
      cli_progress_clear(&s.bar);
    }
    if (l.fd != STDIN_FILENO) close(l.fd);
    if (rc == CLI_EXIT_OK && bulk) {
      if (o->json) {
        json_name(o);
        printf(",\"items\":%llu,\"added\":null,\"bulk\":true,\"bytesUploaded\":%llu,\"seconds\":%.3f}\n",
               (unsigned long long)l.items, (unsigned long long)l.bytes, (double)l.us / 1e6);
      } else {
        printf("%llu items, loaded into the empty filter in one build (%llu bytes uploaded, %.3f s)\n",
               (unsigned long long)l.items, (unsigned long long)l.bytes, (double)l.us / 1e6);
      }
      return CLI_EXIT_OK;
    }
  }
  if (rc != CLI_EXIT_OK) return rc;
  if (o->json) {
    json_name(o);
    printf(",\"items\":%llu,\"added\":%llu,\"bulk\":false}\n", (unsigned long long)s.items,
           (unsigned long long)s.added);
  } else {
    printf("%llu items, %llu added (set at least one new bit)\n", (unsigned long long)s.items,
           (unsigned long long)s.added);
  }
  return CLI_EXIT_OK;
}

/* ---- contains ------------------------------------------------------------------------- */

typedef struct contains_state {
  const cli_opts *o;
  bg_filter *f;
  uint8_t *present;   /* o->batch entries, reused for every batch */
  int list;           /* print every item (arguments, or --verbose) */
  int started;        /* JSON: the results array was opened */
  uint64_t items, npresent, nabsent;
} contains_state;

static void json_open(contains_state *s) {
  if (s->started) return;
  s->started = 1;
  cli_json_partial(1);
  json_name(s->o);
  if (s->list) fputs(",\"results\":[", stdout);
}

static int contains_batch(const void *const *items, const size_t *lens, size_t n, void *ud) {
  contains_state *s = ud;
  int st = bg_filter_contains_many(s->f, items, lens, n, s->present);
  if (st != BG_OK) return cli_fail_filter(s->o->cmd, st, s->f);
  if (s->o->json) json_open(s);
  for (size_t i = 0; i < n; i++) {
    int p = s->present[i] != 0;
    if (p) s->npresent++;
    else s->nabsent++;
    if (!s->list) continue;
    if (s->o->json) {
      if (s->items + i > 0) fputc(',', stdout);
      fputs("{\"item\":", stdout);
      if (!cli_json_string(stdout, items[i], lens[i])) {
        fputs(",\"item_hex\":\"", stdout);
        cli_hex(stdout, items[i], lens[i]);
        fputc('"', stdout);
      }
      printf(",\"present\":%s}", jbool(p));
    } else {
      fputs(p ? "present\t" : "absent\t", stdout);
      fwrite(items[i], 1, lens[i], stdout);
      fputc('\n', stdout);
    }
  }
  s->items += n;
  return CLI_EXIT_OK;
}

int cli_cmd_contains(const cli_opts *o, bg_filter *f) {
  contains_state s;
  memset(&s, 0, sizeof s);
  s.o = o;
  s.f = f;
  s.list = (!o->use_stdin && !o->from) || o->verbose;
  s.present = malloc(o->batch);
  if (!s.present) return cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  int rc;
  if (o->from) {
    int fd;
    const char *what;
    rc = cli_open_lines(o, &fd, &what);
    if (rc == CLI_EXIT_OK) {
      rc = cli_for_each_line_fd(o, fd, what, o->batch, contains_batch, NULL, &s, NULL);
      if (fd != STDIN_FILENO) close(fd);
    }
  } else {
    rc = cli_for_each_batch(o, contains_batch, &s);
  }
  free(s.present);
  if (rc != CLI_EXIT_OK) return rc;  /* (with --json the error object ended the partial output) */
  if (o->json) {
    json_open(&s);
    cli_json_partial(0);
    if (s.list) fputc(']', stdout);
    printf(",\"items\":%llu,\"present\":%llu,\"absent\":%llu}\n", (unsigned long long)s.items,
           (unsigned long long)s.npresent, (unsigned long long)s.nabsent);
  } else if (!s.list) {
    printf("%llu items, %llu present, %llu absent\n", (unsigned long long)s.items,
           (unsigned long long)s.npresent, (unsigned long long)s.nabsent);
  }
  return s.nabsent ? CLI_EXIT_ABSENT : CLI_EXIT_OK;
}

/* ---- count / delete / expire / persist ------------------------------------------------ */

int cli_cmd_count(const cli_opts *o, bg_filter *f) {
  int64_t count = 0;
  int st = bg_filter_count(f, &count);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  if (o->json) {
    json_name(o);
    printf(",\"count\":%lld}\n", (long long)count);
  } else {
    printf("%lld\n", (long long)count);
  }
  return CLI_EXIT_OK;
}

int cli_cmd_delete(const cli_opts *o, bg_filter *f) {
  int deleted = 0;
  int st = bg_filter_delete(f, &deleted);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  if (o->json) {
    json_name(o);
    printf(",\"deleted\":%s}\n", jbool(deleted));
  } else {
    printf(deleted ? "deleted %s\n" : "%s did not exist\n", o->name);
  }
  return CLI_EXIT_OK;
}

int cli_cmd_expire(const cli_opts *o, bg_filter *f) {
  int applied = 0;
  int st = bg_filter_expire(f, o->ttl_ms, &applied);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  if (o->json) {
    json_name(o);
    printf(",\"ttlMs\":%lld,\"applied\":%s}\n", (long long)o->ttl_ms, jbool(applied));
  } else if (applied) {
    printf("%s expires in %lld ms\n", o->name, (long long)o->ttl_ms);
  } else {
    printf("%s does not exist (nothing to expire)\n", o->name);
  }
  return CLI_EXIT_OK;
}

int cli_cmd_persist(const cli_opts *o, bg_filter *f) {
  int applied = 0;
  int st = bg_filter_persist(f, &applied);
  if (st != BG_OK) return cli_fail_filter(o->cmd, st, f);
  if (o->json) {
    json_name(o);
    printf(",\"applied\":%s}\n", jbool(applied));
  } else if (applied) {
    printf("%s no longer expires\n", o->name);
  } else {
    printf("%s had no time to live (or does not exist)\n", o->name);
  }
  return CLI_EXIT_OK;
}
