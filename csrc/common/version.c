#include "bloomguard/version.h"

#include "redis/tls.h"
#include "redis/tracking.h"

BG_API int bg_version(void) { return BG_VERSION_NUMBER; }
BG_API const char *bg_version_string(void) { return BG_VERSION_STRING; }

/* Compile-time facts of this build, asked at run time so bindings and programs loading some
 * libbloomguard can tell what it does without knowing how it was built. */
BG_API int bg_features(void) {
  int features = 0;
  if (bgi_tracking_supported())
    features |= BG_FEATURE_TRACKING;
  if (bgi_tls_supported())
    features |= BG_FEATURE_TLS;
  return features;
}
