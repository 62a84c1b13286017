package bloomguard

// #include <bloomguard.h>
import "C"

import (
	"context"
	"strconv"
	"unsafe"
)

// Source is where a query's answer came from (BG_SOURCE_*).
type Source int

const (
	SourceNone           Source = 0 // no answer: the call failed
	SourceRedis          Source = 1 // the server answered
	SourceSnapshot       Source = 2 // the local snapshot of the bitmap
	SourceCallback       Source = 3 // the Go fallback
	SourceAssumedPresent Source = 4 // ActionAssumePresent
	SourceAssumedAbsent  Source = 5 // ActionAssumeAbsent
)

var sourceNames = [...]string{"none", "redis", "snapshot", "callback", "assumed-present", "assumed-absent"}

// String is the source's name ("snapshot"), or "Source(n)".
func (s Source) String() string {
	if s >= SourceNone && s <= SourceAssumedAbsent {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Degraded reports whether the answer came from the policy rather than from Redis.
func (s Source) Degraded() bool { return s >= SourceSnapshot }

// Answer is a query's answer with its provenance.
type Answer struct {
	Present bool   // for ContainsSource; unused by ContainsManySource
	Source  Source // where the answer came from
	// Reason is the library's message of the failure the policy answered for ("" when Redis
	// answered); Cause is that failure as the error it would have been without a policy (nil when
	// Redis answered), usable with errors.Is (ErrLocked, ErrNotInitialized, ErrTimeout, ...).
	Reason string
	Cause  error
}

// BatchAnswer is ContainsManySource's answer: one Source for the call (for a batch larger than
// 16384 items, the items Redis answered before the failure keep Redis's answers).
type BatchAnswer struct {
	Present []bool
	Source  Source
	Reason  string
	Cause   error
}

// ContainsSource is Contains with the answer's provenance: which Source answered, and the failure
// a degraded answer stands in for.
func (f *Filter) ContainsSource(ctx context.Context, item []byte) (Answer, error) {
	a, err := f.ContainsManySource(ctx, [][]byte{item})
	if err != nil {
		return Answer{}, err
	}
	return Answer{Present: a.Present[0], Source: a.Source, Reason: a.Reason, Cause: a.Cause}, nil
}

// ContainsManySource is ContainsMany with the answer's provenance.
func (f *Filter) ContainsManySource(ctx context.Context, items [][]byte) (BatchAnswer, error) {
	p, c, err := f.begin(ctx)
	if err != nil {
		return BatchAnswer{}, err
	}
	a := BatchAnswer{Present: make([]bool, len(items))}
	if len(items) == 0 {
		return a, f.end(ctx, c, C.BG_OK)
	}
	var cause C.int
	a.Source, a.Reason, cause, err = f.query(ctx, p, c, items, a.Present, true)
	if err != nil {
		return BatchAnswer{}, err
	}
	if cause != C.BG_OK {
		a.Cause = newError(cause, a.Reason)
	}
	return a, nil
}

// query runs one query on a call begun by f.begin (and ends it): through the callback path when
// the filter's policy has a Go fallback. With want, it also returns the answer's source and, for a
// degraded answer, the failure's message and status.
func (f *Filter) query(ctx context.Context, p *C.bg_filter, c *call, items [][]byte, present []bool,
	want bool) (src Source, reason string, cause C.int, err error) {
	b, err := marshalItems(items)
	if err != nil {
		f.end(ctx, c, C.BG_OK)
		return 0, "", C.BG_OK, err
	}
	defer b.free()
	var st C.int
	var pe *PanicError
	if f.h.fallback != 0 { // read under the handle's read lock: SetPolicy cannot change it meanwhile
		// A fallback calling runtime.Goexit (t.FailNow in a test) ends this goroutine inside the
		// library call: let go of the handle and the gate then, so that SetPolicy and Close do not
		// wait for ever (the bg_call is dropped, not reused; the library's frames are abandoned).
		returned := false
		defer func() {
			if !returned {
				f.h.mu.RUnlock()
				f.g.leave()
			}
		}()
		st, pe = containsCallback(ctx, p, c, b, len(items), present)
		returned = true
	} else {
		st = C.bg_filter_contains_many_ex(p, c.p, b.ptrs, b.lens, C.size_t(len(items)),
			(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(present))))
	}
	if want && st == C.BG_OK {
		src = Source(C.bg_call_source(c.p))
		if src.Degraded() {
			reason = C.GoString(C.bg_call_errmsg(c.p))
			cause = C.bg_call_degraded_status(c.p)
		}
	}
	err = f.end(ctx, c, st)
	if pe != nil {
		return 0, "", C.BG_OK, pe
	}
	return src, reason, cause, err
}
