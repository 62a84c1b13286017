package bloomguard

// #include <stdlib.h>
// #include <stdint.h>
import "C"

import (
	"math"
	"unsafe"
)

// cItems is a batch laid out in one C allocation: n item pointers, n lengths, then the bytes of
// every item back to back. Nothing in it points to Go memory, so it satisfies the cgo pointer
// rules without pinning, and it costs no Go allocation whatever the number of items.
// (bench_test.go compares this with pinning each item: see README.md.)
type cItems struct {
	block unsafe.Pointer
	ptrs  *unsafe.Pointer // const void *const *items
	lens  *C.size_t
}

// itemBytes is what a batch's items may be: byte slices, or strings (their UTF-8 bytes, as
// Redisson's StringCodec writes a String).
type itemBytes interface{ ~[]byte | ~string }

func marshalItems[T itemBytes](items []T) (cItems, error) {
	n := len(items)
	total := uintptr(0)
	for _, it := range items {
		total += uintptr(len(it))
		if total > math.MaxInt/2 {
			return cItems{}, errorf(CodeNoMemory, "the batch is too large to copy")
		}
	}
	word := unsafe.Sizeof(uintptr(0))
	head := uintptr(n) * 2 * word
	block := C.malloc(C.size_t(head + total + 1))
	if block == nil {
		return cItems{}, errorf(CodeNoMemory, "out of memory copying the batch")
	}
	// Pointers are stored as uintptr: C addresses, invisible to the garbage collector.
	ptrs := unsafe.Slice((*uintptr)(block), n)
	lens := unsafe.Slice((*C.size_t)(unsafe.Add(block, uintptr(n)*word)), n)
	data := unsafe.Slice((*byte)(unsafe.Add(block, head)), total+1)
	off := uintptr(0)
	base := uintptr(block) + head
	for i, it := range items {
		l := uintptr(len(it))
		copy(data[off:off+l], it)
		if l == 0 {
			ptrs[i] = 0
		} else {
			ptrs[i] = base + off
		}
		lens[i] = C.size_t(l)
		off += l
	}
	return cItems{
		block: block,
		ptrs:  (*unsafe.Pointer)(block),
		lens:  (*C.size_t)(unsafe.Add(block, uintptr(n)*word)),
	}, nil
}

func (b cItems) free() { C.free(b.block) }
