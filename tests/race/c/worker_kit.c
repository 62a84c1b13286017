/* worker_kit.c - command line, item files, stop/ready files and the JSON line (worker_kit.h). */
#include "worker_kit.h"

#include <bloomguard.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(const char *msg) {
  fprintf(stderr,
          "race worker: %s\n"
          "usage: bg_race_worker --url URL --filter NAME --role query|add|rotate --strategy swap|locked|naive\n"
          "  --items FILE --db FILE --added FILE [--stop FILE] [--ready FILE] [--id TAG]\n"
          "  [--duration SEC] [--count N] [--expected N[,N...]] [--fpp P] [--hold-ms MS] [--pause-us US]\n"
          "  [--partitions P (a partitioned filter: tryInit with the first --expected, --fpp, P at start)]\n"
          "  [--kind redisson|native (native: the server's own BF.* filter)]\n"
          "  [--lang NAME (default c; the harness names the worker built against hiredis 1.x c1)]\n"
          "  [--fault ask-bits-only (bg_race_worker_fault only, with a cluster URL: the control)]\n",
          msg);
  exit(2);
}

static long to_long(const char *s, const char *what) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s) usage(what);
  return v;
}

void kit_parse_args(worker_args *a, int argc, char **argv) {
  memset(a, 0, sizeof *a);
  a->lang = "c";
  a->duration = 60;
  a->count = 1000000;
  a->fpp = 0.01;
  a->id = "c";
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (i + 1 >= argc) usage("every option takes a value");
    const char *v = argv[++i];
    if (!strcmp(k, "--url")) a->url = v;
    else if (!strcmp(k, "--filter")) a->filter = v;
    else if (!strcmp(k, "--role")) a->role = v;
    else if (!strcmp(k, "--strategy")) a->strategy = v;
    else if (!strcmp(k, "--items")) a->items = v;
    else if (!strcmp(k, "--db")) a->db = v;
    else if (!strcmp(k, "--added")) a->added = v;
    else if (!strcmp(k, "--stop")) a->stop = v;
    else if (!strcmp(k, "--ready")) a->ready = v;
    else if (!strcmp(k, "--id")) a->id = v;
    else if (!strcmp(k, "--lang")) a->lang = v;
    else if (!strcmp(k, "--fault")) a->fault = v;
    else if (!strcmp(k, "--duration")) a->duration = atof(v);
    else if (!strcmp(k, "--count")) a->count = to_long(v, "--count");
    else if (!strcmp(k, "--fpp")) a->fpp = atof(v);
    else if (!strcmp(k, "--hold-ms")) a->hold_ms = to_long(v, "--hold-ms");
    else if (!strcmp(k, "--pause-us")) a->pause_us = to_long(v, "--pause-us");
    else if (!strcmp(k, "--partitions")) a->partitions = to_long(v, "--partitions");
    else if (!strcmp(k, "--kind")) {
      if (strcmp(v, "native") && strcmp(v, "redisson")) usage("--kind: redisson or native");
      a->native = !strcmp(v, "native");
    }
    else if (!strcmp(k, "--expected")) {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (a->n_expected == 8) usage("--expected: at most 8 values");
        a->expected[a->n_expected++] = to_long(t, "--expected");
      }
    } else usage("unknown option");
  }
  if (!a->url || !a->filter || !a->role || !a->strategy || !a->items || !a->db || !a->added)
    usage("--url, --filter, --role, --strategy, --items, --db and --added are required");
  if ((!strcmp(a->role, "rotate") || a->partitions) && a->n_expected == 0)
    usage("rotate and --partitions need --expected");
}

void kit_list_push(item_list *l, const char *s, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    l->len = realloc(l->len, l->cap * sizeof *l->len);
    if (!l->v || !l->len) abort();
  }
  l->v[l->n] = malloc(len + 1);
  if (!l->v[l->n]) abort();
  memcpy(l->v[l->n], s, len);
  l->v[l->n][len] = 0;
  l->len[l->n++] = len;
}

void kit_list_free(item_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  free(l->len);
  memset(l, 0, sizeof *l);
}

int kit_read_lines(const char *path, long *offset, item_list *l) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  if (fseek(fp, *offset, SEEK_SET) != 0) {
    fclose(fp);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, fp)) > 0) {
    if (line[n - 1] != '\n') break; /* being written: next time */
    kit_list_push(l, line, (size_t)n - 1);
    *offset += n;
  }
  free(line);
  fclose(fp);
  return 0;
}

int kit_open_append(const char *path) { return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); }

int kit_append_line(int fd, const char *item, size_t len) {
  char buf[256];
  if (len + 1 > sizeof buf) return -1;
  memcpy(buf, item, len);
  buf[len] = '\n';
  return write(fd, buf, len + 1) == (ssize_t)(len + 1) ? 0 : -1;
}

double kit_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int kit_should_stop(const worker_args *a, double started) {
  if (kit_now() - started >= a->duration) return 1;
  struct stat st;
  return a->stop && stat(a->stop, &st) == 0;
}

void kit_touch(const char *path) {
  if (!path) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

void kit_note_error(char *first, size_t cap, const char *what, int st, const char *msg) {
  if (first[0]) return;
  if (st) snprintf(first, cap, "%s: %s: %s", what, bg_strerror(st), msg ? msg : "");
  else snprintf(first, cap, "%s: %s", what, msg ? msg : ""); /* not a failed call: a wrong answer */
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

void kit_print_counts(const worker_args *a, const counts *c) {
  printf("{\"lang\":");
  json_string(a->lang);
  printf(",\"role\":");
  json_string(a->role);
  printf(",\"strategy\":");
  json_string(a->strategy);
  printf(",\"queries\":%ld,\"checked\":%ld,\"errors\":%ld,\"false_negatives\":%ld,\"adds\":%ld,"
         "\"add_errors\":%ld,\"rotations\":%ld,\"rotation_errors\":%ld,\"locked\":%ld,"
         "\"tracked\":%ld,\"cluster_moved\":%ld,\"cluster_ask\":%ld,\"cluster_busy\":%ld,"
         "\"cluster_reloads\":%ld,\"last_expected\":%ld,\"first_error\":",
         c->queries, c->checked, c->errors, c->false_negatives, c->adds, c->add_errors, c->rotations,
         c->rotation_errors, c->locked, c->tracked, c->cluster_moved, c->cluster_ask, c->cluster_busy,
         c->cluster_reloads, c->last_expected);
  json_string(c->first_error);
  if (a->partitions) printf(",\"init_created\":%ld,\"partitions\":%ld", c->init_created, c->partitions);
  printf("}\n");
  fflush(stdout);
}
