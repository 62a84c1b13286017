/* licenses.c - `bloomguard licenses`: the license and notices of what the command contains. */
#include "cli.h"

#include <string.h>

int cli_cmd_licenses(const cli_opts *o) {
  if (o->json) {
    fputs("{\"notices\":[", stdout);
    for (size_t i = 0; i < cli_nnotices; i++) {
      fputs(i ? ",{\"path\":" : "{\"path\":", stdout);
      cli_json_string(stdout, cli_notices[i].path, strlen(cli_notices[i].path));
      fputs(",\"text\":", stdout);
      cli_json_string(stdout, cli_notices[i].text, strlen(cli_notices[i].text));
      fputs("}", stdout);
    }
    fputs("]}\n", stdout);
    return CLI_EXIT_OK;
  }
  printf("bloomguard %s is licensed under the Apache License 2.0; this command contains the\n"
         "third-party code whose notices follow. Each file below is printed whole.\n",
         BG_VERSION_STRING);
  for (size_t i = 0; i < cli_nnotices; i++) printf("\n==> %s <==\n%s", cli_notices[i].path, cli_notices[i].text);
  return CLI_EXIT_OK;
}
