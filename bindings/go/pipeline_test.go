package bloomguard

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Goroutines on one Client (multiplexed connections, the default; and off): each asks about
// items whose answers it knows, in batches of a length of its own (an answer meant for another
// goroutine shows), and adds items it must then find, while another client writes the config
// hash (the tracked key), connections are killed and the filter is rebuilt (Swap, and Locked
// under its write lock) from everything added so far. Run with -race.
func TestPipelineGoroutinesGetTheirOwnAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"pipelined", []Option{WithPipeline(true), WithPipelineConns(2)}},
		{"one-connection", []Option{WithPipeline(true), WithPipelineConns(1)}},
		{"pooled", []Option{WithPipeline(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := openClient(t, append(tc.opts, WithWriteLockWait(5*time.Second))...)
			f := initFilter(t, c, 20000, 1e-9)
			// what a rotation must keep: each item is recorded before its Add, so an Add acknowledged
			// before a rotation began is in what the rotation reads (after it began), and a later one
			// is kept by the rotation itself
			var addedMu sync.Mutex
			var added [][]byte
			var present, absent [][]byte
			for i := 0; i < 300; i++ {
				present = append(present, []byte(fmt.Sprintf("p-%d", i)))
				absent = append(absent, []byte(fmt.Sprintf("a-%d", i)))
			}
			if _, err := f.AddMany(ctx, present); err != nil {
				t.Fatal(err)
			}
			r := raw(t)
			const workers, rounds = 32, 40
			var wrong, failed atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					batch := 2 + w%13
					for i := 0; i < rounds; i++ {
						items := make([][]byte, batch)
						want := make([]bool, batch)
						for k := range items {
							want[k] = (i+k)%2 == 1
							src := absent
							if want[k] {
								src = present
							}
							items[k] = src[(w*31+i*7+k)%300]
						}
						got, err := f.ContainsMany(ctx, items)
						if err != nil {
							failed.Add(1)
							continue
						}
						for k := range got {
							if got[k] != want[k] {
								wrong.Add(1)
							}
						}
						mine := []byte(fmt.Sprintf("added-%d-%d", w, i))
						addedMu.Lock()
						added = append(added, mine)
						addedMu.Unlock()
						if _, err := f.Add(ctx, mine); err != nil {
							failed.Add(1)
							continue
						}
						if ok, err := f.Contains(ctx, mine); err != nil {
							failed.Add(1)
						} else if !ok {
							wrong.Add(1)
						}
					}
				}(w)
			}
			g := openFilter(t, openClient(t), f.Name())
			rotate := func(strategy Strategy) {
				err := g.Rotate(ctx, 20000, 1e-9, strategy, func(rot *Rotation) error {
					addedMu.Lock()
					keep := append(append([][]byte{}, present...), added...)
					addedMu.Unlock()
					return rot.AddMany(keep)
				})
				if err != nil {
					t.Errorf("rotate (strategy %d): %v", strategy, err)
				}
			}
			for step := 0; step < 8; step++ {
				switch step % 4 {
				case 0:
					r.must(t, "HSET", "{"+f.Name()+"}:config", "other-field", fmt.Sprint(step))
				case 1:
					r.must(t, "CLIENT", "KILL", "TYPE", "normal")
				case 2:
					rotate(Swap)
				case 3:
					rotate(Locked)
				}
				time.Sleep(10 * time.Millisecond)
			}
			wg.Wait()
			if wrong.Load() != 0 {
				t.Fatalf("%d wrong answers", wrong.Load())
			}
			if failed.Load() > 3*workers {
				t.Fatalf("%d failed calls", failed.Load())
			}
		})
	}
}

// BenchmarkPipeline: 64 goroutines, one shared Client, one item per call; pipelining on (2 connections,
// with a spin, or 8 connections) vs off (a pool as big as the goroutines). Compare the sub-benchmarks'
// ns/op.
func BenchmarkPipeline(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"on", []Option{WithPipeline(true)}},
		{"on-spin50us", []Option{WithPipeline(true), WithPipelineSpin(50 * time.Microsecond)}},
		{"off", []Option{WithPipeline(false), WithPoolSize(64)}},
		{"on-conns8", []Option{WithPipeline(true), WithPipelineConns(8)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c := openClient(b, tc.opts...)
			f := initFilter(b, c, 100000, 0.01)
			if _, err := f.Add(ctx, []byte("x")); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				item := []byte("x")
				for pb.Next() {
					if ok, err := f.Contains(ctx, item); err != nil || !ok {
						b.Errorf("contains: %v %v", ok, err)
						return
					}
				}
			})
		})
	}
}
