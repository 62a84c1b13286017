/* main.c - argument parsing, usage texts and dispatch of the bloomguard command. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Options a command accepts besides the global ones. */
#define OPT_EXPECTED 0x1
#define OPT_FPP      0x2
#define OPT_TTL      0x4
#define OPT_BATCH    0x8
#define OPT_STRATEGY 0x10
#define OPT_FROM     0x20
#define OPT_LEASE    0x40
#define OPT_WAIT     0x80
#define OPT_THREADS  0x100
#define OPT_CHUNK    0x200
#define OPT_STAGING  0x400
#define OPT_PROBES   0x800
#define OPT_PARTS    0x1000
#define OPT_ROTATE   (OPT_EXPECTED | OPT_FPP | OPT_BATCH | OPT_STRATEGY | OPT_FROM | OPT_LEASE | \
                      OPT_WAIT | OPT_THREADS | OPT_CHUNK | OPT_STAGING | OPT_PARTS)

enum { ARGS_NONE, ARGS_NAME, ARGS_NAME_ITEMS };

typedef struct command {
  const char *name;
  int args;        /* ARGS_* */
  unsigned opts;   /* OPT_* */
  const char *synopsis;
  const char *help;
  int (*run)(const cli_opts *o, bg_filter *f);
} command;

static const command commands[] = {
  {"info", ARGS_NAME, 0, "info NAME",
   "Prints the filter's config hash: size, hashIterations, expectedInsertions,\n"
   "falseProbability. A filter without a config fails with BG_ENOTINIT (exit 2).\n",
   cli_cmd_info},
  {"init", ARGS_NAME, OPT_EXPECTED | OPT_FPP | OPT_PARTS, "init NAME --expected N --fpp P [--partitions K]",
   "Creates the filter like Redisson's tryInit(N, P): writes the config hash only if there is\n"
   "none (an existing config is kept, even with other parameters, and reported).\n"
   "  --expected N     expected insertions (Redisson's expectedInsertions)\n"
   "  --fpp P          false positive probability, 0 < P <= 1 (e.g. 0.01, 1.0E-4)\n"
   "  --partitions K   a partitioned filter of K bitmaps (1..16384) spread over the cluster's\n"
   "                   slots, of any total size; Redisson cannot read it (docs/layout.md)\n",
   cli_cmd_init},
  {"add", ARGS_NAME_ITEMS, OPT_BATCH | OPT_FROM | OPT_EXPECTED | OPT_FPP,
   "add NAME [ITEM...] [--from FILE|-] [--expected N --fpp P]",
   "Adds the items. With --from FILE, or no ITEM arguments, or the single argument '-', reads\n"
   "one item per line from FILE or standard input and sends them in batches (one round trip\n"
   "per batch). Prints how many items were sent and how many set at least one new bit.\n"
   "Bulk path: read into a filter that holds no item yet, the items are loaded as\n"
   "'rotate --from' loads them - hashed into a bitmap in memory, uploaded in chunks, one\n"
   "atomic swap (seconds for millions of items) - with the filter's own expected insertions and\n"
   "false probability; items other bloomguard clients add meanwhile are kept, items Redisson\n"
   "adds meanwhile are not. A filter that does not exist is created that way when --expected\n"
   "and --fpp are given (they are ignored for a filter that has a config). The result line\n"
   "then says so ({\"added\":null,\"bulk\":true,...} with --json).\n"
   "On a terminal a progress bar on stderr shows the items added and items/s (--quiet: none).\n"
   "  --from FILE    read the items from FILE ('-': standard input)\n"
   "  --batch N      items per round trip (default 1000)\n"
   "  --expected N, --fpp P   the parameters of a filter that does not exist yet\n",
   cli_cmd_add},
  {"contains", ARGS_NAME_ITEMS, OPT_BATCH | OPT_FROM, "contains NAME [ITEM...] [--from FILE|-]",
   "Tests the items; exit 0 if every item is present, 1 if any is absent.\n"
   "Item arguments: one line per item, 'present<TAB>ITEM' or 'absent<TAB>ITEM'.\n"
   "--from FILE, or stdin (no ITEM arguments, or '-'): one item per line, in batches; prints\n"
   "only the counts ('T items, N present, M absent') unless --verbose lists every item as above.\n"
   "  --from FILE    read the items from FILE ('-': standard input)\n"
   "  --batch N      items per round trip for FILE or stdin (default 1000)\n",
   cli_cmd_contains},
  {"count", ARGS_NAME, 0, "count NAME",
   "Prints Redisson's estimate of the number of items: round(-size/k * ln(1 - bits/size)).\n",
   cli_cmd_count},
  {"delete", ARGS_NAME, 0, "delete NAME",
   "Deletes the bitmap and the config hash (exit 0 also when nothing existed).\n",
   cli_cmd_delete},
  {"expire", ARGS_NAME, OPT_TTL, "expire NAME --ttl-ms MS",
   "Sets a time to live of MS milliseconds on the bitmap and the config hash: 1 to\n"
   "70368744177664 (2^46, about 2230 years; Redis refuses TTLs that overflow its clock).\n",
   cli_cmd_expire},
  {"persist", ARGS_NAME, 0, "persist NAME",
   "Removes the time to live from the bitmap and the config hash.\n",
   cli_cmd_persist},
  {"rotate", ARGS_NAME, OPT_ROTATE,
   "rotate NAME --expected N --fpp P [--strategy swap|locked|naive] [--from FILE|-]",
   "Rebuilds the filter from a full list of its items, with the same or other parameters,\n"
   "while readers and writers keep using it. Items: one per line from FILE (--from) or from\n"
   "standard input (no --from, or '--from -'), read only after the rotation has begun (read\n"
   "the source of truth then, so nothing added before that point is missed).\n"
   "  swap (default): builds the next generation in memory (hashing on all cores), uploads it\n"
   "      to staging keys, then swaps bitmap and config in one atomic step. Readers see the\n"
   "      old filter, then the new one; items added meanwhile (through bloomguard) are kept;\n"
   "      until the swap the live keys are untouched. A second rotation of the same filter\n"
   "      fails with BG_EROTATING (\"rotation in progress\", exit 2) unless --wait-ms.\n"
   "  locked: builds in memory too, then rewrites the live bitmap in place under the\n"
   "      filter's write lock: no second copy in Redis; bloomguard readers wait for the\n"
   "      lock (BG_OPT_WRITE_LOCK_WAIT_MS), then answer from their policy. Once the rewrite has\n"
   "      begun an interrupt does not stop it.\n"
   "  naive: delete, init, add in batches into the live keys - the rebuild that makes\n"
   "      readers fail or miss items meanwhile; kept to reproduce that in tests and demos.\n"
   "  --expected N       expected insertions of the new generation\n"
   "  --fpp P            its false positive probability, 0 < P <= 1\n"
   "  --strategy S       swap (default), locked or naive\n"
   "  --from FILE        read the items from FILE ('-': standard input, the default)\n"
   "  --wait-ms MS       wait up to MS for another rotation of NAME to end (default 0: fail)\n"
   "  --lease-ms MS      the rotator's lease, renewed every third of it (default 30000);\n"
   "                     if this process dies, another rotation can start after it\n"
   "  --staging-ttl-ms MS  time to live of the staging keys (default 300000)\n"
   "  --threads N        hashing threads (default: the online CPUs - 1, at least 1)\n"
   "  --chunk-bytes N    upload chunk in bytes (default 1048576)\n"
   "  --partitions K     a partitioned filter: the new generation's partitions (swap and naive;\n"
   "                     default: as many as now; locked rewrites its partitions in place)\n"
   "  --batch N          items read per batch (default 262144); naive: items per round trip\n"
   "                     (default 1000)\n"
   "On a terminal, a progress bar on stderr shows the phase, items, items/s, bytes uploaded\n"
   "of the total and the upload's ETA; otherwise nothing is printed while it runs. At the end\n"
   "one line on stdout: strategy, items, bytes uploaded, seconds, items/s. With --json:\n"
   "{\"name\",\"strategy\",\"expected\",\"fpp\",\"items\",\"bytesUploaded\",\"seconds\",\n"
   "\"itemsPerSecond\",\"size\",\"hashIterations\"} (size and hashIterations read back after the\n"
   "swap). Ctrl-C (SIGINT) or SIGTERM aborts the rotation cleanly: staging keys removed,\n"
   "lease released, the live filter untouched (swap); exit 130. A second Ctrl-C exits at\n"
   "once (the lease and the staging keys then expire on their own).\n",
   cli_cmd_rotate},
  {"stats", ARGS_NAME, OPT_PROBES, "stats NAME [--probes N]",
   "Measures and prints what this process sees of the filter: it makes N single-item queries\n"
   "(default 100; 0: none) of items that are not meant to be in it, then prints the handle's\n"
   "counters (queries, answers by source, failures by class, breaker, tracked reads), the\n"
   "client's (connections, lost connections, tracking invalidations, cluster redirects) and\n"
   "every latency histogram that counted an operation (operation, outcome, count, mean, the\n"
   "bucket bounds p50 and p99 fall under, and the non-empty buckets). Counters are this\n"
   "process's: a service reports its own through OpenTelemetry or Prometheus\n"
   "(docs/observability.md).\n"
   "  --probes N     queries to measure (0..1000000)\n"
   "With --json: {\"name\",\"probes\",\"node\",\"slot\",\"stats\":{...},\"client\":{...},\n"
   "\"histograms\":[{\"operation\",\"outcome\",\"count\",\"sumSeconds\",\"bounds\",\"counts\"}]}.\n",
   cli_cmd_stats},
  {"licenses", ARGS_NONE, 0, "licenses",
   "Prints bloomguard's license (Apache-2.0) and NOTICE, then the license notice of each\n"
   "third-party component compiled into this command (hiredis, HighwayHash, and OpenSSL when\n"
   "it is linked statically), each under a line '==> PATH <==' naming its file in the\n"
   "source tree. Needs no server.\n"
   "With --json: {\"notices\":[{\"path\",\"text\"}]}.\n",
   NULL},
  {"version", ARGS_NONE, 0, "version",
   "Prints the versions of the command and of the library it loaded, and the hash\n"
   "implementation picked for this CPU; with --verbose also the license and the notices\n"
   "compiled in (see 'licenses'). Needs no server.\n",
   NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char global_help[] =
  "Global options (before or after the command):\n"
  "  --url URL         server: redis://[user[:password]@]host[:port][/db][?db=N] or\n"
  "                    unix:///path[?db=N]\n"
  "                    (default: $BLOOMGUARD_URL, else " CLI_DEFAULT_URL ")\n"
  "  --password-file PATH  the password is the first line of PATH, its newline removed\n"
  "                    (overrides the URL's); else $BLOOMGUARD_PASSWORD_FILE names such a\n"
  "                    file; else $BLOOMGUARD_PASSWORD, if set, is the password. These keep\n"
  "                    it off the command line (ps); an empty one means none. No message\n"
  "                    shows a password\n"
  "  --tls-ca-file PATH, --tls-ca-dir DIR, --tls-cert-file PATH, --tls-key-file PATH,\n"
  "  --tls-server-name NAME, --tls-no-verify\n"
  "                    TLS (any of them, or a rediss:// URL, turns it on): the CAs to trust\n"
  "                    (default: the system's), a client certificate and its key, the name\n"
  "                    the server's certificate must be for (default: the URL's host);\n"
  "                    --tls-no-verify checks nothing (testing only)\n"
  "  --timeout-ms MS   connect and command timeout in milliseconds (default: the library's)\n"
  "  --json            print one JSON object on standard output; an error is the object\n"
  "                    {\"error\":{\"code\":N,\"name\":\"BG_E...\",\"message\":\"...\"}} (its own\n"
  "                    line, the last), with the same exit status\n"
  "  -v, --verbose     with items from stdin, list every item (text and JSON)\n"
  "  --quiet           no progress bar (rotate, add)\n"
  "  --native          the server's own Bloom filter at NAME (BF.*: RedisBloom, valkey-bloom)\n"
  "                    instead of Redisson's layout: init is BF.RESERVE, rotate swaps a\n"
  "                    staging filter in with one RENAME (docs/native.md)\n"
  "  -h, --help        this help; 'bloomguard COMMAND --help' for one command\n"
  "  --version         the same as the version command\n"
  "  --                end of options: later arguments are items even if they start with '-'\n";

static const char details_help[] =
  "Items from stdin: one per line; a trailing \"\\n\" or \"\\r\\n\" is removed, an empty line is\n"
  "the empty item, a last line without newline counts, lines may be long and hold any bytes\n"
  "but '\\n'. Item arguments are their bytes as given (an item starting with '-' goes after --).\n"
  "\n"
  "JSON: 'contains' prints {\"name\":..,\"results\":[{\"item\":\"a\",\"present\":true},..],\n"
  "\"items\":T,\"present\":N,\"absent\":M} (\"results\" only for item arguments or --verbose);\n"
  "the other commands print their fields, e.g. {\"name\":..,\"count\":N}. Strings are UTF-8 with\n"
  "'\"', '\\\\' and control characters escaped; an item that is not valid UTF-8 has each invalid\n"
  "byte replaced by \\ufffd in \"item\" and its exact bytes in \"item_hex\" (lowercase hex).\n"
  "\n"
  "Exit status:\n"
  "  0   success (contains: every item present)\n"
  "  1   contains: at least one item absent\n"
  "  2   error: bad URL, cannot connect, server error, filter not initialized, ...; the\n"
  "      message on stderr names the status (e.g. BG_ENOTINIT) and the library's detail;\n"
  "      what stdout holds then is partial (items of earlier batches were applied)\n"
  "  64  usage error (unknown command or option, missing or malformed argument)\n"
  "  130 rotate: interrupted (SIGINT or SIGTERM); the rotation was aborted (a wait for\n"
  "      another rotation is cancelled at once); lock: interrupted while waiting or holding\n";

static void usage_all(FILE *out) {
  fputs("usage: bloomguard [GLOBAL OPTIONS] COMMAND [OPTIONS] NAME [ITEM...]\n"
        "\n"
        "Bloom filters in Redis, read and written exactly like Redisson's RBloomFilter\n"
        "(same keys, config fields and bit indexes).\n"
        "\n"
        "Commands:\n", out);
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(out, "  %s\n", commands[i].synopsis);
  fputs("  lock NAME [--mode exclusive|read|write] [--wait-ms MS] [--hold-ms MS]   (bloomguard lock --help)\n", out);
  fputs("  lock retire NAME   (deletes the name's fencing-token counter when the lock is free)\n", out);
  fputc('\n', out);
  fputs(global_help, out);
  fputc('\n', out);
  fputs(details_help, out);
}

/* One command's help: its own options only; the global ones, the item format, the JSON output
 * and the exit statuses once, in bloomguard --help (bloomguard help). */
static void usage_cmd(FILE *out, const command *c) {
  fprintf(out, "usage: bloomguard [GLOBAL OPTIONS] %s\n\n%s\n", c->synopsis, c->help);
  fputs("Global options (--url, --password-file, --tls-*, --timeout-ms, --json, --quiet, -v), the\n"
        "item format, --json output and exit statuses: see 'bloomguard --help'.\n", out);
}

static int usage_error(const command *c, const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  cli_error(NULL, BG_EINVAL, CLI_EXIT_USAGE, "%s", msg);
  if (c)
    fprintf(stderr, "usage: bloomguard [GLOBAL OPTIONS] %s  (bloomguard %s --help)\n",
            c->synopsis, c->name);
  else
    fputs("usage: bloomguard [GLOBAL OPTIONS] COMMAND ...  (bloomguard --help)\n", stderr);
  return CLI_EXIT_USAGE;
}

static int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static const command *find_command(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

/* Matches "--opt VALUE" or "--opt=VALUE"; *i advances past a separate value. -1: value missing. */
static int take_value(int argc, char **argv, int *i, const char *opt, const char **val) {
  const char *a = argv[*i];
  size_t n = strlen(opt);
  if (strncmp(a, opt, n) != 0) return 0;
  if (a[n] == '=') {
    *val = a + n + 1;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *val = argv[++*i];
  return 1;
}

/*
 * Parses argv into o. Returns -1 on success, else the exit status to return right away (help
 * printed: 0; usage error: 64).
 */
static int parse(int argc, char **argv, cli_opts *o, const command **cmdp) {
  const command *cmd = NULL;
  int help = 0, version = 0, stdin_dash = 0, end_of_opts = 0;
  unsigned seen = 0;
  char why[160];
  char **pos = malloc((size_t)argc * sizeof *pos);
  size_t npos = 0;
  if (!pos) return cli_error(NULL, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  memset(o, 0, sizeof *o);
  o->batch = CLI_DEFAULT_BATCH;
  o->strategy = BG_ROTATE_SWAP;
  o->url = getenv("BLOOMGUARD_URL");
  if (!o->url || !*o->url) o->url = CLI_DEFAULT_URL;

#define FAIL(fmt, arg) do { free(pos); return usage_error(cmd, fmt, arg); } while (0)
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    int r;
    if (end_of_opts || a[0] != '-' || a[1] == '\0') {
      if (!cmd) {
        if (strcmp(a, "help") == 0 && !end_of_opts) { help = 1; continue; }
        cmd = find_command(a);
        if (!cmd) FAIL("unknown command %s", cli_shown(a));
        o->cmd = cmd->name;
        continue;
      }
      if (!end_of_opts && strcmp(a, "-") == 0) { stdin_dash++; continue; }
      pos[npos++] = argv[i];
      continue;
    }
    if (strcmp(a, "--") == 0) { end_of_opts = 1; continue; }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { help = 1; continue; }
    if (strcmp(a, "--version") == 0) { version = 1; continue; }
    if (strcmp(a, "--json") == 0) { o->json = 1; continue; }
    if (strcmp(a, "--quiet") == 0) { o->quiet = 1; continue; }
    if (strcmp(a, "--native") == 0) { o->native = 1; continue; }
    if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) { o->verbose = 1; continue; }
    if ((r = take_value(argc, argv, &i, "--url", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (!*val) FAIL("option --url needs a non-empty value%s", "");
      o->url = val;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--password-file", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (!*val) FAIL("option --password-file needs a file name%s", "");
      o->password_file = val;
      continue;
    }
    if (strcmp(a, "--tls-no-verify") == 0) { o->tls_no_verify = 1; continue; }
    {
      static const char *const tls_flags[5] = {"--tls-ca-file", "--tls-ca-dir", "--tls-cert-file", "--tls-key-file",
                                               "--tls-server-name"};
      int k = 0;
      for (; k < 5; k++)
        if ((r = take_value(argc, argv, &i, tls_flags[k], &val)) != 0) break;
      if (k < 5) {
        if (r < 0) FAIL("option %s needs a value", a);
        if (!*val) FAIL("option %s needs a non-empty value", tls_flags[k]);
        o->tls[k] = val;
        continue;
      }
    }
    if ((r = take_value(argc, argv, &i, "--timeout-ms", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      /* connect and command timeout both: their ranges are one (bg_options_bounds) */
      if (cli_option_value(BG_OPT_COMMAND_TIMEOUT_MS, val, &o->timeout_ms, why, sizeof why) != 0)
        FAIL("--timeout-ms: %s (milliseconds)", why);
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--batch", &val)) != 0) {
      int64_t b;
      if (r < 0) FAIL("option %s needs a value", a);
      /* the rotation's BG_OPT_ROTATE_BATCH range; add and contains batch within the same */
      if (cli_option_value(BG_OPT_ROTATE_BATCH, val, &b, why, sizeof why) != 0) FAIL("--batch: %s", why);
      o->batch = (size_t)b;
      o->have_batch = 1;
      seen |= OPT_BATCH;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--strategy", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (strcmp(val, "swap") == 0) o->strategy = BG_ROTATE_SWAP;
      else if (strcmp(val, "naive") == 0) o->strategy = BG_ROTATE_NAIVE;
      else if (strcmp(val, "locked") == 0) o->strategy = BG_ROTATE_LOCKED;
      else FAIL("--strategy: %s is not swap, locked or naive", cli_shown(val));
      seen |= OPT_STRATEGY;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--from", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (!*val) FAIL("option --from needs a file name (or '-')%s", "");
      o->from = val;
      seen |= OPT_FROM;
      continue;
    }
    {
      /* the rotation's integer options, checked against the library's ranges (bg_options_bounds) */
      static const struct {
        const char *opt;
        unsigned bit;
        int option;   /* BG_OPT_ROTATE_* */
        size_t off;
        const char *unit;
      } ints[] = {
        {"--lease-ms", OPT_LEASE, BG_OPT_ROTATE_LEASE_MS, offsetof(cli_opts, lease_ms), " (milliseconds)"},
        {"--wait-ms", OPT_WAIT, BG_OPT_ROTATE_WAIT_MS, offsetof(cli_opts, wait_ms), " (milliseconds)"},
        {"--threads", OPT_THREADS, BG_OPT_ROTATE_THREADS, offsetof(cli_opts, threads), ""},
        {"--chunk-bytes", OPT_CHUNK, BG_OPT_ROTATE_CHUNK_BYTES, offsetof(cli_opts, chunk_bytes), " (bytes)"},
        {"--staging-ttl-ms", OPT_STAGING, BG_OPT_ROTATE_STAGING_TTL_MS, offsetof(cli_opts, staging_ttl_ms),
         " (milliseconds)"},
      };
      size_t k;
      for (k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if ((r = take_value(argc, argv, &i, ints[k].opt, &val)) != 0) break;
      if (k < sizeof ints / sizeof ints[0]) {
        char msg[256];
        if (r < 0) FAIL("option %s needs a value", a);
        if (cli_option_value(ints[k].option, val, (int64_t *)((char *)o + ints[k].off), why, sizeof why) != 0) {
          snprintf(msg, sizeof msg, "%s: %s%s", ints[k].opt, why, ints[k].unit);
          FAIL("%s", msg);
        }
        if (ints[k].bit == OPT_WAIT) o->have_wait = 1;
        seen |= ints[k].bit;
        continue;
      }
    }
    if ((r = take_value(argc, argv, &i, "--expected", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (parse_i64(val, 0, INT64_MAX, &o->expected) != 0)
        FAIL("--expected: %s is not a non-negative integer", cli_shown(val));
      o->have_expected = 1;
      seen |= OPT_EXPECTED;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--fpp", &val)) != 0) {
      char *end;
      if (r < 0) FAIL("option %s needs a value", a);
      errno = 0;
      o->fpp = strtod(val, &end);
      if (end == val || *end || errno == ERANGE)
        FAIL("--fpp: %s is not a number (e.g. 0.01 or 1.0E-4)", cli_shown(val));
      o->have_fpp = 1;
      seen |= OPT_FPP;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--partitions", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      /* the range is the library's to check (its message says what fits) */
      if (parse_i64(val, 0, INT64_MAX, &o->partitions) != 0)
        FAIL("--partitions: %s is not a non-negative integer", cli_shown(val));
      seen |= OPT_PARTS;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--probes", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      if (parse_i64(val, 0, 1000000, &o->probes) != 0)
        FAIL("--probes: %s is not a number of queries in 0..1000000", cli_shown(val));
      o->have_probes = 1;
      seen |= OPT_PROBES;
      continue;
    }
    if ((r = take_value(argc, argv, &i, "--ttl-ms", &val)) != 0) {
      if (r < 0) FAIL("option %s needs a value", a);
      /* the library's bound (bg_filter_expire): Redis refuses a TTL that overflows its clock */
      if (parse_i64(val, 1, CLI_MAX_TTL_MS, &o->ttl_ms) != 0)
        FAIL("--ttl-ms: %s is not a number of milliseconds in 1..70368744177664 (2^46, about 2230 "
             "years; use persist for none)", cli_shown(val));
      o->have_ttl = 1;
      seen |= OPT_TTL;
      continue;
    }
    FAIL("unknown option %s", cli_shown(a));
  }

  if (help) {
    free(pos);
    if (cmd) usage_cmd(stdout, cmd);
    else usage_all(stdout);
    return CLI_EXIT_OK;
  }
  if (version) {
    /* --version is the version command; with another command it is a mistake, not ignored */
    if (cmd && strcmp(cmd->name, "version") != 0) FAIL("--version does not combine with a command%s", "");
    cmd = find_command("version");
    o->cmd = cmd->name;
  }
  if (!cmd) FAIL("no command given%s", "");
  if (seen & ~cmd->opts) {
    static const struct { unsigned bit; const char *name; } names[] = {
      {OPT_EXPECTED, "--expected"}, {OPT_FPP, "--fpp"}, {OPT_TTL, "--ttl-ms"},
      {OPT_BATCH, "--batch"}, {OPT_STRATEGY, "--strategy"}, {OPT_FROM, "--from"},
      {OPT_LEASE, "--lease-ms"}, {OPT_WAIT, "--wait-ms"}, {OPT_THREADS, "--threads"},
      {OPT_CHUNK, "--chunk-bytes"}, {OPT_STAGING, "--staging-ttl-ms"}, {OPT_PROBES, "--probes"},
      {OPT_PARTS, "--partitions"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
      if (seen & ~cmd->opts & names[k].bit) FAIL("option %s does not apply to this command",
                                                 names[k].name);
  }
  if (cmd->args == ARGS_NONE) {
    if (npos || stdin_dash) FAIL("'%s' takes no arguments", cmd->name);
  } else {
    if (npos == 0) FAIL("missing filter NAME%s", "");
    o->name = pos[0];
    if (!*o->name) FAIL("the filter NAME must not be empty%s", "");
    /* "bloomguard info redis://:pw@h" (--url forgotten): the library's messages quote the name */
    if (strstr(o->name, "://") && strchr(o->name, '@'))
      FAIL("the filter NAME %s looks like a server URL with a password: give the server with --url",
           cli_shown(o->name));
    if (cmd->args == ARGS_NAME) {
      if (npos > 1 || stdin_dash) FAIL("'%s' takes only the filter NAME", cmd->name);
    } else {
      /* items: the remaining arguments, or stdin when there are none or the single '-' */
      o->nitems = npos - 1;
      if (stdin_dash > 1) FAIL("'-' (stdin) given more than once%s", "");
      if (stdin_dash && o->nitems) FAIL("'-' (stdin) cannot be combined with ITEM arguments%s", "");
      o->use_stdin = o->nitems == 0;
    }
  }
  if (cmd == find_command("init") && (!o->have_expected || !o->have_fpp))
    FAIL("init needs --expected N and --fpp P%s", "");
  if (cmd == find_command("add") && o->have_expected != o->have_fpp)
    FAIL("add takes --expected N and --fpp P together%s", "");
  if ((cmd == find_command("add") || cmd == find_command("contains")) && o->from && (o->nitems || stdin_dash))
    FAIL("--from cannot be combined with ITEM arguments or '-'%s", "");
  if (cmd == find_command("rotate") && (!o->have_expected || !o->have_fpp))
    FAIL("rotate needs --expected N and --fpp P%s", "");
  if (cmd == find_command("expire") && !o->have_ttl) FAIL("expire needs --ttl-ms MS%s", "");
#undef FAIL

  /* The positionals were collected in order; keep the items in place of argv's head. */
  if (o->nitems) {
    for (size_t k = 0; k < o->nitems; k++) argv[k] = pos[k + 1];
    o->items = argv;
  } else {
    o->items = NULL;
  }
  free(pos);
  *cmdp = cmd;
  return -1;
}

static int connect_client(const cli_opts *o, bg_client **out) {
  bg_options *opts = NULL;
  char err[1024];
  int st = bg_options_new(&opts);
  if (st != BG_OK) return cli_fail(o->cmd, st, "cannot allocate options");
  if (o->timeout_ms > 0) {
    st = bg_options_set_int(opts, BG_OPT_CONNECT_TIMEOUT_MS, o->timeout_ms);
    if (st == BG_OK) st = bg_options_set_int(opts, BG_OPT_COMMAND_TIMEOUT_MS, o->timeout_ms);
    if (st != BG_OK) {
      bg_options_free(opts);
      return cli_fail(o->cmd, st, "--timeout-ms rejected by the library");
    }
  }
  bg_options_set_str(opts, BG_OPT_CLIENT_NAME, "bloomguard-cli");
  bg_options_set_int(opts, BG_OPT_CONNECT_AT_OPEN, 1);   /* a wrong address or password fails at once */
  static const int tls_opts[5] = {BG_OPT_TLS_CA_FILE, BG_OPT_TLS_CA_DIR, BG_OPT_TLS_CERT_FILE, BG_OPT_TLS_KEY_FILE,
                                  BG_OPT_TLS_SERVER_NAME};
  for (int k = 0; k < 5 && st == BG_OK; k++)
    if (o->tls[k]) st = bg_options_set_str(opts, tls_opts[k], o->tls[k]);
  if (st == BG_OK && o->tls_no_verify) st = bg_options_set_int(opts, BG_OPT_TLS_VERIFY, 0);
  if (st != BG_OK) {
    bg_options_free(opts);
    return cli_fail(o->cmd, st, "a --tls-* option was rejected by the library");
  }
  /* a password kept out of the command line (ps): --password-file or the environment */
  if (cli_password_load(o->password_file) != CLI_EXIT_OK) {
    bg_options_free(opts);
    return CLI_EXIT_ERROR;
  }
  const char *pw = cli_password();
  st = pw ? bg_options_set_str(opts, BG_OPT_PASSWORD, pw) : BG_OK;
  cli_password_clear(); /* the options hold their own copy */
  if (st != BG_OK) {
    bg_options_free(opts);
    return cli_fail(o->cmd, st, "the password was rejected by the library");
  }
  st = cli_client_open(out, o->url, opts, err, sizeof err);
  bg_options_free(opts);
  if (st != BG_OK) return cli_fail(o->cmd, st, err);
  return CLI_EXIT_OK;
}

/* --json anywhere among the options: errors are JSON objects from the first one on (a usage error
 * may come before parse() reaches the flag). */
static int wants_json(int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--json") == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  cli_opts o;
  const command *cmd = NULL;
  cli_set_args(argc, argv);
  cli_set_json_errors(wants_json(argc, argv));
  if (cli_is_lock_command(argc, argv)) return cli_finish_stdout(cli_lock_main(argc, argv)); /* lock_cmd.c */
  int rc = parse(argc, argv, &o, &cmd);
  if (rc >= 0) return cli_finish_stdout(rc);

  if (strcmp(cmd->name, "version") == 0) return cli_finish_stdout(cli_cmd_version(&o));
  if (strcmp(cmd->name, "licenses") == 0) return cli_finish_stdout(cli_cmd_licenses(&o));

  bg_client *client = NULL;
  rc = connect_client(&o, &client);
  if (rc != CLI_EXIT_OK) return rc;

  bg_filter *f = NULL;
  int st = o.native ? bg_filter_open_native(&f, client, o.name) : bg_filter_open(&f, client, o.name);
  if (st != BG_OK) {
    char err[1024];
    err[0] = '\0';
    bg_client_errmsg_copy(client, err, sizeof err);
    err[sizeof err - 1] = '\0';
    rc = cli_fail(o.cmd, st, *err ? err : o.name);
    bg_client_close(client);
    return rc;
  }

  o.client = client;
  rc = cmd->run(&o, f);

  bg_filter_close(f);
  bg_client_close(client);
  return cli_finish_stdout(rc);
}
