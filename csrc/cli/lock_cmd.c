/*
 * lock_cmd.c - `bloomguard lock NAME`: takes the distributed lock NAME + ":lock" (lock.h), holds it,
 * releases it. Meant for scripts and tests that need a process holding the lock (e.g. against a
 * Java service's redisson.getLock(NAME + ":lock")).
 *
 *   bloomguard [--url URL] [--timeout-ms MS] lock NAME [--mode exclusive|read|write]
 *              [--wait-ms MS] [--hold-ms MS] [--lease-ms MS] [--no-renew] [--json]
 *
 * Prints one line once the lock is held ("acquired KEY mode=M token=T holder=H waited_ms=W", or a
 * JSON object with --json) and flushes it, then holds the lock for --hold-ms, or - without it -
 * until standard input reaches end of file; then releases it and prints "released KEY
 * held_ms=N". SIGINT / SIGTERM while holding: release, exit 130; while waiting: the wait is
 * cancelled (bg_call_cancel from the handler), nothing is held, exit 130. Exit 2 with BG_ELOCKED on stderr
 * (naming the holder) when the lock stayed taken for --wait-ms (default 0: one try).
 * The global --tls-* options (main.c's, same names and meaning) apply here too: this command parses
 * its own argv, so without them a lock over TLS could only trust the system's CAs.
 *
 *   bloomguard [--url URL] [--timeout-ms MS] lock retire NAME [--json]
 *
 * retires the lock's name (bg_lock_retire): deletes its fence counter if nobody holds the lock and
 * no writer waits (exit 2 with BG_ELOCKED, naming the holder, otherwise), printing "retired KEY
 * fence_deleted=0|1". The name's fencing tokens then restart from 1. ("lock retire" alone, with
 * no second name, is the lock named "retire".)
 *
 * It parses its own arguments (main.c hands over every command line whose command is "lock").
 */
#define _DEFAULT_SOURCE 1 /* SA_RESETHAND under the strict C11 build */

#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t lock_stop;
static bg_call *volatile lock_call;  /* the acquire a signal cancels */

static void on_lock_signal(int sig) {
  lock_stop = sig;
  bg_call *c = lock_call;
  if (c) bg_call_cancel(c);  /* async-signal-safe: one atomic store */
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int lock_usage(const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  cli_error("lock", BG_EINVAL, CLI_EXIT_USAGE, "%s", msg);
  fputs("usage: bloomguard [--url URL] [--timeout-ms MS] lock NAME [--mode exclusive|read|write] "
        "[--wait-ms MS] [--hold-ms MS] [--lease-ms MS] [--no-renew] [--json]\n"
        "       bloomguard [--url URL] [--timeout-ms MS] lock retire NAME [--json]\n", stderr);
  return CLI_EXIT_USAGE;
}

static int num(const char *s, int64_t min, int64_t max, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* The global --tls-* options with a value, in the order of tls_opts below (as main.c has them). */
static const char *const tls_flags[5] = {"--tls-ca-file", "--tls-ca-dir", "--tls-cert-file", "--tls-key-file",
                                         "--tls-server-name"};
static const int tls_opts[5] = {BG_OPT_TLS_CA_FILE, BG_OPT_TLS_CA_DIR, BG_OPT_TLS_CERT_FILE, BG_OPT_TLS_KEY_FILE,
                                BG_OPT_TLS_SERVER_NAME};

static int tls_index(const char *opt) {
  for (int k = 0; k < 5; k++)
    if (!strcmp(opt, tls_flags[k])) return k;
  return -1;
}

/* Options that take a value, global or the lock's. */
static int takes_value(const char *a) {
  static const char *const v[] = {"--url", "--timeout-ms", "--mode", "--wait-ms", "--hold-ms", "--lease-ms",
                                  "--password-file"};
  if (tls_index(a) >= 0) return 1;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!strcmp(a, v[i])) return 1;
  return 0;
}

int cli_is_lock_command(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) return 0;
    if (argv[i][0] == '-' && argv[i][1]) {
      if (takes_value(argv[i]) && !strchr(argv[i], '=')) i++;
      continue;
    }
    return !strcmp(argv[i], "lock");
  }
  return 0;
}

/* `lock retire NAME`: the handle is open; closes it and the client. */
static int retire(bg_client *client, bg_lock *l, int json) {
  char err[1024] = "";
  int deleted = 0, rc = CLI_EXIT_OK;
  int st = bg_lock_retire(l, &deleted);
  if (st != BG_OK) {
    bg_lock_errmsg_copy(l, err, sizeof err);
    rc = cli_fail("lock retire", st, err);
  } else if (json) {
    fputs("{\"event\":\"retired\",\"key\":", stdout);
    cli_json_string(stdout, bg_lock_key(l), strlen(bg_lock_key(l)));
    printf(",\"fenceDeleted\":%s}\n", deleted ? "true" : "false");
  } else {
    printf("retired %s fence_deleted=%d\n", bg_lock_key(l), deleted);
  }
  bg_lock_close(l);
  bg_client_close(client);
  return rc;
}

int cli_lock_main(int argc, char **argv) {
  const char *url = getenv("BLOOMGUARD_URL"), *name = NULL, *name2 = NULL, *mode_s = "exclusive";
  const char *password_file = NULL;
  const char *tls[5] = {NULL, NULL, NULL, NULL, NULL}; /* global --tls-* options: lock over TLS too */
  int tls_no_verify = 0;
  const char *hold_opt = NULL; /* an option of holding, which `lock retire` refuses */
  int64_t timeout_ms = 0, wait_ms = 0, hold_ms = -1, lease_ms = 0;
  int json = 0, renew = 1, seen_cmd = 0, mode = BG_LOCK_EXCLUSIVE;
  if (!url || !*url) url = CLI_DEFAULT_URL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    if (a[0] != '-' || !a[1]) {
      if (!seen_cmd) seen_cmd = 1; /* "lock" */
      else if (!name) name = a;
      else if (!name2 && !strcmp(name, "retire")) name2 = a; /* lock retire NAME */
      else return lock_usage("unexpected argument %s", cli_shown(a));
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs("usage: bloomguard [--url URL] [--password-file PATH] [--timeout-ms MS] [--tls-* ...] lock NAME [--mode exclusive|read|write]\n"
            "                  [--wait-ms MS] [--hold-ms MS] [--lease-ms MS] [--no-renew] [--json]\n\n"
            "Takes the distributed lock NAME:lock (Redisson RLock layout for exclusive and write),\n"
            "prints 'acquired KEY mode=M token=T holder=H waited_ms=W' once held, holds it for\n"
            "--hold-ms (default: until standard input ends), releases it, prints 'released KEY\n"
            "held_ms=N'. --wait-ms: how long to wait for it (default 0: one try; exit 2 with\n"
            "BG_ELOCKED naming the holder). --lease-ms: the lease (default 30000), renewed every\n"
            "third of it unless --no-renew. SIGINT/SIGTERM while holding: release, exit 130;\n"
            "while waiting: the wait is cancelled, nothing held, exit 130. The global --tls-*\n"
            "options (bloomguard --help) and rediss:// URLs work here too.\n\n"
            "usage: bloomguard [--url URL] [--timeout-ms MS] lock retire NAME [--json]\n\n"
            "Retires the name: deletes its fencing-token counter (kept forever otherwise, so tokens\n"
            "never go backwards) if nobody holds the lock and no writer waits (exit 2 with\n"
            "BG_ELOCKED otherwise); prints 'retired KEY fence_deleted=0|1'. Tokens of the name then\n"
            "restart from 1: retire only names that will not be locked again while old tokens may\n"
            "still be checked.\n", stdout);
      return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--json")) { json = 1; continue; }
    if (!strcmp(a, "--tls-no-verify")) { tls_no_verify = 1; continue; }
    if (!strcmp(a, "--no-renew")) { renew = 0; hold_opt = a; continue; }
    const char *eq = strchr(a, '=');
    char opt[32], range[160];
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= sizeof opt) return lock_usage("unknown option %s", cli_shown(a));
    memcpy(opt, a, n);
    opt[n] = 0;
    if (!takes_value(opt)) return lock_usage("unknown option %s", cli_shown(a));
    if (eq) val = eq + 1;
    else if (i + 1 < argc) val = argv[++i];
    else return lock_usage("option %s needs a value", cli_shown(a));
    int tk = tls_index(opt);
    if (tk >= 0) {
      if (!*val) return lock_usage("option %s needs a non-empty value", tls_flags[tk]);
      tls[tk] = val;
      continue;
    }
    if (strcmp(opt, "--url") && strcmp(opt, "--timeout-ms") && strcmp(opt, "--password-file")) hold_opt = a;
    if (!strcmp(opt, "--url")) url = val;
    else if (!strcmp(opt, "--password-file")) password_file = val;
    else if (!strcmp(opt, "--mode")) mode_s = val;
    else if (!strcmp(opt, "--timeout-ms") && cli_option_value(BG_OPT_COMMAND_TIMEOUT_MS, val, &timeout_ms, range,
                                                              sizeof range))
      return lock_usage("--timeout-ms: %s", range);
    else if (!strcmp(opt, "--wait-ms") && num(val, 0, 3600000, &wait_ms))
      return lock_usage("--wait-ms: %s is not in 0..3600000", cli_shown(val));
    else if (!strcmp(opt, "--hold-ms") && num(val, 0, INT64_MAX / 2, &hold_ms))
      return lock_usage("--hold-ms: %s is not a number of milliseconds", cli_shown(val));
    else if (!strcmp(opt, "--lease-ms") && cli_option_value(BG_OPT_LOCK_LEASE_MS, val, &lease_ms, range, sizeof range))
      return lock_usage("--lease-ms: %s", range);
  }
  int retiring = name2 != NULL;
  if (retiring) {
    name = name2;
    if (hold_opt) return lock_usage("retire: %s does not apply (only --url, --password-file, --timeout-ms, --tls-* and --json do)", cli_shown(hold_opt));
  }
  if (!name || !*name) return lock_usage("missing lock NAME%s", "");
  if (!strcmp(mode_s, "exclusive")) mode = BG_LOCK_EXCLUSIVE;
  else if (!strcmp(mode_s, "read")) mode = BG_LOCK_READ;
  else if (!strcmp(mode_s, "write")) mode = BG_LOCK_WRITE;
  else return lock_usage("--mode: %s is not exclusive, read or write", cli_shown(mode_s));

  /* two objects: bg_client_open refuses lock options and bg_lock_open client ones (options.h) */
  bg_options *opts = NULL, *lock_opts = NULL;
  bg_client *client = NULL;
  bg_lock *l = NULL;
  char err[1024] = "";
  int st = bg_options_new(&opts);
  if (st == BG_OK) st = bg_options_new(&lock_opts);
  if (st == BG_OK && timeout_ms) st = bg_options_set_int(opts, BG_OPT_CONNECT_TIMEOUT_MS, timeout_ms);
  if (st == BG_OK && timeout_ms) st = bg_options_set_int(opts, BG_OPT_COMMAND_TIMEOUT_MS, timeout_ms);
  if (st == BG_OK && lease_ms) st = bg_options_set_int(lock_opts, BG_OPT_LOCK_LEASE_MS, lease_ms);
  if (st == BG_OK) st = bg_options_set_int(lock_opts, BG_OPT_LOCK_RENEW, renew);
  if (st == BG_OK) st = bg_options_set_str(opts, BG_OPT_CLIENT_NAME, "bloomguard-cli");
  if (st == BG_OK) st = bg_options_set_int(opts, BG_OPT_CONNECT_AT_OPEN, 1);
  for (int k = 0; k < 5 && st == BG_OK; k++)
    if (tls[k]) st = bg_options_set_str(opts, tls_opts[k], tls[k]);
  if (st == BG_OK && tls_no_verify) st = bg_options_set_int(opts, BG_OPT_TLS_VERIFY, 0);
  if (st != BG_OK) {
    bg_options_free(opts);
    bg_options_free(lock_opts);
    return cli_fail("lock", st, "a --tls-* option was rejected by the library");
  }
  if (st == BG_OK && cli_password_load(password_file) != CLI_EXIT_OK) {
    bg_options_free(opts);
    bg_options_free(lock_opts);
    return CLI_EXIT_ERROR;
  }
  if (st == BG_OK && cli_password()) st = bg_options_set_str(opts, BG_OPT_PASSWORD, cli_password());
  cli_password_clear(); /* the options hold their own copy */
  if (st != BG_OK) {
    bg_options_free(opts);
    bg_options_free(lock_opts);
    return cli_fail("lock", st, "options rejected by the library");
  }
  st = cli_client_open(&client, url, opts, err, sizeof err);
  bg_options_free(opts);
  if (st != BG_OK) {
    bg_options_free(lock_opts);
    return cli_fail("lock", st, err);
  }
  st = bg_lock_open(&l, client, name, lock_opts);
  bg_options_free(lock_opts);
  if (st != BG_OK) {
    bg_client_errmsg_copy(client, err, sizeof err);
    bg_client_close(client);
    return cli_fail("lock", st, err);
  }

  if (retiring) return retire(client, l, json);

  /* handlers from before the wait: a signal cancels it (and, once held, ends the hold) */
  bg_call *call = NULL;
  if ((st = bg_call_new(&call)) != BG_OK) {
    bg_lock_close(l);
    bg_client_close(client);
    return cli_fail("lock", st, "cannot allocate a call");
  }
  lock_call = call;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_lock_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND; /* a second signal takes its default action */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  int64_t t0 = now_ms();
  uint64_t token = 0;
  st = bg_lock_acquire_ex(l, call, mode, wait_ms, &token);
  lock_call = NULL;
  if (st != BG_OK) {
    int interrupted = st == BG_ECANCELED && lock_stop;
    if (interrupted)
      cli_error("lock", BG_ECANCELED, CLI_EXIT_INTERRUPTED, "interrupted by %s while waiting for %s; nothing is held",
                lock_stop == SIGINT ? "SIGINT" : "SIGTERM", bg_lock_key(l));
    snprintf(err, sizeof err, "%s", bg_call_errmsg(call));
    bg_call_free(call);
    bg_lock_close(l);
    bg_client_close(client);
    return interrupted ? CLI_EXIT_INTERRUPTED : cli_fail("lock", st, err);
  }
  bg_call_free(call);
  int64_t acquired = now_ms();
  char holder[128];
  bg_lock_holder_id(l, holder, sizeof holder);
  if (json) {
    fputs("{\"event\":\"acquired\",\"key\":", stdout);
    cli_json_string(stdout, bg_lock_key(l), strlen(bg_lock_key(l)));
    printf(",\"mode\":\"%s\",\"token\":%llu,\"holder\":\"%s\",\"waitedMs\":%lld}\n", mode_s,
           (unsigned long long)token, holder, (long long)(acquired - t0));
  } else {
    printf("acquired %s mode=%s token=%llu holder=%s waited_ms=%lld\n", bg_lock_key(l), mode_s,
           (unsigned long long)token, holder, (long long)(acquired - t0));
  }
  fflush(stdout);

  if (hold_ms >= 0) {
    while (!lock_stop && now_ms() - acquired < hold_ms) {
      int64_t left = hold_ms - (now_ms() - acquired);
      struct timespec ts = {0, (long)(left < 50 ? left : 50) * 1000000L};
      nanosleep(&ts, NULL);
    }
  } else {
    char buf[4096];
    while (!lock_stop) {
      struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
      int r = poll(&p, 1, 100);
      if (r < 0 && errno != EINTR) break;
      if (r > 0) {
        ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) break;
      }
    }
  }

  int rc = CLI_EXIT_OK;
  st = bg_lock_release(l);
  if (st != BG_OK) {
    bg_lock_errmsg_copy(l, err, sizeof err);
    rc = cli_fail("lock", st, err);
  } else if (json) {
    fputs("{\"event\":\"released\",\"key\":", stdout);
    cli_json_string(stdout, bg_lock_key(l), strlen(bg_lock_key(l)));
    printf(",\"heldMs\":%lld}\n", (long long)(now_ms() - acquired));
  } else {
    printf("released %s held_ms=%lld\n", bg_lock_key(l), (long long)(now_ms() - acquired));
  }
  bg_lock_close(l);
  bg_client_close(client);
  if (rc == CLI_EXIT_OK && lock_stop) rc = CLI_EXIT_INTERRUPTED;
  return rc;
}
