/* output.c - JSON strings, numbers and error messages of the bloomguard command. */
#include "cli.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * Length of the valid UTF-8 sequence at p (at most n bytes left), or 0 if the bytes there are not
 * one: overlong forms, surrogates (U+D800..U+DFFF) and values above U+10FFFF are invalid.
 */
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t min, cp;
  if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; cp = c & 0x07; }
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

int cli_utf8_valid(const void *s, size_t len) {
  const unsigned char *p = s;
  size_t i = 0;
  while (i < len) {
    size_t l = utf8_seq(p + i, len - i);
    if (l == 0) return 0;
    i += l;
  }
  return 1;
}

int cli_json_string(FILE *out, const void *s, size_t len) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *p = s;
  int valid = 1;
  size_t i = 0, run = 0; /* run: start of the pending stretch written as is */
  fputc('"', out);
  while (i < len) {
    unsigned char c = p[i];
    const char *esc = NULL;
    char ubuf[7];
    size_t l = 1;
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') { i++; continue; }
    if (c >= 0x80) {
      l = utf8_seq(p + i, len - i);
      if (l > 0) { i += l; continue; }  /* valid multi-byte character: copied as is */
      valid = 0;
      esc = "\\ufffd";
      l = 1;
    } else {
      switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:  /* other control characters and DEL */
          memcpy(ubuf, "\\u00", 4);
          ubuf[4] = hexd[c >> 4];
          ubuf[5] = hexd[c & 15];
          ubuf[6] = '\0';
          esc = ubuf;
          break;
      }
    }
    if (i > run) fwrite(p + run, 1, i - run, out);
    fputs(esc, out);
    i += l;
    run = i;
  }
  if (len > run) fwrite(p + run, 1, len - run, out);
  fputc('"', out);
  return valid;
}

void cli_hex(FILE *out, const void *s, size_t len) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *p = s;
  for (size_t i = 0; i < len; i++) {
    fputc(hexd[p[i] >> 4], out);
    fputc(hexd[p[i] & 15], out);
  }
}

void cli_fmt_double(char *buf, size_t size, double d) {
  if (!isfinite(d)) {  /* not valid JSON numbers; the CLI never prints them from a valid config */
    snprintf(buf, size, "%s", isnan(d) ? "null" : (d > 0 ? "1e999" : "-1e999"));
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, d);
    if (strtod(buf, NULL) == d) return;
  }
}

const char *cli_status_name(int status) {
  const char *name = bg_status_name(status);
  return name ? name : "BG_E?";  /* a code newer than this library's header */
}

/* ---- errors ------------------------------------------------------------------------- */

static int json_errors;      /* --json: errors also as a JSON object on stdout */
static int json_partial;     /* stdout ends inside a JSON document (contains' streamed results) */

void cli_set_json_errors(int on) { json_errors = on; }
void cli_json_partial(int open) { json_partial = open; }

/* {"error":{"code":N,"name":"BG_E...","message":"..."}} on its own line: after a partial
 * document, on a new line, so that the last line of stdout is always the error. */
static void json_error(int status, const char *message) {
  if (!json_errors) return;
  if (json_partial) fputc('\n', stdout);
  json_partial = 0;
  printf("{\"error\":{\"code\":%d,\"name\":", status);
  const char *name = cli_status_name(status);
  cli_json_string(stdout, name, strlen(name));
  fputs(",\"message\":", stdout);
  cli_json_string(stdout, message, strlen(message));
  fputs("}}\n", stdout);
  fflush(stdout);
}

int cli_error(const char *cmd, int status, int exit_code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);  /* keep what was printed before the error in order */
  if (cmd) fprintf(stderr, "bloomguard: %s: %s\n", cmd, msg);
  else fprintf(stderr, "bloomguard: %s\n", msg);
  json_error(status, msg);
  return exit_code;
}

int cli_fail(const char *cmd, int status, const char *detail) {
  fflush(stdout);
  const char *text = bg_strerror(status);
  if (!text) text = "?";
  fprintf(stderr, "bloomguard: %s: %s (%d, %s)", cmd, cli_status_name(status), status, text);
  if (detail && *detail) fprintf(stderr, ": %s", detail);
  fputc('\n', stderr);
  json_error(status, detail && *detail ? detail : text);
  return CLI_EXIT_ERROR;
}

int cli_fail_filter(const char *cmd, int status, const bg_filter *f) {
  char msg[1024];
  msg[0] = '\0';
  if (f) bg_filter_errmsg_copy(f, msg, sizeof msg);
  msg[sizeof msg - 1] = '\0';
  return cli_fail(cmd, status, msg);
}

int cli_finish_stdout(int rc) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "bloomguard: error writing to standard output\n");  /* no JSON: stdout is what failed */
    return CLI_EXIT_ERROR;
  }
  return rc;
}
