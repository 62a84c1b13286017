/*
 * items.c - where the items of add / contains come from, in batches.
 *
 * Arguments: the argv strings themselves, o->batch at a time (no copy).
 * Stdin: one item per line. A trailing "\n" or "\r\n" is removed (a lone '\r' elsewhere stays
 * part of the item), an empty line is the empty item, a last line without '\n' is an item, and
 * lines may be of any length and contain NUL bytes. Lines are read with getline into one reused
 * line buffer and appended to one reused arena; a batch ends at o->batch items or when the arena
 * reaches CLI_BATCH_BYTES. Nothing is allocated per line: the buffers only grow, a few times.
 *
 * A file descriptor (rotate: --from FILE or stdin): the same rules, read with read(2) in 64 KiB
 * blocks straight into the arena (a line may span blocks), after a poll(2) of at most 200 ms so
 * that the caller's tick runs while the source is idle (an interrupt is noticed at once).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct arena {
  char *buf;
  size_t len, cap;
  size_t *offs;        /* start of each item in buf */
  size_t *lens;
  const void **ptrs;   /* filled from offs just before a batch is handed over */
  size_t n, max;
} arena;

static int arena_init(arena *a, size_t max_items) {
  memset(a, 0, sizeof *a);
  a->max = max_items;
  a->offs = malloc(max_items * sizeof *a->offs);
  a->lens = malloc(max_items * sizeof *a->lens);
  a->ptrs = malloc(max_items * sizeof *a->ptrs);
  a->cap = 64 * 1024;
  a->buf = malloc(a->cap);
  return a->offs && a->lens && a->ptrs && a->buf ? 0 : -1;
}

static void arena_free(arena *a) {
  free(a->buf);
  free(a->offs);
  free(a->lens);
  free(a->ptrs);
}

/* Makes room for len more bytes after a->len. */
static int arena_reserve(arena *a, size_t len) {
  if (a->len + len > a->cap || a->len + len < a->len) {
    size_t cap = a->cap;
    while (cap < a->len + len) {
      if (cap > SIZE_MAX / 2) return -1;
      cap *= 2;
    }
    char *nb = realloc(a->buf, cap);
    if (!nb) return -1;
    a->buf = nb;
    a->cap = cap;
  }
  return 0;
}

static int arena_push(arena *a, const char *data, size_t len) {
  if (arena_reserve(a, len) != 0) return -1;
  if (len) memcpy(a->buf + a->len, data, len);
  a->offs[a->n] = a->len;
  a->lens[a->n] = len;
  a->len += len;
  a->n++;
  return 0;
}

static int arena_flush(arena *a, cli_batch_fn fn, void *ud) {
  if (a->n == 0) return CLI_EXIT_OK;
  for (size_t i = 0; i < a->n; i++) a->ptrs[i] = a->buf + a->offs[i];
  int rc = fn(a->ptrs, a->lens, a->n, ud);
  a->n = 0;
  a->len = 0;
  return rc;
}

static int from_stdin(const cli_opts *o, cli_batch_fn fn, void *ud) {
  arena a;
  char *line = NULL;
  size_t line_cap = 0;
  int rc = CLI_EXIT_OK;
  if (arena_init(&a, o->batch) != 0) {
    arena_free(&a);
    return cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  }
  if (isatty(STDIN_FILENO))
    fprintf(stderr, "bloomguard: %s: reading items from the terminal, one per line; end with "
                    "Ctrl-D\n", o->cmd);
  for (;;) {
    errno = 0;
    ssize_t got = getline(&line, &line_cap, stdin);
    if (got < 0) {
      if (ferror(stdin)) {
        rc = cli_error(o->cmd, BG_EINVAL, CLI_EXIT_ERROR, "error reading standard input: %s",
                       strerror(errno ? errno : EIO));
      } else if (errno == ENOMEM || errno == EOVERFLOW) {
        rc = cli_error(o->cmd, BG_EINVAL, CLI_EXIT_ERROR, "input line too long: %s", strerror(errno));
      }
      break;
    }
    size_t len = (size_t)got;
    if (len > 0 && line[len - 1] == '\n') {
      len--;
      if (len > 0 && line[len - 1] == '\r') len--;
    }
    if (arena_push(&a, line, len) != 0) {
      rc = cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory (line of %zu bytes)", len);
      break;
    }
    if (a.n == a.max || a.len >= CLI_BATCH_BYTES) {
      rc = arena_flush(&a, fn, ud);
      if (rc != CLI_EXIT_OK) break;
    }
  }
  if (rc == CLI_EXIT_OK) rc = arena_flush(&a, fn, ud);
  free(line);
  arena_free(&a);
  return rc;
}

static int from_args(const cli_opts *o, cli_batch_fn fn, void *ud) {
  size_t cap = o->nitems < o->batch ? o->nitems : o->batch;
  if (cap == 0) return CLI_EXIT_OK;
  size_t *lens = malloc(cap * sizeof *lens);
  if (!lens) return cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  int rc = CLI_EXIT_OK;
  for (size_t at = 0; at < o->nitems && rc == CLI_EXIT_OK; at += cap) {
    size_t n = o->nitems - at < cap ? o->nitems - at : cap;
    for (size_t i = 0; i < n; i++) lens[i] = strlen(o->items[at + i]);
    rc = fn((const void *const *)(o->items + at), lens, n, ud);
  }
  free(lens);
  return rc;
}

int cli_for_each_line_fd(const cli_opts *o, int fd, const char *what, size_t batch,
                         cli_batch_fn fn, cli_tick_fn tick, void *ud, cli_progress *bar) {
  enum { BLOCK = 64 * 1024 };
  arena a;
  int rc = CLI_EXIT_OK;
  size_t start = 0;   /* offset in a.buf where the item being read began */
  if (arena_init(&a, batch) != 0) {
    arena_free(&a);
    return cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  }
  if (isatty(fd))
    fprintf(stderr, "bloomguard: %s: reading items from the terminal, one per line; end with "
                    "Ctrl-D\n", o->cmd);
  struct stat st;
  if (bar && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    off_t at = lseek(fd, 0, SEEK_CUR);
    bar->input_total = (uint64_t)st.st_size - (at > 0 ? (uint64_t)at : 0);
  }
  for (;;) {
    if (tick && (rc = tick(ud)) != CLI_EXIT_OK) break;
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR) {
      rc = cli_error(o->cmd, BG_EINVAL, CLI_EXIT_ERROR, "cannot wait for %s: %s", what, strerror(errno));
      break;
    }
    if (pr <= 0) continue;  /* idle or interrupted: tick again */
    if (arena_reserve(&a, BLOCK) != 0) {
      rc = cli_error(o->cmd, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory (line of %zu bytes)", a.len - start);
      break;
    }
    ssize_t got = read(fd, a.buf + a.len, BLOCK);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      rc = cli_error(o->cmd, BG_EINVAL, CLI_EXIT_ERROR, "error reading %s: %s", what, strerror(errno));
      break;
    }
    if (got == 0) break;  /* end of input */
    if (bar) bar->input_done += (uint64_t)got;
    /* split what arrived into items; the arena holds the bytes in place, nothing is copied */
    size_t end = a.len + (size_t)got;
    size_t at = a.len;
    a.len = end;
    while (at < end) {
      char *nl = memchr(a.buf + at, '\n', end - at);
      if (!nl) break;
      size_t stop = (size_t)(nl - a.buf);
      size_t len = stop - start;
      if (len > 0 && a.buf[stop - 1] == '\r') len--;
      a.offs[a.n] = start;
      a.lens[a.n] = len;
      a.n++;
      at = stop + 1;
      start = at;
      if (a.n == a.max || start >= CLI_BATCH_BYTES) {
        /* hand over the complete items; the bytes of the next, unfinished one move to the front */
        size_t rest = end - start;
        a.len = start;
        for (size_t i = 0; i < a.n; i++) a.ptrs[i] = a.buf + a.offs[i];
        rc = fn(a.ptrs, a.lens, a.n, ud);
        a.n = 0;
        if (rest) memmove(a.buf, a.buf + start, rest);
        a.len = rest;
        end = rest;
        at = 0;
        start = 0;
        if (rc != CLI_EXIT_OK) break;
      }
    }
    if (rc != CLI_EXIT_OK) break;
  }
  if (rc == CLI_EXIT_OK) {
    if (a.len > start) {  /* a last line without '\n' is an item (its '\r' stays) */
      a.offs[a.n] = start;
      a.lens[a.n] = a.len - start;
      a.n++;
    }
    rc = arena_flush(&a, fn, ud);
  }
  arena_free(&a);
  return rc;
}

int cli_open_lines(const cli_opts *o, int *fd, const char **what) {
  *fd = STDIN_FILENO;
  *what = "standard input";
  if (!o->from || strcmp(o->from, "-") == 0) return CLI_EXIT_OK;
  *fd = open(o->from, O_RDONLY | O_CLOEXEC);
  if (*fd < 0)
    return cli_error(o->cmd, BG_EINVAL, CLI_EXIT_ERROR, "cannot open %s: %s", cli_path_shown(o->from),
                     strerror(errno));
  *what = cli_path_shown(o->from);
  return CLI_EXIT_OK;
}

int cli_for_each_batch(const cli_opts *o, cli_batch_fn fn, void *ud) {
  return o->use_stdin ? from_stdin(o, fn, ud) : from_args(o, fn, ud);
}
