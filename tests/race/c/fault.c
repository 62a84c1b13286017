/* fault.c - fault injection for the race suite's cluster control (fault.h). Built only into
 * bg_race_worker_fault, with BG_RACE_FAULT: it reaches into the client's internal layout. */
#include "fault.h"

#include <string.h>

#ifdef BG_RACE_FAULT
#include "client/client.h"
#include "redis/cluster.h"
#endif

int race_fault_set(bg_client *client, const char *name) {
#ifdef BG_RACE_FAULT
  /* an ASK answered by BITFIELD_RO alone on the importing node (csrc/redis/cluster.h) */
  if (!strcmp(name, "ask-bits-only") && client->cluster) {
    client->cluster->fault_ask_bits_only = 1;
    return 0;
  }
#else
  (void)client;
  (void)name;
#endif
  return -1;
}
