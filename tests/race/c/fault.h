/*
 * fault.h - the negative control of the cluster scenarios (tests/race/README.md): a C reader
 * whose client follows ASK wrongly, as test_cluster.c's control does - a bits-only read with
 * ASKING on the importing node while the bitmap is still on the source. Only the
 * bg_race_worker_fault build (CMakeLists.txt here: the static library and csrc/'s internal headers)
 * has it; the ordinary worker refuses --fault.
 */
#ifndef RACE_FAULT_H
#define RACE_FAULT_H

#include <bloomguard.h>

/* Sets the named fault on client: 0, or -1 for an unknown name or a build without faults. */
int race_fault_set(bg_client *client, const char *name);

#endif
