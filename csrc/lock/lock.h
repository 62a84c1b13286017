/* Internal layout of bg_lock (see include/bloomguard/lock.h for the design). */
#ifndef BG_INTERNAL_LOCK_H
#define BG_INTERNAL_LOCK_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "bloomguard/lock.h"
#include "common/call.h"
#include "client/client.h"
#include "common/err.h"
#include "common/wait.h"
#include "client/step.h"
#include "redis/conn.h"
#include "redis/layout.h"
#include "redis/names.h"

/* Kinds of hold on the server: exclusive (RLock layout) or shared (reader). */
enum { BGI_KIND_X = 'x', BGI_KIND_R = 'r' };

/* A waiting writer's intent lives this long unless renewed (and never longer than the lease). */
#define BGI_LOCK_INTENT_MS 2000

/*
 * An owner (owner.c): what a hold belongs to. seq is drawn from one per-process counter and
 * never reused, so a hold record names its owner by seq (a freed owner's address may come back
 * for a new one; its seq does not). refs: 1 for the owner itself (until bg_lock_owner_free, or
 * its thread's exit for a default owner) + 1 per hold record naming it, so the memory outlives
 * every record that points at it.
 */
struct bg_lock_owner {
  uint64_t seq;
  _Atomic unsigned refs;
  _Atomic unsigned holds;   /* hold records naming it (bg_lock_owner_holds) */
  int is_default;           /* a thread's default owner (freed by the thread's exit) */
};

/* The calling thread's default owner (made on first use); NULL when out of memory. */
bg_lock_owner *bgi_lock_owner_default(void);
/* A hold record takes / gives back a reference (the last one frees a freed owner). */
void bgi_lock_owner_take_hold(bg_lock_owner *o);
void bgi_lock_owner_drop_hold(bg_lock_owner *o);

/* One owner's hold through a handle. A record with count 0 is a fresh acquire in flight. */
typedef struct bgi_hold {
  bg_lock_owner *owner;
  uint64_t seq;         /* owner->seq */
  int kind;             /* BGI_KIND_* */
  int mode;             /* BG_LOCK_* of the acquire that started it */
  uint32_t count;       /* 0: a first acquire is in flight (not yet held) */
  int busy;             /* a call of this owner on this handle is running (calls must not overlap) */
  uint64_t token;
  uint64_t gen;         /* distinguishes successive holds of one owner */
  int lost;             /* the renewal found it gone */
  char lost_why[256];
  /* when the round trip that last set its lease was sent (the acquire's, then each renewal's): the
   * server ran it later, so the lease runs at least until lease_from_ns + lease (how long a renewal
   * waits for its answer, and the renewal trace) */
  uint64_t lease_from_ns;
  uint64_t held_from_ns; /* when its acquire's reply was recorded (from then on it is renewed) */
} bgi_hold;

struct bg_lock {
  bg_client *client;
  char *name;
  /* NAME:lock, its suffix(.., "fence" / "readers" / "writers") keys, the unlock channel */
  bgi_key key, fence_key, readers_key, writers_key, channel;
  int slot;             /* the cluster hash slot of every key and of the channel */
  char uuid[37];
  uint64_t fork_gen;    /* the process's fork generation the uuid and holds belong to (lock.c: forked) */
  int64_t lease_ms, poll_max_ms;
  int renew, subscribe;

  pthread_mutex_t mu;   /* holds */
  bgi_hold *holds;
  size_t nholds, cap;
  uint64_t next_gen;

  /* its renewal thread (renew.c: one per client and server); fields under the registry's mutex */
  struct bg_lock *rn_prev, *rn_next;
  const void *rn_domain;   /* the thread's key (its client, or its slot's cluster node) */
  int rn_registered, rn_busy;
  uint64_t rn_due_ns;

  bgi_errslot err;
};

/* Writes "<uuid>:<owner seq>" into buf (at least 64 bytes); returns its length. */
size_t bgi_lock_holder(const bg_lock *l, uint64_t seq, char *buf, size_t cap);

/* Releases every hold of the handle in full, taking it off the renewal list first (a hold whose
 * release fails then runs out on its own); the handle must be idle (no call on it: at close, or
 * once a failed rotation handed it to its give-back). BG_OK once nothing is held, else the first
 * failure (err): the holds that failed stay, for another try. */
int bgi_lock_release_all(bg_lock *l, uint64_t deadline_ns, bgi_err *err);
/* The handle's lease, for a caller that needs to know when what it holds runs out by itself. */
static inline int64_t bgi_lock_lease_ms(const bg_lock *l) { return l->lease_ms; }

/* ---- server-side steps (steps.c) ----------------------------------------------------------- */

/* Outcome of an acquire step. */
typedef struct bgi_acq {
  int status;           /* 1 acquired, 0 held by others, 2 a writer waits (reads), 3 our hold is gone */
  uint64_t token;       /* acquired: the new hold's token, 0 for a reentrant one */
  int64_t pttl;         /* not acquired: ms until the holder's (or intent's) lease runs out, -1/-2 as PTTL */
  int64_t holders;      /* not acquired: number of holders (or waiting writers) */
  char who[128];        /* not acquired: one holder id (or waiting writer) */
  char mode[16];        /* not acquired: the key's "mode" field ("" for an RLock layout) */
} bgi_acq;

/* write: the acquire is BG_LOCK_WRITE (a hold it starts is marked mode = "write") */
int bgi_lock_step_acquire(bg_lock *l, uint64_t deadline_ns, uint64_t seq, int kind, int write, int fresh,
                          int64_t intent_ms, bgi_acq *out, bgi_err *err);
/* *released: 1 the hold ended (final), 0 one count less; *held: 0 if the server no longer had our hold */
int bgi_lock_step_release(bg_lock *l, uint64_t deadline_ns, uint64_t seq, int kind, int final, int *held, bgi_err *err);
/* Up to BGI_RENEW_BATCH holds of one handle, renewed by one step. */
#define BGI_RENEW_BATCH 100
typedef struct bgi_renew_part {
  bg_lock *l;
  const uint64_t *seqs;
  const int *kinds;
  size_t n;             /* 1..BGI_RENEW_BATCH */
  char *held;           /* out: held[i] 1 renewed, 0 gone (0 too when the part failed) */
  int status;           /* out: BG_OK, or what failed (the round trip, or this part's step) */
} bgi_renew_part;
/* Renews the parts (at most BGI_STEPS_MAX, of one client, all on the node of parts[0]'s slot) in
 * one round trip - a pipeline of their steps, no MULTI: each step is atomic on its own keys and
 * the steps need not be atomic together. Returns the round trip's status (a redirect of one part
 * sends the whole pipeline: group parts by the node that serves them). */
int bgi_lock_step_renew(bgi_renew_part *parts, size_t n, uint64_t deadline_ns, bgi_err *err);
/* Deletes the fence, readers and writers keys if nobody holds the lock and no writer waits
 * (one step). out->status 1: retired (out->token: 1 if the fence key existed), 0: held, 2: a
 * writer waits (out->pttl, holders, who, mode as for an acquire). */
int bgi_lock_step_retire(bg_lock *l, uint64_t deadline_ns, bgi_acq *out, bgi_err *err);
/* Withdraws a waiting writer's intent (and wakes readers held back by it). */
int bgi_lock_step_cancel_intent(bg_lock *l, uint64_t seq, bgi_err *err);

/* ---- waiting (wait.c) ------------------------------------------------------------------------ */

/* A connection subscribed to the lock's unlock channel. */
typedef struct bgi_lock_sub {
  bgi_conn conn;
  int active;
  bgi_cluster *cluster;   /* the client's, when it talks to a cluster: an unsolicited sunsubscribe asks it to reload */
} bgi_lock_sub;

/* Opens and subscribes; BG_OK or an error (the caller then polls). */
int bgi_lock_sub_open(bg_lock *l, bgi_lock_sub *s, bgi_err *err);
/* Waits up to ms for a message on the channel: 1 one came, 0 none, -1 the connection failed or
 * the server ended the subscription (it is closed; the caller may subscribe again, else polls),
 * BG_ECANCELED the thread's current call was cancelled (bgi_poll_fd). */
int bgi_lock_sub_wait(bgi_lock_sub *s, int64_t ms);
void bgi_lock_sub_close(bgi_lock_sub *s);

/* ---- renewal (renew.c) ----------------------------------------------------------------------- */

/* Puts the handle on the renewal thread's list (starting the thread if none runs) if renewal is
 * on and it is not there yet, for a new hold whose acquire round trip was sent at lease_from_ns:
 * the handle is due a period after that at the latest (the server may have started the lease
 * as soon as it was sent; the reply may come much later). Call with l->mu held (lock order:
 * l->mu, then the registry's). */
int bgi_lock_renewer_register(bg_lock *l, uint64_t lease_from_ns);
/* Takes it off, waiting out a renewal round of it in flight (call without l->mu). */
void bgi_lock_renewer_unregister(bg_lock *l);

/* ---- renewal trace and fault (tests only: tests/c/test_lock_renew.c) -------------------------- */

/* One renewal of one hold, as the renewal thread saw it (times on bgi_now_ns). */
typedef struct bgi_renew_rec {
  const bg_lock *lock;
  uint64_t seq, gen;    /* the hold */
  int64_t lease_ms;
  uint64_t due_ns;      /* when the handle was due (the pass renews what is due within half a period) */
  uint64_t pass_ns;     /* when the pass that renewed it began (the thread woke, or the last pass ended) */
  uint64_t base_ns;     /* the hold's lease_from_ns before this renewal: its lease ran to >= base + lease */
  uint64_t held_ns;     /* the hold's held_from_ns: no renewal of it could come before */
  uint64_t sent_ns;     /* this renewal's round trip began */
  uint64_t done_ns;     /* ... and its reply was in */
  int status;           /* the round trip's status (BG_OK, or an error: retried after a quarter period) */
  int held;             /* 1 renewed, 0 found gone */
  uint64_t trip;        /* the round trip that carried it (numbered across the process) */
} bgi_renew_rec;

/* Starts recording every renewal into buf (up to cap, the rest are counted but dropped); NULL
 * stops. Returns the number recorded since the last start (may exceed cap). */
size_t bgi_lock_renew_trace(bgi_renew_rec *buf, size_t cap);
/* The fault of the negative control: every pass of the renewal thread first sleeps this long. */
void bgi_lock_renew_fault_delay(uint64_t ns);
/* The frozen-server tests' negative control: handles registered while on share one renewal
 * thread whatever their client and server (the process-wide thread of 0.2). */
void bgi_lock_renew_fault_one_thread(int on);
/* The batching control: a round trip per handle (as before one pipeline per server and pass). */
void bgi_lock_renew_fault_per_handle(int on);
/* A fault: a first acquire sleeps this long between its reply and recording the hold (a thread
 * preempted there, as under a sanitizer on a loaded machine). */
void bgi_lock_acquire_fault_delay(uint64_t ns);

#endif
