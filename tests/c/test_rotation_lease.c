/*
 * A rotation that failed or was freed gives its lease back (rotation/giveback.c). The server
 * stops answering for 1.5 s (its clients killed, then CLIENT PAUSE ALL, from the progress
 * callback between two upload chunks) while the client's command timeout is 300 ms: the next
 * chunk times out, the rotation fails, and its abort - sent into the same pause - times out too. Before, nothing tried
 * again, and the lease (30 s) blocked every rotation of the filter, this process's included.
 *  - the give-back goes on in the background: the lease is gone soon after the pause ends, long
 *    before it would have run out (SWAP and LOCKED; after a failed commit, and after a free);
 *  - with the background give-back switched off (a test-only fault), the same process's next
 *    begin takes the lease over at once, while another process (a forked child: another owner)
 *    still gets BG_EROTATING;
 *  - the negative control: both switched off, the lease stays and the next begin gets
 *    BG_EROTATING - the pause really leaves the lease behind, so the cases above prove something.
 */
#include <bloomguard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filters.h"
#include "harness.h"
#include "items.h"
#include "redis_fixture.h"
#include "rotation/rotation.h"

/* longer than LOCKED's three failing round trips (a chunk, the lock's release, the abort) */
#define PAUSE_MS 1500
#define TIMEOUT_MS 300
/* the lease the left one would hold: the default, long next to every bound below */
#define LEASE_MS 30000

static bgt_redis srv;
static bg_client *cl;
static items it;

static void setup(void) {
  bgt_redis_start(&srv, NULL);
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_COMMAND_TIMEOUT_MS, TIMEOUT_MS));
  char msg[512];
  int st = bgt_client_open(&cl, srv.url, o, msg, sizeof msg);
  CHECK_MSG(st == BG_OK, "open: %s", msg);
  bg_options_free(o);
  it = make_items("lease", 20000);
}

static void teardown(void) {
  bg_client_close(cl);
  items_free(&it);
  bgt_redis_stop(&srv);
}

static bg_options *rotation_opts(void) {
  bg_options *o = NULL;
  CHECK_OK(bg_options_new(&o));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_LEASE_MS, LEASE_MS));
  CHECK_OK(bg_options_set_int(o, BG_OPT_ROTATE_CHUNK_BYTES, 4096)); /* several chunks: a point between two */
  return o;
}

/* The library's connections are killed and the server pauses every client (CLIENT PAUSE answers
 * once the pause is in force): whatever the library sends next needs a new connection, whose
 * handshake the pause holds, so nothing it sends during the pause reaches a command - as when a
 * stalled server (DEBUG SLEEP, SIGSTOP) also made it reconnect. */
static void pause_server(void) {
  free(bgt_redis_cmd(&srv, "CLIENT KILL TYPE normal"));
  char *r = bgt_redis_cmd(&srv, "CLIENT PAUSE %d ALL", PAUSE_MS);
  CHECK_MSG(!strcmp(r, "OK"), "CLIENT PAUSE: %s", r);
  free(r);
}

/* Pauses the server at the second upload report: after the first chunk, the next one in flight. */
static int uploads_seen;
static int pause_mid_upload(void *data, int phase, uint64_t items, uint64_t done, uint64_t total) {
  (void)data, (void)items, (void)done, (void)total;
  if (phase == BG_PHASE_UPLOADING && ++uploads_seen == 2) pause_server();
  return 0;
}

static long long lease_pttl(const char *name) {
  char key[128];
  snprintf(key, sizeof key, "{%s}:rotation", name);
  char *r = bgt_redis_cmd(&srv, "PTTL %s", key);
  long long v = atoll(r);
  free(r);
  return v;
}

/* Waits until the server answers again (the pause is over); bounded. */
static void wait_pause_over(void) {
  CHECK_MSG(bgt_redis_wait_pong(&srv, 20000) == 0, "the server still does not answer PING after 20 s");
}

/* A rotation of name that fails mid-upload (commit = 1) or is freed during the pause (commit = 0);
 * returns the filter. The lease is held when this returns (as far as the client could tell). */
static bg_filter *fail_a_rotation(const char *name, int strategy, int commit) {
  bg_filter *f = bgt_fresh_filter(cl, name, 1000, 0.01, NULL);
  bg_options *o = rotation_opts();
  bg_rotation *r = NULL;
  CHECK_OK(bg_rotation_begin(&r, f, 20000, 0.01, strategy, o));
  bg_options_free(o);
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, it.n));
  if (commit) {
    uploads_seen = 0;
    CHECK_OK(bg_rotation_set_progress(r, pause_mid_upload, NULL));
    int st = bg_rotation_commit(r);
    CHECK_MSG(st != BG_OK, "the commit succeeded through a %d ms pause with a %d ms timeout", PAUSE_MS, TIMEOUT_MS);
    CHECK_MSG(uploads_seen >= 2, "the pause was never sent (%d upload reports)", uploads_seen);
    printf("    commit: %s: %s\n", bg_status_name(st), bg_rotation_errmsg(r));
  } else {
    pause_server();
  }
  bg_rotation_free(r);   /* aborts an active one: into the pause */
  return f;
}

/* Begins and commits a whole rotation of f (wait 0: a held lease fails at once), or only begins and
 * aborts (commit = 0). */
static int rotate_again(bg_filter *f, int strategy, int commit) {
  bg_options *o = rotation_opts();
  bg_rotation *r = NULL;
  int st = bg_rotation_begin(&r, f, 1000, 0.01, strategy, o);
  bg_options_free(o);
  if (st != BG_OK) {
    printf("    begin again: %s: %s\n", bg_status_name(st), bg_filter_errmsg(f));
    return st;
  }
  CHECK_OK(bg_rotation_add_many(r, PTRS(it), it.len, 100));
  st = commit ? bg_rotation_commit(r) : bg_rotation_abort(r);
  CHECK_MSG(st == BG_OK, "%s again: %s", commit ? "commit" : "abort", bg_rotation_errmsg(r));
  bg_rotation_free(r);
  return st;
}

/* The background give-back: the lease goes once the server answers, long before its 30 s. */
static void given_back(const char *name, int strategy, int commit) {
  bg_filter *f = fail_a_rotation(name, strategy, commit);
  uint64_t t0 = bgt_now_ns();
  long long pttl;
  while ((pttl = lease_pttl(name)) > 0 && bgt_now_ns() - t0 < 10000000000ull) usleep(20000);
  double ms = (double)(bgt_now_ns() - t0) / 1e6;
  printf("    %s: the lease was gone %.0f ms after the rotation was freed\n", name, ms);
  CHECK_MSG(pttl == -2, "the lease of \"%s\" is still there %.0f ms after the free (PTTL %lld)", name, ms, pttl);
  /* LOCKED: the write lock the failed commit held is given back too (its commit would wait for it) */
  t0 = bgt_now_ns();
  CHECK_OK(rotate_again(f, strategy, 1));
  ms = (double)(bgt_now_ns() - t0) / 1e6;
  CHECK_MSG(ms < LEASE_MS / 3, "the next rotation took %.0f ms (the write lock's lease is %d ms)", ms, LEASE_MS);
  bg_filter_close(f);
}

static void test_a_failed_swap_commit_gives_its_lease_back(void) { given_back("gb-swap", BG_ROTATE_SWAP, 1); }
static void test_a_failed_locked_commit_gives_its_lease_back(void) { given_back("gb-locked", BG_ROTATE_LOCKED, 1); }
static void test_a_freed_rotation_gives_its_lease_back(void) { given_back("gb-freed", BG_ROTATE_SWAP, 0); }

/* Another owner (a process of its own) tries to begin: its status. */
static int begin_in_a_child(const char *name) {
  pid_t pid = fork();
  if (pid == 0) {
    bg_client *c = NULL;
    bg_filter *f = NULL;
    bg_rotation *r = NULL;
    int st = bg_client_open(&c, srv.url, NULL);
    if (st == BG_OK) st = bg_filter_open(&f, c, name);
    if (st == BG_OK) st = bg_rotation_begin(&r, f, 1000, 0.01, BG_ROTATE_SWAP, NULL);
    if (st == BG_OK) bg_rotation_abort(r);
    _exit(st == BG_OK ? 0 : st == BG_EROTATING ? 1 : 2);
  }
  int status = 0;
  CHECK_MSG(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status), "the child did not exit");
  int code = WEXITSTATUS(status);
  return code == 0 ? BG_OK : code == 1 ? BG_EROTATING : BG_ESERVER;
}

/* Give-back off: the lease stays, only its owner takes it over (or, with take-over off too, nobody).
 * Only the lease: LOCKED's write lock is left too, and the background give-back (off here) is what
 * releases it, so the next rotation begins and aborts. */
static void left_behind(const char *name, int strategy, int faults, int want) {
  bgi_rotation_fault_giveback(faults);
  bg_filter *f = fail_a_rotation(name, strategy, 1);
  wait_pause_over();
  long long pttl = lease_pttl(name);
  CHECK_MSG(pttl > LEASE_MS - 10000, "the lease of \"%s\" is not held after the failure (PTTL %lld)", name, pttl);
  CHECK_STATUS(begin_in_a_child(name), BG_EROTATING);   /* another owner waits for it */
  CHECK_STATUS(rotate_again(f, strategy, 0), want);
  bgi_rotation_fault_giveback(0);
  bg_filter_close(f);
}

static void test_the_same_owner_takes_its_left_lease_over(void) {
  left_behind("to-swap", BG_ROTATE_SWAP, BGI_FAULT_NO_GIVEBACK, BG_OK);
  left_behind("to-locked", BG_ROTATE_LOCKED, BGI_FAULT_NO_GIVEBACK, BG_OK);
}

static void test_negative_control_a_left_lease_blocks_the_next_rotation(void) {
  left_behind("ctrl", BG_ROTATE_SWAP, BGI_FAULT_NO_GIVEBACK | BGI_FAULT_NO_TAKEOVER, BG_EROTATING);
}

BGT_RUN(BGT_CASE(setup), BGT_CASE(test_a_failed_swap_commit_gives_its_lease_back),
        BGT_CASE(test_a_failed_locked_commit_gives_its_lease_back), BGT_CASE(test_a_freed_rotation_gives_its_lease_back),
        BGT_CASE(test_the_same_owner_takes_its_left_lease_over),
        BGT_CASE(test_negative_control_a_left_lease_blocks_the_next_rotation), BGT_CASE(teardown))
