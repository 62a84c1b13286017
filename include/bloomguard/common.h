/*
 * bloomguard/common.h - export macro and the conventions every header shares.
 *
 * Conventions (see docs/c.md):
 *  - every fallible function returns an int status: BG_OK (0) or a negative BG_E* code;
 *  - constructors are bg_x_open(bg_x **out, ...); destructors return void, accept NULL;
 *  - items are bytes: a pointer plus a size_t length (length 0 is a valid item); no object is
 *    bigger than PTRDIFF_MAX, so a length past it, or a batch whose lengths sum past it, is BG_EINVAL.
 */
#ifndef BLOOMGUARD_COMMON_H
#define BLOOMGUARD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifndef BG_API
#  if defined(_WIN32)
#    define BG_API __declspec(dllimport)
#  elif defined(__GNUC__)
#    define BG_API __attribute__((visibility("default")))
#  else
#    define BG_API
#  endif
#endif

#ifdef __cplusplus
#  define BG_BEGIN_DECLS extern "C" {
#  define BG_END_DECLS }
#else
#  define BG_BEGIN_DECLS
#  define BG_END_DECLS
#endif

#endif
