#include "items.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

items make_items(const char *prefix, size_t n) {
  items it = {malloc((n ? n : 1) * sizeof(char *)), malloc((n ? n : 1) * sizeof(size_t)), n};
  for (size_t i = 0; i < n; i++) {
    char buf[64];
    it.len[i] = (size_t)snprintf(buf, sizeof buf, "%s-%zu", prefix, i);
    it.p[i] = strdup(buf);
  }
  return it;
}

void items_free(items *it) {
  for (size_t i = 0; i < it->n; i++) free(it->p[i]);
  free(it->p);
  free(it->len);
}
