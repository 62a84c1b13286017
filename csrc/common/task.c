/* The blocking runner of tasks (task.h): waits on the calling thread. */
#include "common/task.h"

#include <stdalign.h>
#include <stdlib.h>

#include "common/wait.h"

/* One task being run: its stack of SUB tasks, the err it is resumed with, and (in a fan-out) the
 * executor's state of its CALL in flight. */
typedef struct lane {
  bgi_task *stack[BGI_TASK_MAX_DEPTH];
  int depth;
  bgi_err *err;
  int pending;     /* its CALL was started and is due (finish) */
  int done;
  void *state;     /* state_size bytes for the executor */
} lane;

static int run_fanout(bgi_task *t, const bgi_executor *ex);

/* How a lane's CALLs go out: each sent and waited for, or started (a fan-out's lane), or started
 * and held until the executor's flush (a fan-out's first CALLs). */
enum { SEND_AND_WAIT, START, START_HELD };

/* Moves l forward from its top task resumed with st until it ends (l->done; the status is
 * returned) or waits for a started CALL (l->pending; BGI_TASK_PENDING). */
static int step(lane *l, const bgi_executor *ex, int how, int st) {
  for (;;) {
    bgi_task *t = l->stack[l->depth];
    switch (t->resume(t, st, l->err)) {
      case BGI_NEXT_CALL:
        if (how != SEND_AND_WAIT) {
          st = ex->start(l->state, t->req, how == START_HELD && ex->flush, l->err);
          if (st == BGI_TASK_PENDING) {
            l->pending = 1;
            return st;
          }
        } else {
          st = ex && ex->call ? ex->call(t->req, l->err)
                              : bgi_err_set(l->err, BG_EINVAL, "internal: a request with no one to send it");
        }
        break;
      case BGI_NEXT_SLEEP:
        /* the one wait primitive: the thread's current call's cancel ends it */
        st = bgi_sleep_until(t->until_ns);
        break;
      case BGI_NEXT_SUB:
        if (l->depth + 1 == BGI_TASK_MAX_DEPTH) {
          st = bgi_err_set(l->err, BG_EINVAL, "internal: tasks nested too deep");
          break;
        }
        l->stack[++l->depth] = t->sub;
        st = BG_OK;
        break;
      case BGI_NEXT_FANOUT:
        st = run_fanout(t, ex);
        break;
      case BGI_NEXT_WAIT:
        /* no transport of a blocking runner hands its wait on */
        st = bgi_err_set(l->err, BG_EINVAL, "internal: a task waits for a transport the blocking runner has not got");
        break;
      default:
        st = t->status;
        if (l->depth == 0) {
          l->done = 1;
          return st;
        }
        l->depth--;
        break;
    }
  }
}

static void lane_init(lane *l, bgi_task *t, bgi_err *err, void *state) {
  l->stack[0] = t;
  l->depth = 0;
  l->err = err;
  l->pending = l->done = 0;
  l->state = state;
}

/* A fan-out's tasks to their ends; BG_OK (each one's status is its own). */
static int run_fanout(bgi_task *t, const bgi_executor *ex) {
  size_t n = t->nsubs;
  bgi_subtask *subs = t->subs;
  size_t state = ex && ex->start ? (ex->state_size + alignof(max_align_t) - 1) / alignof(max_align_t) *
                                       alignof(max_align_t) : 0;
  unsigned char *mem = state && n > 1 ? malloc(n * (sizeof(lane) + state)) : NULL;
  if (!mem) {
    /* one after another */
    for (size_t i = 0; i < n; i++) {
      lane l;
      lane_init(&l, subs[i].t, &subs[i].err, NULL);
      step(&l, ex, SEND_AND_WAIT, BG_OK);
    }
    return BG_OK;
  }
  lane *lanes = (lane *)(mem + n * state);
  for (size_t i = 0; i < n; i++) {
    lane_init(&lanes[i], subs[i].t, &subs[i].err, mem + i * state);
    step(&lanes[i], ex, START_HELD, BG_OK);
  }
  if (ex->flush)
    for (size_t i = 0; i < n; i++)
      if (lanes[i].pending) ex->flush(lanes[i].state);
  /* every request is out: now the answers, in the order they were sent */
  for (int more = 1; more;) {
    more = 0;
    for (size_t i = 0; i < n; i++) {
      lane *l = &lanes[i];
      if (!l->pending) continue;
      l->pending = 0;
      int st = ex->finish(l->state, l->err);
      if (st == BGI_TASK_PENDING) l->pending = 1;
      else if (step(l, ex, START, st) != BGI_TASK_PENDING) continue;
      more = 1;
    }
  }
  free(mem);
  return BG_OK;
}

int bgi_task_run_with(bgi_task *root, const bgi_executor *ex, bgi_err *err) {
  lane l;
  lane_init(&l, root, err, NULL);
  return step(&l, ex, SEND_AND_WAIT, BG_OK);
}

int bgi_task_run(bgi_task *root, bgi_exec_fn exec, bgi_err *err) {
  bgi_executor ex = {.call = exec};
  return bgi_task_run_with(root, &ex, err);
}
