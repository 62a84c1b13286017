/*
 * A TLS-only redis-server for a test: `--port 0 --tls-port P` on a free 127.0.0.1 port, with a fresh
 * set of test certificates made by scripts/tls-certs.sh (see that script for every file it makes:
 * ca.crt, other-ca.crt, ca-dir/, server/wrong-host/expired/client/other-client .crt+.key,
 * mismatched.key, garbage.crt, unreadable.crt (mode 000), missing.crt (never created)).
 *
 * The server is a child of the test, stopped by its pid; it gets SIGKILL when the *thread* that
 * started it exits (PR_SET_PDEATHSIG), so start it from the main thread (or one that outlives it).
 * bgt_tls_redis_stop removes the scratch directory (certificates and log included); a test that
 * crashes leaves no process, but its directory stays in /tmp/bgt-tls-*.
 * Binaries: $BG_REDIS_SERVER or redis-server, $BG_REDIS_CLI or redis-cli (the readiness check is a
 * TLS PING by redis-cli, which Debian builds with TLS), bash and openssl, all from PATH.
 * No library code is used: the fixture is the ground truth the library's TLS tests compare to.
 */
#ifndef BG_TEST_TLS_FIXTURE_H
#define BG_TEST_TLS_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct bgt_tls_redis {
  pid_t pid;
  int port;                 /* the TLS port (the plain port is 0: TLS only) */
  char url[128];            /* rediss://127.0.0.1:PORT */
  char dir[256];            /* scratch dir; the certificates of scripts/tls-certs.sh are in certs/ inside it */
  char certs[300];          /* that certs directory */
} bgt_tls_redis;

/*
 * cert: "server" (default when NULL), "wrong-host" or "expired": which server certificate to present
 * (always with its own key, and ca.crt as the CA that client certificates must chain to);
 * auth_clients: 1 for --tls-auth-clients yes (a client certificate signed by ca is required), 0 for no.
 * Generates the certificates, starts the server and waits until a TLS PING answers (redis-cli
 * --insecure, with client.crt: the readiness check must pass for the bad certificates too).
 * Exits the test binary with status 2 and a message if it cannot.
 */
void bgt_tls_redis_start(bgt_tls_redis *r, const char *cert, int auth_clients);
/* The same for one case of a binary whose other cases need no TLS: 0 started; -1 when the server
 * was built without TLS - the case is marked skipped (bgt_skip_case) and should return. */
int bgt_tls_redis_start_or_skip(bgt_tls_redis *r, const char *cert, int auth_clients);
/* Stops the server by its pid (SIGTERM, then SIGKILL after 5 s) and removes the scratch directory.
 * Idempotent. */
void bgt_tls_redis_stop(bgt_tls_redis *r);
/* "<certs>/<name>" into buf (e.g. "ca.crt"); returns buf. */
const char *bgt_tls_path(const bgt_tls_redis *r, const char *name, char *buf, size_t cap);

/*
 * Runs argv (argv[0] looked up in PATH) with `input` (may be NULL: empty) on its stdin, and its
 * stdout and stderr together in out (NUL-terminated, truncated to cap - 1). Killed by pid after
 * timeout_ms. Returns the exit status (0..255), 128 + signal if killed by one, -1 if it timed out
 * or could not run. For `openssl s_client` / `redis-cli --tls` in tests.
 */
int bgt_tls_run(const char *const *argv, const char *input, int timeout_ms, char *out, size_t cap);

#endif
