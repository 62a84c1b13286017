/* bg_features: what this build can do, answered by the layer that knows (the hiredis this build
 * has: RESP3 for tracked queries, TLS), not by common/, which sits below it. */
#include "bloomguard/version.h"
#include "redis/tls.h"
#include "redis/tracking.h"

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
