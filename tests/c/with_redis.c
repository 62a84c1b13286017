/*
 * with_redis CMD [ARG...]: runs CMD with a fresh redis-server on a free loopback port, then stops
 * the server. "@URL@" in any argument is replaced by the server's URL, which is also exported as
 * BLOOMGUARD_TEST_URL. Exits with CMD's status. Lets ctest run programs and scripts that need a
 * server (the README example, the CLI tests) without a server of their own.
 * with_redis --bloom CMD ...: the server loads RedisBloom (native_fixture.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "native_fixture.h"
#include "redis_fixture.h"

int main(int argc, char **argv) {
  bgt_redis srv;
  if (argc < 2) {
    fprintf(stderr, "usage: with_redis CMD [ARG...]   (@URL@ in an argument becomes the server URL)\n");
    return 64;
  }
  int bloom = strcmp(argv[1], "--bloom") == 0;
  if (bloom) argv++, argc--;
  if (argc < 2) return 64;
  if (bloom) bgt_redis_start_bloom(&srv, NULL);
  else bgt_redis_start(&srv, NULL);
  setenv("BLOOMGUARD_TEST_URL", srv.url, 1);
  char **args = calloc((size_t)argc, sizeof *args);
  for (int i = 1; i < argc; i++) args[i - 1] = strcmp(argv[i], "@URL@") ? argv[i] : srv.url;
  pid_t pid = fork();
  if (pid == 0) {
    execvp(args[0], args);
    perror(args[0]);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  bgt_redis_stop(&srv);
  free(args);
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  fprintf(stderr, "with_redis: %s died with signal %d\n", argv[1], WTERMSIG(st));
  return 128 + WTERMSIG(st);
}
