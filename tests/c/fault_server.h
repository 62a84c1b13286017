/*
 * Fault servers for the transport tests, each a thread of the test listening on a free loopback
 * port (no library code: the ground truth the library is judged by):
 *  - a proxy to a real redis-server that relays both ways, and can trickle the server's bytes to
 *    the client one at a time (bgt_fault_trickle): a reply that arrives, but slowly;
 *  - a fake server that answers each command with a function's reply (a lying sentinel).
 * Stopping one closes every connection it holds.
 */
#ifndef BG_TEST_FAULT_SERVER_H
#define BG_TEST_FAULT_SERVER_H

#include <stddef.h>

typedef struct bgt_fault bgt_fault;

/* The RESP text to answer a command with (argv[0] is its name), or NULL to close the connection. */
typedef const char *(*bgt_fault_answer)(void *userdata, int argc, char **argv);

/* A proxy to 127.0.0.1:target_port. NULL (and a message on stderr) if it cannot listen. */
bgt_fault *bgt_proxy_start(int target_port);
/* A fake server answering with fn. */
bgt_fault *bgt_fake_start(bgt_fault_answer fn, void *userdata);
int bgt_fault_port(const bgt_fault *f);
/* Proxy: from now on the server's bytes reach the client one every us microseconds (0: as they
 * come). Bytes already waiting are trickled too. */
void bgt_fault_trickle(bgt_fault *f, int us);
/* Closes every connection it holds now (the listener stays). Returns once they are closed. */
void bgt_fault_drop_all(bgt_fault *f);
/* Connections accepted so far. */
int bgt_fault_accepted(const bgt_fault *f);
/* Closes every connection and the listener, and frees f. */
void bgt_fault_stop(bgt_fault *f);

#endif
