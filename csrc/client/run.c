/* A task's CALL sent by the blocking runner (client.h, bgi_req_exec, bgi_req_executor). */
#include "client/client.h"

#include <stdatomic.h>

#include "common/wait.h"

/* The fan-out test's negative control (test_partitioned), never set otherwise: nothing is held,
 * each CALL of a fan-out is written on its own, as before holding was made. */
static atomic_int fault_send_each;

void bgi_fanout_fault_send_each(int on) { atomic_store(&fault_send_each, on); }

int bgi_req_exec(const void *p, bgi_err *err) {
  const bgi_req *r = p;
  if (r->run)
    return bgi_client_call_script_ex(r->client, r->slot, r->deadline_ns, r->flags, r->run, r->what, r->build,
                                     r->parse, r->ctx, err);
  return bgi_client_call_ex(r->client, r->slot, r->deadline_ns, r->flags, r->build, r->parse, r->ctx, err);
}

/* A fan-out's CALL in flight: its request task on a deferring blocking transport. */
typedef struct started {
  bgi_blocking_transport b;
  bgi_req_task rt;
} started;

/* The request task from where it was resumed with st until it waits for its submitted round
 * trip (BGI_TASK_PENDING) or ends (its status). */
static int drive(started *s, int st, bgi_err *err) {
  for (;;) {
    switch (s->rt.t.resume(&s->rt.t, st, err)) {
      case BGI_NEXT_WAIT:
        return BGI_TASK_PENDING;
      case BGI_NEXT_SLEEP:
        st = bgi_sleep_until(s->rt.t.until_ns);
        break;
      case BGI_NEXT_DONE:
        bgi_blocking_transport_free(&s->b);
        return s->rt.t.status;
      default:
        bgi_blocking_transport_free(&s->b);
        return bgi_err_set(err, BG_EINVAL, "internal: a request task asked for what it never asks for");
    }
  }
}

static int start(void *state, const void *req, int hold, bgi_err *err) {
  started *s = state;
  bgi_blocking_transport_init(&s->b, NULL, 1);
  s->b.hold = hold && !atomic_load_explicit(&fault_send_each, memory_order_relaxed);
  bgi_req_task_init(&s->rt, req, &s->b.tr);
  return drive(s, BG_OK, err);
}

static int finish(void *state, bgi_err *err) {
  started *s = state;
  int st = bgi_blocking_transport_wait(&s->b, err);
  return drive(s, st, err);
}

static void flush(void *state) { bgi_blocking_transport_flush(&((started *)state)->b); }

const bgi_executor bgi_req_executor = {
  .call = bgi_req_exec, .state_size = sizeof(started), .start = start, .flush = flush, .finish = finish,
};
