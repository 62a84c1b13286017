package bloomguard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Each consumer of a bg_options (bg_client_open, bg_rotation_begin, bg_lock_open) refuses an
// option of another one with BG_ENOTSUP (options.h). The Go types keep them apart (Option,
// RotateOption, LockOption): every option of each kind at once is accepted by its consumer,
// so the binding never hands one a foreign option.
func TestEveryOptionGoesToItsOwnConsumer(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithConnectTimeout(5*time.Second), WithCommandTimeout(5*time.Second), WithPoolSize(3),
		WithDB(0), WithConfigRetries(5), WithWriteLockWait(100*time.Millisecond), WithTracking(true),
		WithCluster(ClusterOff), WithWaitReplicas(0), WithWaitTimeout(time.Second), WithClientName("go-opts"))
	f := openFilter(t, c, uniqueName(t))
	err := f.Rotate(ctx, 1000, 0.01, Swap, func(r *Rotation) error { return r.Add([]byte("a")) },
		WithLease(5*time.Second), WithWait(0), WithStagingTTL(10*time.Second), WithThreads(1),
		WithChunkBytes(4096), WithNice(0), WithBatch(10))
	if err != nil {
		t.Fatalf("Rotate with every rotation option: %v", err)
	}
	l, err := c.Lock(uniqueName(t), WithLockLease(5*time.Second), WithLockRenewal(false), WithLockSubscribe(false),
		WithLockPollMax(10*time.Millisecond))
	if err != nil {
		t.Fatalf("Lock with every lock option: %v", err)
	}
	defer l.Close()
	if _, err := l.Acquire(ctx, LockExclusive); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	fl, err := f.Lock(WithLockLease(time.Second))
	if err != nil {
		t.Fatalf("Filter.Lock: %v", err)
	}
	fl.Close()
}

// An out-of-range value's message says the range, which the binding asks the library for
// (bg_options_bounds, bg_policy_bounds) instead of keeping a copy.
func TestRangeMessagesComeFromTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithPoolSize(0), "WithPoolSize(0): invalid argument"},
		{WithPoolSize(0), "; must be 1..1024"},
		{WithCommandTimeout(2 * time.Hour), "; must be 1ms..1h0m0s"},
		{WithConfigRetries(101), "; must be 0..100"},
		{WithWaitReplicas(65), "; must be 0..64"},
	} {
		_, err := Open(testServer.url, tc.opt)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalid || !strings.Contains(e.Message, tc.want) {
			t.Errorf("want %q in %v", tc.want, err)
		}
	}
	f := openFilter(t, openClient(t), uniqueName(t))
	err := f.Rotate(context.Background(), 1000, 0.01, Swap, func(*Rotation) error { return nil }, WithChunkBytes(100))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalid || !strings.Contains(e.Message, "must be 4096..67108864") {
		t.Errorf("WithChunkBytes(100): %v", err)
	}
	for _, tc := range []struct {
		opt  PolicyOption
		want string
	}{
		{WithJitter(101), "; must be 0..100"},
		{WithSnapshotRefresh(50 * time.Millisecond), "; must be 100ms..24h0m0s (or 0: never)"},
	} {
		_, err := NewPolicy(tc.opt)
		if !errors.As(err, &e) || e.Code != CodeInvalid || !strings.Contains(e.Message, tc.want) {
			t.Errorf("want %q in %v", tc.want, err)
		}
	}
	if _, err := NewPolicy(WithSnapshotRefresh(0)); err != nil {
		t.Errorf("WithSnapshotRefresh(0): %v", err)
	}
}
