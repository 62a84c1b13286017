/*
 * rotate.c - `bloomguard rotate`: rebuilds a live filter through bg_rotation_* (rotation.h); the
 * same load serves `add` into an empty filter (commands.c), the bulk path.
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
 * Progress: the bar of progress.c, on a terminal only.
 */
#define _DEFAULT_SOURCE 1  /* SA_RESTART / SA_RESETHAND under the strict C11 build */

#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

typedef struct rot_state {
  const cli_opts *o;
  cli_load *l;
  bg_filter *f;
  bg_rotation *r;
  cli_progress bar;
} rot_state;

/* ---- library callbacks and the batch loop ----------------------------------------------- */

/* Progress callback (this thread, inside add_many / commit): non-zero aborts the rotation. */
static int on_progress(void *ud, int phase, uint64_t items, uint64_t bytes_done,
                       uint64_t bytes_total) {
  rot_state *s = ud;
  cli_progress_phase(&s->bar, phase, items, bytes_done, bytes_total);
  return stop_signal != 0;
}

/* A failure of the rotation itself: its message is on the rotation handle. */
static int fail_rotation(rot_state *s, int st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", bg_rotation_errmsg(s->r));
  cli_progress_clear(&s->bar);
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
  bg_rotation_stats(s->r, &s->bar.items, NULL, NULL);
  cli_progress_draw(&s->bar, 0);
  return CLI_EXIT_OK;
}

static int rotate_tick(void *ud) {
  rot_state *s = ud;
  if (stop_signal) return CLI_EXIT_INTERRUPTED;
  cli_progress_draw(&s->bar, 0);
  return CLI_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------------ */

static int set_opt(const cli_opts *o, bg_options *opts, int option, int64_t v, const char *what) {
  int st = bg_options_set_int(opts, option, v);
  if (st != BG_OK) return cli_fail(o->cmd, st, what);
  return CLI_EXIT_OK;
}

static int make_options(const cli_opts *o, bg_options **out) {
  bg_options *opts = NULL;
  int st = bg_options_new(&opts);
  if (st != BG_OK) return cli_fail(o->cmd, st, "cannot allocate options");
  int rc = CLI_EXIT_OK;
  if (rc == CLI_EXIT_OK && o->lease_ms)
    rc = set_opt(o, opts, BG_OPT_ROTATE_LEASE_MS, o->lease_ms, "--lease-ms rejected by the library");
  if (rc == CLI_EXIT_OK && o->threads)
    rc = set_opt(o, opts, BG_OPT_ROTATE_THREADS, o->threads, "--threads rejected by the library");
  if (rc == CLI_EXIT_OK && o->chunk_bytes)
    rc = set_opt(o, opts, BG_OPT_ROTATE_CHUNK_BYTES, o->chunk_bytes,
                 "--chunk-bytes rejected by the library");
  if (rc == CLI_EXIT_OK && o->staging_ttl_ms)
    rc = set_opt(o, opts, BG_OPT_ROTATE_STAGING_TTL_MS, o->staging_ttl_ms,
                 "--staging-ttl-ms rejected by the library");
  if (rc == CLI_EXIT_OK && o->partitions)
    rc = set_opt(o, opts, BG_OPT_ROTATE_PARTITIONS, o->partitions, "--partitions rejected by the library");
  if (rc == CLI_EXIT_OK && o->have_batch)
    rc = set_opt(o, opts, BG_OPT_ROTATE_BATCH, (int64_t)o->batch, "--batch rejected by the library");
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
    s->bar.phase = CLI_PHASE_WAITING;
    cli_progress_draw(&s->bar, 1);
  }
  return bg_rotation_begin_ex(&s->r, call, s->f, s->l->expected, s->l->fpp, s->l->strategy, opts);
}

/* add's bulk path: the filter must hold no item. Asked once the rotation has begun, so that
 * items added through bloomguard from then on are kept by the swap (rotation.h), and any added
 * before show in the count. Redisson's count estimate is 0 only while fewer bits are set than
 * half the hash iterations, which even one item does not leave (its bits would have to collide). */
static int filter_is_empty(rot_state *s, int *empty) {
  int64_t n = 0;
  int st = bg_filter_count(s->f, &n);
  if (st == BG_ENOTINIT) st = BG_OK;  /* a new filter: the commit creates it */
  *empty = st == BG_OK && n == 0;
  return st;
}

int cli_rotation_load(const cli_opts *o, bg_filter *f, cli_load *l) {
  rot_state s;
  memset(&s, 0, sizeof s);
  s.o = o;
  s.l = l;
  s.f = f;
  cli_progress_init(&s.bar, o, o->cmd, l->strategy == BG_ROTATE_NAIVE ? "adding" : "building");
  bg_options *opts = NULL;
  int rc = make_options(o, &opts);
  if (rc != CLI_EXIT_OK) return rc;

  bg_call *call = NULL;
  if (bg_call_new(&call) != BG_OK) {
    bg_options_free(opts);
    return cli_fail(o->cmd, BG_ENOMEM, "cannot allocate a call");
  }
  saved_handlers sh;
  stop_signal = 0;
  signal_call = call;
  install_handlers(&sh);

  int st = begin(&s, opts, call);
  bg_options_free(opts);
  if (st != BG_OK) {
    cli_progress_clear(&s.bar);
    restore_handlers(&sh);
    signal_call = NULL;
    bg_call_free(call);
    if (stop_signal && (st == BG_ECANCELED || st == BG_EROTATING))
      return cli_error(o->cmd, BG_ECANCELED, CLI_EXIT_INTERRUPTED,
                       "interrupted by %s while waiting for another rotation of %s; nothing was changed",
                       signal_name(stop_signal), o->name);
    /* `add`'s bulk path only: another rotation holds the filter, so its items go the plain way
     * (recorded by that rotation as any add is) */
    if (l->only_if_empty && st == BG_EROTATING) return CLI_LOAD_NOT_EMPTY;
    return cli_fail_filter(o->cmd, st, f);
  }
  if (l->only_if_empty) {
    int empty = 0;
    st = filter_is_empty(&s, &empty);
    if (st != BG_OK || !empty) {
      rc = st != BG_OK ? cli_fail_filter(o->cmd, st, f) : CLI_LOAD_NOT_EMPTY;
      st = bg_rotation_abort(s.r);  /* nothing was staged yet: releases the lease */
      bg_rotation_free(s.r);
      restore_handlers(&sh);
      signal_call = NULL;
      bg_call_free(call);
      return rc;
    }
  }
  s.bar.t0 = cli_now_ns();
  s.bar.phase = BG_PHASE_BUILDING;
  bg_rotation_set_progress(s.r, on_progress, &s);
  cli_progress_draw(&s.bar, 1);

  size_t batch = o->have_batch ? o->batch : CLI_ROTATE_BATCH;
  rc = cli_for_each_line_fd(o, l->fd, l->what, batch, rotate_batch, rotate_tick, &s, &s.bar);
  if (rc == CLI_EXIT_OK && stop_signal) rc = CLI_EXIT_INTERRUPTED;
  if (rc == CLI_EXIT_OK) {
    st = bg_rotation_commit_ex(s.r, call);
    if (st != BG_OK)
      rc = (st == BG_EABORTED || st == BG_ECANCELED) && stop_signal ? CLI_EXIT_INTERRUPTED : fail_rotation(&s, st);
  }

  bg_rotation_stats(s.r, &l->items, &l->bytes, &l->us);
  if (rc != CLI_EXIT_OK) {
    /* a no-op when the library already ended it (a failed or aborted call cleans up itself) */
    st = bg_rotation_abort(s.r);
    cli_progress_clear(&s.bar);
    if (st != BG_OK)
      fprintf(stderr, "bloomguard: %s: the abort could not remove the staging keys (%s: %s); "
                      "they expire on their own\n", o->cmd, cli_status_name(st), bg_rotation_errmsg(s.r));
    if (rc == CLI_EXIT_INTERRUPTED) {
      if (l->strategy == BG_ROTATE_NAIVE)
        cli_error(o->cmd, BG_ECANCELED, rc, "interrupted by %s: the naive rotation stopped after "
                  "%llu items; %s was already deleted and re-created and holds only those",
                  signal_name(stop_signal), (unsigned long long)l->items, o->name);
      else
        cli_error(o->cmd, BG_ECANCELED, rc, "interrupted by %s: the rotation was aborted (%llu "
                  "items read; staging keys removed, lease released); %s is unchanged",
                  signal_name(stop_signal), (unsigned long long)l->items, o->name);
    }
  }
  bg_rotation_free(s.r);
  restore_handlers(&sh);
  signal_call = NULL;
  bg_call_free(call);
  cli_progress_clear(&s.bar);
  return rc;
}

static void print_summary(const cli_opts *o, bg_filter *f, const cli_load *l) {
  uint64_t items = l->items, bytes = l->bytes, us = l->us;
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
  int st = bg_filter_info(f, &size, &k, NULL, NULL);
  if (st != BG_OK) {
    char msg[1024];
    bg_filter_errmsg_copy(f, msg, sizeof msg);
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
  cli_load l;
  memset(&l, 0, sizeof l);
  l.expected = o->expected;
  l.fpp = o->fpp;
  l.strategy = o->strategy;
  /* opened before the rotation begins (a bad path fails without taking the lease), read after */
  int rc = cli_open_lines(o, &l.fd, &l.what);
  if (rc != CLI_EXIT_OK) return rc;
  rc = cli_rotation_load(o, f, &l);
  if (l.fd != STDIN_FILENO) close(l.fd);
  if (rc != CLI_EXIT_OK) return rc;
  print_summary(o, f, &l);
  return CLI_EXIT_OK;
}
