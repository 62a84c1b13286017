package bloomguard

// #include <bloomguard.h>
import "C"

// HeaderVersionNumber is BG_VERSION_NUMBER of the headers this package was compiled against
// (MAJOR*10000 + MINOR*100 + PATCH).
const HeaderVersionNumber = C.BG_VERSION_NUMBER

// Version is the version of the C library actually loaded ("0.1.0").
func Version() string { return C.GoString(C.bg_version_string()) }

// VersionNumber is the loaded library's version as a number, comparable with HeaderVersionNumber.
func VersionNumber() int { return int(C.bg_version()) }

// Features of the loaded C library (bg_features()), a mask of FeatureTracking and FeatureTLS.
type Features int

const (
	// FeatureTracking: built with hiredis >= 1.0, so queries can take the tracked path (given
	// Redis >= 6 and WithTracking(true), the default). Not set with hiredis 0.14.
	FeatureTracking Features = C.BG_FEATURE_TRACKING
	// FeatureTLS: can connect with TLS (rediss:// URLs, WithTLS*): built with hiredis's TLS part.
	FeatureTLS Features = C.BG_FEATURE_TLS
)

// LibraryFeatures reports what the loaded C library was built to do.
func LibraryFeatures() Features { return Features(C.bg_features()) }

// Has reports whether every bit of f is set.
func (fs Features) Has(f Features) bool { return fs&f == f }
