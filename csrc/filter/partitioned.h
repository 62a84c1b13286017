/*
 * Internal: partitioned filters - one filter spread over P partitions, each a bitmap and a small
 * meta hash in a cluster slot of its own (docs/layout.md; the geometry in partition.h; the keys
 * in redis/layout.h).
 *
 * The central config (the filter's config hash, Redisson's key) names the live generation and
 * its geometry; handles read it once and again only when a step finds what it read outdated. A
 * partition's step reads or writes the partition's meta hash in the same atomic step as its bits
 * (a MULTI block, a Lua script: one slot), so no answer comes from bits of another generation or
 * geometry than the step checked: when the meta is gone (the filter was deleted) or holds another
 * geometry (deleted and made again), the step touches nothing, the handle reads the central config
 * again and the items are asked again with what is live.
 *
 * An operation on many items is split per partition: each partition's share is a lane (a task of
 * its own with its own CALL), and a window's lanes run as one fan-out (common/task.h) - on a
 * submission queue concurrently, on the blocking runner every lane's request sent before the
 * first answer is waited for.
 */
#ifndef BG_INTERNAL_PARTITIONED_H
#define BG_INTERNAL_PARTITIONED_H

#include <string.h>

#include "filter/filter.h"
#include "filter/partition.h"

/* ---- the central config ---------------------------------------------------------------------- */

/* bg_filter.kind */
#define BGI_KIND_PLAIN 0          /* Redisson's layout (or not known yet: a plain step finds out) */
#define BGI_KIND_PARTITIONED 1
#define BGI_KIND_NATIVE 2         /* the server's BF.* key (filter/native.h): fixed at open */

/* The handle's copy (under f->pmu). */
void bgi_pconf_get(bg_filter *f, bgi_pconf *out);
void bgi_pconf_set(bg_filter *f, const bgi_pconf *conf);
/* The filter is gone (deleted): plain until a step finds otherwise. */
void bgi_pconf_set_none(bg_filter *f);

/* Reading the central config (HGETALL) as a task's CALL: the kind found, and for a partitioned
 * filter its config; both published on the handle. BG_ENOTINIT when neither kind is there (or a
 * partitioned init has not finished), BG_ECORRUPT for fields that do not parse. */
typedef struct bgi_pconf_load {
  bg_filter *f;
  int kind;
  bgi_pconf conf;
} bgi_pconf_load;

void bgi_pconf_req(bgi_req *r, bgi_pconf_load *ld, bg_filter *f, uint64_t deadline_ns);
/* The same read on this thread (a rotation's steps, the snapshot's download). */
int bgi_pconf_read(bg_filter *f, bgi_pconf_load *ld, bgi_err *err);
/* The same parse, of an HGETALL reply another step made (info). */
int bgi_pconf_parse(bg_filter *f, const bgi_reply *hash, bgi_pconf_load *ld, bgi_err *err);

/* ---- partitions ---------------------------------------------------------------------------- */

/* The slot of partition `part` of a generation of `parts` partitions, and a key of it
 * (BGI_PKEY_* of redis/layout.h) as a bulk string. */
static inline unsigned bgi_pslot(uint32_t part, uint32_t parts) { return bgi_partition_slot(part, parts); }
void bgi_resp_pk(bgi_buf *b, const bg_filter *f, uint64_t gen, uint32_t part, uint32_t parts, char what);
/* Room for one key of f. */
static inline size_t bgi_pk_bound(const bg_filter *f) { return BGI_RESP_BULK_OVERHEAD + BGI_PKEY_MAX(f->name.len); }
/* A key of f as text, for messages. */
const char *bgi_pk_text(const bg_filter *f, uint64_t gen, uint32_t part, uint32_t parts, char what, char *buf,
                        size_t cap);

/* The tracking verdict of a partition (redis/tracking.h): its own id, its generation and
 * geometry folded into the config the verdict vouches for. */
static inline uint64_t bgi_ptrack_id(const bg_filter *f, uint32_t part) {
  return (1ULL << 63) | (f->id << 14) | part;
}
static inline uint64_t bgi_ptrack_cfg(uint64_t gen, uint32_t parts, uint64_t cfg) {
  uint64_t x = (gen << 15 | parts) * 0x9e3779b97f4a7c15ULL;
  return cfg ^ (x ^ (x >> 29));
}

/* ---- a window of items, split per partition ------------------------------------------------ */

/* Lanes one fan-out runs at most: a window touching more partitions runs several rounds. */
#define BGI_PLANES_MAX 256

typedef struct bgi_plane bgi_plane;

/* A window's items: their hashes, and the items still to do grouped by partition for one
 * generation. A window of one item keeps everything here (no allocation); a bigger one on the heap. */
typedef struct bgi_pwin {
  size_t n;              /* items in the window */
  uint64_t (*h)[2];      /* hash of each */
  uint32_t *part;        /* partition of each, for the generation being grouped */
  uint32_t *todo;        /* items still to do, n_todo of them */
  uint32_t *redo;        /* items a round gave back (a lane found its generation gone), n_redo */
  uint32_t *fwd;         /* items added whose partition named a generation a commit moves to, n_fwd */
  uint32_t *order;       /* the items to do, by partition */
  uint32_t *start;       /* per partition p: its items are order[start[p] .. start[p + 1]) */
  size_t n_todo, n_redo, n_fwd;
  size_t cap, cap_parts;
  bgi_plane *lanes;      /* BGI_PLANES_MAX of them, and their subtasks */
  bgi_subtask *subs;
  uint64_t h1[1][2];
  uint32_t part1[1], todo1[1], redo1[1], fwd1[1], order1[1];
} bgi_pwin;

/* An empty window (its one-item room set up). */
void bgi_pwin_init(bgi_pwin *w);
/* Room for n items, and when n > 1 for the lanes. BG_OK or BG_ENOMEM. */
int bgi_pwin_reserve(bgi_pwin *w, size_t n, bgi_err *err);
void bgi_pwin_free(bgi_pwin *w);
/* Hashes items[0..n) into w (n <= its room); every item is to do. */
void bgi_pwin_hash(bgi_pwin *w, const void *const *items, const size_t *lens, size_t n);
/* The same with the hashes given (a rotation applying its delta). */
void bgi_pwin_set_hashes(bgi_pwin *w, const uint64_t (*h)[2], size_t n);
/* Groups the items to do by partition of a generation of `parts` partitions (the grouping of one
 * item needs no room per partition). BG_OK or BG_ENOMEM. */
int bgi_pwin_group(bgi_pwin *w, uint32_t parts, bgi_err *err);
/* Every item of the window is to do again (another generation's round). */
static inline void bgi_pwin_all(bgi_pwin *w) {
  for (size_t i = 0; i < w->n; i++) w->todo[i] = (uint32_t)i;
  w->n_todo = w->n;
  w->n_redo = w->n_fwd = 0;
}
/* The items a round gave back become the items to do. */
static inline void bgi_pwin_take_redo(bgi_pwin *w) {
  uint32_t *t = w->todo;
  w->todo = w->redo;
  w->redo = t;
  w->n_todo = w->n_redo;
  w->n_redo = 0;
}
/* The next partition from *p on that has items to do in the grouping: its items (window indexes)
 * in *items and their count; 0 when none is left (*p is then parts). */
uint32_t bgi_pwin_next(const bgi_pwin *w, uint32_t parts, uint32_t *p, const uint32_t **items);

/* ---- lanes: one partition's share of a window ------------------------------------------------ */

/* What a lane found, besides its status. */
#define BGI_LANE_DONE 0      /* answered / applied */
#define BGI_LANE_GONE 1      /* the partition's meta is gone or holds another geometry: nothing was read
                                or written; the central config says what is live */
#define BGI_LANE_LOCKED 2    /* a locked rotation rewrites the partition's bits (its meta's stage): no
                                answer; asked again after a nap, up to BG_OPT_WRITE_LOCK_WAIT_MS */

struct bgi_plane {
  bgi_task t;
  bg_filter *f;
  const bgi_pwin *w;
  const uint32_t *items;  /* window indexes */
  uint32_t n;
  uint32_t part;
  bgi_pgen g;             /* the generation it reads / writes (cfg: the partition's geometry) */
  uint64_t deadline_ns;
  bgi_req req;
  int state, outcome;
  /* query */
  uint8_t *present;       /* the window's answers */
  int bits_only, tracked, stale, plain;   /* plain: the cluster tests' fault (pquery.c) */
  uint64_t epoch;
  uint64_t forward;       /* the partition's meta names the generation a commit moves to (0: none) */
  /* add */
  bgi_script_run run;
  size_t added;
};

/* What every lane starts with (its kind's init then sets the rest). */
void bgi_plane_init(bgi_plane *l, bg_filter *f, const bgi_pwin *w, const uint32_t *items, uint32_t n, uint32_t part,
                    const bgi_pgen *g, uint64_t deadline_ns);
void bgi_plane_query_init(bgi_plane *l, uint8_t *present);
void bgi_plane_add_init(bgi_plane *l);
/* The lane's items' bit indexes into c->idx (k per item, Redisson's scheme over the partition). */
int bgi_plane_indexes(bgi_conn *c, const bgi_plane *l, bgi_err *err);

/*
 * The next round of a window's lanes: from partition *cursor on, one lane per partition with items
 * to do, up to BGI_PLANES_MAX (in w->lanes; a window of one item in *one). init sets each up.
 * Returns how many (0: every partition of the grouping had its lane).
 */
typedef void (*bgi_plane_init_fn)(bgi_plane *l, const uint32_t *items, uint32_t n, uint32_t part, void *ctx);
uint32_t bgi_pwin_lanes(bgi_pwin *w, uint32_t parts, uint32_t *cursor, bgi_plane *one, bgi_plane_init_fn init,
                        void *ctx);
/* Runs a round's lanes: a SUB for one, a FANOUT for more. */
int bgi_pwin_run(bgi_task *t, bgi_pwin *w, bgi_plane *one, uint32_t nlanes);
/* After the round: lane i, and its status (its message copied to err when it failed). */
static inline bgi_plane *bgi_pwin_lane(bgi_pwin *w, bgi_plane *one, uint32_t i) { return w->lanes ? &w->lanes[i] : one; }
int bgi_pwin_lane_status(bgi_pwin *w, uint32_t nlanes, uint32_t i, int round_st, bgi_err *err);

/* ---- whole-filter steps (psweep.c) ------------------------------------------------------------ */

#define BGI_PSWEEP_INIT 1      /* DEL bitmap, HSET meta: a partition made empty with the generation's geometry */
#define BGI_PSWEEP_COUNT 2     /* BITCOUNT bitmap */
#define BGI_PSWEEP_DELETE 3    /* UNLINK bitmap, meta, mark, delta */
#define BGI_PSWEEP_EXPIRE 4    /* PEXPIRE both */
#define BGI_PSWEEP_PERSIST 5   /* PERSIST both */

/* One partition's request of a sweep. */
typedef struct bgi_pkey_lane {
  bgi_task t;
  bg_filter *f;
  bgi_pgen g;
  uint32_t part;
  int op, sent;
  int64_t ttl_ms, value;
  uint64_t deadline_ns;
  bgi_req req;
} bgi_pkey_lane;

/* Every partition of generation g, BGI_PLANES_MAX at a time: applied (a key existed / changed) or
 * count (the sum of each partition's Redisson estimate). The first failure ends it. */
typedef struct bgi_psweep {
  bgi_task t;
  bg_filter *f;
  bgi_pgen g;
  int op;
  int64_t ttl_ms;
  uint64_t deadline_ns;
  uint32_t cursor, nlanes;
  int applied;
  double count;
  bgi_pkey_lane lanes[BGI_PLANES_MAX];
  bgi_subtask subs[BGI_PLANES_MAX];
} bgi_psweep;

void bgi_psweep_init(bgi_psweep *s, bg_filter *f, const bgi_pgen *g, int op, int64_t ttl_ms, uint64_t deadline_ns);

/*
 * A partitioned init (tryInit's meaning: a config already there, of either kind, is kept; created
 * says which): claims the central config (a script: only where none exists; kind, the generation's
 * record and a token, with a TTL), writes every partition's meta (a sweep), then makes the
 * generation live (a script: only while the claim's token is there; the TTL dropped). Readers see
 * BG_ENOTINIT until that last step; an init that dies leaves a claim that expires.
 */
typedef struct bgi_pinit {
  bgi_task t;
  bg_filter *f;
  uint64_t deadline_ns;
  bgi_pgen g;
  char fpp[32];
  char token[33];
  int state, ok, created;
  bgi_script_run run;
  bgi_req req;
  bgi_psweep sweep;
} bgi_pinit;

/* The first generation's record for (n, fpp, P), or the failure (partition.h,
 * bgi_partition_geometry) with its message. */
int bgi_pinit_geometry(int64_t n, double fpp, int64_t parts, bgi_pgen *g, bgi_err *err);
/* Checks n, fpp and P as that does and sets the task up. */
int bgi_pinit_prepare(bgi_pinit *in, bg_filter *f, uint64_t deadline_ns, int64_t n, double fpp, int64_t parts,
                      bgi_err *err);

/* ---- the operations ---------------------------------------------------------------------- */

/*
 * contains or add of items[0..n) on a partitioned filter, without the policy: *done as the plain
 * tasks' (query.c, add.c), present[] for contains, *added for add. BG_ENOTINIT when the central
 * config is gone or says the filter is plain (the caller then tries the plain steps).
 */
typedef struct bgi_pop_task {
  bgi_task t;
  bg_filter *f;
  int is_add;
  const void *const *items;
  const size_t *lens;
  const uint64_t (*hashes)[2];   /* instead of items: their hashes (bgi_pop_task_hashes) */
  bgi_pgen fixed;         /* gen != 0: that generation only, whatever is live (a rotation's own) */
  int forwarding;         /* the round adds items to the generation a commit moves to */
  uint64_t confirm;       /* a query read a partition of this generation that a commit moves away
                             from: the config must still name it once the window is read (0: none) */
  uint64_t fwd_gen;
  int locked;             /* a round found a partition being rewritten in place */
  bgi_lock_wait lw;
  size_t n, *done, *added;
  uint8_t *present;
  uint64_t deadline_ns;
  int64_t retries, attempt;
  int state;
  size_t from;            /* the window: items[from .. from + win.n) */
  uint32_t cursor, nlanes;
  bgi_pgen g;
  bgi_pconf_load ld;
  bgi_req req;
  bgi_pwin win;
  bgi_plane one;
} bgi_pop_task;

void bgi_pop_task_init(bgi_pop_task *pt, bg_filter *f, int is_add, uint64_t deadline_ns, const void *const *items,
                       const size_t *lens, size_t n, uint8_t *present, size_t *added, size_t *done);
/* Frees what the task holds; after it ended (done), or instead of running it. */
void bgi_pop_task_free(bgi_pop_task *pt);
/* Tests only (the negative control of tests/c/test_prot.c): adds and queries ignore a partition's
 * forward generation - adds do not reach it, queries answer from a generation no longer live. */
void bgi_pop_fault_ignore_forward(int on);
/* Tests only (the negative control of test_policy.c's partitioned snapshot race): the download
 * copies every partition's bits without checking its meta, its WATCH or the config after. */
void bgi_download_fault_unchecked(int on);

/* An add of items given by their hashes into generation g alone (a rotation applying the items
 * its delta recorded to the generation it built): a partition of g found gone fails it
 * (BG_ESERVER). */
void bgi_pop_task_hashes(bgi_pop_task *pt, bg_filter *f, const bgi_pgen *g, uint64_t deadline_ns,
                         const uint64_t (*hashes)[2], size_t n, size_t *added, size_t *done);

#endif
