/*
 * Internal: an operation as a resumable state machine (a task).
 *
 * A task never waits. Each time it is resumed it does what it can without waiting, then says
 * what it needs next: one request to Redis (CALL), a wait until a time (SLEEP), another task run
 * to its end (SUB), several tasks run to their ends (FANOUT), or nothing more (DONE); a request
 * task that handed its wait to a transport which will resume it (client/transport.h) says WAIT. Whoever runs it - the blocking runner on
 * the calling thread (bgi_task_run below, client/run.c), or a submission queue driven by the
 * host's event loop (client/queue.c) - does that and resumes it with the outcome. So the
 * blocking calls and the submitted ones share every line of protocol, policy and retry code:
 * only the waiting differs.
 *
 * The contract of a resume function:
 *   int resume(bgi_task *t, int st, bgi_err *err)
 * st is the outcome of what the task asked for last: BG_OK the first time, then the CALL's status
 * (its message in err), BG_OK after a SLEEP (BG_ECANCELED when the operation was cancelled during
 * it; BG_ETIMEOUT when a queue ended it at its deadline), the SUB task's status, BG_OK after a
 * FANOUT (each task's own status and message are in its bgi_subtask), or after a WAIT what the
 * transport resumes it with. It returns
 * BGI_NEXT_*, with the matching field of t set; for BGI_NEXT_DONE, t->status is the result (the
 * failure's message in err). A task is resumed on one thread at a time, but not always the same one.
 */
#ifndef BG_INTERNAL_TASK_H
#define BG_INTERNAL_TASK_H

#include <stdint.h>

#include "common/err.h"

#define BGI_NEXT_DONE 0
#define BGI_NEXT_CALL 1
#define BGI_NEXT_SLEEP 2
#define BGI_NEXT_SUB 3
#define BGI_NEXT_WAIT 4   /* a transport holds it (client/transport.h) and will resume it */
#define BGI_NEXT_FANOUT 5 /* several tasks, each to its end (below) */

/* Deepest nesting of SUB tasks a runner keeps (policy -> filter operation -> step). */
#define BGI_TASK_MAX_DEPTH 6

typedef struct bgi_task bgi_task;
typedef int (*bgi_resume_fn)(bgi_task *t, int st, bgi_err *err);

/*
 * One task of a FANOUT, with the message of its own failure (the tasks of a fan-out end in any
 * order, each resumed with its own err). A fan-out's tasks share nothing a runner knows of: the
 * queue runs them concurrently (each CALL on its own), the blocking runner with an executor that
 * can start CALLs (bgi_task_run_with) sends every task's request before it waits for the first
 * answer, else one task after another.
 */
typedef struct bgi_subtask {
  bgi_task *t;
  bgi_err err;
} bgi_subtask;

struct bgi_task {
  bgi_resume_fn resume;
  int status;            /* DONE: the result */
  const void *req;       /* CALL: what to send (the client layer's bgi_req; opaque below it) */
  uint64_t until_ns;     /* SLEEP: until this monotonic time */
  bgi_task *sub;         /* SUB: the task to run (its resume function set, its state at the start) */
  bgi_subtask *subs;     /* FANOUT: the tasks to run (each set up as a SUB is), nsubs of them */
  size_t nsubs;
};

static inline void bgi_task_init(bgi_task *t, bgi_resume_fn resume) {
  t->resume = resume;
  t->status = BG_OK;
  t->req = NULL;
  t->until_ns = 0;
  t->sub = NULL;
  t->subs = NULL;
  t->nsubs = 0;
}

/* The returns of a resume function (t's field set first). */
static inline int bgi_task_done(bgi_task *t, int status) {
  t->status = status;
  return BGI_NEXT_DONE;
}
static inline int bgi_task_call(bgi_task *t, const void *req) {
  t->req = req;
  return BGI_NEXT_CALL;
}
static inline int bgi_task_sleep(bgi_task *t, uint64_t until_ns) {
  t->until_ns = until_ns;
  return BGI_NEXT_SLEEP;
}
static inline int bgi_task_sub(bgi_task *t, bgi_task *sub) {
  t->sub = sub;
  return BGI_NEXT_SUB;
}
/* subs[i].err is cleared here; n > 0. */
static inline int bgi_task_fanout(bgi_task *t, bgi_subtask *subs, size_t n) {
  for (size_t i = 0; i < n; i++) bgi_err_clear(&subs[i].err);
  t->subs = subs;
  t->nsubs = n;
  return BGI_NEXT_FANOUT;
}

/* Sends one CALL's request and waits for its outcome (the client layer's, client/run.h). */
typedef int (*bgi_exec_fn)(const void *req, bgi_err *err);

/* Not a status: a started CALL's outcome comes from finish (below). */
#define BGI_TASK_PENDING 1

/*
 * How the blocking runner sends CALLs: call sends one and waits for its outcome. A fan-out's
 * CALLs may instead be started: start sends one (state: state_size bytes of the executor's, kept
 * by the runner until the CALL ended) and returns BGI_TASK_PENDING while its answer is due, or the
 * outcome at once; finish waits for it and returns the outcome, or BGI_TASK_PENDING again (the
 * CALL sent its request once more: a redirect). start NULL: a fan-out runs task after task.
 * hold: the fan-out's first CALLs may be kept unsent until flush (NULL: never held), which the
 * runner calls for each of them before the first finish, so that the requests for one server go
 * out together; CALLs started later are sent at once.
 */
typedef struct bgi_executor {
  bgi_exec_fn call;
  size_t state_size;
  int (*start)(void *state, const void *req, int hold, bgi_err *err);
  void (*flush)(void *state);
  int (*finish)(void *state, bgi_err *err);
} bgi_executor;

/*
 * Runs root to its end on this thread and returns its status: CALLs through exec (NULL: a CALL
 * fails with BG_EINVAL - for tasks that never make one, as the policy engine's unit tests give
 * it), SLEEPs through the one wait primitive (common/wait.h: the thread's current call may
 * cancel them), a FANOUT's tasks one after another.
 */
int bgi_task_run(bgi_task *root, bgi_exec_fn exec, bgi_err *err);
/* The same with an executor: a FANOUT's CALLs all started before the first is waited for (when
 * the executor can start them; also when the memory for that cannot be had, task after task). */
int bgi_task_run_with(bgi_task *root, const bgi_executor *ex, bgi_err *err);

#endif
