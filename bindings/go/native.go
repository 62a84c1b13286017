package bloomguard

/*
#include <bloomguard.h>

#cgo noescape bg_filter_info_native_ex
#cgo nocallback bg_filter_info_native_ex
*/
import "C"

import (
	"context"
	"strconv"
)

// WithNative opens the server's own Bloom filter at the name (BF.* commands: RedisBloom, built
// into Redis 8 and loadable into Redis 7 and Valkey; valkey-bloom) instead of Redisson's layout
// (docs/native.md). Every method of Filter then takes its native step, through the same policy
// and queues: Init is BF.RESERVE (InitNative with an expansion), Add BF.INSERT NOCREATE (a missing
// filter is not created: ErrNotInitialized), Contains BF.MEXISTS in one step with the key's TYPE
// (a missing key is ErrNotInitialized to the policy, never false), Count BF.CARD, Info BF.INFO.
// A Redisson-layout filter under the name is ErrWrongType naming it (and the reverse), a server
// without the module ErrNotSupported naming it, a full NONSCALING filter ErrFull naming the first
// item refused. Rotate builds the next generation in a staging key and swaps it in with one
// RENAME (Swap; Locked is ErrNotSupported).
func WithNative() FilterOption {
	return func(s *filterSettings) { s.native = true }
}

// Native reports whether the filter was opened WithNative.
func (f *Filter) Native() bool { return f.native }

// ExpansionDefault asks InitNative for the server's default expansion; ExpansionNonScaling for a
// NONSCALING filter (full at its capacity: ErrFull).
const (
	ExpansionDefault    = -1
	ExpansionNonScaling = 0
)

// InitNative is BF.RESERVE name errorRate capacity with an expansion (ExpansionDefault,
// ExpansionNonScaling, or 1..32768): created is false when a native filter is already there (it is
// kept). A first link larger than WithNativeMaxBytes gives ErrBadParams before anything is sent.
// On a filter not opened WithNative: ErrInvalid.
func (f *Filter) InitNative(ctx context.Context, capacity int64, errorRate float64, expansion int) (created bool,
	err error) {
	r := newRequest(opInitNative)
	defer r.release()
	r.arg, r.fpp, r.parts = capacity, errorRate, int64(expansion)
	if expansion < -1 || expansion > 32768 {
		return false, errorf(CodeBadParams, "expansion must be -1 (the server's default), 0 (NONSCALING) or 1..32768, not "+
			strconv.Itoa(expansion))
	}
	err = f.do(ctx, r)
	return r.value != 0, err
}

// NativeInfo is BF.INFO of a native filter.
type NativeInfo struct {
	Capacity  int64 // of all its links
	Bytes     int64 // the server's memory for it
	Filters   int64 // links
	Items     int64 // inserted
	Expansion int64 // 0: NONSCALING
}

// NativeInfo reads BF.INFO (a blocking call in C, as the rotation's); ErrInvalid on a filter not
// opened WithNative.
func (f *Filter) NativeInfo(ctx context.Context) (NativeInfo, error) {
	p, c, err := f.begin(ctx)
	if err != nil {
		return NativeInfo{}, err
	}
	var capacity, bytes, filters, items, expansion C.int64_t
	st := C.bg_filter_info_native_ex(p, c.p, &capacity, &bytes, &filters, &items, &expansion)
	if err := f.end(ctx, c, st); err != nil {
		return NativeInfo{}, err
	}
	return NativeInfo{int64(capacity), int64(bytes), int64(filters), int64(items), int64(expansion)}, nil
}

// WithNativeMaxBytes bounds the first link a native filter's InitNative (or a rotation) may ask
// the server for, in bytes (BG_OPT_NATIVE_MAX_BYTES; default 512 MiB, 4096..2^40): a larger one is
// ErrBadParams before anything is sent, so the server never tries to allocate it.
func WithNativeMaxBytes(n int64) Option {
	return intOption("WithNativeMaxBytes", C.BG_OPT_NATIVE_MAX_BYTES, n)
}
