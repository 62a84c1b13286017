#include "bloomguard/version.h"

BG_API int bg_version(void) { return BG_VERSION_NUMBER; }
BG_API const char *bg_version_string(void) { return BG_VERSION_STRING; }
