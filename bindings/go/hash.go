package bloomguard

/*
#include <bloomguard.h>

#cgo noescape bg_hash128
#cgo noescape bg_indexes
#cgo noescape bg_optimal_params
#cgo nocallback bg_hash128
#cgo nocallback bg_indexes
#cgo nocallback bg_optimal_params
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Limits of Redisson's Bloom filters (bloomguard/hash.h).
const (
	// MaxSize is the largest bitmap Redisson accepts, in bits (Integer.MAX_VALUE * 2).
	MaxSize uint64 = 4294967294
	// MaxHashIterations is the largest k accepted from a config hash (Redisson's optimum never
	// exceeds 1075). Indexes rejects a larger k.
	MaxHashIterations uint32 = 4096
)

// Hash128 is HighwayHash-128 with Redisson's key over item: the two 64-bit words Redisson derives
// its bit indexes from. Pure and safe from any goroutine.
func Hash128(item []byte) (h1, h2 uint64) {
	var a, b C.uint64_t
	var p unsafe.Pointer
	if len(item) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(item))
	}
	// Cannot fail: the pointers are valid and data is NULL only for an empty item.
	C.bg_hash128(p, C.size_t(len(item)), &a, &b)
	return uint64(a), uint64(b)
}

// Indexes returns the k bit indexes Redisson sets for item in a bitmap of size bits.
// size must be 1..MaxSize and k 1..MaxHashIterations (ErrInvalid otherwise).
func Indexes(item []byte, size uint64, k uint32) ([]uint64, error) {
	if k == 0 || k > MaxHashIterations {
		return nil, errorf(CodeInvalid, fmt.Sprintf("indexes: k must be 1..%d, got %d", MaxHashIterations, k))
	}
	if size == 0 || size > MaxSize {
		return nil, errorf(CodeInvalid, fmt.Sprintf("indexes: size must be 1..%d, got %d", MaxSize, size))
	}
	out := make([]uint64, k)
	var p unsafe.Pointer
	if len(item) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(item))
	}
	if st := C.bg_indexes(p, C.size_t(len(item)), C.uint64_t(size), C.uint32_t(k),
		(*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(out)))); st != C.BG_OK {
		return nil, newError(st, "indexes: "+Code(st).Description())
	}
	return out, nil
}

// OptimalParams is Redisson's sizing: the bitmap size (bits) and hash-iteration count k for
// expectedInsertions items at false probability fpp, exactly as RedissonBloomFilter computes them.
// It fails with ErrBadParams where Redisson's tryInit throws: fpp < 0, fpp > 1 or NaN, a computed
// size of 0 or above MaxSize, and (bloomguard's own rule) expectedInsertions <= 0.
//
// The C function has no handle to carry Redisson's message, so the error's message is generic;
// Filter.Init rejects the same parameters with Redisson's exact message.
func OptimalParams(expectedInsertions int64, fpp float64) (size uint64, k uint32, err error) {
	var s C.uint64_t
	var kk C.uint32_t
	if st := C.bg_optimal_params(C.int64_t(expectedInsertions), C.double(fpp), &s, &kk); st != C.BG_OK {
		return 0, 0, newError(st, fmt.Sprintf("optimal params for %d expected insertions at false probability %v: %s",
			expectedInsertions, fpp, Code(st).Description()))
	}
	return uint64(s), uint32(kk), nil
}

// HashImpl names the HighwayHash implementation the library picked for this CPU: "avx2",
// "sse41" or "portable".
func HashImpl() string { return C.GoString(C.bg_hash_impl()) }
