/* Links against an installed bloomguard and checks the library it got matches its headers. */
#include <bloomguard.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  uint64_t h1, h2, size;
  uint32_t k;
  if (bg_version() != BG_VERSION_NUMBER || strcmp(bg_version_string(), BG_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s, library %s\n", BG_VERSION_STRING, bg_version_string());
    return 1;
  }
  if (bg_hash128("", 0, &h1, &h2) != BG_OK || h1 != 0xb7aad9c226c6a36bULL ||
      bg_optimal_params(1000000, 0.01, &size, &k) != BG_OK || size != 9585058 || k != 7) {
    fprintf(stderr, "wrong results from the installed library\n");
    return 1;
  }
  printf("bloomguard %s (%s hashing) OK\n", bg_version_string(), bg_hash_impl());
  return 0;
}
