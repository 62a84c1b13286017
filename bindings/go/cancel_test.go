package bloomguard

import (
	"context"
	"errors"
	"testing"
	"time"
)

// What issue 16 asks: the end of a context cancels the library's wait (bg_call_cancel through
// context.AfterFunc), which returns within 150ms - for a lock, a rotation waiting for another
// one, a query waiting out a write lock and a policy backoff. Each with its control: the same
// wait without a cancel takes its full time.
const (
	cancelReturn = 150 * time.Millisecond
	cancelAfter  = 300 * time.Millisecond
	controlWait  = 600 * time.Millisecond
)

// cancelMidway runs fn with a context cancelled cancelAfter later and returns fn's error and the
// time from the cancel to fn's return.
func cancelMidway(t *testing.T, fn func(ctx context.Context) error) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var at time.Time
	timer := time.AfterFunc(cancelAfter, func() { at = time.Now(); cancel() })
	defer timer.Stop()
	err := fn(ctx)
	back := time.Now()
	if at.IsZero() {
		t.Fatalf("returned before the cancel: %v", err)
	}
	return err, back.Sub(at)
}

func wantPromptCancel(t *testing.T, what string, err error, took time.Duration) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: %v, want an error that is context.Canceled", what, err)
	}
	if late := machineLate(time.Now().Add(-took)); took > cancelReturn+late {
		t.Fatalf("%s: returned %v after the cancel (at most %v + %v the machine woke a sleeper late)", what, took,
			cancelReturn, late)
	}
	t.Logf("%s: %v after the cancel: %v", what, took, err)
}

func TestCancelLockWait(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	holder := openLock(t, c, name)
	mustAcquire(t, holder, LockExclusive)
	w := openLock(t, c, name)

	// control: a wait of its own runs out after its full time
	lim := openLock(t, c, name, WithLockWait(controlWait))
	start := time.Now()
	_, err := lim.Acquire(context.Background(), LockWrite)
	wantCode(t, err, CodeLocked, ErrLocked)
	if time.Since(start) < controlWait {
		t.Fatalf("the uncancelled wait ended after %v", time.Since(start))
	}

	err, took := cancelMidway(t, func(ctx context.Context) error { _, err := w.Acquire(ctx, LockWrite); return err })
	wantPromptCancel(t, "lock wait", err, took)
	wantCode(t, err, CodeLocked, ErrLocked)
	if h, err := w.Held(); err != nil || h.Mode != 0 {
		t.Fatalf("the cancelled waiter holds %+v %v", h, err)
	}
	// no writer intent left behind: once the holder releases, a reader gets in at once (it would
	// queue behind a waiting writer's intent)
	mustRelease(t, holder)
	r := openLock(t, c, name)
	if _, err := r.TryAcquire(context.Background(), LockRead); err != nil {
		t.Fatalf("a reader after the cancelled writer: %v", err)
	}
	mustRelease(t, r)
	// the pooled call is usable again: a wait that is not cancelled succeeds
	if _, err := w.Acquire(context.Background(), LockExclusive); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	mustRelease(t, w)
}

func TestCancelRotationWait(t *testing.T) {
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	inside := make(chan struct{})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- f.Rotate(context.Background(), 1000, 0.01, Swap, func(*Rotation) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	f2 := openFilter(t, c, f.Name())

	start := time.Now()
	err := f2.Rotate(context.Background(), 1000, 0.01, Swap, func(*Rotation) error { return errors.New("began") },
		WithWait(controlWait))
	wantCode(t, err, CodeRotationInProgress, ErrRotationInProgress)
	if time.Since(start) < controlWait {
		t.Fatalf("the uncancelled wait ended after %v", time.Since(start))
	}

	err, took := cancelMidway(t, func(ctx context.Context) error {
		return f2.Rotate(ctx, 1000, 0.01, Swap, func(*Rotation) error { return errors.New("began") },
			WithWait(time.Minute))
	})
	wantPromptCancel(t, "rotation wait", err, took)
	wantCode(t, err, CodeRotationInProgress, ErrRotationInProgress)
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first rotation: %v", err)
	}
	// no lease was taken by the cancelled waiter
	if err := f2.Rotate(context.Background(), 1000, 0.01, Swap, func(*Rotation) error { return nil }); err != nil {
		t.Fatalf("a rotation after the cancelled wait: %v", err)
	}
	noRotationsLeft(t)
}

func TestCancelWriteLockWait(t *testing.T) {
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	patient := openClient(t, WithWriteLockWait(time.Hour))
	pf := openFilter(t, patient, f.Name())
	wl, err := f.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	mustAcquire(t, wl, LockWrite)

	// control: the context's deadline ends the wait (ErrLocked, the library stops a look short of
	// it), not sooner
	dctx, cancel := context.WithTimeout(context.Background(), controlWait)
	start := time.Now()
	_, err = pf.ContainsString(dctx, "x")
	cancel()
	if !errors.Is(err, ErrLocked) || time.Since(start) < controlWait-100*time.Millisecond {
		t.Fatalf("uncancelled write-lock wait: %v after %v", err, time.Since(start))
	}

	err, took := cancelMidway(t, func(ctx context.Context) error { _, err := pf.ContainsString(ctx, "x"); return err })
	wantPromptCancel(t, "write-lock wait", err, took)
	wantCode(t, err, CodeCanceled, ErrCanceled)
	mustRelease(t, wl)
	if _, err := pf.ContainsString(context.Background(), "x"); err != nil {
		t.Fatalf("after the write lock: %v", err)
	}
}

func TestCancelPolicyBackoff(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t) // never initialized: ErrNotInitialized, which the policy retries
	mk := func(base time.Duration) *Filter {
		p, err := NewPolicy(WithChain(FailNotInitialized, ActionRetry, ActionError), WithRetries(1),
			WithJitter(0), WithBackoff(base, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.Filter(name, WithPolicy(p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	ctl := mk(controlWait)
	start := time.Now()
	_, err := ctl.ContainsString(context.Background(), "x")
	wantCode(t, err, CodeNotInitialized, ErrNotInitialized)
	if time.Since(start) < controlWait {
		t.Fatalf("the uncancelled backoff ended after %v", time.Since(start))
	}
	f := mk(time.Minute)
	err, took := cancelMidway(t, func(ctx context.Context) error { _, err := f.ContainsString(ctx, "x"); return err })
	wantPromptCancel(t, "policy backoff", err, took)
	wantCode(t, err, CodeCanceled, ErrCanceled)
}

// Close cancels a waiting Acquire (no slices any more): ErrClosed at once.
func TestCancelLockClose(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	holder := openLock(t, c, name)
	mustAcquire(t, holder, LockExclusive)
	w := openLock(t, c, name)
	res := make(chan error, 1)
	go func() { _, err := w.Acquire(context.Background(), LockExclusive); res <- err }()
	time.Sleep(cancelAfter)
	start := time.Now()
	w.Close()
	select {
	case err := <-res:
		wantCode(t, err, CodeClosed, ErrClosed)
		if d := time.Since(start); d > cancelReturn {
			t.Fatalf("Close ended the wait after %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	mustRelease(t, holder)
}
