/* The blocking runner of tasks (task.h): waits on the calling thread. */
#include "common/task.h"

#include "common/wait.h"

int bgi_task_run(bgi_task *root, bgi_exec_fn exec, bgi_err *err) {
  bgi_task *stack[BGI_TASK_MAX_DEPTH];
  int depth = 0, st = BG_OK;
  stack[0] = root;
  for (;;) {
    bgi_task *t = stack[depth];
    switch (t->resume(t, st, err)) {
      case BGI_NEXT_CALL:
        st = exec ? exec(t->req, err) : bgi_err_set(err, BG_EINVAL, "internal: a request with no one to send it");
        break;
      case BGI_NEXT_SLEEP:
        /* the one wait primitive: the thread's current call's cancel ends it */
        st = bgi_sleep_until(t->until_ns);
        break;
      case BGI_NEXT_SUB:
        if (depth + 1 == BGI_TASK_MAX_DEPTH) {
          st = bgi_err_set(err, BG_EINVAL, "internal: tasks nested too deep");
          break;
        }
        stack[++depth] = t->sub;
        st = BG_OK;
        break;
      case BGI_NEXT_WAIT:
        /* no transport of a blocking runner hands its wait on */
        st = bgi_err_set(err, BG_EINVAL, "internal: a task waits for a transport the blocking runner has not got");
        break;
      default:
        st = t->status;
        if (depth == 0) return st;
        depth--;
        break;
    }
  }
}
