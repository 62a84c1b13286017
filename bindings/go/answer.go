package bloomguard

// #include <bloomguard.h>
import "C"

import (
	"context"
	"strconv"
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
	a := BatchAnswer{Present: make([]bool, len(items))}
	if len(items) == 0 {
		return a, f.ready(ctx)
	}
	r, err := containsMany(ctx, f, items, a.Present, true)
	if r != nil {
		defer r.release()
	}
	if err != nil {
		return BatchAnswer{}, err
	}
	a.Source = r.source
	if a.Source.Degraded() {
		a.Reason = r.msg
		if r.degraded != C.BG_OK {
			a.Cause = newError(r.degraded, r.msg)
		}
	}
	return a, nil
}
