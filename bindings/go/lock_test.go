package bloomguard

import (
	"context"
	"errors"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openLock(t testing.TB, c *Client, name string, opts ...LockOption) *Lock {
	t.Helper()
	l, err := c.Lock(name, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAcquire(t testing.TB, l *Lock, mode LockMode) uint64 {
	t.Helper()
	tok, err := l.Acquire(context.Background(), mode)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", mode, err)
	}
	return tok
}

func mustRelease(t testing.TB, l *Lock) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// The wire layout is Redisson's RLock (key NAME:lock, field = holder id, value = count), holds are
// reentrant, the Lock is the holder whatever goroutine calls it, and bad input is refused.
func TestLockBasics(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	l := openLock(t, c, name)
	r := raw(t)
	if l.Key() != name+":lock" || l.Name() != name {
		t.Fatalf("Key %q Name %q", l.Key(), l.Name())
	}
	id := l.HolderID()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:[0-9]+$`).MatchString(id) {
		t.Fatalf("HolderID %q", id)
	}
	if id != l.HolderID() {
		t.Fatal("HolderID changed: a Lock is one owner whatever thread its calls run on")
	}
	if h, err := l.Held(); err != nil || h != (Hold{}) {
		t.Fatalf("Held before: %+v %v", h, err)
	}
	tok := mustAcquire(t, l, LockExclusive)
	if tok == 0 {
		t.Fatal("token 0")
	}
	if v := r.must(t, "HGET", l.Key(), id); v != "1" {
		t.Fatalf("HGET %s %s = %v", l.Key(), id, v)
	}
	if pttl := r.must(t, "PTTL", l.Key()).(int64); pttl <= 0 || pttl > 30000 {
		t.Fatalf("PTTL %d", pttl)
	}
	// reentrant, from other goroutines too: the Lock is the holder, not the goroutine
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if tok2, err := l.Acquire(ctx, LockRead); err != nil || tok2 != tok {
			t.Errorf("reentrant Acquire: %d %v (token %d)", tok2, err, tok)
		}
	}()
	wg.Wait()
	if h, err := l.Held(); err != nil || h != (Hold{Mode: LockExclusive, Count: 2, Token: tok}) {
		t.Fatalf("Held: %+v %v", h, err)
	}
	if v := r.must(t, "HGET", l.Key(), id); v != "2" {
		t.Fatalf("count in Redis %v", v)
	}
	wg.Add(1)
	go func() { defer wg.Done(); mustRelease(t, l) }()
	wg.Wait()
	mustRelease(t, l)
	if n := existing(t, r, l.Key()); n != 0 {
		t.Fatal("the key outlived the last release")
	}
	e := wantCode(t, l.Release(ctx), CodeInvalid, ErrInvalid)
	if !strings.Contains(e.Message, "does not hold it") {
		t.Errorf("Release unheld: %q", e.Message)
	}
	wantCode(t, second(l.Acquire(ctx, LockMode(7))), CodeInvalid, ErrInvalid)
	if LockMode(7).String() != "LockMode(7)" || LockWrite.String() != "write" {
		t.Error("LockMode.String")
	}

	// upgrades are refused
	mustAcquire(t, l, LockRead)
	e = wantCode(t, second(l.Acquire(ctx, LockExclusive)), CodeInvalid, ErrInvalid)
	if !strings.Contains(e.Message, "upgrade") {
		t.Errorf("upgrade: %q", e.Message)
	}
	mustRelease(t, l)

	// bad names and options, contexts
	wantCode(t, second(c.Lock("a{}b")), CodeBadName, ErrBadName)
	wantCode(t, second(c.Lock("a\x00b")), CodeInvalid, ErrInvalid)
	e = wantCode(t, second(c.Lock(name, WithLockLease(time.Millisecond))), CodeInvalid, ErrInvalid)
	if !strings.Contains(e.Message, "WithLockLease(1ms)") {
		t.Errorf("bad lease: %q", e.Message)
	}
	wantCode(t, second(c.Lock(name, WithLockPollMax(2*time.Minute))), CodeInvalid, ErrInvalid)
	//lint:ignore SA1012 a nil context is what is tested
	wantCode(t, second(l.Acquire(nil, LockExclusive)), CodeInvalid, ErrInvalid) //nolint:staticcheck
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cctx, LockExclusive); err != context.Canceled {
		t.Fatalf("cancelled ctx: %v", err)
	}

	// Close: releases what is held, idempotent, then ErrClosed
	mustAcquire(t, l, LockWrite)
	l.Close()
	l.Close()
	if existing(t, r, l.Key()) != 0 {
		t.Fatal("Close left the hold")
	}
	wantCode(t, second(l.Acquire(ctx, LockExclusive)), CodeClosed, ErrClosed)
	wantCode(t, l.Release(ctx), CodeClosed, ErrClosed)
	wantCode(t, second(l.Held()), CodeClosed, ErrClosed)
	if l.HolderID() != "" {
		t.Error("HolderID after Close")
	}
	// a closed client opens no lock, but a lock keeps its client alive
	c2 := openClient(t)
	l2 := openLock(t, c2, name)
	c2.Close()
	wantCode(t, second(c2.Lock(name)), CodeClosed, ErrClosed)
	mustAcquire(t, l2, LockExclusive)
	mustRelease(t, l2)
}

// A taken lock: WithLockWait and TryAcquire give ErrLocked naming the holder; a context deadline
// or cancel ends the wait (ErrLocked and ctx.Err()); a waiter wakes when the holder releases.
func TestLockWait(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	holder := openLock(t, c, name)
	tok := mustAcquire(t, holder, LockExclusive)

	w := openLock(t, c, name, WithLockWait(100*time.Millisecond))
	_, err := w.Acquire(ctx, LockExclusive)
	e := wantCode(t, err, CodeLocked, ErrLocked)
	if !strings.Contains(e.Message, holder.HolderID()) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait limit: %v", err)
	}
	e = wantCode(t, second(w.TryAcquire(ctx, LockExclusive)), CodeLocked, ErrLocked)
	if !strings.Contains(e.Message, "held by") {
		t.Errorf("TryAcquire: %q", e.Message)
	}
	wantCode(t, second(w.TryAcquire(ctx, LockRead)), CodeLocked, ErrLocked)

	// the context's deadline ends a wait with no limit of its own
	nw := openLock(t, c, name)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = nw.Acquire(dctx, LockExclusive)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !(errors.Is(err, ErrLocked) || errors.Is(err, ErrTimeout)) {
		t.Fatalf("deadline: %v", err)
	}
	t.Logf("deadline: %v", err)
	// a cancel from another goroutine ends it too (within a wait slice)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(250*time.Millisecond, cancel)
	_, err = nw.Acquire(cctx, LockExclusive)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrLocked) {
		t.Fatalf("cancel: %v", err)
	}
	// nothing of the waiters is held
	for _, l := range []*Lock{w, nw} {
		if h, err := l.Held(); err != nil || h.Mode != 0 {
			t.Fatalf("waiter holds %+v %v", h, err)
		}
	}

	// a waiter with no limit is woken by the release (and gets a later token)
	got := make(chan uint64, 1)
	go func() {
		tk, err := nw.Acquire(ctx, LockExclusive)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- tk
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("the waiter got a held lock")
	default:
	}
	mustRelease(t, holder)
	select {
	case tk := <-got:
		if tk <= tok {
			t.Fatalf("token %d after %d", tk, tok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	mustRelease(t, nw)

	// Close ends a wait with no limit and no deadline (within a wait slice): ErrClosed
	mustAcquire(t, holder, LockExclusive)
	cw := openLock(t, c, name)
	res := make(chan error, 1)
	go func() { _, err := cw.Acquire(ctx, LockExclusive); res <- err }()
	time.Sleep(50 * time.Millisecond)
	cw.Close()
	select {
	case err := <-res:
		wantCode(t, err, CodeClosed, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	mustRelease(t, holder)
}

// Readers share, writers exclude readers and each other; exclusive and write are the same hold.
func TestLockModes(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	r1, r2 := openLock(t, c, name), openLock(t, c, name)
	wr := openLock(t, c, name)
	mustAcquire(t, r1, LockRead)
	mustAcquire(t, r2, LockRead)
	for _, m := range []LockMode{LockWrite, LockExclusive} {
		wantCode(t, second(wr.TryAcquire(ctx, m)), CodeLocked, ErrLocked)
	}
	if h, _ := r2.Held(); h.Mode != LockRead || h.Count != 1 {
		t.Fatalf("reader Held %+v", h)
	}
	mustRelease(t, r1)
	wantCode(t, second(wr.TryAcquire(ctx, LockWrite)), CodeLocked, ErrLocked)
	mustRelease(t, r2)
	mustAcquire(t, wr, LockWrite)
	wantCode(t, second(r1.TryAcquire(ctx, LockRead)), CodeLocked, ErrLocked)
	wantCode(t, second(r1.TryAcquire(ctx, LockExclusive)), CodeLocked, ErrLocked)
	// an exclusive holder may re-enter in any mode
	mustAcquire(t, wr, LockRead)
	if h, _ := wr.Held(); h.Mode != LockWrite || h.Count != 2 {
		t.Fatalf("writer Held %+v", h)
	}
	mustRelease(t, wr)
	mustRelease(t, wr)
	mustAcquire(t, r1, LockExclusive)
	wantCode(t, second(wr.TryAcquire(ctx, LockWrite)), CodeLocked, ErrLocked)
	wantCode(t, second(r2.TryAcquire(ctx, LockRead)), CodeLocked, ErrLocked)
	mustRelease(t, r1)
}

// Every hold that starts gets a strictly larger token, whichever Lock or client takes it; a
// reentrant acquire keeps its hold's token.
func TestLockFencingTokens(t *testing.T) {
	c1, c2 := openClient(t), openClient(t)
	name := uniqueName(t)
	locks := []*Lock{openLock(t, c1, name), openLock(t, c2, name), openLock(t, c1, name)}
	var last uint64
	for i := 0; i < 12; i++ {
		l := locks[i%3]
		mode := []LockMode{LockExclusive, LockWrite, LockRead}[i%3]
		tok := mustAcquire(t, l, mode)
		if tok <= last {
			t.Fatalf("hold %d: token %d after %d", i, tok, last)
		}
		if again := mustAcquire(t, l, mode); again != tok {
			t.Fatalf("reentrant token %d, hold's %d", again, tok)
		}
		mustRelease(t, l)
		mustRelease(t, l)
		last = tok
	}
}

// Retire deletes the fence counter only when nobody holds the lock; a retired name's tokens
// restart. A filter's Delete keeps its write-lock fence.
func TestLockRetire(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	a, b := openLock(t, c, name), openLock(t, c, name)
	r := raw(t)
	fence := "{" + name + ":lock}:fence"
	tok := mustAcquire(t, a, LockWrite)
	if _, err := b.Retire(ctx); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), a.HolderID()) {
		t.Fatalf("Retire while held: %v", err)
	}
	if v := r.must(t, "GET", fence); v != strconv.FormatUint(tok, 10) {
		t.Fatalf("fence %v, token %d", v, tok)
	}
	mustRelease(t, a)
	if del, err := b.Retire(ctx); err != nil || !del {
		t.Fatalf("Retire when free: %v %v", del, err)
	}
	if v := r.must(t, "EXISTS", fence); v != int64(0) {
		t.Fatalf("fence still there: %v", v)
	}
	if del, err := b.Retire(ctx); err != nil || del {
		t.Fatalf("Retire again: %v %v", del, err)
	}
	if tok := mustAcquire(t, a, LockExclusive); tok != 1 {
		t.Fatalf("token after retire %d, want 1", tok)
	}
	mustRelease(t, a)
	b.Close()
	if _, err := b.Retire(ctx); err == nil {
		t.Fatal("Retire on a closed Lock succeeded")
	}

	f := openFilter(t, c, name+"f")
	if _, err := f.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	fl, err := f.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	mustAcquire(t, fl, LockWrite)
	mustRelease(t, fl)
	if _, err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	ffence := "{" + name + "f}:lock:fence"
	if v := r.must(t, "EXISTS", ffence); v != int64(1) {
		t.Fatalf("Delete removed the write-lock fence: %v", v)
	}
	if del, err := fl.Retire(ctx); err != nil || !del {
		t.Fatalf("filter lock Retire: %v %v", del, err)
	}
}

// exclusionRun runs goroutines that each take lockFor(g) and, inside, do a read-modify-write of a
// Redis counter with a pause in between, recording how many are inside at once. It returns the
// counter's final value and the most goroutines seen inside together.
func exclusionRun(t *testing.T, c *Client, counterKey string, goroutines, rounds int,
	lockFor func(g int) *Lock) (final int64, maxInside int64, tokens []uint64) {
	t.Helper()
	ctx := context.Background()
	var inside, most atomic.Int64
	var mu sync.Mutex // guards tokens (appended inside the critical section, so in hold order)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r, err := dialRESP(testServer.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.close()
			l := lockFor(g)
			for i := 0; i < rounds; i++ {
				tok, err := l.Acquire(ctx, LockExclusive)
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				v, _ := r.do("GET", counterKey)
				cur, _ := strconv.ParseInt(func() string { s, _ := v.(string); return s }(), 10, 64)
				time.Sleep(time.Millisecond)
				r.do("SET", counterKey, strconv.FormatInt(cur+1, 10))
				mu.Lock()
				tokens = append(tokens, tok)
				mu.Unlock()
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("goroutine %d: release: %v", g, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	v := raw(t).must(t, "GET", counterKey)
	final, _ = strconv.ParseInt(v.(string), 10, 64)
	return final, most.Load(), tokens
}

// Goroutines with a Lock each exclude each other: the counter is exact and nobody overlaps. The
// negative control shares one Lock between the goroutines - one holder, reentrant - and sees them
// overlap and lose updates, so the harness can fail.
func TestLockMutualExclusion(t *testing.T) {
	c := openClient(t, WithPoolSize(8))
	name := uniqueName(t)
	const goroutines, rounds = 8, 15
	locks := make([]*Lock, goroutines)
	for i := range locks {
		locks[i] = openLock(t, c, name)
	}
	final, most, tokens := exclusionRun(t, c, name+":counter", goroutines, rounds, func(g int) *Lock { return locks[g] })
	if final != goroutines*rounds || most != 1 {
		t.Fatalf("with a Lock per goroutine: counter %d (want %d), up to %d inside at once", final,
			goroutines*rounds, most)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not increasing in hold order: %v", tokens)
		}
	}
	// negative control: one shared Lock is one holder, so it excludes nobody
	shared := openLock(t, c, name+":shared")
	final, most, _ = exclusionRun(t, c, name+":counter2", goroutines, rounds, func(int) *Lock { return shared })
	t.Logf("shared Lock (negative control): counter %d of %d, up to %d inside at once", final, goroutines*rounds, most)
	if most < 2 || final == goroutines*rounds {
		t.Fatalf("negative control: a shared Lock excluded the goroutines (counter %d, %d inside at once)",
			final, most)
	}
}

// Without renewal a hold ends with its lease: another Lock takes it, and the first one's Release
// says its hold was lost (ErrLocked) and leaves the new holder alone.
func TestLockLeaseRunsOut(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	short := openLock(t, c, name, WithLockRenewal(false), WithLockLease(100*time.Millisecond))
	other := openLock(t, c, name, WithLockWait(5*time.Second), WithLockSubscribe(false),
		WithLockPollMax(20*time.Millisecond))
	t1 := mustAcquire(t, short, LockExclusive)
	t2 := mustAcquire(t, other, LockExclusive) // waits out the lease
	if t2 <= t1 {
		t.Fatalf("tokens %d then %d", t1, t2)
	}
	e := wantCode(t, short.Release(context.Background()), CodeLocked, ErrLocked)
	if !strings.Contains(e.Message, "lost") {
		t.Errorf("lost hold: %q", e.Message)
	}
	if h, err := other.Held(); err != nil || h.Token != t2 {
		t.Fatalf("the new holder: %+v %v", h, err)
	}
	if v := raw(t).must(t, "HGET", other.Key(), other.HolderID()); v != "1" {
		t.Fatalf("the new hold in Redis: %v", v)
	}
	mustRelease(t, other)
}

// With renewal, a hold whose key is deleted behind its back is found lost by the renewal
// thread: Held says so (ErrLocked, the hold still described), Release fails with ErrLocked and
// forgets it. Negative control: a Lock whose key is left alone stays fine as long.
func TestLockHoldLost(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	l := openLock(t, c, name, WithLockLease(90*time.Millisecond))
	// renewed every 200 ms: a generous margin on a loaded machine (a 90 ms lease was too tight)
	keep := openLock(t, c, name+":kept", WithLockLease(600*time.Millisecond))
	tok := mustAcquire(t, l, LockExclusive)
	mustAcquire(t, keep, LockExclusive)
	raw(t).must(t, "DEL", l.Key())
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := l.Held()
		if err != nil {
			wantCode(t, err, CodeLocked, ErrLocked)
			if h != (Hold{Mode: LockExclusive, Count: 1, Token: tok}) {
				t.Fatalf("lost hold described as %+v", h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the renewal never found the hold lost")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(900 * time.Millisecond) // past the kept hold's lease: only renewal keeps it
	if h, err := keep.Held(); err != nil || h.Count != 1 || existing(t, raw(t), keep.Key()) != 1 {
		t.Fatalf("the kept hold (renewed past its 600 ms lease): %+v %v", h, err)
	}
	wantCode(t, l.Release(context.Background()), CodeLocked, ErrLocked)
	if h, err := l.Held(); err != nil || h != (Hold{}) {
		t.Fatalf("after the release: %+v %v", h, err)
	}
	mustRelease(t, keep)
}

// A Lock never closed is closed by the cleanup: its hold is released and its threads end.
func TestLockCleanupSafetyNet(t *testing.T) {
	c := openClient(t)
	name := uniqueName(t)
	r := raw(t)
	func() {
		l, err := c.Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, l, LockExclusive)
	}()
	if existing(t, r, name+":lock") != 1 {
		t.Fatal("not held")
	}
	deadline := time.Now().Add(10 * time.Second)
	for existing(t, r, name+":lock") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the forgotten Lock was not closed by the cleanup")
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}
