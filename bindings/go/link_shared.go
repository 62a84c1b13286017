//go:build !bloomguard_static

package bloomguard

// Links the installed shared library found by pkg-config (bloomguard.pc). At run time the
// dynamic loader must find libbloomguard.so.0.2: a system prefix, LD_LIBRARY_PATH, or an rpath
// (CGO_LDFLAGS=-Wl,-rpath,<libdir>). setup.sh prints the settings for its prefix.

// #cgo pkg-config: bloomguard
import "C"
