/* bloomguard/version.h - compile-time and run-time version. */
#ifndef BLOOMGUARD_VERSION_H
#define BLOOMGUARD_VERSION_H

#include "common.h"

BG_BEGIN_DECLS

#define BG_VERSION_MAJOR 0
#define BG_VERSION_MINOR 2
#define BG_VERSION_PATCH 0
/* Single number for comparisons: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define BG_VERSION_NUMBER 200
#define BG_VERSION_STRING "0.2.0"

/* The version of the library actually loaded, as BG_VERSION_NUMBER / BG_VERSION_STRING. */
BG_API int bg_version(void);
BG_API const char *bg_version_string(void);

/* What the loaded library was built to do: a mask of BG_FEATURE_* bits (bg_features()). */
/* Built with hiredis >= 1.0 (RESP3): queries can take the tracked path, reading the bits alone while
 * Redis's client tracking vouches for the config (docs/concepts.md, "Queries and tracking"). Whether a client
 * does also depends on the server (Redis >= 6) and BG_OPT_TRACKING. Not set with hiredis 0.14. */
#define BG_FEATURE_TRACKING 0x1
/* Can connect with TLS (rediss:// URLs, BG_OPT_TLS_*): built with hiredis's TLS part and OpenSSL.
 * Not set with hiredis 0.14, where asking for TLS is BG_ENOTSUP. */
#define BG_FEATURE_TLS 0x2
BG_API int bg_features(void);

BG_END_DECLS

#endif
