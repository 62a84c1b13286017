/*
 * bloomguard/client.h - connection pools to one Redis server, or to the masters of a Redis Cluster.
 *
 * Thread safety: a bg_client may be shared by any number of threads; each call takes a pooled
 * connection for its duration (waiting up to its deadline, else the command timeout, when all are
 * busy). A connection that failed is dropped and replaced by a fresh one on a later call; a call
 * whose idle connection turned out dead (the server restarted, closed it, or a write to it failed)
 * is sent again on another one.
 *
 * Redis Cluster (BG_OPT_CLUSTER, options.h): the URL of any node, or a seed list. Every call
 * touches the keys of one filter or one lock, which share one hash slot, and goes to the master
 * serving it (a pool of BG_OPT_POOL_SIZE connections per master, opened when first needed);
 * MOVED, ASK, TRYAGAIN, CLUSTERDOWN and LOADING are handled inside the call within its timeout
 * (docs/servers.md, "Redis Cluster"). A cluster has only db 0.
 *
 * URLs:  redis://[user[:password]@]host[:port][/db][?db=N]   (user and password may be %-encoded;
 *        unix:///path/to.sock[?db=N]                            host may be [IPv6])
 *   The userinfo ends at the last '@'; an empty user or password is none (no AUTH). A seed list
 *   host1[:port1],host2[:port2],... (at most 16) names cluster seeds: the first reachable one
 *   is asked for the slot map (several hosts are refused for a standalone server). BG_EBADURL
 *   messages name the part that is wrong and never quote the URL, and other messages name a host
 *   of the URL only when it is an IP address (else by its place: "seed 2 of the URL"), so no
 *   password can appear in them whatever the URL looks like.
 *
 * Lifetime: filters opened on a client keep it alive; bg_client_close releases the caller's
 * reference and the pool goes away when the last filter is closed as well.
 *
 * fork(): a client (and its filters) made before a fork may be used in both processes. In the
 * child, its first use closes the child's copies of the inherited connections without writing to
 * them (the parent's go on) and connects anew on demand; nothing of the parent's is read or
 * written there. docs/operations.md, "Across fork()".
 */
#ifndef BLOOMGUARD_CLIENT_H
#define BLOOMGUARD_CLIENT_H

#include "call.h"
#include "common.h"
#include "options.h"

BG_BEGIN_DECLS

typedef struct bg_client bg_client;

/*
 * Parses the URL and checks the options, the TLS files (readable, a key matching its certificate)
 * and that credentials are complete (a user name needs a password), and returns the client in
 * *out, without connecting: the first call that needs a connection makes it (and finds a cluster's
 * slots, or asks the sentinels), under that call's deadline, so a client opened while its server is
 * down works once the server is back, and its calls meanwhile get the degrade policy's answer.
 * With BG_OPT_CONNECT_AT_OPEN 1 (the command line's choice) open also reaches the server by the
 * call's timeout (else BG_OPT_CONNECT_TIMEOUT_MS for the connect and handshakes), so a wrong
 * address or password fails here. opts may be NULL; an explicitly set option that is not a
 * client's (a BG_OPT_ROTATE_* or BG_OPT_LOCK_* one) is refused with BG_ENOTSUP (options.h). On
 * failure *out is NULL and, because there is no handle to carry it, the message is only on the
 * call of bg_client_open_ex (bg_call_errmsg): use that form to learn it.
 */
BG_API int  bg_client_open(bg_client **out, const char *url, const bg_options *opts);
BG_API int  bg_client_open_ex(bg_client **out, bg_call *call, const char *url, const bg_options *opts);
BG_API void bg_client_close(bg_client *c);

/* Round trip to the server (PING). */
BG_API int  bg_client_ping(bg_client *c);
/* The same with a per-call timeout and message (see call.h); call may be NULL. */
BG_API int  bg_client_ping_ex(bg_client *c, bg_call *call);

/*
 * The message of the most recent failure on this client (empty string if none). When threads
 * share the client the message may be another thread's. The pointer is a copy owned by the calling
 * thread, valid until that thread asks for an error message again; bg_client_errmsg_copy copies
 * into a buffer of yours. Never contains a password. Per-call messages: bg_call (call.h).
 */
BG_API const char *bg_client_errmsg(const bg_client *c);
BG_API size_t bg_client_errmsg_copy(const bg_client *c, char *buf, size_t buf_size);

BG_END_DECLS

#endif
