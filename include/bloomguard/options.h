/*
 * bloomguard/options.h - connection options, set by enum so the ABI grows without frozen structs.
 *
 * Three consumers read a bg_options object, each only its own options: bg_client_open (the options
 * from BG_OPT_CONNECT_TIMEOUT_MS to BG_OPT_HISTOGRAMS and the string options), bg_rotation_begin
 * (BG_OPT_ROTATE_*) and bg_lock_open / bg_lock_open_filter (BG_OPT_LOCK_*). A consumer given an
 * object in which an option of another was set explicitly refuses it with BG_ENOTSUP, its message
 * naming the option and where it belongs ("BG_OPT_ROTATE_LEASE_MS is a rotation option
 * (bg_rotation_begin), not a client option (bg_client_open)"): an option that would be ignored is
 * a mistake. Setting a string option to NULL or "" makes it unset again. Each consumer copies what
 * it needs, so one object may be reused for several calls and freed right after them.
 */
#ifndef BLOOMGUARD_OPTIONS_H
#define BLOOMGUARD_OPTIONS_H

#include "common.h"

BG_BEGIN_DECLS

typedef struct bg_options bg_options;

/* Integer options (bg_options_set_int). Values are pinned like status codes. */
#define BG_OPT_CONNECT_TIMEOUT_MS   1  /* a connection's connect and, for a call with a deadline, its TLS and RESP
                                          handshakes too (never past that deadline; without one the handshakes
                                          get the command timeout); default 2000; 1..3600000 */
#define BG_OPT_COMMAND_TIMEOUT_MS   2  /* for a call with no deadline of its own: a multiplexed round trip, and
                                          each reply of a pooled one (a reply that trickles in ends after it,
                                          not with each byte); default 1000; 1..3600000 */
#define BG_OPT_POOL_SIZE            3  /* connections kept by a client; default 4; 1..1024 */
#define BG_OPT_DB                   4  /* database to SELECT; overrides the URL's; 0..1000000 */
#define BG_OPT_CONFIG_RETRIES       5  /* retries when the filter's config changed under a call; default 5; 0..100 */
#define BG_OPT_WRITE_LOCK_WAIT_MS   6  /* how long a query waits while its filter is write-locked (an in-place
                                          rebuild, filter.h) before failing with BG_ELOCKED; default 100;
                                          0..3600000 (never past the call's deadline) */
#define BG_OPT_TRACKING             7  /* 1 (default): where hiredis >= 1.0 and Redis >= 6 allow it, connections
                                          speak RESP3 with CLIENT TRACKING (OPTIN), and a query whose config and
                                          write lock were checked on its connection sends only BITFIELD_RO
                                          until the server pushes an invalidation for either key (filter.h,
                                          "Queries"); 0: every query sends the full MULTI check */
#define BG_OPT_CLUSTER              8  /* Redis Cluster: BG_CLUSTER_AUTO (default) asks the first reachable
                                          host of the URL (CLUSTER SLOTS) whether it is a cluster node;
                                          BG_CLUSTER_ON requires one (BG_ENOTSUP otherwise);
                                          BG_CLUSTER_OFF talks to the one server as is (client.h) */
#define BG_OPT_WAIT_REPLICAS        9  /* durability: 0 (default) off; N: every add, lock acquire / release and
                                          rotation commit is followed by WAIT N BG_OPT_WAIT_TIMEOUT_MS in the
                                          same round trip, and fails with BG_ETIMEOUT when fewer than N
                                          replicas acknowledged it (it was applied on the master, but a
                                          failover may lose it); 0..64 */
#define BG_OPT_WAIT_TIMEOUT_MS     10  /* how long that WAIT waits for the replicas; default 1000; 1..3600000 */
#define BG_OPT_TLS_VERIFY          11  /* TLS: 1 (default) checks the server's certificate and name; 0 checks
                                          nothing (testing only) */
#define BG_OPT_PIPELINE            12  /* 1 (default): concurrent calls of one client share a few multiplexed
                                          connections per server (their commands written together, replies
                                          matched in order); bulk and connection-stateful steps (rotation
                                          uploads, snapshots, steps followed by WAIT) keep pooled connections
                                          of their own; 0: every call takes a pooled connection (client.h) */
#define BG_OPT_PIPELINE_CONNS      13  /* multiplexed connections per server (per cluster node); default 2;
                                          1..64 */
#define BG_OPT_PIPELINE_SPIN_US    14  /* a call waiting for its reply on a multiplexed connection first spins
                                          (yielding the CPU) up to this long before it sleeps: a reply due
                                          within it then costs no sleep and no wake-up (bench/README.md,
                                          bench_threads); default 0: sleeps at once; 0..1000 */
#define BG_OPT_CONNECT_AT_OPEN     15  /* 0 (default): bg_client_open checks the URL, the options, the TLS files
                                          and that credentials are complete, and connects nothing; connections
                                          (and a cluster's or the sentinels' discovery) are made by the first
                                          call that needs one, under its deadline, so a client opened while the
                                          server is down answers by its degrade policy and then from Redis once
                                          it is back; 1: open also reaches the server (the cluster, the
                                          sentinels and their master) by its call's deadline and fails as the
                                          first call would (a wrong address or password, a refused
                                          certificate) */
#define BG_OPT_DEGRADED_EVENTS_PER_S 16  /* degraded answers told to the client's observer (observe.h): at most
                                            this many events per filter handle per second, each counting the
                                            answers since the one before; default 1; 0: none (still counted,
                                            stats.h); 0..1000000 */
#define BG_OPT_HISTOGRAMS          17  /* 1 (default): every filter of the client keeps latency histograms of its
                                          operations (observe.h; two relaxed atomic additions and two clock
                                          reads per call); 0: none (they read empty) */
#define BG_OPT_NATIVE_MAX_BYTES    18  /* native filters (filter.h, bg_filter_init_native): the largest first
                                          link a BF.RESERVE may ask the server for, in bytes (bits =
                                          -capacity * ln(error_rate / 2) / ln(2)^2, RedisBloom's sizing);
                                          a larger one is refused with BG_EBADPARAMS before anything is
                                          sent; default 536870912 (512 MiB); 4096..1099511627776 */

#define BG_CLUSTER_OFF  0
#define BG_CLUSTER_ON   1
#define BG_CLUSTER_AUTO 2
/* Rotation options (bg_rotation_begin; see rotation.h). */
#define BG_OPT_ROTATE_LEASE_MS       20  /* lease of the rotator, renewed every third of it (a failed renewal
                                            sooner; none waits for its answer longer than a third of the
                                            lease, whatever the command timeout); 100..3600000 */
#define BG_OPT_ROTATE_WAIT_MS        21  /* wait for another rotation to end; 0..3600000 */
#define BG_OPT_ROTATE_STAGING_TTL_MS 22  /* TTL of the staging keys, renewed with the lease; 1000..86400000.
                                            While the lease is held they get max(this, the lease): no key a
                                            rotation depends on may expire before the lease guarding it */
#define BG_OPT_ROTATE_THREADS        23  /* hashing threads; 1..256 */
#define BG_OPT_ROTATE_CHUNK_BYTES    24  /* upload chunk; 4096..67108864 */
#define BG_OPT_ROTATE_BATCH          25  /* NAIVE: items per add round trip; 1..1000000 */
#define BG_OPT_ROTATE_NICE           26  /* added to the hashing threads' nice value; 0..19 */
#define BG_OPT_ROTATE_PARTITIONS     27  /* a partitioned filter's next generation: its partitions; 0 (default):
                                            as many as the live one; 1..16384. A plain filter refuses it */
/* Lock options (bg_lock_open; see lock.h). */
#define BG_OPT_LOCK_LEASE_MS         40  /* lease (PEXPIRE) of a hold; default 30000 (Redisson's); 30..3600000 */
#define BG_OPT_LOCK_RENEW            41  /* 1 (default): a thread renews held locks every third of the lease;
                                            0: no renewal, a hold ends when its lease runs out */
#define BG_OPT_LOCK_SUBSCRIBE        42  /* 1 (default): waiters listen on the unlock channel; 0: poll only */
#define BG_OPT_LOCK_POLL_MAX_MS      43  /* longest sleep between two tries when polling; default 100; 1..60000 */
/* String options (bg_options_set_str). */
#define BG_OPT_USERNAME           101  /* ACL user; overrides the URL's; "" = none given */
#define BG_OPT_PASSWORD           102  /* password; overrides the URL's; never echoed in messages;
                                          "" = none given (the URL's, if any, applies) */
#define BG_OPT_CLIENT_NAME        103  /* CLIENT SETNAME on every connection; default "bloomguard" */
#define BG_OPT_SENTINEL_USERNAME  104  /* redis-sentinel:// URLs: the ACL user for the sentinels (the URL's
                                          userinfo is the data nodes'); default none */
#define BG_OPT_SENTINEL_PASSWORD  105  /* the sentinels' password; default none; never echoed in messages */
/* TLS (rediss://, rediss-sentinel://; setting any of these turns TLS on for a redis:// URL too): every
 * connection - pooled ones, lock waiters', cluster nodes', sentinels' - is TLS. */
#define BG_OPT_TLS_CA_FILE        106  /* PEM file of the CAs to trust; default: the system's trust store
                                          (SSL_CERT_FILE / SSL_CERT_DIR, else each distribution's usual
                                          bundle: docs/servers.md); none found: BG_ETLS at open */
#define BG_OPT_TLS_CA_DIR         107  /* a directory of hashed CA certificates (c_rehash); default none */
#define BG_OPT_TLS_CERT_FILE      108  /* PEM client certificate (chain), for servers with tls-auth-clients */
#define BG_OPT_TLS_KEY_FILE       109  /* its PEM private key (unencrypted) */
#define BG_OPT_TLS_SERVER_NAME    110  /* SNI and the name the certificate must be for; default: the host
                                          connected to (a DNS name or an IP address) */

BG_API int  bg_options_new(bg_options **out);
BG_API void bg_options_free(bg_options *o);
/* BG_ENOTSUP for an unknown option (or one of the other type), BG_EINVAL for a value out of range
 * (bg_options_bounds). */
BG_API int  bg_options_set_int(bg_options *o, int option, int64_t value);
/*
 * The range bg_options_set_int accepts for an integer option: *lo..*hi inclusive (each pointer may
 * be NULL), from the same table the setter checks, so a binding or a command line can say the
 * range without a copy of it. BG_ENOTSUP for an unknown option or a string option.
 */
BG_API int  bg_options_bounds(int option, int64_t *lo, int64_t *hi);
/* value is copied; NULL resets the option to its default. */
BG_API int  bg_options_set_str(bg_options *o, int option, const char *value);

BG_END_DECLS

#endif
