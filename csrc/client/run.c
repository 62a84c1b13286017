/* A task's CALL sent by the blocking runner (client.h, bgi_req_exec). */
#include "client/client.h"

int bgi_req_exec(const void *p, bgi_err *err) {
  const bgi_req *r = p;
  if (r->run)
    return bgi_client_call_script_ex(r->client, r->slot, r->deadline_ns, r->flags, r->run, r->what, r->build,
                                     r->parse, r->ctx, err);
  return bgi_client_call_ex(r->client, r->slot, r->deadline_ns, r->flags, r->build, r->parse, r->ctx, err);
}
