package bloomguard

// The C library is compiled into the program from internal/clib (see its package comment); this
// package's cgo code only needs its headers, which lie there too.

// #cgo CFLAGS: -I${SRCDIR}/internal/clib
import "C"

import _ "github.com/bloomguard/bloomguard/bindings/go/internal/clib"
