package bloomguard

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// Benchmarks. The Marshal ones compare the two ways of handing a batch to C under the cgo
// pointer rules (no server needed); the others measure whole calls against the test server.
//
//   go test -run '^$' -bench . -benchmem

func benchItems(n, size int) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		b := make([]byte, size)
		copy(b, fmt.Sprintf("item-%d", i))
		items[i] = b
	}
	return items
}

// What the package does: one C allocation holding pointers, lengths and a copy of the bytes.
func BenchmarkMarshalCopyToC(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		for _, size := range []int{16, 1024} {
			items := benchItems(n, size)
			b.Run(fmt.Sprintf("items=%d/size=%d", n, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c, err := marshalItems(items)
					if err != nil {
						b.Fatal(err)
					}
					c.free()
				}
			})
		}
	}
}

// The alternative: pin every item with a runtime.Pinner and pass Go arrays of the (pinned)
// pointers and lengths, which avoids the copy but pins per item.
func BenchmarkMarshalPinItems(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		for _, size := range []int{16, 1024} {
			items := benchItems(n, size)
			b.Run(fmt.Sprintf("items=%d/size=%d", n, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var p runtime.Pinner
					ptrs := make([]unsafe.Pointer, len(items))
					lens := make([]uintptr, len(items))
					for i, it := range items {
						if len(it) > 0 {
							p.Pin(unsafe.SliceData(it))
							ptrs[i] = unsafe.Pointer(unsafe.SliceData(it))
						}
						lens[i] = uintptr(len(it))
					}
					runtime.KeepAlive(ptrs)
					runtime.KeepAlive(lens)
					p.Unpin()
				}
			})
		}
	}
}

func benchFilter(b *testing.B) *Filter {
	c := openClient(b, WithPoolSize(8))
	f := initFilter(b, c, 1000000, 0.01)
	b.Cleanup(func() { f.Delete(context.Background()) })
	return f
}

func BenchmarkContainsString(b *testing.B) {
	f := benchFilter(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ContainsString(ctx, "sku-42"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkContainsStringParallel(b *testing.B) {
	f := benchFilter(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.ContainsString(ctx, "sku-42"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkContainsMany(b *testing.B) {
	f := benchFilter(b)
	ctx := context.Background()
	items := benchItems(1000, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ContainsMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddMany(b *testing.B) {
	f := benchFilter(b)
	ctx := context.Background()
	items := benchItems(1000, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.AddMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
}
