/* bloomguard/version.h - compile-time and run-time version. */
#ifndef BLOOMGUARD_VERSION_H
#define BLOOMGUARD_VERSION_H

#include "common.h"

BG_BEGIN_DECLS

#define BG_VERSION_MAJOR 0
#define BG_VERSION_MINOR 1
#define BG_VERSION_PATCH 0
/* Single number for comparisons: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define BG_VERSION_NUMBER 100
#define BG_VERSION_STRING "0.1.0"

/* The version of the library actually loaded, as BG_VERSION_NUMBER / BG_VERSION_STRING. */
BG_API int bg_version(void);
BG_API const char *bg_version_string(void);

BG_END_DECLS

#endif
