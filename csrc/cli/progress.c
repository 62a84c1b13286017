/*
 * progress.c - the one-line progress bar of `rotate` and `add` on stderr.
 *
 * Drawn only when stderr is a terminal and --quiet was not given; redrawn in place at most every
 * 100 ms (and at each phase change when forced), never wider than the terminal (a wrapped line
 * cannot be redrawn), and cleared before anything else is printed.
 */
#define _DEFAULT_SOURCE 1  /* TIOCGWINSZ under the strict C11 build */

#include "cli.h"

#include <math.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define DRAW_EVERY_NS 100000000ull

uint64_t cli_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cli_progress_init(cli_progress *p, const cli_opts *o, const char *verb, const char *building) {
  memset(p, 0, sizeof *p);
  p->verb = verb;
  p->name = o->name;
  p->building = building;
  p->tty = !o->quiet && isatty(STDERR_FILENO);
  p->phase = CLI_PHASE_STARTING;
}

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

static const char *phase_name(const cli_progress *p) {
  switch (p->phase) {
    case CLI_PHASE_WAITING: return "waiting for another rotation";
    case BG_PHASE_BUILDING: return p->building;
    case BG_PHASE_UPLOADING: return "uploading";
    case BG_PHASE_COMMITTING: return "committing";
    case BG_PHASE_DONE: return "done";
    default: return "starting";
  }
}

void cli_progress_clear(cli_progress *p) {
  if (!p->drawn) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  p->drawn = 0;
}

void cli_progress_draw(cli_progress *p, int force) {
  if (!p->tty) return;
  uint64_t now = cli_now_ns();
  if (!force && now - p->last_draw < DRAW_EVERY_NS) return;
  p->last_draw = now;

  char line[512], a[32], b[32], eta[32];
  size_t len = 0;
#define PUT(...) do { \
    int w_ = snprintf(line + len, sizeof line - len, __VA_ARGS__); \
    if (w_ > 0) len = len + (size_t)w_ < sizeof line ? len + (size_t)w_ : sizeof line - 1; \
  } while (0)
  PUT("%s %.24s%s: %s", p->verb, p->name, strlen(p->name) > 24 ? "..." : "", phase_name(p));
  if (p->phase != CLI_PHASE_WAITING) {
    double secs = p->t0 ? (double)(now - p->t0) / 1e9 : 0;
    PUT("  %llu items", (unsigned long long)p->items);
    if (secs > 0.05) PUT("  %.0f items/s", (double)p->items / secs);
    /* the input's share read so far, while items are still being read from it */
    if (p->phase == BG_PHASE_BUILDING && p->input_total > 0 && p->input_done < p->input_total) {
      PUT("  %.0f%%", 100.0 * (double)p->input_done / (double)p->input_total);
      if (p->input_done > 0 && secs > 0.5) {
        fmt_duration(eta, sizeof eta, secs * (double)(p->input_total - p->input_done) / (double)p->input_done);
        PUT("  ETA %s", eta);
      }
    }
  }
  if (p->bytes_total > 0 && p->phase >= BG_PHASE_UPLOADING) {
    int filled = (int)(20.0 * (double)p->bytes_done / (double)p->bytes_total);
    if (filled > 20) filled = 20;
    fmt_bytes(a, sizeof a, p->bytes_done);
    fmt_bytes(b, sizeof b, p->bytes_total);
    PUT("  [%.*s%.*s] %s / %s", filled, "####################", 20 - filled,
        "--------------------", a, b);
    if (p->phase == BG_PHASE_UPLOADING && p->bytes_done > 0 && p->bytes_done < p->bytes_total) {
      double up = (double)(now - p->upload_t0) / 1e9;
      if (up > 0) {
        fmt_duration(eta, sizeof eta,
                     (double)(p->bytes_total - p->bytes_done) / ((double)p->bytes_done / up));
        PUT("  ETA %s", eta);
      }
    }
  }
#undef PUT
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && len >= ws.ws_col)
    len = ws.ws_col - 1;
  fputc('\r', stderr);
  fwrite(line, 1, len, stderr);
  fputs("\033[K", stderr);
  fflush(stderr);
  p->drawn = 1;
}

void cli_progress_phase(cli_progress *p, int phase, uint64_t items, uint64_t bytes_done,
                        uint64_t bytes_total) {
  int changed = phase != p->phase;
  if (phase == BG_PHASE_UPLOADING && changed) p->upload_t0 = cli_now_ns();
  p->phase = phase;
  p->items = items;
  p->bytes_done = bytes_done;
  p->bytes_total = bytes_total;
  cli_progress_draw(p, changed);
}
