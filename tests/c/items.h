/* Test items "prefix-0" .. "prefix-(n-1)" as the pointer/length arrays the batch calls take. */
#ifndef BG_TEST_ITEMS_H
#define BG_TEST_ITEMS_H

#include <stddef.h>

typedef struct items {
  char **p;
  size_t *len;
  size_t n;
} items;

items make_items(const char *prefix, size_t n);
void items_free(items *it);

/* The item pointers as the library's const void *const * parameter. */
#define PTRS(it) ((const void *const *)(it).p)

#endif
