package bloomguard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A write hold on the filter's lock makes its queries wait, then fail with ErrLocked; exclusive
// holds do not (the negative control), and a Policy answers the locked class.
func TestFilterLockMakesQueriesWait(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithWriteLockWait(50*time.Millisecond))
	f := initFilter(t, c, 1000, 0.01)
	item := []byte("held")
	if _, err := f.Add(ctx, item); err != nil {
		t.Fatal(err)
	}
	l, err := f.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Key() != "{"+f.Name()+"}:lock" {
		t.Fatalf("key %q", l.Key())
	}
	if _, err := l.Acquire(ctx, LockExclusive); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Contains(ctx, item); err != nil || !ok {
		t.Fatalf("an exclusive hold stopped a query: %v %v", ok, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, LockWrite); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = f.Contains(ctx, item)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("a query under a write hold: %v, want ErrLocked", err)
	}
	if d := time.Since(t0); d < 40*time.Millisecond {
		t.Fatalf("gave up after %v, before the 50ms wait", d)
	}
	p, err := NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	a, err := f.ContainsSource(ctx, item)
	if err != nil || !a.Present || a.Source != SourceAssumedPresent || !errors.Is(a.Cause, ErrLocked) {
		t.Fatalf("with a policy: %+v %v", a, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a, err = f.ContainsSource(ctx, item)
	if err != nil || !a.Present || a.Source != SourceRedis || a.Cause != nil {
		t.Fatalf("after the release: %+v %v", a, err)
	}
}

// Locked rotations under goroutines querying: no error, no false negative, and the rotation is
// in place (no staging keys left).
func TestRotateLockedUnderQueries(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithWriteLockWait(10*time.Second), WithPoolSize(6))
	f := initFilter(t, c, 2000, 0.01)
	base := makeItems("base", 2000)
	if _, err := f.AddMany(ctx, base); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var queries, failures atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; !stop.Load(); i += 4 {
				ok, err := f.Contains(ctx, base[i%len(base)])
				queries.Add(1)
				if err != nil || !ok {
					failures.Add(1)
				}
			}
		}(g)
	}
	for i := 0; i < 10; i++ {
		n := int64(2000 + 500*(i%2)) // every other rotation changes size and k
		if err := f.Rotate(ctx, n, 0.01, Locked, func(r *Rotation) error { return r.AddMany(base) }); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if queries.Load() == 0 || failures.Load() != 0 {
		t.Fatalf("%d queries, %d errors or false negatives", queries.Load(), failures.Load())
	}
	wantAllPresent(t, f, base)
	wantNoStaging(t, raw(t), f.Name())
}
