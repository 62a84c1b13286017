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
