/*
 * Internal: host names resolved off the calling thread, so that no loop ever blocks in getaddrinfo
 * and a connect's resolution ends with the call's deadline (as libcurl's threaded resolver does).
 *
 * A name that is not an IP literal is resolved by getaddrinfo on a detached thread of its own; the
 * request is shared by that thread and its owner until both let go, so an owner gives up at its
 * deadline (or at a cancel, or at its close) without waiting for a resolver that never answers:
 * the thread ends by the resolver's own timeouts and frees the request then. The order of
 * addresses is hiredis's own (IPv4 first, then IPv6 when there is none); the connect goes to the
 * first address, as a numeric host, while TLS still checks the certificate against the name.
 *
 * Who waits how: a blocking connect waits with bgi_resolve_wait (cancellable, up to its deadline);
 * the submission queue gives a descriptor the thread writes an 8-byte count to when it is done
 * (the queue's wake fd, client/poller.h: an eventfd or a socket pair; its loop wakes, then asks
 * bgi_resolve_done). The thread writes with bgi_wake_fd_write (common/sock.h): no SIGPIPE if the
 * queue closed its end meanwhile.
 *
 * Messages name the server by its label, never by the host text: a damaged URL may hold its
 * password where the host stands (redis/url.h, bgi_url_host_label).
 */
#ifndef BG_INTERNAL_RESOLVE_H
#define BG_INTERNAL_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Resolutions whose threads run at once in the process, at most: past it a connect fails at once
 * (a resolver that does not answer must not pile up a thread per reconnect). */
#define BGI_RESOLVE_MAX_INFLIGHT 64
/* "255.255.255.255" or the longest IPv6 text, with its NUL */
#define BGI_RESOLVE_ADDR_MAX 46

typedef struct bgi_resolve bgi_resolve;

/* 1 when host is an IPv4 or IPv6 literal (nothing to resolve). */
int bgi_resolve_is_literal(const char *host);

/* Starts resolving host on a thread; notify_fd >= 0: duplicated, and 8 bytes (a count of 1) are
 * written to the duplicate when the outcome is there. BG_ENOMEM, or BG_ECONN when the thread cannot
 * start or BGI_RESOLVE_MAX_INFLIGHT are in flight. label names the server in messages. */
int bgi_resolve_start(bgi_resolve **out, const char *host, int notify_fd, const char *label, bgi_err *err);

/* 1 once the outcome is there (a relaxed check a loop makes after its descriptor fired). */
int bgi_resolve_done(const bgi_resolve *r);

/* Waits for the outcome until the monotonic until_ns (0: no bound), cancellably (wait.h): BG_OK,
 * or timeout_st / BG_ECANCELED with a message on err. */
int bgi_resolve_wait(bgi_resolve *r, uint64_t until_ns, int timeout_st, int64_t budget_ms, bgi_err *err);

/* The outcome once done: BG_OK with the first address as numeric text in addr, or BG_ECONN saying
 * why (the resolver's words). */
int bgi_resolve_result(const bgi_resolve *r, char addr[BGI_RESOLVE_ADDR_MAX], bgi_err *err);

/* The owner lets go (NULL: no-op); the thread frees the request if it still runs. */
void bgi_resolve_release(bgi_resolve *r);

/* Threads still resolving in the process (for the tests: an abandoned one ends and frees). */
int bgi_resolve_inflight(void);

/* The negative control of the tests that no loop waits for a resolver (never set otherwise): a
 * resolution runs on the calling thread, to its end, as it did inside hiredis's connect. */
void bgi_resolve_fault_inline(int on);

#endif
