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

// reportTracked adds the share of query round trips that took the tracked path (BITFIELD_RO
// alone: hiredis >= 1.0, Redis >= 6) as a metric, and fails a library that can track but never did.
func reportTracked(b *testing.B, f *Filter) {
	s := stats(b, f)
	if s.Queries > 0 {
		b.ReportMetric(float64(s.TrackedReads)/float64(s.Queries), "tracked/query")
	}
	if LibraryFeatures().Has(FeatureTracking) && s.Queries > 1 && s.TrackedReads == 0 {
		b.Errorf("%d queries, none tracked", s.Queries)
	}
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
	reportTracked(b, f)
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
	reportTracked(b, f)
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

// A healthy filter's query without a policy (the nocallback fast path), with a policy and no
// fallback (the same path), and with a Go fallback (the callback path: the item copied into C
// memory, a cgo.Handle for the query) - the fallback itself is never called. Compare the three
// within one run; the round trip dominates.
func BenchmarkContainsPolicyPath(b *testing.B) {
	ctx := context.Background()
	c := openClient(b)
	f := initFilter(b, c, 1000, 0.01)
	f.AddString(ctx, "x")
	fb := func(context.Context, [][]byte, []bool) error { return nil }
	for _, tc := range []struct {
		name string
		p    *Policy
	}{
		{"no-policy", nil},
		{"policy", mustPolicy(b)},
		{"policy+fallback", mustPolicy(b, WithFallback(fb))},
	} {
		if err := f.SetPolicy(tc.p); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := f.ContainsString(ctx, "x"); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// A hold and its release, against the test server: two round trips.
func BenchmarkLockAcquireRelease(b *testing.B) {
	ctx := context.Background()
	c := openClient(b)
	l, err := c.Lock(uniqueName(b))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Acquire(ctx, LockExclusive); err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
