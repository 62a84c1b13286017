//go:build bloomguard_static

package bloomguard

// Links libbloomguard.a: `pkg-config --static` adds what the archive needs (hiredis from
// Requires.private, -lpthread -lm from Libs.private). The prefix must hold only the archive
// (setup.sh with BG_LINK=static installs one like that), otherwise the linker prefers the .so.

// #cgo pkg-config: --static bloomguard
import "C"
