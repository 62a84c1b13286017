/*
 * Fuzz test: no message may contain the password, whatever the URL looks like.
 *
 * 3000 mutations (deterministic seed) of URLs that hold a distinctive password (with a missing '@',
 * a doubled ':', an '@' in the password, %-escapes) go to bgi_url_parse; a URL that parses has every
 * host named as messages name it (bgi_url_host_label); and every URL that either fails to parse or
 * names only numeric hosts also goes to bg_client_open_ex with BG_OPT_CONNECT_AT_OPEN: port 1 on
 * loopback, where nothing listens, and 100 ms timeouts, so no attempt waits (a host that is a name
 * would be looked up: only its label is checked). A message or a label containing the password is
 * a leak - also when the password became the host itself (its ':' and '@' both lost).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bloomguard.h>

#include "harness.h"
#include "redis/url.h"

#define NMUTATIONS 3000

/* The passwords of the base URLs, as they may appear in a message: raw, and %-encoded forms. */
static const char *const secrets[] = {"S3cr3tPw", "S3cr3t!Pw", "S3cr3t%21Pw", "Zx9Secret", "Qu1et@Pw", "Qu1et%40Pw"};

static const char *const bases[] = {
  "redis://:S3cr3tPw@127.0.0.1:1",
  "redis://:S3cr3tPw/x@127.0.0.1:1",
  "redis://alice:S3cr3t!Pw@127.0.0.1:1/2",
  "redis://alice:S3cr3t%21Pw@127.0.0.1:1/0",
  "redis://:S3cr3t!Pw@[::1]:1",
  "redis://bob:S3cr3t!Pw@127.0.0.1:1,127.0.0.1:1/1",
  "redis://:S3cr3t!Pw@127.0.0.1:1?db=3",
  "redis://u:a@S3cr3t!Pw@127.0.0.1:1",
  "redis://Zx9Secret@127.0.0.1:1",       /* a bare user part: the "user" may be a password */
  "redis://:Zx9Secret@127.0.0.1",
  "unix:///tmp/bg-fuzz-none.sock?db=1",
  "redis.//user:S3cr3t!Pw@127.0.0.1:1",
  "redis:pw:S3cr3t!Pw@127.0.0.1:1",
  "redis://S3cr3tPw127.0.0.1:1",          /* its ':' and '@' lost: the password is the host */
  "redis://:S3cr3tPw127.0.0.1:1",         /* its '@' lost */
  "redis://S3cr3tPwdb.example:1",         /* ... before a name */
  "redis://::S3cr3tPw@127.0.0.1:1",       /* a doubled ':' */
  "redis://alice::S3cr3tPw@127.0.0.1:1",
  "redis://:Qu1et@Pw@127.0.0.1:1",        /* an '@' in the password */
  "redis://:Qu1et@Pw127.0.0.1:1",         /* ... and the last '@' lost */
  "redis://:Qu1et%40Pw@127.0.0.1:1",      /* %-escaped */
  "redis-sentinel://:S3cr3tPw@127.0.0.1:1,127.0.0.1:1#m",
  "redis-sentinel://S3cr3tPw127.0.0.1:1#m",
  "rediss://:S3cr3tPw@127.0.0.1:1",
};

/* The URLs of the issues, each a known leak before its fix. */
static const char *const known[] = {
  "redis://:S3cr3tPw/x@127.0.0.1:6379", "redis:/:S3cr3tPw@h", "redis//:S3cr3tPw@h",
  "redis:S3cr3tPw@h",                   ":S3cr3tPw@h:6379",   "redis.//user:S3cr3tPw@h",
  "rediss:/:S3cr3tPw@h",                "redis://:S3cr3tPw@h:6379?db=1",
  "redis://:S3cr3tPw@h/x",              "redis://:S3cr3tPw@[::1",
  "redis://S3cr3tPw127.0.0.1:1",        "redis://S3cr3tPw127.0.0.1:1,127.0.0.1:1",
};

static uint64_t rng = 0x5eed0b100d6a4dULL;
static uint32_t rnd(uint32_t n) {
  /* splitmix64: fixed seed, the same mutations on every run */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (uint32_t)(z % n);
}

/* One to three edits: delete, insert or replace a character (URL punctuation and digits), cut
 * the scheme's separators, duplicate a span, truncate. */
static void mutate(const char *base, char *out, size_t cap) {
  static const char alphabet[] = ":/@[]?=,%.#&;0123456789";
  char buf[512];
  snprintf(buf, sizeof buf, "%s", base);
  int edits = 1 + (int)rnd(3);
  for (int e = 0; e < edits; e++) {
    size_t n = strlen(buf);
    size_t at = n ? rnd((uint32_t)n) : 0;
    switch (rnd(6)) {
      case 0: /* delete */
        if (n) memmove(buf + at, buf + at + 1, n - at);
        break;
      case 1: /* insert */
        if (n + 2 < sizeof buf) {
          memmove(buf + at + 1, buf + at, n - at + 1);
          buf[at] = alphabet[rnd(sizeof alphabet - 1)];
        }
        break;
      case 2: /* replace */
        if (n) buf[at] = alphabet[rnd(sizeof alphabet - 1)];
        break;
      case 3: { /* damage the scheme separator "://": drop one of its characters or make it a '.' */
        char *s = strstr(buf, "://");
        size_t k = rnd(3);
        if (!s) break;
        if (rnd(2)) memmove(s + k, s + k + 1, strlen(s + k));
        else s[k] = '.';
        break;
      }
      case 4: { /* duplicate a span */
        size_t len = 1 + rnd(8);
        if (at + len <= n && n + len + 1 < sizeof buf) {
          memmove(buf + at + len, buf + at, n - at + 1);
          /* the span now appears twice: buf[at..at+len) and buf[at+len..at+2len) */
        }
        break;
      }
      default: /* truncate */
        buf[at] = 0;
        break;
    }
  }
  snprintf(out, cap, "%s", buf);
}

static const char *leaked(const char *msg) {
  for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
    if (strstr(msg, secrets[i])) return secrets[i];
  return NULL;
}

static int numeric_host(const char *h) {
  unsigned char addr[16];
  return inet_pton(AF_INET, h, addr) == 1 || inet_pton(AF_INET6, h, addr) == 1;
}

static int leaks, checked, opened;

static void report(const char *what, const char *url, const char *msg) {
  if (++leaks <= 8) fprintf(stderr, "  leak (%s): %s -> %s\n", what, url, msg);
}

/* Parses url, checks how messages would name its hosts, then (when no name lookup could wait)
 * opens a client on it, reaching the server at open. */
static void try_url(const char *url, bg_options *opts) {
  bgi_url u;
  bgi_err e = {0};
  int st = bgi_url_parse(url, &u, &e);
  int lookup = 0;
  checked++;
  if (st == BG_OK) {
    for (size_t i = 0; i < u.nhosts; i++) {
      char label[300];
      bgi_url_host_label(u.hosts[i].host, u.hosts[i].port, "seed N of the URL", label, sizeof label);
      if (leaked(label)) report("host label", url, label);
      lookup |= !numeric_host(u.hosts[i].host);
    }
    bgi_url_free(&u);
  } else if (leaked(e.msg)) {
    report("parse", url, e.msg);
  }
  if (lookup) return; /* a DNS lookup: not here */

  bg_client *c = NULL;
  char errbuf[1024];
  errbuf[0] = 0;
  st = bgt_client_open(&c, url, opts, errbuf, sizeof errbuf);
  opened++;
  if (st == BG_OK) {
    bg_client_close(c); /* something listened after all: no message to check */
    return;
  }
  if (leaked(errbuf)) report("bg_client_open_ex", url, errbuf);
}

static void test_no_password_in_messages(void) {
  bg_options *opts = NULL;
  char url[512];
  CHECK_OK(bg_options_new(&opts));
  CHECK_OK(bg_options_set_int(opts, BG_OPT_CONNECT_TIMEOUT_MS, 100));
  CHECK_OK(bg_options_set_int(opts, BG_OPT_COMMAND_TIMEOUT_MS, 100));
  CHECK_OK(bg_options_set_int(opts, BG_OPT_CONNECT_AT_OPEN, 1));
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) try_url(known[i], opts);
  for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) try_url(bases[i], opts);
  for (int i = 0; i < NMUTATIONS; i++) {
    mutate(bases[rnd(sizeof bases / sizeof bases[0])], url, sizeof url);
    try_url(url, opts);
  }
  bg_options_free(opts);
  fprintf(stderr, "%d URLs parsed, %d opened, %d leaks\n", checked, opened, leaks);
  CHECK_MSG(leaks == 0, "%d of %d messages contained the password", leaks, checked);
}

BGT_RUN(BGT_CASE(test_no_password_in_messages))
