/*
 * A program that links libbloomguard.a and also uses the system's hiredis (Debian 12: 0.14, a
 * struct layout unlike the 1.x inside bloomguard). Each must get its own: the program's
 * redisConnect is the system's, bloomguard's client keeps the hiredis it was built with.
 *
 *   hiredis_coexist CLOSED_PORT REDIS_PORT
 *
 * CLOSED_PORT: a loopback port nothing listens on (the system hiredis must say "Connection
 * refused" with err REDIS_ERR_IO); REDIS_PORT: a running redis-server that both clients talk to.
 * Exit 0 when both work, 1 with a message otherwise.
 */
#include <bloomguard.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "hiredis_coexist: %s\n", what);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) return fail("usage: hiredis_coexist CLOSED_PORT REDIS_PORT");
  int closed = atoi(argv[1]), port = atoi(argv[2]);

  /* the system hiredis, through its own header's struct layout */
  redisContext *rc = redisConnect("127.0.0.1", closed);
  if (!rc) return fail("system hiredis: redisConnect returned NULL");
  printf("system hiredis %d.%d, closed port: err=%d errstr=%s\n", HIREDIS_MAJOR, HIREDIS_MINOR, rc->err,
         rc->errstr);
  if (rc->err != REDIS_ERR_IO || strstr(rc->errstr, "Connection refused") == NULL) {
    redisFree(rc);
    return fail("system hiredis: expected err=REDIS_ERR_IO and \"Connection refused\" (did redisConnect "
                "bind to another hiredis?)");
  }
  redisFree(rc);
  rc = redisConnect("127.0.0.1", port);
  if (!rc || rc->err) return fail("system hiredis: cannot connect to the redis-server");
  redisReply *reply = redisCommand(rc, "PING");
  int pong = reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0;
  if (reply) freeReplyObject(reply);
  redisFree(rc);
  if (!pong) return fail("system hiredis: PING did not answer PONG");

  /* bloomguard's client, built with its own hiredis */
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  bg_client *c = NULL;
  bg_filter *f = NULL;
  int present = 0, st = bg_client_open(&c, url, NULL);
  if (st == BG_OK) st = bg_filter_open(&f, c, "coexist:filter");
  if (st == BG_OK) st = bg_filter_init(f, 1000, 0.01, NULL);
  if (st == BG_OK) st = bg_filter_add(f, "item", 4, NULL);
  if (st == BG_OK) st = bg_filter_contains(f, "item", 4, &present);
  if (st == BG_OK) st = bg_filter_delete(f, NULL);
  if (st != BG_OK) fprintf(stderr, "hiredis_coexist: bloomguard: %s: %s\n", bg_strerror(st),
                           f ? bg_filter_errmsg(f) : c ? bg_client_errmsg(c) : "");
  bg_filter_close(f);
  bg_client_close(c);
  if (st != BG_OK) return 1;
  if (!present) return fail("bloomguard: contains after add answered absent");
  printf("bloomguard %s: contains after add = present\n", bg_version_string());
  return 0;
}
