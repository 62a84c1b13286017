/*
 * worker_kit.h - what every race worker shares, whatever its role: the command line, the item
 * files, the stop/ready files and the one JSON line of counts. The protocol is described in
 * tests/race/README.md; the Python, Go and Java workers implement the same one.
 */
#ifndef RACE_WORKER_KIT_H
#define RACE_WORKER_KIT_H

#include <stddef.h>
#include <stdio.h>

typedef struct worker_args {
  const char *url, *filter, *role, *strategy, *lang;
  const char *items;  /* base items: in every generation */
  const char *db;     /* the "database": base + every item an adder is about to add */
  const char *added;  /* items whose add returned OK, appended after the add */
  const char *stop;   /* stop as soon as this file exists */
  const char *ready;  /* created once the worker is running */
  const char *id;     /* adders: prefix of their items, unique per worker */
  const char *fault;  /* the cluster control's fault (fault.h), NULL for none */
  double duration;    /* seconds; a hard cap */
  long count;         /* rotate: rotations; add: adds (caps) */
  long expected[8];   /* rotate: rotation i uses expected[i % n_expected] */
  int n_expected;
  double fpp;
  long hold_ms;       /* rotate: pause between reading the database and committing */
  long pause_us;      /* query/add: pause between two operations */
  long partitions;    /* a partitioned filter's P (0: Redisson's layout): tryInit'd at start */
  int native;         /* --kind native: the server's own BF.* filter (bg_filter_open_native) */
} worker_args;

/* Parses argv; on a usage error prints it and exits 2 (a harness failure). */
void kit_parse_args(worker_args *a, int argc, char **argv);

/* A growing list of items (owned copies). */
typedef struct item_list {
  char **v;
  size_t *len;
  size_t n, cap;
} item_list;

void kit_list_push(item_list *l, const char *s, size_t len);
void kit_list_free(item_list *l);

/* Appends the complete lines of path from *offset on to l, and moves *offset past them (a
 * line still being written - no newline yet - is left for the next call). -1 on an I/O error. */
int kit_read_lines(const char *path, long *offset, item_list *l);

/* Appends "item\n" with one write() on an O_APPEND descriptor, so that lines written by
 * workers of every language to one file never interleave. -1 on error. */
int kit_append_line(int fd, const char *item, size_t len);
int kit_open_append(const char *path);

int kit_should_stop(const worker_args *a, double started);
void kit_touch(const char *path);
double kit_now(void);

/* Keeps the first failure's message, for the JSON line (st: the status, 0 for a wrong answer). */
void kit_note_error(char *first, size_t cap, const char *what, int st, const char *msg);

/* {"lang":..,"role":..,"strategy":..,"queries":..,...} on stdout, then newline. */
typedef struct counts {
  long queries, checked, errors, false_negatives, adds, add_errors, rotations, rotation_errors;
  long locked; /* of the errors: BG_ELOCKED (a LOCKED rewrite outlasted the reader's lock wait) */
  long tracked; /* queries that read the bits alone (BG_STAT_TRACKED_READS; hiredis >= 1.0 only) */
  /* the client's Redis Cluster counters (BG_STAT_CLUSTER_*; 0 standalone): MOVED and ASK
   * redirects followed, TRYAGAIN / CLUSTERDOWN / LOADING answers waited out, slot map reloads */
  long cluster_moved, cluster_ask, cluster_busy, cluster_reloads;
  long last_expected;
  /* with --partitions: 1 if this worker's tryInit created the filter (the harness made it
   * first, so 0), and the P its info() then read */
  long init_created, partitions;
  char first_error[512];
} counts;
void kit_print_counts(const worker_args *a, const counts *c);

#endif
