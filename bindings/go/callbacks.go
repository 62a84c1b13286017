package bloomguard

// The functions the C library calls back, exported to C with //export. A file with //export may
// only declare C functions in its preamble (its preamble is copied into the generated
// _cgo_export.c), so the C side of each callback (the adapter with the library's function type,
// and the code installing it) lives with its user: rotation.go for the progress callback,
// fallback.go for the policy's fallback.
//
// Go values reach C as a runtime/cgo.Handle passed as the callback's userdata: C never holds a
// Go pointer. Each handle is deleted only after the library guarantees it will not call back
// with it any more (for a rotation: after bg_rotation_free). A callback never lets a panic
// unwind through the library's frames: it is recovered, turned into "abort", and raised again
// by the Go code that called the library, once the library has returned.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

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

// bgoFallback is the bg_fallback_fn of every policy with a Go fallback (through bgo_fallback in
// fallback.go). policy is the cgo.Handle of the filter's *fallbackBox. For a blocking query,
// query is the cgo.Handle of the *fallbackQuery of the query running on this thread; for a
// submitted one, driver is the cgo.Handle of the driver polling (or submitting to) its queue and
// tag the operation's. (Neither would mean a query that did not take the callback path; it
// cannot happen, see filterHandle.fallback.) Non-zero declines.
//
//export bgoFallback
func bgoFallback(policy, query, driver C.uintptr_t, tag C.uint64_t, items unsafe.Pointer, lens *C.size_t, n C.size_t,
	present *C.uint8_t) C.int {
	box := cgo.Handle(policy).Value().(*fallbackBox)
	var q *fallbackQuery
	var r *request
	if query != 0 {
		q = cgo.Handle(query).Value().(*fallbackQuery)
	} else if driver != 0 {
		if r = fallbackRequest(driver, tag); r != nil {
			q = r.fb
		}
	}
	// copies: the fallback may keep them, and C's memory is only valid during the call
	ptrs := unsafe.Slice((*unsafe.Pointer)(items), int(n))
	ls := unsafe.Slice(lens, int(n))
	goItems := make([][]byte, int(n))
	for i := range goItems {
		goItems[i] = C.GoBytes(ptrs[i], C.int(ls[i]))
	}
	answers := make([]bool, int(n))
	var answered bool
	if driver != 0 {
		var goexit bool
		answered, goexit = runIsolated(func() bool { return onFallback(box, q, goItems, answers, true) })
		if goexit && r != nil {
			r.goexit = true
		}
	} else {
		answered = onFallback(box, q, goItems, answers, false)
	}
	if !answered {
		return 1
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(present)), int(n))
	for i, v := range answers {
		out[i] = 0
		if v {
			out[i] = 1
		}
	}
	return 0
}
