package bloomguard

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustPolicy(t testing.TB, opts ...PolicyOption) *Policy {
	t.Helper()
	p, err := NewPolicy(opts...)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

func stats(t testing.TB, f *Filter) Stats {
	t.Helper()
	s, err := f.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

// quick keeps retries short.
var quick = WithBackoff(time.Millisecond, 2*time.Millisecond)

// fallbacksLeft fails unless every policy handle made by the test is gone.
func fallbacksLeft(t testing.TB, want int64) {
	t.Helper()
	if n := fallbacksLive.Load(); n != want {
		t.Fatalf("%d fallback handles alive, want %d", n, want)
	}
}

// Options are checked by the library when the policy is made, with messages naming the option.
func TestPolicyBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opt  PolicyOption
		code Code
		in   string
	}{
		{WithRetries(-1), CodeInvalid, "WithRetries(-1)"},
		{WithRetries(101), CodeInvalid, "WithRetries(101)"},
		{WithBackoff(2*time.Minute, time.Second), CodeInvalid, "WithBackoff(base)"},
		{WithJitter(101), CodeInvalid, "WithJitter(101)"},
		{WithBreaker(-1, time.Second), CodeInvalid, "WithBreaker(threshold)"},
		{WithBreaker(1, 0), CodeInvalid, "WithBreaker(cooldown)"},
		{WithCallbackRate(1, 0), CodeInvalid, "WithCallbackRate(burst)"},
		{WithSnapshotRefresh(50 * time.Millisecond), CodeInvalid, "WithSnapshotRefresh"},
		{WithSnapshotChunkBytes(100), CodeInvalid, "WithSnapshotChunkBytes(100)"},
		{WithChain(FailureClass(42), ActionError), CodeNotSupported, "WithChain"},
		{WithChain(FailTimeout, Action(42)), CodeNotSupported, "WithChain"},
		{WithChain(FailTimeout), CodeInvalid, "WithChain"},
		{WithChain(FailTimeout, make([]Action, MaxChain+1)...), CodeInvalid, "WithChain"},
	} {
		_, err := NewPolicy(tc.opt)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.in) {
			t.Errorf("%s: %v", tc.in, err)
		}
	}
	if _, err := NewPolicy(WithChain(FailTimeout, ActionRetry, ActionSnapshot, ActionCallback, ActionAssumeAbsent,
		ActionAssumePresent, ActionError, ActionRetry, ActionError), WithCallbackRate(0, 1),
		WithSnapshotRefresh(0), WithBreaker(0, time.Hour), nil); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	if FailConnection.String() != "connection" || ActionAssumePresent.String() != "assume-present" ||
		SourceCallback.String() != "callback" || BreakerHalfOpen.String() != "half-open" ||
		Source(9).String() != "Source(9)" || SourceRedis.Degraded() || !SourceSnapshot.Degraded() {
		t.Error("String methods")
	}
}

// Against a filter that does not exist (the not-initialized class, as a rebuild's delete makes):
// each action, the answer's source and reason, the Go fallback with exactly the queried items
// and the query's context, a decline handing over to the next action, and the counters.
func TestPolicyActionsOnMissingFilter(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	f := openFilter(t, c, name)
	base := fallbacksLive.Load()

	// no policy: the plain error
	wantCode(t, second(f.ContainsString(ctx, "a")), CodeNotInitialized, ErrNotInitialized)

	for _, tc := range []struct {
		act     Action
		src     Source
		present bool
	}{
		{ActionAssumePresent, SourceAssumedPresent, true},
		{ActionAssumeAbsent, SourceAssumedAbsent, false},
	} {
		if err := f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, tc.act))); err != nil {
			t.Fatal(err)
		}
		a, err := f.ContainsSource(ctx, []byte("a"))
		if err != nil || a.Present != tc.present || a.Source != tc.src || !strings.Contains(a.Reason, "not initialized") {
			t.Fatalf("%v: %+v %v", tc.act, a, err)
		}
		if ok, err := f.ContainsString(ctx, "b"); err != nil || ok != tc.present {
			t.Fatalf("%v ContainsString: %v %v", tc.act, ok, err)
		}
	}
	if err := f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, ActionError))); err != nil {
		t.Fatal(err)
	}
	wantCode(t, second(f.ContainsSource(ctx, []byte("a"))), CodeNotInitialized, ErrNotInitialized)

	// the Go fallback: the items of the query, its context; answers item by item
	type key struct{}
	var calls [][]string
	var mu sync.Mutex
	decline := false
	fb := func(ctx context.Context, items [][]byte, present []bool) error {
		mu.Lock()
		defer mu.Unlock()
		var got []string
		for _, it := range items {
			got = append(got, string(it))
		}
		calls = append(calls, append(got, fmt.Sprint(ctx.Value(key{}))))
		if decline {
			return errors.New("the database is down too")
		}
		for i, it := range items {
			present[i] = strings.HasPrefix(string(it), "in")
		}
		return nil
	}
	p := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumePresent), WithFallback(fb))
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	fallbacksLeft(t, base+1)
	before := stats(t, f)
	vctx := context.WithValue(ctx, key{}, "query-ctx")
	items := [][]byte{[]byte("in-1"), []byte("out-1"), nil, []byte("in-2")}
	a, err := f.ContainsManySource(vctx, items)
	if err != nil || a.Source != SourceCallback || fmt.Sprint(a.Present) != "[true false false true]" ||
		!strings.Contains(a.Reason, "not initialized") {
		t.Fatalf("fallback: %+v %v", a, err)
	}
	if ok, err := f.ContainsString(vctx, "in-3"); err != nil || !ok {
		t.Fatalf("ContainsString via the fallback: %v %v", ok, err)
	}
	if ok, err := f.Contains(vctx, []byte("out-3")); err != nil || ok {
		t.Fatalf("Contains via the fallback: %v %v", ok, err)
	}
	if got, err := f.ContainsMany(vctx, items[:2]); err != nil || fmt.Sprint(got) != "[true false]" {
		t.Fatalf("ContainsMany via the fallback: %v %v", got, err)
	}
	want := "[[in-1 out-1  in-2 query-ctx] [in-3 query-ctx] [out-3 query-ctx] [in-1 out-1 query-ctx]]"
	if fmt.Sprint(calls) != want {
		t.Fatalf("fallback calls %v\nwant %v", calls, want)
	}
	// a decline hands over to the next action
	decline = true
	if a, err := f.ContainsSource(ctx, []byte("out-9")); err != nil || a.Source != SourceAssumedPresent || !a.Present {
		t.Fatalf("declined: %+v %v", a, err)
	}
	after := stats(t, f)
	if d := after.CallbackCalls - before.CallbackCalls; d != 5 {
		t.Errorf("CallbackCalls +%d", d)
	}
	if d := after.CallbackDeclined - before.CallbackDeclined; d != 1 {
		t.Errorf("CallbackDeclined +%d", d)
	}
	if d := after.AnswersCallback - before.AnswersCallback; d != 4 {
		t.Errorf("AnswersCallback +%d", d)
	}
	if after.Failures[FailNotInitialized] < 8 || after.QueryErrors != 2 || after.Queries < 10 {
		t.Errorf("stats %+v", after)
	}

	// adds are never degraded by the fallback: retries, then the error
	wantCode(t, second(f.AddString(ctx, "x")), CodeNotInitialized, ErrNotInitialized)

	// once the filter exists Redis answers, through the callback path too
	if _, err := f.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	f.AddString(ctx, "out-1")
	if a, err := f.ContainsSource(ctx, []byte("out-1")); err != nil || a.Source != SourceRedis || !a.Present || a.Reason != "" {
		t.Fatalf("Redis: %+v %v", a, err)
	}

	// replacing the policy drops its fallback handle; so does Close
	if err := f.SetPolicy(nil); err != nil {
		t.Fatal(err)
	}
	fallbacksLeft(t, base)
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	g, err := c.Filter(name, WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	fallbacksLeft(t, base+2)
	f.Close()
	g.Close()
	fallbacksLeft(t, base)
	wantCode(t, f.SetPolicy(p), CodeClosed, ErrClosed)
	wantCode(t, second(f.Stats()), CodeClosed, ErrClosed)
	fallbacksLeft(t, base)
	// a bad policy at open: no filter
	wantCode(t, second(c.Filter(name, WithPolicy(&Policy{sets: []setting{intSetting("x", 1, -5)}}))),
		CodeInvalid, ErrInvalid)
}

// A panic in the fallback never unwinds through the library: the library sees a decline (the
// chain goes on), and the query fails with a *PanicError carrying the value and the stack.
func TestPolicyFallbackPanic(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	boom := errors.New("boom")
	var n atomic.Int64
	p := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumeAbsent),
		WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			if n.Add(1) == 1 {
				panic(boom)
			}
			panic("plain value")
		}))
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	_, err := f.ContainsString(ctx, "x")
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != boom || !errors.Is(err, boom) ||
		!strings.Contains(string(pe.Stack), "policy_test.go") {
		t.Fatalf("panic: %v", err)
	}
	_, err = f.ContainsManySource(ctx, [][]byte{[]byte("a"), []byte("b")})
	if !errors.As(err, &pe) || pe.Value != "plain value" || errors.Unwrap(pe) != nil {
		t.Fatalf("panic: %v", err)
	}
	s := stats(t, f)
	if s.CallbackCalls != 2 || s.CallbackDeclined != 2 || s.AnswersAssumedAbsent != 2 {
		t.Fatalf("stats: %+v", s)
	}
	// the goroutine, the filter and the library are fine afterwards
	if a, err := f.ContainsSource(ctx, []byte("z")); err == nil || a.Source != SourceNone {
		t.Fatalf("third call: %+v %v", a, err)
	}
	if _, err := f.Init(ctx, 100, 0.01); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.ContainsString(ctx, "x"); err != nil || ok {
		t.Fatalf("after the panics: %v %v", ok, err)
	}
}

// The token bucket bounds the fallback's calls: a burst of 2 at 1 per second, then refusals
// (the chain moves on) - counted.
func TestPolicyTokenBucket(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	var called atomic.Int64
	p := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumeAbsent), WithCallbackRate(1, 2),
		WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			called.Add(1)
			for i := range present {
				present[i] = true
			}
			return nil
		}))
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	sources := map[Source]int{}
	for i := 0; i < 6; i++ {
		a, err := f.ContainsSource(ctx, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		sources[a.Source]++
	}
	s := stats(t, f)
	t.Logf("sources %v, stats calls %d refused %d", sources, s.CallbackCalls, s.CallbackRefused)
	if s.CallbackCalls != called.Load() || int64(sources[SourceCallback]) != s.CallbackCalls ||
		int64(sources[SourceAssumedAbsent]) != s.CallbackRefused || s.CallbackCalls < 2 || s.CallbackRefused < 1 {
		t.Fatalf("bucket: %v %+v", sources, s)
	}
	// SetPolicy fills the bucket again
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	if a, _ := f.ContainsSource(ctx, []byte("x")); a.Source != SourceCallback {
		t.Fatalf("after SetPolicy: %+v", a)
	}
	// negative control: unlimited
	if err := f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumeAbsent),
		WithCallbackRate(0, 1), WithFallback(func(context.Context, [][]byte, []bool) error { return nil }))); err != nil {
		t.Fatal(err)
	}
	before := stats(t, f).CallbackRefused
	for i := 0; i < 6; i++ {
		if a, _ := f.ContainsSource(ctx, []byte("x")); a.Source != SourceCallback {
			t.Fatalf("unlimited: %+v", a)
		}
	}
	if stats(t, f).CallbackRefused != before {
		t.Fatal("unlimited bucket refused")
	}
}

// The snapshot answers like Redis did once the filter is deleted; a max age skips it.
func TestPolicySnapshot(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	if s := stats(t, f); s.SnapshotAge != -1 || s.SnapshotBytes != 0 {
		t.Fatalf("no snapshot yet: %+v", s)
	}
	wantCode(t, f.RefreshSnapshot(ctx), CodeNotInitialized, ErrNotInitialized)
	if _, err := f.Init(ctx, 5000, 0.01); err != nil {
		t.Fatal(err)
	}
	in, out := makeItems("in", 2000), makeItems("out", 2000)
	if _, err := f.AddMany(ctx, in); err != nil {
		t.Fatal(err)
	}
	fromRedis, err := f.ContainsMany(ctx, append(append([][]byte{}, in...), out...))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, ActionSnapshot, ActionError),
		WithSnapshotChunkBytes(4096))); err != nil {
		t.Fatal(err)
	}
	if err := f.RefreshSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	s := stats(t, f)
	info, _ := f.Info(ctx)
	if s.SnapshotRefreshes != 1 || s.SnapshotFailures != 1 || s.SnapshotBytes != int64((info.Size+7)/8) || s.SnapshotAge < 0 {
		t.Fatalf("after refresh: %+v (size %d)", s, info.Size)
	}
	if _, err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := f.ContainsManySource(ctx, append(append([][]byte{}, in...), out...))
	if err != nil || a.Source != SourceSnapshot || fmt.Sprint(a.Present) != fmt.Sprint(fromRedis) {
		t.Fatalf("snapshot answer: %v %v", a.Source, err)
	}
	if stats(t, f).AnswersSnapshot != 1 {
		t.Fatal("AnswersSnapshot")
	}
	// too old: skipped, the chain ends in ActionError
	if err := f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, ActionSnapshot, ActionError),
		WithSnapshotMaxAge(time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	wantCode(t, second(f.ContainsString(ctx, "in-1")), CodeNotInitialized, ErrNotInitialized)
}

// CLIENT PAUSE: after 3 timeouts the breaker opens and queries are answered at once from the
// chain, until a probe after the cooldown finds Redis again; the counters say so. Negative
// control: no policy, the plain timeout.
func TestPolicyBreakerClientPause(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithCommandTimeout(200*time.Millisecond))
	f := initFilter(t, c, 1000, 0.01)
	items := makeItems("k", 10)
	if _, err := f.AddMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPolicy(mustPolicy(t, WithBreaker(3, time.Second), WithChain(FailTimeout, ActionAssumePresent))); err != nil {
		t.Fatal(err)
	}
	r := raw(t)
	r.must(t, "CLIENT", "PAUSE", "1500", "ALL")
	start := time.Now()
	sources := map[Source]int{}
	var a BatchAnswer
	var err error
	for time.Since(start) < 8*time.Second {
		a, err = f.ContainsManySource(ctx, items)
		if err != nil {
			t.Fatalf("during the pause: %v", err)
		}
		for i, p := range a.Present {
			if !p {
				t.Fatalf("item %d absent (%v)", i, a.Source)
			}
		}
		sources[a.Source]++
		if a.Source == SourceRedis {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := stats(t, f)
	t.Logf("paused 1500 ms: sources %v; trips %d, rejected %d, probes %d, timeouts %d", sources, s.BreakerTrips,
		s.BreakerRejected, s.BreakerProbes, s.Failures[FailTimeout])
	if a.Source != SourceRedis || s.BreakerTrips != 1 || s.Breaker != BreakerClosed || s.Failures[FailTimeout] != 3 ||
		s.BreakerRejected < 1 || s.BreakerProbes < 1 || sources[SourceAssumedPresent] < 4 {
		t.Fatalf("breaker: %v %+v", sources, s)
	}
	// an add while paused: the timeout, never an assumed success
	r.must(t, "CLIENT", "PAUSE", "400", "ALL")
	wantCode(t, second(f.AddString(ctx, "during-pause")), CodeTimeout, ErrTimeout)
	time.Sleep(500 * time.Millisecond)
	// negative control: no policy
	if err := f.SetPolicy(nil); err != nil {
		t.Fatal(err)
	}
	r.must(t, "CLIENT", "PAUSE", "400", "ALL")
	wantCode(t, second(f.ContainsManySource(ctx, items)), CodeTimeout, ErrTimeout)
	time.Sleep(500 * time.Millisecond)
	// nothing was lost (checked with the default 1 s timeout: 200 ms is tight on a loaded machine)
	wantAllPresent(t, openFilter(t, openClient(t), f.Name()), items)
}

// A stopped server (a second redis-server of this test, stopped by its pid): the connection
// class goes to the Go fallback; without a policy the queries fail with ErrConn.
func TestPolicyServerStopped(t *testing.T) {
	ctx := context.Background()
	srv, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	c, err := Open(srv.url, WithCommandTimeout(500*time.Millisecond), WithConnectTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := uniqueName(t)
	f, err := c.Filter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := c.Filter(name, WithPolicy(mustPolicy(t, quick, WithRetries(1),
		WithChain(FailConnection, ActionRetry, ActionCallback, ActionError),
		WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			for i, it := range items {
				present[i] = string(it) == "known"
			}
			return nil
		}))))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := f.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	f.AddString(ctx, "known")
	srv.stopProcess()

	wantCode(t, second(f.ContainsString(ctx, "known")), CodeConn, ErrConn)
	for i := 0; i < 3; i++ {
		a, err := g.ContainsManySource(ctx, [][]byte{[]byte("known"), []byte("other")})
		if err != nil || a.Source != SourceCallback || !a.Present[0] || a.Present[1] {
			t.Fatalf("stopped server, call %d: %+v %v", i, a, err)
		}
	}
	s := stats(t, g)
	if s.AnswersCallback != 3 || s.Failures[FailConnection] < 3 || s.Retries < 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A Naive rebuild (delete, tryInit, add: the one that fails in production) in a goroutine while
// goroutines query: with a policy whose not-initialized and config-changed chains ask a Go
// fallback (the source of truth), no query fails. The negative control, without a policy, sees
// the errors the rebuild causes. The naive rotation's own window (between its delete and its
// tryInit) is two round trips, too short to be hit every time; so each rebuild first deletes the
// filter and holds it deleted until the readers have made queries, which makes the window
// certain in both halves (a run whose readers were never in it would fail either half).
func TestPolicyNaiveRotationWithFallback(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithPoolSize(8))
	name := uniqueName(t)
	known := makeItems("known", 3000)
	truth := map[string]bool{}
	for _, it := range known {
		truth[string(it)] = true
	}
	var fallbackCalls atomic.Int64
	fb := func(ctx context.Context, items [][]byte, present []bool) error {
		fallbackCalls.Add(1)
		for i, it := range items {
			present[i] = truth[string(it)]
		}
		return nil
	}
	policy := mustPolicy(t, WithCallbackRate(0, 1), WithRetries(0),
		WithChain(FailNotInitialized, ActionCallback, ActionError),
		WithChain(FailConfigChanged, ActionCallback, ActionError), WithFallback(fb))

	run := func(p *Policy) (queries, errs int64, first error) {
		f, err := c.Filter(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if p != nil {
			if err := f.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.Init(ctx, 10000, 0.01); err != nil {
			t.Fatal(err)
		}
		if _, err := f.AddMany(ctx, known); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var nq, ne atomic.Int64
		var once sync.Once
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if g%2 == 0 {
						_, err = f.ContainsString(ctx, string(known[(i*7+g)%len(known)]))
					} else {
						_, err = f.ContainsMany(ctx, known[(i*13)%2900:(i*13)%2900+5])
					}
					nq.Add(1)
					if err != nil {
						ne.Add(1)
						once.Do(func() { first = err })
					}
				}
			}(g)
		}
		for rebuild := 0; rebuild < 3 && err == nil; rebuild++ { // each opens the window once
			if _, err = f.Delete(ctx); err != nil {
				break
			}
			// held open until the readers were in it (bounded: the readers never block for long)
			for since, until := nq.Load(), time.Now().Add(5*time.Second); nq.Load() < since+16 && time.Now().Before(until); {
				time.Sleep(time.Millisecond)
			}
			err = f.Rotate(ctx, 10000, 0.01, Naive, func(r *Rotation) error {
				for i := 0; i < len(known); i += 100 {
					if err := r.AddMany(known[i : i+100]); err != nil {
						return err
					}
				}
				return nil
			}, WithBatch(20))
		}
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("Naive rotation: %v", err)
		}
		return nq.Load(), ne.Load(), first
	}

	before := fallbackCalls.Load()
	q, e, first := run(policy)
	calls := fallbackCalls.Load() - before
	t.Logf("with the fallback (3 rebuilds): %d queries, %d errors, %d fallback calls", q, e, calls)
	if e != 0 {
		t.Fatalf("with the fallback: %d errors of %d queries, first: %v", e, q, first)
	}
	if calls == 0 {
		t.Fatal("the fallback was never needed in 3 rebuilds: the harness missed the window")
	}
	q, e, first = run(nil)
	t.Logf("negative control (no policy, 3 rebuilds): %d queries, %d errors, first: %v", q, e, first)
	if e == 0 {
		t.Fatal("negative control: no error in 3 Naive rebuilds: the harness cannot fail")
	}
	if !errors.Is(first, ErrNotInitialized) && !errors.Is(first, ErrConfigChanged) {
		t.Fatalf("negative control: unexpected error %v", first)
	}
}

// Goroutines query through a Go fallback while others swap the policy: no crash (a callback on
// a nocallback path would abort the process), no error, and no handle left behind.
func TestPolicySetWhileQuerying(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	base := fallbacksLive.Load()
	withFB := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumePresent), WithCallbackRate(0, 1),
		WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			for i := range present {
				present[i] = true
			}
			return nil
		}))
	noFB := mustPolicy(t, WithChain(FailNotInitialized, ActionAssumePresent))
	if err := f.SetPolicy(noFB); err != nil { // before the first query: without a policy it fails
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var queries atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ok, err := f.ContainsString(ctx, "x"); err != nil || !ok {
					t.Errorf("query: %v %v", ok, err)
					return
				}
				queries.Add(1)
			}
		}()
	}
	for i := 0; i < 100; i++ {
		p := withFB
		if i%2 == 1 {
			p = noFB
		}
		if err := f.SetPolicy(p); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
	s := stats(t, f)
	t.Logf("%d queries, %d through the fallback, across 100 policy changes", queries.Load(), s.AnswersCallback)
	f.Close()
	fallbacksLeft(t, base)
}

// runtime.Goexit in the fallback (t.FailNow would do it) ends the querying goroutine; the filter
// is not left locked: SetPolicy, queries and Close still work.
func TestPolicyFallbackGoexit(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	base := fallbacksLive.Load()
	p := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionAssumeAbsent),
		WithFallback(func(context.Context, [][]byte, []bool) error {
			runtime.Goexit()
			return nil
		}))
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- returned }()
		f.ContainsString(ctx, "x")
		returned = true
	}()
	if <-done {
		t.Fatal("the query returned")
	}
	ok := make(chan error, 1)
	go func() { ok <- f.SetPolicy(mustPolicy(t, WithChain(FailNotInitialized, ActionAssumePresent))) }()
	select {
	case err := <-ok:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SetPolicy blocked after a Goexit in the fallback")
	}
	if present, err := f.ContainsString(ctx, "y"); err != nil || !present {
		t.Fatalf("after: %v %v", present, err)
	}
	f.Close()
	fallbacksLeft(t, base)
}
