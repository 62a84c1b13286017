package bloomguard

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// osThreads is the number of OS threads of this process (/proc/self/task).
func osThreads(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatalf("read /proc/self/task: %v", err)
	}
	return len(entries)
}

// threadPeak samples osThreads every few ms until stop is called, and returns the largest count.
func threadPeak(t testing.TB) (stop func() int) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := func() {
		if n := int64(osThreads(t)); n > peak.Load() {
			peak.Store(n)
		}
	}
	sample()
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		sample()
		return int(peak.Load())
	}
}

// The thread counter is real: goroutines pinned with runtime.LockOSThread (what each Lock did
// before lock owners) each show up as a thread of their own, so 120 of them take the count past
// the bound the test below asserts. Negative control for that test.
func TestLockThreadCounterSeesPinnedThreads(t *testing.T) {
	const pinned = 120
	var started sync.WaitGroup
	quit := make(chan struct{})
	var ended sync.WaitGroup
	started.Add(pinned)
	ended.Add(pinned)
	for i := 0; i < pinned; i++ {
		go func() {
			defer ended.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			started.Done()
			<-quit
		}()
	}
	started.Wait()
	during := osThreads(t)
	close(quit)
	ended.Wait()
	// each pinned goroutine has a thread to itself, and the test's goroutine runs on another
	if during <= pinned || during < 100 {
		t.Fatalf("%d goroutines pinned to OS threads, but only %d threads counted", pinned, during)
	}
}

// 10,000 Locks held at once from goroutines, on one client, with fewer than 100 OS threads in the
// process: a hold pins no thread (each Lock is a library lock owner, not an OS thread), and the
// library renews all of them from one thread. Calls in flight do use a thread each (a cgo call
// blocks its thread), so at most 16 run at once; the holds themselves are just parked goroutines.
// Failed before lock owners: each Lock pinned a thread of its own (10,000 threads).
// It runs in a fresh test process (this binary, re-run for this test alone): Go keeps the idle
// threads earlier tests made (thousands of goroutines in C, LockOSThread), and the bound is on
// the whole process.
func TestLockTenThousandHoldsFewThreads(t *testing.T) {
	const n = 10000
	const inFlight = 16
	if testing.Short() {
		t.Skip("10,000 holds")
	}
	if os.Getenv(freshProcessEnv) != "1" {
		runInFreshProcess(t, "TestLockTenThousandHoldsFewThreads")
		return
	}
	c := openClient(t)
	r := raw(t)
	prefix := uniqueName(t)
	locks := make([]*Lock, n)
	for i := range locks {
		l, err := c.Lock(prefix + ":" + strconv.Itoa(i))
		if err != nil {
			t.Fatalf("Lock %d: %v", i, err)
		}
		locks[i] = l
	}
	t.Cleanup(func() {
		for _, l := range locks {
			l.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := threadPeak(t)
	sem := make(chan struct{}, inFlight)
	var held, releaseAll, released sync.WaitGroup
	var failures atomic.Int64
	held.Add(n)
	released.Add(n)
	releaseAll.Add(1)
	for i := range locks {
		go func(l *Lock) {
			defer released.Done()
			sem <- struct{}{}
			_, err := l.Acquire(ctx, LockExclusive)
			<-sem
			held.Done()
			if err != nil {
				failures.Add(1)
				t.Errorf("Acquire %s: %v", l.Key(), err)
				return
			}
			releaseAll.Wait() // parked, holding the lock, on no thread of its own
			sem <- struct{}{}
			err = l.Release(ctx)
			<-sem
			if err != nil {
				failures.Add(1)
				t.Errorf("Release %s: %v", l.Key(), err)
			}
		}(locks[i])
	}
	held.Wait()
	if failures.Load() != 0 {
		releaseAll.Done()
		released.Wait()
		t.FailNow()
	}
	heldThreads := osThreads(t)
	count := "return #redis.call('KEYS', ARGV[1])"
	if got := r.must(t, "EVAL", count, "0", prefix+":*:lock").(int64); got != n {
		t.Errorf("%d lock keys in Redis while all %d are held", got, n)
	}
	// every hold is its Lock's, named by the Lock's holder id
	for _, i := range []int{0, n / 2, n - 1} {
		if v := r.must(t, "HGET", locks[i].Key(), locks[i].HolderID()); v != "1" {
			t.Errorf("HGET %s %s = %v", locks[i].Key(), locks[i].HolderID(), v)
		}
		if h, err := locks[i].Held(); err != nil || h.Count != 1 {
			t.Errorf("Held %d: %+v %v", i, h, err)
		}
	}
	releaseAll.Done()
	released.Wait()
	peak := stop()
	if got := r.must(t, "EVAL", count, "0", prefix+":*:lock").(int64); got != 0 {
		t.Errorf("%d lock keys left after every release", got)
	}
	t.Logf("%d holds: %d OS threads while held, peak %d", n, heldThreads, peak)
	if peak >= 100 {
		t.Fatalf("the process reached %d OS threads holding %d locks (want < 100)", peak, n)
	}
}

const freshProcessEnv = "BG_TEST_FRESH_PROCESS"

// runInFreshProcess runs the test named name alone in a new process of this test binary (with
// its own redis-server, TestMain's) and fails t if it fails there.
func runInFreshProcess(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), freshProcessEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("fresh process:\n%s", out)
	if err != nil {
		t.Fatalf("%s in a fresh process: %v", name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s did not pass in the fresh process", name)
	}
}

// A Lock released from another goroutine than the one that acquired it, while both may run on any
// thread; and a Release waiting behind the same Lock's Acquire gives up with its own ctx.
func TestLockCallsTakeTurns(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	a := openLock(t, c, name)
	b := openLock(t, c, name)
	mustAcquire(t, a, LockExclusive)
	waitDone := make(chan error, 1)
	go func() {
		_, err := b.Acquire(context.Background(), LockExclusive)
		waitDone <- err
	}()
	time.Sleep(50 * time.Millisecond) // b's Acquire waits for a
	// b's Release takes its turn behind b's waiting Acquire: its ctx ends that wait
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := b.Release(ctx)
	cancel()
	wantCode(t, err, CodeLocked, ErrLocked)
	if h, _ := b.Held(); h.Count != 0 { // Held never waits for a turn
		t.Fatalf("b holds %+v while waiting", h)
	}
	go func() {
		if err := a.Release(context.Background()); err != nil {
			t.Errorf("a.Release: %v", err)
		}
	}()
	if err := <-waitDone; err != nil {
		t.Fatalf("b's Acquire: %v", err)
	}
	mustRelease(t, b)
}

// WithLockOwner: Locks of two names opened with one LockOwner are one holder (holder ids end in
// its number, Holds counts both), released from other goroutines; two Locks of one name stay two
// holders even with one owner (negative control: the second is refused until the first releases).
func TestLockSharedOwner(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	r := raw(t)
	name := uniqueName(t)
	job, err := NewLockOwner()
	if err != nil {
		t.Fatal(err)
	}
	if job.Seq() == 0 || job.Holds() != 0 {
		t.Fatalf("new owner: seq %d holds %d", job.Seq(), job.Holds())
	}
	a := openLock(t, c, name, WithLockOwner(job))
	b := openLock(t, c, name+"-2", WithLockOwner(job))
	suffix := ":" + strconv.FormatUint(job.Seq(), 10)
	if !strings.HasSuffix(a.HolderID(), suffix) || !strings.HasSuffix(b.HolderID(), suffix) {
		t.Fatalf("holder ids %q %q, want the suffix %q", a.HolderID(), b.HolderID(), suffix)
	}
	mustAcquire(t, a, LockExclusive)
	mustAcquire(t, b, LockWrite)
	if job.Holds() != 2 {
		t.Fatalf("Holds %d, want 2", job.Holds())
	}
	if v := r.must(t, "HGET", a.Key(), a.HolderID()); v != "1" {
		t.Fatalf("HGET %s = %v", a.Key(), v)
	}
	var wg sync.WaitGroup
	for _, l := range []*Lock{a, b} {
		wg.Add(1)
		go func(l *Lock) {
			defer wg.Done()
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release %s: %v", l.Key(), err)
			}
		}(l)
	}
	wg.Wait()
	if job.Holds() != 0 || existing(t, r, a.Key(), b.Key()) != 0 {
		t.Fatalf("after the releases: holds %d", job.Holds())
	}
	same := openLock(t, c, name, WithLockOwner(job))
	mustAcquire(t, a, LockExclusive)
	wantCode(t, second(same.TryAcquire(ctx, LockExclusive)), CodeLocked, ErrLocked)
	mustRelease(t, a)
	mustAcquire(t, same, LockExclusive) // negative control
	// Close releases and leaves the shared owner usable
	same.Close()
	if job.Holds() != 0 || existing(t, r, same.Key()) != 0 {
		t.Fatal("Close left the hold")
	}
	mustAcquire(t, b, LockExclusive)
	mustRelease(t, b)
}
