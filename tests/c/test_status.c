/*
 * bg_status_name and bg_strerror against the header itself: every BG_OK / BG_E* code that
 * include/bloomguard/errors.h defines (read at run time from the source tree, so a code added
 * there without its entry in csrc/common/errors.c fails here) has its own macro name and a text
 * of its own; values the header does not define have no name (NULL) and "unknown status".
 */
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomguard.h"
#include "harness.h"

#define MAX_CODES 128

typedef struct code { char name[64]; int value; } code;

static int header_codes(code *out, int cap) {
  char path[4096], line[512];
  regex_t re;
  regmatch_t m[3];
  int n = 0;
  snprintf(path, sizeof path, "%s/include/bloomguard/errors.h", BG_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  CHECK_MSG(f != NULL, "cannot open %s", path);
  if (!f) return 0;
  regcomp(&re, "^#define[ \t]+(BG_OK|BG_E[A-Z0-9_]+)[ \t]+\\(?(-?[0-9]+)\\)?", REG_EXTENDED);
  while (fgets(line, sizeof line, f) && n < cap) {
    if (regexec(&re, line, 3, m, 0) != 0) continue;
    snprintf(out[n].name, sizeof out[n].name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
    out[n].value = atoi(line + m[2].rm_so);
    n++;
  }
  regfree(&re);
  fclose(f);
  return n;
}

static void test_every_header_code_has_its_name(void) {
  code codes[MAX_CODES];
  int n = header_codes(codes, MAX_CODES);
  CHECK_MSG(n >= 22, "only %d codes read from errors.h", n);  /* BG_OK .. BG_ETLS at least */
  for (int i = 0; i < n; i++) {
    CHECK_EQ_STR(bg_status_name(codes[i].value), codes[i].name);
    CHECK_MSG(strcmp(bg_strerror(codes[i].value), "unknown status") != 0, "%s has no text", codes[i].name);
    for (int j = 0; j < i; j++) {
      CHECK_MSG(codes[i].value != codes[j].value, "%s and %s share %d", codes[i].name, codes[j].name, codes[i].value);
      CHECK_MSG(strcmp(bg_strerror(codes[i].value), bg_strerror(codes[j].value)) != 0, "%s and %s: same text",
                codes[i].name, codes[j].name);
    }
  }
  CHECK_EQ_STR(bg_status_name(BG_ETIMEOUT), "BG_ETIMEOUT");
  CHECK_EQ_STR(bg_status_name(BG_OK), "BG_OK");
}

static void test_unknown_codes_have_no_name(void) {
  code codes[MAX_CODES];
  int n = header_codes(codes, MAX_CODES), lowest = 0;
  for (int i = 0; i < n; i++)
    if (codes[i].value < lowest) lowest = codes[i].value;
  const int unknown[] = {1, 2, lowest - 1, -1000, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    CHECK_MSG(bg_status_name(unknown[i]) == NULL, "bg_status_name(%d) = %s", unknown[i], bg_status_name(unknown[i]));
    CHECK_EQ_STR(bg_strerror(unknown[i]), "unknown status");
  }
}

BGT_RUN(BGT_CASE(test_every_header_code_has_its_name), BGT_CASE(test_unknown_codes_have_no_name))
