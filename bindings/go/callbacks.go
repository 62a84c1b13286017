package bloomguard

// The functions the C library calls back, exported to C with //export. A file with //export may
// only declare C functions in its preamble (its preamble is copied into the generated
// _cgo_export.c), so the C side of each callback (the adapter with the library's function type,
// and the code installing it) lives with its user: rotation.go for the progress callback.
//
// Go values reach C as a runtime/cgo.Handle passed as the callback's userdata: C never holds a
// Go pointer. Each handle is deleted only after the library guarantees it will not call back
// with it any more (for a rotation: after bg_rotation_free). A callback never lets a panic
// unwind through the library's frames: it is recovered, turned into "abort", and raised again
// by the Go code that called the library, once the library has returned.

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// bgoProgress is every rotation's bg_progress_fn (through bgo_progress in rotation.go). handle is
// the *Rotation's cgo.Handle. Non-zero asks the library to abort the rotation.
//
//export bgoProgress
func bgoProgress(handle C.uintptr_t, phase C.int, items, bytesDone, bytesTotal C.uint64_t) C.int {
	r := cgo.Handle(handle).Value().(*Rotation)
	if r.onProgress(Phase(phase), uint64(items), uint64(bytesDone), uint64(bytesTotal)) {
		return 1
	}
	return 0
}
