package bloomguard

// The submission queue underneath the filter calls (queue.go): OS threads with calls in flight,
// cancels and deadlines reaching C, thousands of goroutines under faults with known answers, and
// what is left once everything is closed.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond every ms until it holds or limit passes; whether it held.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

const threadsGoroutines, threadsBound = 1024, 40

// 1,024 goroutines with a Contains in flight each (the server paused, so none can finish) use at
// most 40 OS threads. Each side runs in a process of its own (this test binary again), so that
// threads earlier tests made do not count. The negative control runs the same in a process whose
// client makes blocking calls (WithQueues(0)): there the count goes past the bound - the count is
// real.
func TestThreadsWithCallsInFlight(t *testing.T) {
	if os.Getenv("BG_THREADS_CHILD") != "" {
		t.Skip("in the child")
	}
	child := func(mode string) (threads, inflight int) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "BG_THREADS_CHILD="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s child: %v\n%s", mode, err, out)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "THREADS %d INFLIGHT %d", &threads, &inflight); err == nil {
				return threads, inflight
			}
		}
		t.Fatalf("%s child printed no THREADS line:\n%s", mode, out)
		return 0, 0
	}
	threads, inflight := child("queue")
	t.Logf("queues: %d OS threads with %d calls in flight (%d goroutines)", threads, inflight, threadsGoroutines)
	if inflight != threadsGoroutines {
		t.Errorf("%d calls in flight, want %d", inflight, threadsGoroutines)
	}
	if threads > threadsBound {
		t.Errorf("%d OS threads with %d calls in flight: more than %d", threads, inflight, threadsBound)
	}
	threads, inflight = child("blocking")
	t.Logf("negative control, blocking calls: %d OS threads with %d calls in C", threads, inflight)
	if threads <= threadsBound {
		t.Errorf("the negative control (blocking calls) had %d OS threads with %d calls in C: the count proves nothing",
			threads, inflight)
	}
}

// TestThreadsChild is one side of TestThreadsWithCallsInFlight, in its own process.
func TestThreadsChild(t *testing.T) {
	mode := os.Getenv("BG_THREADS_CHILD")
	if mode == "" {
		t.Skip("run by TestThreadsWithCallsInFlight")
	}
	queues := 1
	if mode == "blocking" {
		queues = 0
	}
	ctx := context.Background()
	c := openClient(t, WithQueues(queues), WithCommandTimeout(20*time.Second))
	f := initFilter(t, c, 1000, 0.01)
	if _, err := f.AddString(ctx, "x"); err != nil { // connects the queue (or the pool) first
		t.Fatal(err)
	}
	raw(t).must(t, "CLIENT", "PAUSE", "2500", "ALL")
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < threadsGoroutines; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := f.ContainsString(ctx, "x"); err != nil || !ok {
				failed.Add(1)
			}
		}()
	}
	inC := func() int {
		if c.h.qs != nil {
			return int(c.h.qs.inflight())
		}
		return len(c.g) // blocking: the calls let into C (the others wait for the gate)
	}
	want := threadsGoroutines
	if c.h.qs == nil {
		want = cap(c.g)
	}
	if !waitFor(2*time.Second, func() bool { return inC() == want }) {
		t.Fatalf("%d calls in flight after 2 s, want %d", inC(), want)
	}
	peak := threadPeak(t)
	time.Sleep(300 * time.Millisecond)
	most := peak()
	fmt.Printf("THREADS %d INFLIGHT %d\n", most, inC())
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d calls failed or answered wrong after the pause", failed.Load())
	}
}

// chaosCounts is what the readers of one chaosRun saw.
type chaosCounts struct {
	answers, falseNeg, crossed      atomic.Int64
	timeouts, cancels, conns        atomic.Int64 // the expected failures: a deadline, a cancel, a killed connection
	unexpected                      atomic.Int64
	firstUnexpected                 atomic.Value
	rotations, rotationErrs, faults atomic.Int64
	firstRotationErr                atomic.Value
}

func (c *chaosCounts) String() string {
	first, _ := c.firstUnexpected.Load().(string)
	rot, _ := c.firstRotationErr.Load().(string)
	return fmt.Sprintf("%d answers, %d false negatives, %d crossed; failures: %d deadlines, %d cancels, %d connections "+
		"lost, %d unexpected %q; %d rotations (%d failed %q), %d kills and pauses", c.answers.Load(), c.falseNeg.Load(),
		c.crossed.Load(), c.timeouts.Load(), c.cancels.Load(), c.conns.Load(), c.unexpected.Load(), first,
		c.rotations.Load(), c.rotationErrs.Load(), rot, c.faults.Load())
}

// classify counts a failed call by what it is; a deadline or a cancel is expected only when the
// call's ctx had one (and must then unwrap to ctx.Err()).
func (c *chaosCounts) classify(err error, hadDeadline, hadCancel bool) {
	switch {
	case errors.Is(err, ErrTimeout) && hadDeadline && errors.Is(err, context.DeadlineExceeded):
		c.timeouts.Add(1)
	case errors.Is(err, ErrCanceled) && hadCancel && errors.Is(err, context.Canceled):
		c.cancels.Add(1)
	case err == context.DeadlineExceeded && hadDeadline: // expired before the call began: ctx.Err()
		c.timeouts.Add(1)
	case errors.Is(err, ErrLocked) && hadDeadline: // the deadline ended a wait for a Locked rotation's write lock
		c.timeouts.Add(1)
	case err == context.Canceled && hadCancel: // cancelled before the call began
		c.cancels.Add(1)
	case errors.Is(err, ErrConn):
		c.conns.Add(1)
	default:
		c.unexpected.Add(1)
		c.firstUnexpected.CompareAndSwap(nil, err.Error())
	}
}

// chaosRun: goroutines readers query one filter through the client's queues for dur - present
// and absent items with known answers (fpp 1e-9: an absent item answered present is an answer
// that went to the wrong caller), one at a time and in batches of 8, some under a short deadline
// and some cancelled at a random moment - while a rotator rebuilds the filter with strategies in
// turn (to other parameters each time), the server's connections are killed (CLIENT KILL) and the
// server is paused for 40 ms now and then (deadlines expire in flight). It returns the counts once
// every goroutine ended (a hang fails the test), having closed everything and checked that no
// goroutine was left behind.
// chaosRun runs the chaos for at least dur, then on until enough(counts) holds - the faults the
// caller judges by were seen - at most 10 times dur (a slow machine, emulation: the run lasts
// longer rather than judging too little).
func chaosRun(t *testing.T, readers int, dur time.Duration, strategies []Strategy,
	enough func(*chaosCounts) bool) *chaosCounts {
	t.Helper()
	baseGoroutines := runtime.NumGoroutine()
	bg := context.Background()
	c, err := Open(testServer.url, WithQueues(2), WithCommandTimeout(5*time.Second),
		WithWriteLockWait(10*time.Second), WithConfigRetries(50))
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName(t)
	f, err := c.Filter(name)
	if err != nil {
		t.Fatal(err)
	}
	const fpp = 1e-9
	present, absent := makeItems(name+"-in-", 500), makeItems(name+"-out-", 500)
	if _, err := f.Init(bg, 500, fpp); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddMany(bg, present); err != nil {
		t.Fatal(err)
	}
	counts := &chaosCounts{}
	stop := make(chan struct{})
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; !stopped.Load(); i++ {
				ctx, hadDeadline, hadCancel := bg, false, false
				var cancel context.CancelFunc = func() {}
				switch i % 10 {
				case 1:
					ctx, cancel = context.WithTimeout(bg, time.Duration(1+i%20)*time.Millisecond)
					hadDeadline = true
				case 2:
					ctx, cancel = context.WithCancel(bg)
					time.AfterFunc(time.Duration(i%3000)*time.Microsecond, cancel)
					hadCancel = true
				}
				k := (i * 7) % len(present)
				if i%10 == 3 { // a batch: 4 present, 4 absent, interleaved
					batch := make([][]byte, 8)
					for j := range batch {
						if j%2 == 0 {
							batch[j] = present[(k+j)%len(present)]
						} else {
							batch[j] = absent[(k+j)%len(absent)]
						}
					}
					got, err := f.ContainsMany(ctx, batch)
					if err != nil {
						counts.classify(err, hadDeadline, hadCancel)
					} else {
						counts.answers.Add(1)
						for j, p := range got {
							if j%2 == 0 && !p {
								counts.falseNeg.Add(1)
							} else if j%2 == 1 && p {
								counts.crossed.Add(1)
							}
						}
					}
				} else {
					want := i%2 == 0
					item := present[k]
					if !want {
						item = absent[k]
					}
					got, err := f.Contains(ctx, item)
					switch {
					case err != nil:
						counts.classify(err, hadDeadline, hadCancel)
					case want && !got:
						counts.falseNeg.Add(1)
					case !want && got:
						counts.crossed.Add(1)
					default:
						counts.answers.Add(1)
					}
				}
				cancel()
			}
		}()
	}
	// the rotator: a filter handle of its own on the same client; the stop ends its wait for
	// another rotation's lease (one whose connection was killed)
	rctx, rcancel := context.WithCancel(bg)
	defer rcancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rf, err := c.Filter(name)
		if err != nil {
			t.Error(err)
			return
		}
		defer rf.Close()
		for i := 0; !stopped.Load(); i++ {
			n := int64(500 + 250*(i%2)) // other parameters each time
			err := rf.Rotate(rctx, n, fpp, strategies[i%len(strategies)], func(r *Rotation) error {
				return r.AddMany(present)
			}, WithWait(10*time.Second))
			if rctx.Err() != nil {
				return
			}
			counts.rotations.Add(1)
			if err != nil {
				counts.rotationErrs.Add(1)
				counts.firstRotationErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	// faults: CLIENT KILL of every connection but this one, and short pauses
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := raw(t)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(70 * time.Millisecond):
			}
			if i%3 == 2 {
				r.do("CLIENT", "PAUSE", "40", "ALL")
			} else {
				r.do("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
			}
			counts.faults.Add(1)
		}
	}()
	time.Sleep(dur)
	for limit := time.Now().Add(9 * dur); !enough(counts) && time.Now().Before(limit); {
		time.Sleep(dur / 10)
	}
	stopped.Store(true)
	close(stop)
	rcancel()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines still running 60 s after the stop (a hang): %s\n%s", counts, buf[:runtime.Stack(buf, true)])
	}
	if c.h.qs.inflight() != 0 {
		t.Errorf("%d operations still in the queues once every call returned", c.h.qs.inflight())
	}
	f.Delete(bg)
	f.Close()
	c.Close()
	if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() <= baseGoroutines }) {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after everything was closed, %d before:\n%s", runtime.NumGoroutine(), baseGoroutines,
			buf[:runtime.Stack(buf, true)])
	}
	return counts
}

// Thousands of goroutines with known answers through the queues while the filter is rotated
// (Swap and Locked, to other parameters each time), connections are killed, the server pauses,
// deadlines expire in flight and contexts are cancelled at random: no false negative, no answer
// that went to another caller, only the failures those faults explain, no hang, nothing left.
func TestQueueChaos(t *testing.T) {
	readers, dur := 2000, 3*time.Second
	if raceEnabled || testing.Short() {
		readers, dur = 1000, 2*time.Second
	}
	enough := func(c *chaosCounts) bool {
		return c.answers.Load() >= int64(readers) && c.rotations.Load() >= 3 && c.timeouts.Load() > 0 &&
			c.cancels.Load() > 0
	}
	c := chaosRun(t, readers, dur, []Strategy{Swap, Locked}, enough)
	t.Logf("%d goroutines, at least %v: %s", readers, dur, c)
	if c.falseNeg.Load() != 0 || c.crossed.Load() != 0 || c.unexpected.Load() != 0 || c.rotationErrs.Load() > c.rotations.Load()/2 {
		t.Errorf("%s", c)
	}
	// the faults happened, and reached the callers
	if !enough(c) {
		t.Errorf("too little happened to judge, in 10 times %v: %s", dur, c)
	}
}

// The negative controls of TestQueueChaos: the harness sees naive rotations (delete, then
// rebuild: readers meet a missing or half-built filter), and answers handed to the wrong caller
// (faultCrossed).
func TestQueueChaosNegativeControls(t *testing.T) {
	c := chaosRun(t, 500, 1500*time.Millisecond, []Strategy{Naive}, func(c *chaosCounts) bool {
		return c.falseNeg.Load() > 0 || c.unexpected.Load() > 0
	})
	t.Logf("naive rotations: %s", c)
	if c.falseNeg.Load() == 0 && c.unexpected.Load() == 0 {
		t.Errorf("naive rotations went unnoticed: %s", c)
	}
	faultCrossed.Store(true)
	defer faultCrossed.Store(false)
	c = chaosRun(t, 500, time.Second, []Strategy{Swap}, func(c *chaosCounts) bool {
		return c.crossed.Load() > 0 && c.falseNeg.Load() > 0
	})
	t.Logf("answers crossed by the driver (faultCrossed): %s", c)
	if c.crossed.Load() == 0 || c.falseNeg.Load() == 0 {
		t.Errorf("crossed answers went unnoticed: %s", c)
	}
}

// The end of a call's context ends its operation in C at once (bg_queue_cancel), even with its
// request already sent to a paused server: the call returns within a few ms with ErrCanceled and
// context.Canceled, nothing of it stays in the queue, and its late reply reaches no one. The
// negative control is the same harness on blocking calls, whose sent round trip a cancel does not
// end: it returns only after the pause.
func TestQueueCancelReachesC(t *testing.T) {
	round := func(queues int) (time.Duration, error, int64) {
		bg := context.Background()
		c := openClient(t, WithQueues(queues), WithCommandTimeout(5*time.Second))
		f := initFilter(t, c, 1000, 0.01)
		if _, err := f.AddString(bg, "present"); err != nil {
			t.Fatal(err)
		}
		r := raw(t)
		r.must(t, "CLIENT", "PAUSE", "800", "ALL")
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := f.ContainsString(ctx, "present")
		elapsed := time.Since(start)
		var left int64
		if c.h.qs != nil {
			left = c.h.qs.inflight()
		}
		r.must(t, "PING") // the pause is over
		for _, item := range []string{"absent", "present"} {
			if ok, err := f.ContainsString(bg, item); err != nil || ok != (item == "present") {
				t.Errorf("queues %d: after the cancel, %s: %v %v", queues, item, ok, err)
			}
		}
		return elapsed, err, left
	}
	elapsed, err, left := round(1)
	t.Logf("queue: cancelled after %v: %v", elapsed, err)
	wantCode(t, err, CodeCanceled, ErrCanceled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("not context.Canceled: %v", err)
	}
	if bound := 100*time.Millisecond + machineLate(time.Now().Add(-elapsed)); elapsed > bound || left != 0 {
		t.Errorf("the cancel at 50 ms ended the call after %v (bound %v), %d operations left in the queue", elapsed,
			bound, left)
	}
	elapsed, err, _ = round(0)
	t.Logf("negative control, blocking call: returned after %v: %v", elapsed, err)
	if elapsed < 700*time.Millisecond {
		t.Errorf("the blocking call's sent round trip ended after %v: the harness cannot tell", elapsed)
	}
}

// A fallback run by the driver gets the context of the query it answers for, among many in
// flight - run inside a poll (a missing filter), and inside a submit (an open breaker) - and its
// panic fails that query only. The negative control tells the fallback another operation's tag
// (faultFallbackTag): the harness sees the wrong contexts.
func TestQueueFallbackKnowsItsQuery(t *testing.T) {
	type key struct{}
	run := func(t *testing.T, missing bool) (answered, wrong, panics, other int64) {
		bg := context.Background()
		c := openClient(t, WithQueues(1), WithCommandTimeout(100*time.Millisecond))
		f := openFilter(t, c, uniqueName(t))
		var chain PolicyOption = WithChain(FailNotInitialized, ActionCallback, ActionError)
		if !missing {
			if _, err := f.Init(bg, 1000, 0.01); err != nil {
				t.Fatal(err)
			}
			chain = WithChain(FailTimeout, ActionCallback, ActionError)
		}
		var nWrong atomic.Int64
		p := mustPolicy(t, chain, WithCallbackRate(0, 1), WithBreaker(1, time.Minute),
			WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
				want, _ := ctx.Value(key{}).(string)
				if len(items) != 1 || string(items[0]) != want {
					nWrong.Add(1)
				}
				if strings.HasSuffix(want, "-panic") {
					panic(want)
				}
				present[0] = true
				return nil
			}))
		if err := f.SetPolicy(p); err != nil {
			t.Fatal(err)
		}
		if !missing { // one query times out on a paused server: the breaker opens, the rest go to the chain at submit
			r := raw(t)
			r.must(t, "CLIENT", "PAUSE", "400", "ALL")
			if a, err := f.ContainsSource(context.WithValue(bg, key{}, "first"), []byte("first")); err != nil ||
				a.Source != SourceCallback {
				t.Fatalf("the first query: %+v %v", a, err)
			}
			defer r.must(t, "PING")
		}
		var nAnswered, nPanics, nOther atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 100; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					item := fmt.Sprintf("g%d-i%d", g, i)
					if i == 7 {
						item += "-panic"
					}
					a, err := f.ContainsSource(context.WithValue(bg, key{}, item), []byte(item))
					var pe *PanicError
					switch {
					case errors.As(err, &pe) && pe.Value == item:
						nPanics.Add(1)
					case err == nil && a.Present && a.Source == SourceCallback:
						nAnswered.Add(1)
					default:
						nOther.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if s := stats(t, f); !missing && s.BreakerRejected < 2000 {
			t.Errorf("%d queries went to the chain at submit (the breaker open), want 2000", s.BreakerRejected)
		}
		return nAnswered.Load(), nWrong.Load(), nPanics.Load(), nOther.Load()
	}
	for _, missing := range []bool{true, false} {
		where := map[bool]string{true: "in the poll (missing filter)", false: "in the submit (open breaker)"}[missing]
		answered, wrong, panics, other := run(t, missing)
		t.Logf("%s: %d answered, %d panics, %d other; %d fallback calls with another query's context", where,
			answered, panics, other, wrong)
		if answered != 1900 || panics != 100 || other != 0 || wrong != 0 {
			t.Errorf("%s: %d answered (want 1900), %d panics (want 100), %d other, %d with another context", where,
				answered, panics, other, wrong)
		}
	}
	faultFallbackTag.Store(true)
	defer faultFallbackTag.Store(false)
	_, wrong, _, _ := run(t, true)
	t.Logf("negative control (the fallback told another tag): %d calls with another query's context", wrong)
	if wrong == 0 {
		t.Errorf("the negative control saw no fallback with another query's context")
	}
}

// A fallback that asks another filter of the same client, with the ctx it was given, gets its
// answer: that call is a blocking one, not a request to the driver that waits for the fallback.
func TestQueueFallbackCallsTheSameClient(t *testing.T) {
	bg := context.Background()
	c := openClient(t, WithQueues(1))
	backup := initFilter(t, c, 1000, 0.01)
	if _, err := backup.AddString(bg, "in-backup"); err != nil {
		t.Fatal(err)
	}
	f := openFilter(t, c, uniqueName(t)) // missing: its queries go to the fallback
	p := mustPolicy(t, WithChain(FailNotInitialized, ActionCallback, ActionError), WithCallbackRate(0, 1),
		WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			got, err := backup.ContainsMany(ctx, items)
			copy(present, got)
			return err
		}))
	if err := f.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		a, err := f.ContainsManySource(bg, [][]byte{[]byte("in-backup"), []byte("not-anywhere")})
		if err == nil && (!a.Present[0] || a.Present[1] || a.Source != SourceCallback) {
			err = fmt.Errorf("answers %v from %v", a.Present, a.Source)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fallback's call to the same client did not return (the driver waits for it)")
	}
}
