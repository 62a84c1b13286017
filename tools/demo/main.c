/*
 * main.c - bloomguard-demo: the rebuild problem and its fixes, measured on this machine.
 *
 *   bloomguard-demo [--url URL] [--items N] [--seconds S] [--threads N] [--rate Q]
 *                   [--strategies LIST] [--plot FILE] [--json] [--timeout-ms MS]
 *
 * With no --url it starts its own redis-server on a free loopback port and stops it at the end
 * (by pid). Each scenario loads a catalogue filter, then keeps query threads busy while it is
 * rebuilt (see scenario.c); a table (or --json) summarises, and an SVG plot shows latency and
 * errors over time with the rotations marked. Exit 0 when the demo ran - a strategy showing errors
 * is its result, not a failure - 2 when the harness failed (no redis-server, cannot connect, ...),
 * 64 on a usage error, 130 when interrupted.
 *
 * It is its own program (tools/demo), not a subcommand of the shipped bloomguard command.
 * $BLOOMGUARD_URL is deliberately not used: the demo loads millions of keys, only into a server
 * named on its command line or one it started itself.
 */
#define _DEFAULT_SOURCE 1 /* SA_RESTART under the strict C11 build */

#include "demo.h"
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_ITEMS    1000000
#define DEFAULT_SECONDS  8.0
#define DEFAULT_THREADS  4
#define DEFAULT_RATE     10000   /* queries per second: what 4 threads keep up on a busy 2-core machine */
#define DEFAULT_PLOT     "bloomguard-demo.svg"

static volatile sig_atomic_t demo_stop;
static void on_demo_signal(int sig) { demo_stop = sig; }

static const char demo_help[] =
  "usage: bloomguard-demo [--url URL] [--items N] [--seconds S] [--threads N] [--rate Q]\n"
  "                       [--strategies LIST] [--plot FILE] [--json] [--timeout-ms MS]\n"
  "\n"
  "Replays 'the catalogue filter is rebuilt every hour while queries keep coming', compressed\n"
  "into seconds, once per strategy, and measures what the readers see:\n"
  "  naive    delete + init + re-add into the live keys (the rebuild that fails in production)\n"
  "  swap     build aside, upload to staging keys, one atomic swap (bloomguard's default)\n"
  "  locked   rebuild in place under the filter's write lock (readers wait)\n"
  "  degrade  swap rebuilds, but the demo kills its redis-server mid-run and starts it again\n"
  "           empty: answers then come from bloomguard's default degrade policy (retry\n"
  "           briefly, then assume present; circuit breaker) until the next rebuild\n"
  "Query threads ask for product ids that are all in the catalogue, so every 'absent' answer is\n"
  "a false negative. Rebuilds start at 10 %, 40 % and 70 % of each scenario, each once the\n"
  "previous one is over; queries go on until the last rebuild has committed (a naive rebuild\n"
  "of a big catalogue takes long). degrade: Redis is killed at 25 %, restarted 30 % later,\n"
  "and the filter rebuilt 10 % after that.\n"
  "\n"
  "  --url URL          use this server instead of starting one (the degrade scenario is then\n"
  "                     skipped: the demo stops only a server it started). $BLOOMGUARD_URL is\n"
  "                     not used. Keys: bloomguard-demo:PID:*, deleted at the end (the\n"
  "                     rotations' staging keys expire on their own within 30 s)\n"
  "  --password-file PATH  the server's password: the first line of PATH (else\n"
  "                     $BLOOMGUARD_PASSWORD_FILE, else $BLOOMGUARD_PASSWORD)\n"
  "  --items N          catalogue size (default 1000000; 1000..100000000)\n"
  "  --seconds S        length of each scenario (default 8; 1..600)\n"
  "  --threads N        query threads (default 4; 1..64)\n"
  "  --rate Q           queries per second, all threads together (default 10000; 0: as fast\n"
  "                     as they can, which makes scenarios with instant answers count more)\n"
  "  --strategies LIST  comma-separated subset of naive,swap,locked,degrade (default: all)\n"
  "  --plot FILE        the SVG plot (default " DEFAULT_PLOT "); --plot '' for none\n"
  "  --json             print a JSON summary on stdout instead of the table\n"
  "  --timeout-ms MS    connect and command timeout of the readers' client (default: the\n"
  "                     library's, 2000 / 1000 ms); the rebuilds' own client waits up to 10 s\n"
  "Progress goes to standard error. Without --url, redis-server must be on PATH (or named by\n"
  "$BG_REDIS_SERVER); scripts/demo.sh installs it and builds the demo first.\n"
  "\n"
  "Exit status: 0 the demo ran (even though naive shows errors: that is the point), 2 the demo\n"
  "itself failed (no redis-server, cannot connect, ...), 64 usage error, 130 interrupted.\n";

static int demo_usage(const char *fmt, const char *arg) {
  fputs("bloomguard-demo: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nusage: bloomguard-demo [--url URL] [--items N] [--seconds S] [--threads N] [--rate Q] [--strategies LIST] "
        "[--plot FILE] [--json] [--timeout-ms MS]  (bloomguard-demo --help)\n", stderr);
  return CLI_EXIT_USAGE;
}

static int takes_value(const char *a) {
  static const char *const v[] = {"--url", "--timeout-ms", "--items", "--seconds", "--threads", "--rate",
                                  "--strategies", "--plot", "--password-file"};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!strcmp(a, v[i])) return 1;
  return 0;
}

static int num(const char *s, double min, double max, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= min && v <= max)) return -1;
  *out = v;
  return 0;
}

/* "naive,swap" -> kinds in the order given; -1 on an unknown or repeated name. */
static int parse_strategies(const char *list, int *kinds) {
  int n = 0;
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int k;
    for (k = 0; k < DEMO_NKINDS; k++)
      if (strlen(demo_kind_name(k)) == len && !strncmp(p, demo_kind_name(k), len)) break;
    if (k == DEMO_NKINDS) return -1;
    for (int j = 0; j < n; j++)
      if (kinds[j] == k) return -1;
    kinds[n++] = k;
    if (!end) break;
    p = end + 1;
  }
  return n ? n : -1;
}

/* ---- output --------------------------------------------------------------------------- */
static void print_table(const demo_config *cfg, const demo_result *rs, int n, const char *plot) {
  printf("%-9s %10s %8s %10s %9s %9s %9s %9s %10s %10s %9s %7s\n", "strategy", "queries", "errors", "false-neg",
         "p50 ms", "p99 ms", "max ms", "rebuilds", "rebuild s", "redis", "assumed", "other");
  for (int i = 0; i < n; i++) {
    const demo_result *r = &rs[i];
    if (!r->ran) {
      printf("%-9s %s\n", r->name, r->note[0] ? r->note : "did not run");
      continue;
    }
    char rebuilds[32];
    snprintf(rebuilds, sizeof rebuilds, "%d/%d", r->rotations_ok, r->rotations_ok + r->rotations_failed);
    printf("%-9s %10llu %8llu %10llu %9.3f %9.3f %9.1f %9s %10.2f %10lld %9lld %7lld\n", r->name,
           (unsigned long long)r->queries, (unsigned long long)r->errors, (unsigned long long)r->false_neg,
           r->p50_us / 1e3, r->p99_us / 1e3, r->max_us / 1e3, rebuilds, r->rebuild_mean_s,
           (long long)r->answers[BG_SOURCE_REDIS],
           (long long)(r->answers[BG_SOURCE_ASSUMED_PRESENT] + r->answers[BG_SOURCE_ASSUMED_ABSENT]),
           (long long)(r->answers[BG_SOURCE_SNAPSHOT] + r->answers[BG_SOURCE_CALLBACK]));
  }
  putchar('\n');
  for (int i = 0; i < n; i++) {
    const demo_result *r = &rs[i];
    if (!r->ran) continue;
    printf("%s: catalogue loaded in %.2f s; rebuild longest %.2f s", r->name, r->load_s, r->rebuild_max_s);
    if (r->duration_s > cfg->seconds * 1.01)
      printf("; queries ran %.2f s: until the last rebuild ended", r->duration_s);
    if (r->kind == DEMO_DEGRADE)
      printf("; policy: %lld retries, breaker opened %lld times, %lld calls not sent while open", (long long)r->retries,
             (long long)r->breaker_trips, (long long)r->breaker_rejected);
    putchar('\n');
    if (r->note[0]) printf("  note: %s\n", r->note);
    if (r->first_error[0]) printf("  first error: %s\n", r->first_error);
  }
  printf("latency: per query (one item per call), from histograms with bins about 9 %% wide\n");
  printf("answers: redis = the server answered; assumed = the degrade policy answered 'present'"
         " (no policy outside degrade)\n");
  if (plot && *plot) printf("plot: %s\n", plot);
}

static void json_num(const char *key, double v) {
  char buf[40];
  cli_fmt_double(buf, sizeof buf, v);
  printf(",\"%s\":%s", key, buf);
}

static void print_json(const demo_config *cfg, const demo_result *rs, int n, const char *plot) {
  printf("{\"items\":%lld,\"threads\":%d", (long long)cfg->items, cfg->threads);
  json_num("rate", cfg->rate);
  json_num("seconds", cfg->seconds);
  json_num("fpp", cfg->fpp);
  printf(",\"server\":\"%s\",\"plot\":", cfg->server ? "started" : "external");
  if (plot && *plot) cli_json_string(stdout, plot, strlen(plot));
  else fputs("null", stdout);
  fputs(",\"scenarios\":[", stdout);
  for (int i = 0; i < n; i++) {
    const demo_result *r = &rs[i];
    printf("%s{\"strategy\":\"%s\",\"ran\":%s,\"harnessFailed\":%s,\"note\":", i ? "," : "", r->name,
           r->ran ? "true" : "false", r->harness_failed ? "true" : "false");
    cli_json_string(stdout, r->note, strlen(r->note));
    if (r->ran) {
      printf(",\"queries\":%llu,\"errors\":%llu,\"falseNegatives\":%llu,\"policyAnswers\":%llu",
             (unsigned long long)r->queries, (unsigned long long)r->errors, (unsigned long long)r->false_neg,
             (unsigned long long)r->degraded);
      json_num("p50Ms", r->p50_us / 1e3);
      json_num("p99Ms", r->p99_us / 1e3);
      json_num("maxMs", r->max_us / 1e3);
      printf(",\"rotations\":%d,\"rotationsFailed\":%d", r->rotations_ok, r->rotations_failed);
      json_num("rebuildMeanS", r->rebuild_mean_s);
      json_num("rebuildMaxS", r->rebuild_max_s);
      json_num("loadS", r->load_s);
      json_num("durationS", r->duration_s);
      printf(",\"answers\":{\"redis\":%lld,\"snapshot\":%lld,\"callback\":%lld,\"assumedPresent\":%lld,"
             "\"assumedAbsent\":%lld}",
             (long long)r->answers[1], (long long)r->answers[2], (long long)r->answers[3], (long long)r->answers[4],
             (long long)r->answers[5]);
      printf(",\"retries\":%lld,\"breakerTrips\":%lld,\"breakerRejected\":%lld", (long long)r->retries,
             (long long)r->breaker_trips, (long long)r->breaker_rejected);
      fputs(",\"marks\":[", stdout);
      for (int m = 0; m < r->nmarks; m++) {
        printf("%s{\"kind\":\"%s\",\"ok\":%s", m ? "," : "",
               r->marks[m].kind == DEMO_MARK_OUTAGE ? "outage" : "rotation", r->marks[m].ok ? "true" : "false");
        json_num("start", r->marks[m].t0);
        json_num("end", r->marks[m].t1);
        putchar('}');
      }
      fputs("],\"firstError\":", stdout);
      cli_json_string(stdout, r->first_error, strlen(r->first_error));
    }
    putchar('}');
  }
  fputs("]}\n", stdout);
}

/* ---- main ----------------------------------------------------------------------------- */
static int demo_main(int argc, char **argv) {
  const char *url = NULL, *plot = DEFAULT_PLOT, *password_file = NULL;
  double items = DEFAULT_ITEMS, seconds = DEFAULT_SECONDS, threads = DEFAULT_THREADS, timeout = 0;
  double rate = DEFAULT_RATE;
  int json = 0, kinds[DEMO_NKINDS] = {DEMO_NAIVE, DEMO_SWAP, DEMO_LOCKED, DEMO_DEGRADE};
  int nkinds = DEMO_NKINDS;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    if (a[0] != '-' || !a[1]) return demo_usage("unexpected argument %s", cli_shown(a));
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(demo_help, stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--json")) { json = 1; continue; }
    const char *eq = strchr(a, '=');
    char opt[32];
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= sizeof opt) return demo_usage("unknown option %s", cli_shown(a));
    memcpy(opt, a, n);
    opt[n] = 0;
    if (!takes_value(opt)) return demo_usage("unknown option %s", cli_shown(a));
    if (eq) val = eq + 1;
    else if (i + 1 < argc) val = argv[++i];
    else return demo_usage("option %s needs a value", cli_shown(a));
    if (!strcmp(opt, "--url")) {
      if (!*val) return demo_usage("option --url needs a non-empty value%s", "");
      url = val;
    } else if (!strcmp(opt, "--password-file")) {
      password_file = val;
    } else if (!strcmp(opt, "--plot")) {
      plot = val;
    } else if (!strcmp(opt, "--items")) {
      if (num(val, 1000, 100000000, &items) || items != (double)(int64_t)items)
        return demo_usage("--items: %s is not a whole number in 1000..100000000", cli_shown(val));
    } else if (!strcmp(opt, "--seconds")) {
      if (num(val, 1, 600, &seconds))
        return demo_usage("--seconds: %s is not a number in 1..600", cli_shown(val));
    } else if (!strcmp(opt, "--threads")) {
      if (num(val, 1, DEMO_MAX_THREADS, &threads) || threads != (double)(int)threads)
        return demo_usage("--threads: %s is not a whole number in 1..64", cli_shown(val));
    } else if (!strcmp(opt, "--rate")) {
      if (num(val, 0, 10000000, &rate))
        return demo_usage("--rate: %s is not a number in 0..10000000", cli_shown(val));
    } else if (!strcmp(opt, "--timeout-ms")) {
      if (num(val, 1, 3600000, &timeout) || timeout != (double)(int64_t)timeout)
        return demo_usage("--timeout-ms: %s is not a whole number in 1..3600000", cli_shown(val));
    } else if (!strcmp(opt, "--strategies")) {
      if ((nkinds = parse_strategies(val, kinds)) < 0)
        return demo_usage("--strategies: %s is not a comma-separated list of naive, swap, locked, degrade "
                          "(each at most once)", cli_shown(val));
    }
  }

  /* --password-file, else $BLOOMGUARD_PASSWORD_FILE / $BLOOMGUARD_PASSWORD: for every client */
  if (cli_password_load(password_file) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
  bgt_server server;
  memset(&server, 0, sizeof server);
  char err[512];
  if (!url) {
    if (bgt_server_find(&server) != 0) {
      fprintf(stderr,
              "bloomguard-demo: redis-server is not installed (%s not found%s).\n"
              "  Install it (Debian/Ubuntu: apt-get install redis-server), or run scripts/demo.sh, which\n"
              "  installs what is missing, or point the demo at a running server: --url redis://HOST:PORT\n",
              bgt_server_bin(), strchr(bgt_server_bin(), '/') ? "" : " on PATH");
      return CLI_EXIT_ERROR;
    }
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_demo_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (!url) {
    if (bgt_server_start(&server, err, sizeof err) != 0) {
      fprintf(stderr, "bloomguard-demo: cannot start redis-server: %s\n", err);
      bgt_server_cleanup(&server);
      cli_password_clear();
      return CLI_EXIT_ERROR;
    }
    fprintf(stderr, "demo: started %s on 127.0.0.1:%d (pid %d); it is stopped at the end\n", server.bin, server.port,
            (int)server.pid);
  }
  char prefix[64];
  if (url) snprintf(prefix, sizeof prefix, "bloomguard-demo:%d:", (int)getpid());
  else snprintf(prefix, sizeof prefix, "bloomguard-demo:");
  demo_config cfg = {url ? url : server.url, url ? NULL : &server, (int64_t)items, 0.01, seconds, (int)threads, rate,
                     (int64_t)timeout, prefix, &demo_stop};

  demo_result results[DEMO_NKINDS];
  memset(results, 0, sizeof results);
  int failed = 0;
  for (int i = 0; i < nkinds && !demo_stop; i++) {
    demo_result *r = &results[i];
    r->kind = kinds[i];
    fprintf(stderr, "demo: %-8s loading %lld items, then %g s of queries (%g/s on %d threads)...\n",
            demo_kind_name(r->kind), (long long)cfg.items, cfg.seconds, cfg.rate, cfg.threads);
    if (demo_run_scenario(&cfg, r) != 0) {
      failed = 1;
      fprintf(stderr, "bloomguard-demo: %s: %s\n", r->name, r->note);
    } else if (!r->ran) {
      fprintf(stderr, "demo: %-8s %s\n", r->name, r->note);
    }
  }
  int nres = 0;
  while (nres < nkinds && results[nres].name) nres++;
  if (!url) bgt_server_cleanup(&server);
  cli_password_clear();

  if (plot && *plot) {
    if (demo_write_svg(plot, results, nres, &cfg) != 0) {
      fprintf(stderr, "bloomguard-demo: cannot write the plot %s: %s\n", plot, strerror(errno));
      failed = 1;
      plot = NULL;
    }
  }
  if (json) print_json(&cfg, results, nres, plot);
  else print_table(&cfg, results, nres, plot);
  for (int i = 0; i < nres; i++) demo_result_free(&results[i]);
  if (demo_stop) return CLI_EXIT_INTERRUPTED;
  return failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

int main(int argc, char **argv) {
  cli_set_args(argc, argv);  /* what messages may quote of an argument (secret.c) */
  return cli_finish_stdout(demo_main(argc, argv));
}
