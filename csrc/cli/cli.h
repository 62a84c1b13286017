/*
 * cli.h - the bloomguard command: shared declarations of its small units.
 *
 *   main.c      argument parsing, usage texts, dispatch, connecting
 *   commands.c  one function per subcommand
 *   items.c     item sources: arguments or stdin lines, delivered in batches
 *   rotate.c    the rotate subcommand: rotation and signals (add's bulk load uses it too)
 *   stats.c     the stats subcommand: probes, counters and latency histograms
 *   progress.c  the progress bar on stderr (rotate, add)
 *   output.c    JSON string escaping, number formatting, error reporting
 *   secret.c    what messages may show of an argument; the password from a file or $BLOOMGUARD_*
 *
 * The CLI uses only the public API (bloomguard.h) and the shared library. output.c and secret.c
 * (bg_cli_kit) serve bloomguard-demo (tools/demo) too.
 */
#ifndef BG_CLI_H
#define BG_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bloomguard.h"

/* Documented exit statuses. */
#define CLI_EXIT_OK      0   /* success (contains: every item present) */
#define CLI_EXIT_ABSENT  1   /* contains: at least one item absent */
#define CLI_EXIT_ERROR   2   /* library, connection or server error */
#define CLI_EXIT_USAGE  64   /* usage error (EX_USAGE) */
#define CLI_EXIT_INTERRUPTED 130  /* rotate: stopped by SIGINT / SIGTERM, the rotation aborted */

#define CLI_DEFAULT_URL   "redis://127.0.0.1:6379"
#define CLI_DEFAULT_BATCH 1000
/* expire --ttl-ms: the library's bound, 2^46 ms (bg_filter_expire) */
#define CLI_MAX_TTL_MS    70368744177664LL
/* A stdin batch is also flushed once its items reach this many bytes (long lines). */
#define CLI_BATCH_BYTES   (8u * 1024u * 1024u)
/* rotate reads larger batches: the library hashes a batch on several threads only from 8192
 * items per thread on. */
#define CLI_ROTATE_BATCH  262144

typedef struct cli_opts {
  const char *cmd;         /* subcommand name */
  const char *url;         /* --url, else $BLOOMGUARD_URL, else CLI_DEFAULT_URL */
  const char *password_file; /* --password-file PATH; NULL: not given */
  const char *tls[5];        /* --tls-ca-file, --tls-ca-dir, --tls-cert-file, --tls-key-file, --tls-server-name */
  int tls_no_verify;         /* --tls-no-verify */
  int json;                /* --json */
  int quiet;               /* --quiet: no progress bar */
  int native;              /* --native: bg_filter_open_native */
  int have_batch;          /* --batch given */
  int verbose;             /* -v / --verbose */
  int64_t timeout_ms;      /* --timeout-ms; 0 = library defaults */
  size_t batch;            /* --batch */
  int have_expected;
  int64_t expected;        /* --expected */
  int have_fpp;
  double fpp;              /* --fpp */
  int64_t partitions;      /* --partitions; 0: Redisson's layout */
  int have_ttl;
  int64_t ttl_ms;          /* --ttl-ms */
  /* rotate */
  int strategy;            /* --strategy: BG_ROTATE_SWAP (default) or BG_ROTATE_NAIVE */
  const char *from;        /* --from FILE (rotate, add); NULL or "-": standard input */
  int64_t lease_ms;        /* --lease-ms; 0 = library default */
  int have_wait;
  int64_t wait_ms;         /* --wait-ms */
  int64_t threads;         /* --threads; 0 = library default (online CPUs - 1) */
  int64_t chunk_bytes;     /* --chunk-bytes; 0 = library default */
  int64_t staging_ttl_ms;  /* --staging-ttl-ms; 0 = library default */
  int have_probes;
  int64_t probes;          /* stats --probes; default 100 */
  bg_client *client;       /* the connected client (set before a command runs) */
  const char *name;        /* filter name (first positional) */
  char **items;            /* remaining positionals */
  size_t nitems;
  int use_stdin;           /* no item arguments, or the single argument "-" */
} cli_opts;

/* ---- commands.c: each returns an exit status ------------------------------------------ */
int cli_cmd_version(const cli_opts *o);
int cli_cmd_info(const cli_opts *o, bg_filter *f);
int cli_cmd_init(const cli_opts *o, bg_filter *f);
int cli_cmd_add(const cli_opts *o, bg_filter *f);
int cli_cmd_contains(const cli_opts *o, bg_filter *f);
int cli_cmd_count(const cli_opts *o, bg_filter *f);
int cli_cmd_delete(const cli_opts *o, bg_filter *f);
int cli_cmd_expire(const cli_opts *o, bg_filter *f);
int cli_cmd_persist(const cli_opts *o, bg_filter *f);
int cli_cmd_rotate(const cli_opts *o, bg_filter *f);   /* rotate.c */
int cli_cmd_stats(const cli_opts *o, bg_filter *f);    /* stats.c */
/* licenses.c: `bloomguard licenses` prints LICENSE, NOTICE and the notice of each third-party
 * component compiled into the command; the texts come from notices.c, which the build generates
 * from the files themselves (cmake/embed_notices.cmake) */
typedef struct cli_notice {
  const char *path;   /* repository-relative, e.g. "third_party/hiredis/COPYING" */
  const char *text;
} cli_notice;
extern const cli_notice cli_notices[];
extern const size_t cli_nnotices;
int cli_cmd_licenses(const cli_opts *o);
/* lock_cmd.c: `bloomguard lock NAME ...`, which parses its own arguments */
int cli_is_lock_command(int argc, char **argv);
int cli_lock_main(int argc, char **argv);

/* ---- progress.c --------------------------------------------------------------------- */
#define CLI_PHASE_STARTING 0
#define CLI_PHASE_WAITING (-1)  /* for another rotation (--wait-ms), before begin succeeded */

typedef struct cli_progress {
  const char *verb;       /* "rotate", "add" */
  const char *name;       /* the filter */
  const char *building;   /* what BG_PHASE_BUILDING is called: "building", "adding" */
  int tty;                /* draw at all: stderr is a terminal and no --quiet */
  int drawn;              /* the bar is on the terminal line */
  int phase;              /* BG_PHASE_* or CLI_PHASE_* */
  uint64_t items, bytes_done, bytes_total;
  /* the input's bytes read, and its size when known (a regular file): the building phase's
   * percent and ETA; input_total 0: unknown (a pipe) */
  uint64_t input_done, input_total;
  uint64_t t0;            /* the work began (items/s) */
  uint64_t upload_t0;     /* first report of the upload phase (ETA) */
  uint64_t last_draw;
} cli_progress;

uint64_t cli_now_ns(void);  /* CLOCK_MONOTONIC */
void cli_progress_init(cli_progress *p, const cli_opts *o, const char *verb, const char *building);
/* Redraws the line, unless drawn less than 100 ms ago (force: now). */
void cli_progress_draw(cli_progress *p, int force);
/* The rotation's progress report: a phase change redraws at once. */
void cli_progress_phase(cli_progress *p, int phase, uint64_t items, uint64_t bytes_done,
                        uint64_t bytes_total);
/* Erases the line, so that a message or the result starts at column 0. */
void cli_progress_clear(cli_progress *p);

/* ---- rotate.c: a filter loaded from a file through a rotation ----------------------- */
typedef struct cli_load {
  int fd;                  /* the items, one per line (the caller opens and closes it) */
  const char *what;        /* fd in messages: "standard input", a file name */
  int64_t expected;
  double fpp;
  int strategy;            /* BG_ROTATE_* */
  int only_if_empty;       /* add: unless the filter holds no item once the rotation has begun,
                              abort it and return CLI_LOAD_NOT_EMPTY, fd untouched */
  uint64_t items, bytes, us;  /* out: bg_rotation_stats after the commit */
} cli_load;
#define CLI_LOAD_NOT_EMPTY (-1)
/* Begins a rotation of f (waiting up to --wait-ms), feeds it fd's lines, commits it; SIGINT and
 * SIGTERM abort it cleanly (CLI_EXIT_INTERRUPTED); the progress bar is drawn on a terminal. */
int cli_rotation_load(const cli_opts *o, bg_filter *f, cli_load *l);

/* ---- items.c ------------------------------------------------------------------------ */
/*
 * Called once per batch; items[i] points at lens[i] bytes (valid only during the call; not
 * NUL-terminated for stdin items). Returns CLI_EXIT_OK to go on, anything else stops the walk
 * and is returned by cli_for_each_batch.
 */
typedef int (*cli_batch_fn)(const void *const *items, const size_t *lens, size_t n, void *ud);

/*
 * Delivers the items of o (arguments, or stdin lines when o->use_stdin) in batches of at most
 * o->batch items (stdin batches also end at CLI_BATCH_BYTES). Buffers are allocated once and
 * reused for every batch. Returns CLI_EXIT_OK, the callback's stop value, or CLI_EXIT_ERROR
 * (message printed) when stdin cannot be read or memory runs out.
 */
int cli_for_each_batch(const cli_opts *o, cli_batch_fn fn, void *ud);

/* The line source of --from: FILE opened for reading (fd; what: its name as messages show it), or
 * standard input for none or '-'. CLI_EXIT_OK, or CLI_EXIT_ERROR with the message printed. */
int cli_open_lines(const cli_opts *o, int *fd, const char **what);

/* Called by cli_for_each_line_fd after every read and whenever no input came for 200 ms.
 * Returns CLI_EXIT_OK to go on, anything else stops the walk and is returned. */
typedef int (*cli_tick_fn)(void *ud);

/*
 * The same line rules as stdin above, read from fd with read(2): a batch ends at `batch` items or
 * CLI_BATCH_BYTES. The wait for input is a poll(2) of at most 200 ms, so `tick` (may be NULL)
 * runs even while the source is idle: a stop request is noticed without input arriving. `what`
 * names the source in messages ("standard input", a file name). bar (may be NULL) is told the
 * input's size, when fd is a regular file, and the bytes read so far.
 */
int cli_for_each_line_fd(const cli_opts *o, int fd, const char *what, size_t batch,
                         cli_batch_fn fn, cli_tick_fn tick, void *ud, cli_progress *bar);

/* ---- secret.c ---------------------------------------------------------------------- */
/* ---- library.c ------------------------------------------------------------------------- */
/* Parses s as a value of the integer option (BG_OPT_*) within the library's range for it
 * (bg_options_bounds): 0, or -1 with why = "'X' is not a whole number in LO..HI". */
int cli_option_value(int option, const char *s, int64_t *out, char *why, size_t cap);
/* bg_client_open_ex with a call of its own: the failure's message goes to err ("" on success). */
int cli_client_open(bg_client **out, const char *url, const bg_options *opts, char *err, size_t cap);

/* Records argv, so cli_shown can name an argument by its position. */
void cli_set_args(int argc, char **argv);
/* How a message may show the argument arg (or a value inside one, after '='): quoted when it
 * looks like a command, option name or number; else "(argument N, not shown: ...)", since it may
 * be a misplaced URL or a password. Returns a static buffer: one call per message. */
const char *cli_shown(const char *arg);
/* A file name as messages may show it: as is, unless it looks like a URL with userinfo (holds
 * '@' or "://": a misplaced --url), then a note saying it is not shown. */
const char *cli_path_shown(const char *path);
/* The password: --password-file PATH (file_opt, may be NULL), else $BLOOMGUARD_PASSWORD_FILE,
 * else $BLOOMGUARD_PASSWORD, else none (the URL's applies). A file gives its first line, without
 * "\n" or "\r\n" (an empty line: none). Returns CLI_EXIT_OK or CLI_EXIT_ERROR with a message
 * naming the file (never its content). */
int cli_password_load(const char *file_opt);
/* The loaded password or NULL. */
const char *cli_password(void);
/* Wipes and frees the loaded password. */
void cli_password_clear(void);

/* ---- output.c ----------------------------------------------------------------------- */
/* Writes s (len bytes) as a JSON string literal, quotes included. Control characters are
 * escaped, bytes that are not valid UTF-8 become U+FFFD. Returns 1 if s was valid UTF-8. */
int cli_json_string(FILE *out, const void *s, size_t len);
/* 1 if the bytes are valid UTF-8 (no overlongs, no surrogates, max U+10FFFF). */
int cli_utf8_valid(const void *s, size_t len);
/* Writes the bytes as lowercase hex, no quotes. */
void cli_hex(FILE *out, const void *s, size_t len);
/* Shortest decimal form of d that reads back to the same double ("%.15g".."%.17g"). */
void cli_fmt_double(char *buf, size_t size, double d);

/* Symbolic name of a status code, e.g. "BG_ENOTINIT" ("BG_E?" for an unknown code). */
const char *cli_status_name(int status);
/* --json: every error is also printed on stdout, on a line of its own, as
 * {"error":{"code":STATUS,"name":"BG_E...","message":"..."}} (the exit status is unchanged). */
void cli_set_json_errors(int on);
/* Set while stdout ends inside a JSON document being streamed (an error then starts a new line). */
void cli_json_partial(int open);
/* Prints "bloomguard: CMD: MESSAGE" on stderr (CMD may be NULL) and, with --json, the error object
 * named by status (the library's BG_E* code closest to what failed); returns exit_code. */
int cli_error(const char *cmd, int status, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints "bloomguard: CMD: BG_ENAME (strerror): detail" on stderr (and the JSON error object);
 * returns CLI_EXIT_ERROR. */
int cli_fail(const char *cmd, int status, const char *detail);
/* Same, taking the detail from the filter's message. */
int cli_fail_filter(const char *cmd, int status, const bg_filter *f);
/* Checks stdout for write errors after the command; returns rc or CLI_EXIT_ERROR. */
int cli_finish_stdout(int rc);

#endif
