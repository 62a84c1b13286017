/*
 * secret.c - keeping the password out of the command's output and off its command line: what a
 * message may show of an argument, and the password read from a file or the environment.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int g_argc;
static char **g_argv;

void cli_set_args(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
}

/* Position of s in argv (s may point inside an argument, e.g. after '='); 0 if not found. */
static int arg_index(const char *s) {
  for (int i = 1; i < g_argc; i++)
    if (s >= g_argv[i] && s <= g_argv[i] + strlen(g_argv[i])) return i;
  return 0;
}

/*
 * Only what looks like a command, an option name or a number is echoed: any other text may be a
 * misplaced URL ("--url --url redis://:pw@h") or a password, and no message shows a password.
 */
static int looks_plain(const char *s, size_t n) {
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '+' || c == ','))
      return 0;
  }
  return 1;
}

const char *cli_shown(const char *arg) {
  static char buf[128];
  size_t n = strlen(arg);
  const char *eq = arg[0] == '-' ? strchr(arg, '=') : NULL;
  if (looks_plain(arg, n)) {
    snprintf(buf, sizeof buf, "'%s'", arg);
  } else if (eq && looks_plain(arg, (size_t)(eq - arg))) {
    snprintf(buf, sizeof buf, "'%.*s=...'", (int)(eq - arg), arg); /* "--pasword=..." */
  } else {
    int i = arg_index(arg);
    if (i) snprintf(buf, sizeof buf, "(argument %d, not shown: it may hold a password)", i);
    else snprintf(buf, sizeof buf, "(not shown: it may hold a password)");
  }
  return buf;
}

const char *cli_path_shown(const char *path) {
  return strchr(path, '@') || strstr(path, "://") ? "(path not shown: it looks like a URL)" : path;
}

static char *g_password;

/* The first line of the file, without its "\n" or "\r\n"; the rest of the file is ignored. */
static int read_first_line(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  if (!f) {
    return cli_error(NULL, BG_EINVAL, CLI_EXIT_ERROR, "cannot open the password file %s (%s): %s",
                     cli_path_shown(path), what, strerror(errno));
  }
  errno = 0;
  n = getline(&line, &cap, f);
  if (n < 0 && ferror(f)) {
    int e = errno;
    fclose(f);
    free(line);
    return cli_error(NULL, BG_EINVAL, CLI_EXIT_ERROR, "cannot read the password file %s (%s): %s",
                     cli_path_shown(path), what, strerror(e));
  }
  fclose(f);
  if (n < 0) n = 0; /* an empty file: no password */
  if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
  if (n > 0 && line[n - 1] == '\r') line[--n] = 0;
  if (n == 0 || memchr(line, '\0', (size_t)n)) {
    int had_nul = n > 0;
    if (line) memset(line, 0, cap);
    free(line);
    if (had_nul) {
      return cli_error(NULL, BG_EINVAL, CLI_EXIT_ERROR, "the password file %s (%s) holds a NUL byte in its "
                       "first line", cli_path_shown(path), what);
    }
    return CLI_EXIT_OK; /* an empty first line: no password, like an empty one in the URL */
  }
  g_password = line;
  return CLI_EXIT_OK;
}

int cli_password_load(const char *file_opt) {
  const char *env_file = getenv("BLOOMGUARD_PASSWORD_FILE"), *env = getenv("BLOOMGUARD_PASSWORD");
  cli_password_clear();
  if (file_opt) return read_first_line(file_opt, "--password-file");
  if (env_file && *env_file) return read_first_line(env_file, "$BLOOMGUARD_PASSWORD_FILE");
  if (env && *env && !(g_password = strdup(env))) return cli_error(NULL, BG_ENOMEM, CLI_EXIT_ERROR, "out of memory");
  return CLI_EXIT_OK;
}

const char *cli_password(void) { return g_password; }

void cli_password_clear(void) {
  if (g_password) {
    volatile char *s = g_password;
    while (*s) *s++ = 0;
    free(g_password);
    g_password = NULL;
  }
}
