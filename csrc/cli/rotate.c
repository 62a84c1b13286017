/*
 * rotate.c - `bloomguard rotate`: rebuilds a live filter through bg_rotation_* (rotation.h).
 *
 *   begin (waiting up to --wait-ms for another rotation; a signal cancels the wait)
 *   -> items from --from FILE or stdin, in batches, to bg_rotation_add_many
 *   -> bg_rotation_commit (upload + atomic swap for SWAP)
 *
 * Signals: SIGINT and SIGTERM set a flag (SA_RESETHAND: a second one ends the process at once)
 * and cancel the library call in progress (bg_call_cancel, async-signal-safe: a wait for another
 * rotation, or a LOCKED commit's wait for the write lock, ends within 50 ms with BG_ECANCELED).
 * The flag is checked by the progress callback, which then returns non-zero so the library
 * aborts the rotation cleanly (BG_EABORTED), and by the line reader between reads (it polls at
 * most 200 ms, so an idle source does not hide the request); any failure or stop outside the
 * library calls bg_rotation_abort. A signal already ignored when the command started (a
 * background job of a non-interactive shell) stays ignored, as is the convention.
 *
 * Progress: on a terminal (isatty(stderr)) one line on stderr, redrawn in place at most every
 * 100 ms and at each phase change; nothing otherwise.
 */
#define _DEFAULT_SOURCE 1  /* TIOCGWINSZ, SA_RESTART / SA_RESETHAND under the strict C11 build */

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define DRAW_EVERY_NS 100000000ull

static volatile sig_atomic_t stop_signal;  /* the signal that asked to stop; 0: none */
static bg_call *volatile signal_call;       /* the call a signal cancels (set while handlers are) */

static void on_signal(int sig) {
  stop_signal = sig;
  bg_call *c = signal_call;
  if (c) bg_call_cancel(c);
}

static const int handled[] = {SIGINT, SIGTERM};
#define NHANDLED (sizeof handled / sizeof handled[0])

typedef struct saved_handlers {
  struct sigaction old[NHANDLED];
  int set[NHANDLED];
} saved_handlers;

static void install_handlers(saved_handlers *h) {
  for (size_t i = 0; i < NHANDLED; i++) {
    struct sigaction cur, sa;
    h->set[i] = 0;
    if (sigaction(handled[i], NULL, &cur) != 0 || cur.sa_handler == SIG_IGN) continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: the library's reads and writes carry on; poll() in the line reader still
     * returns EINTR. SA_RESETHAND: a second signal takes its default action. */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    if (sigaction(handled[i], &sa, &h->old[i]) == 0) h->set[i] = 1;
  }
}

static void restore_handlers(saved_handlers *h) {
  for (size_t i = 0; i < NHANDLED; i++)
    if (h->set[i]) sigaction(handled[i], &h->old[i], NULL);
}

static const char *signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- progress bar ----------------------------------------------------------------------- */

#define PHASE_WAITING (-1)  /* for another rotation (--wait-ms), before begin succeeded */

typedef struct rot_state {
  const cli_opts *o;
  bg_filter *f;
  bg_rotation *r;
  int tty;              /* draw the bar */
  int drawn;            /* the bar is on the terminal line */
  int phase;            /* BG_PHASE_* or PHASE_WAITING */
  uint64_t items;       /* items handed to the library so far */
  uint64_t bytes_done, bytes_total;
  uint64_t t0;          /* begin succeeded */
  uint64_t upload_t0;   /* first report of the upload phase */
  uint64_t last_draw;
} rot_state;

static void fmt_bytes(char *buf, size_t cap, uint64_t v) {
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
  if (v < 1024) {
    snprintf(buf, cap, "%llu B", (unsigned long long)v);
    return;
  }
  double d = (double)v / 1024.0;
  size_t u = 0;
  while (d >= 1024.0 && u + 1 < sizeof unit / sizeof unit[0]) d /= 1024.0, u++;
  snprintf(buf, cap, "%.1f %s", d, unit[u]);
}

static void fmt_duration(char *buf, size_t cap, double s) {
  if (s < 60) snprintf(buf, cap, "%.0fs", ceil(s));
  else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static const char *phase_name(const rot_state *s) {
  switch (s->phase) {
    case PHASE_WAITING: return "waiting for another rotation";
    case BG_PHASE_BUILDING: return s->o->strategy == BG_ROTATE_NAIVE ? "adding" : "building";
    case BG_PHASE_UPLOADING: return "uploading";
    case BG_PHASE_COMMITTING: return "committing";
    case BG_PHASE_DONE: return "done";
    default: return "starting";
  }
}

static void bar_clear(rot_state *s) {
  if (!s->drawn) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  s->drawn = 0;
}

static void bar_draw(rot_state *s, int force) {
  if (!s->tty) return;
  uint64_t now = now_ns();
  if (!force && now - s->last_draw < DRAW_EVERY_NS) return;
  s->last_draw = now;

  char line[512], a[32], b[32], eta[32];
  size_t len = 0;
#define PUT(...) do { \
    int w_ = snprintf(line + len, sizeof line - len, __VA_ARGS__); \
    if (w_ > 0) len = len + (size_t)w_ < sizeof line ? len + (size_t)w_ : sizeof line - 1; \
  } while (0)
  PUT("rotate %.24s%s: %s", s->o->name, strlen(s->o->name) > 24 ? "..." : "", phase_name(s));
  if (s->phase != PHASE_WAITING) {
    double secs = s->t0 ? (double)(now - s->t0) / 1e9 : 0;
    PUT("  %llu items", (unsigned long long)s->items);
    if (secs > 0.05) PUT("  %.0f items/s", (double)s->items / secs);
  }
  if (s->bytes_total > 0 && s->phase >= BG_PHASE_UPLOADING) {
    int filled = (int)(20.0 * (double)s->bytes_done / (double)s->bytes_total);
    if (filled > 20) filled = 20;
    fmt_bytes(a, sizeof a, s->bytes_done);
    fmt_bytes(b, sizeof b, s->bytes_total);
    PUT("  [%.*s%.*s] %s / %s", filled, "####################", 20 - filled,
        "--------------------", a, b);
    if (s->phase == BG_PHASE_UPLOADING && s->bytes_done > 0 && s->bytes_done < s->bytes_total) {
      double up = (double)(now - s->upload_t0) / 1e9;
      if (up > 0) {
        fmt_duration(eta, sizeof eta,
                     (double)(s->bytes_total - s->bytes_done) / ((double)s->bytes_done / up));
        PUT("  ETA %s", eta);
      }
    }
  }
#undef PUT
  /* never wider than the terminal: a wrapped line cannot be redrawn in place */
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && len >= ws.ws_col)
    len = ws.ws_col - 1;
  fputc('\r', stderr);
  fwrite(line, 1, len, stderr);
  fputs("\033[K", stderr);
  fflush(stderr);
  s->drawn = 1;
}

/* ---- library callbacks and the batch loop ----------------------------------------------- */

/* Progress callback (this thread, inside add_many / commit): non-zero aborts the rotation. */
static int on_progress(void *ud, int phase, uint64_t items, uint64_t bytes_done,
                       uint64_t bytes_total) {
  rot_state *s = ud;
  int changed = phase != s->phase;
  if (phase == BG_PHASE_UPLOADING && changed) s->upload_t0 = now_ns();
  s->phase = phase;
  s->items = items;
  s->bytes_done = bytes_done;
  s->bytes_total = bytes_total;
  bar_draw(s, changed);
  return stop_signal != 0;
}

/* A failure of the rotation itself: its message is on the rotation handle. */
static int fail_rotation(rot_state *s, int st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", bg_rotation_errmsg(s->r));
  bar_clear(s);
  return cli_fail(s->o->cmd, st, msg);
}

static int rotate_batch(const void *const *items, const size_t *lens, size_t n, void *ud) {
  rot_state *s = ud;
  if (stop_signal) return CLI_EXIT_INTERRUPTED;
  int st = bg_rotation_add_many(s->r, items, lens, n);
  if (st != BG_OK) {
    if (st == BG_EABORTED && stop_signal) return CLI_EXIT_INTERRUPTED;
    return fail_rotation(s, st);
  }
  /* the callback's count may lag (it is throttled): take the library's */
  bg_rotation_stats(s->r, &s->items, NULL, NULL);
  bar_draw(s, 0);
  return CLI_EXIT_OK;
}

static int rotate_tick(void *ud) {
  rot_state *s = ud;
  if (stop_signal) return CLI_EXIT_INTERRUPTED;
  bar_draw(s, 0);
  return CLI_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------------ */

static int set_opt(bg_options *opts, int option, int64_t v, const char *what) {
  int st = bg_options_set_int(opts, option, v);
  if (st != BG_OK) return cli_fail("rotate", st, what);
  return CLI_EXIT_OK;
}

static int make_options(const cli_opts *o, bg_options **out) {
  bg_options *opts = NULL;
  int st = bg_options_new(&opts);
  if (st != BG_OK) return cli_fail(o->cmd, st, "cannot allocate options");
  int rc = CLI_EXIT_OK;
  if (rc == CLI_EXIT_OK && o->lease_ms)
    rc = set_opt(opts, BG_OPT_ROTATE_LEASE_MS, o->lease_ms, "--lease-ms rejected by the library");
  if (rc == CLI_EXIT_OK && o->threads)
    rc = set_opt(opts, BG_OPT_ROTATE_THREADS, o->threads, "--threads rejected by the library");
  if (rc == CLI_EXIT_OK && o->chunk_bytes)
    rc = set_opt(opts, BG_OPT_ROTATE_CHUNK_BYTES, o->chunk_bytes,
                 "--chunk-bytes rejected by the library");
  if (rc == CLI_EXIT_OK && o->staging_ttl_ms)
    rc = set_opt(opts, BG_OPT_ROTATE_STAGING_TTL_MS, o->staging_ttl_ms,
                 "--staging-ttl-ms rejected by the library");
  if (rc == CLI_EXIT_OK && o->have_batch)
    rc = set_opt(opts, BG_OPT_ROTATE_BATCH, (int64_t)o->batch, "--batch rejected by the library");
  if (rc != CLI_EXIT_OK) {
    bg_options_free(opts);
    return rc;
  }
  *out = opts;
  return CLI_EXIT_OK;
}

/* bg_rotation_begin_ex, waiting up to --wait-ms for another rotation to end (the library's
 * BG_OPT_ROTATE_WAIT_MS); a signal cancels the call, which ends the wait (BG_ECANCELED). */
static int begin(rot_state *s, bg_options *opts, bg_call *call) {
  const cli_opts *o = s->o;
  int st = bg_options_set_int(opts, BG_OPT_ROTATE_WAIT_MS, o->wait_ms);
  if (st != BG_OK) return st;
  if (o->wait_ms > 0) {
    s->phase = PHASE_WAITING;
    bar_draw(s, 1);
  }
  return bg_rotation_begin_ex(&s->r, call, s->f, o->expected, o->fpp, o->strategy, opts);
}

static void print_summary(const rot_state *s, uint64_t items, uint64_t bytes, uint64_t us) {
  const cli_opts *o = s->o;
  const char *strategy = o->strategy == BG_ROTATE_NAIVE ? "naive" : o->strategy == BG_ROTATE_LOCKED ? "locked" : "swap";
  double secs = (double)us / 1e6;
  double rate = secs > 0 ? (double)items / secs : 0;
  if (!o->json) {
    printf("rotated %s (%s): %llu items, %llu bytes uploaded, %.3f s, %.0f items/s\n", o->name,
           strategy, (unsigned long long)items, (unsigned long long)bytes, secs, rate);
    return;
  }
  /* the config in force after the swap, read back from the server */
  uint64_t size = 0;
  uint32_t k = 0;
  int st = bg_filter_info(s->f, &size, &k, NULL, NULL);
  if (st != BG_OK) {
    char msg[1024];
    bg_filter_errmsg_copy(s->f, msg, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    fprintf(stderr, "bloomguard: rotate: committed, but the config could not be read back: %s: %s\n",
            cli_status_name(st), msg);
  }
  char fpp[64];
  cli_fmt_double(fpp, sizeof fpp, o->fpp);
  fputs("{\"name\":", stdout);
  cli_json_string(stdout, o->name, strlen(o->name));
  printf(",\"strategy\":\"%s\",\"expected\":%lld,\"fpp\":%s,\"items\":%llu,\"bytesUploaded\":%llu,"
         "\"seconds\":%.3f,\"itemsPerSecond\":%.0f",
         strategy, (long long)o->expected, fpp, (unsigned long long)items,
         (unsigned long long)bytes, secs, rate);
  if (st == BG_OK) printf(",\"size\":%llu,\"hashIterations\":%lu}\n", (unsigned long long)size,
                          (unsigned long)k);
  else fputs(",\"size\":null,\"hashIterations\":null}\n", stdout);
}

int cli_cmd_rotate(const cli_opts *o, bg_filter *f) {
  rot_state s;
  memset(&s, 0, sizeof s);
  s.o = o;
  s.f = f;
  s.tty = isatty(STDERR_FILENO);

  int fd = STDIN_FILENO;
  const char *what = "standard input";
  if (o->from && strcmp(o->from, "-") != 0) {
    /* opened before the rotation begins (a bad path fails without taking the lease), read after */
    fd = open(o->from, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fprintf(stderr, "bloomguard: rotate: cannot open %s: %s\n", cli_path_shown(o->from), strerror(errno));
      return CLI_EXIT_ERROR;
    }
    what = cli_path_shown(o->from);
  }
  bg_options *opts = NULL;
  int rc = make_options(o, &opts);
  if (rc != CLI_EXIT_OK) {
    if (fd != STDIN_FILENO) close(fd);
    return rc;
  }

  bg_call *call = NULL;
  if (bg_call_new(&call) != BG_OK) {
    bg_options_free(opts);
    if (fd != STDIN_FILENO) close(fd);
    return cli_fail(o->cmd, BG_ENOMEM, "cannot allocate a call");
  }
  saved_handlers sh;
  stop_signal = 0;
  signal_call = call;
  install_handlers(&sh);

  int st = begin(&s, opts, call);
  bg_options_free(opts);
  if (st != BG_OK) {
    bar_clear(&s);
    restore_handlers(&sh);
    signal_call = NULL;
    bg_call_free(call);
    if (fd != STDIN_FILENO) close(fd);
    if (stop_signal && (st == BG_ECANCELED || st == BG_EROTATING)) {
      fprintf(stderr, "bloomguard: rotate: interrupted by %s while waiting for another rotation "
                      "of %s; nothing was changed\n", signal_name(stop_signal), o->name);
      return CLI_EXIT_INTERRUPTED;
    }
    return cli_fail_filter(o->cmd, st, f);
  }
  s.t0 = now_ns();
  s.phase = BG_PHASE_BUILDING;
  bg_rotation_set_progress(s.r, on_progress, &s);
  bar_draw(&s, 1);

  size_t batch = o->have_batch ? o->batch : CLI_ROTATE_BATCH;
  rc = cli_for_each_line_fd(o, fd, what, batch, rotate_batch, rotate_tick, &s);
  if (fd != STDIN_FILENO) close(fd);
  if (rc == CLI_EXIT_OK && stop_signal) rc = CLI_EXIT_INTERRUPTED;
  if (rc == CLI_EXIT_OK) {
    st = bg_rotation_commit_ex(s.r, call);
    if (st != BG_OK)
      rc = (st == BG_EABORTED || st == BG_ECANCELED) && stop_signal ? CLI_EXIT_INTERRUPTED : fail_rotation(&s, st);
  }

  uint64_t items = 0, bytes = 0, us = 0;
  bg_rotation_stats(s.r, &items, &bytes, &us);
  if (rc != CLI_EXIT_OK) {
    /* a no-op when the library already ended it (a failed or aborted call cleans up itself) */
    st = bg_rotation_abort(s.r);
    bar_clear(&s);
    if (st != BG_OK)
      fprintf(stderr, "bloomguard: rotate: the abort could not remove the staging keys (%s: %s); "
                      "they expire on their own\n", cli_status_name(st), bg_rotation_errmsg(s.r));
    if (rc == CLI_EXIT_INTERRUPTED) {
      if (o->strategy == BG_ROTATE_NAIVE)
        fprintf(stderr, "bloomguard: rotate: interrupted by %s: the naive rotation stopped after "
                        "%llu items; %s was already deleted and re-created and holds only those\n",
                signal_name(stop_signal), (unsigned long long)items, o->name);
      else
        fprintf(stderr, "bloomguard: rotate: interrupted by %s: the rotation was aborted (%llu "
                        "items read; staging keys removed, lease released); %s is unchanged\n",
                signal_name(stop_signal), (unsigned long long)items, o->name);
    }
  }
  bg_rotation_free(s.r);
  restore_handlers(&sh);
  signal_call = NULL;
  bg_call_free(call);
  if (rc != CLI_EXIT_OK) return rc;
  bar_clear(&s);
  print_summary(&s, items, bytes, us);
  return CLI_EXIT_OK;
}
