package bloomguard

// Calls without a context deadline on a server that stalls (CLIENT PAUSE, SIGSTOP): each ends at
// the client's command timeout with ErrTimeout, never a connection error - single and batch
// queries and adds, the admin calls, a partitioned filter's fan-outs (all through the queue).
// The bound is the command timeout + 50 ms from the call, plus how late a goroutine sleeping 2 ms
// at a time woke meanwhile. Each stall has its control (after it the same calls answer, with
// their known answers); the negative control runs the same harness on a client whose command
// timeout is three times the one the bound is for - what a call retried with fresh waits looked
// like - and the harness must flag every call. The trickling reply is C's test
// (tests/c/test_queue_stall.c): these calls run over the same queue.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const stallCmdTimeout = 400 * time.Millisecond

type stallOp struct {
	name  string
	call  func(ctx context.Context) (any, error)
	check func(any) bool // the known answer (after the stall)
}

type stallOutcome struct {
	name string
	err  error
	took time.Duration
}

func stallItems(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func allTrue(v any) bool {
	bs, ok := v.([]bool)
	if !ok {
		return false
	}
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return len(bs) > 0
}

func runStallOps(ops []stallOp) ([]stallOutcome, []any) {
	out := make([]stallOutcome, len(ops))
	vals := make([]any, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			v, err := op.call(context.Background())
			out[i] = stallOutcome{op.name, err, time.Since(t0)}
			vals[i] = v
		}()
		time.Sleep(3 * time.Millisecond) // a FIFO of requests on each connection, as a busy service has
	}
	wg.Wait()
	return out, vals
}

// stallThrough runs every call through one stall on a server of its own: the calls that broke the
// rule (ErrTimeout within the bound), and all outcomes.
func stallThrough(t *testing.T, stall string, cmdTimeout time.Duration) (broke []string, outs []stallOutcome) {
	srv, err := startRedis()
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	defer srv.stop()
	c, err := Open(srv.url, WithCommandTimeout(cmdTimeout), WithQueues(1))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	ctx := context.Background()
	present, absent := stallItems("present", 40), stallItems("absent", 40)
	open := func(name string) *Filter {
		f, err := c.Filter(name)
		if err != nil {
			t.Fatalf("Filter: %v", err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f, aux, gone, p := open("stall"), open("stall-aux"), open("stall-gone"), open("stall-p")
	for _, step := range []error{
		func() error { _, err := f.Init(ctx, 100000, 0.001); return err }(),
		func() error { _, err := aux.Init(ctx, 100000, 0.001); return err }(),
		func() error { _, err := p.InitPartitioned(ctx, 100000, 0.001, 8); return err }(),
		func() error { _, err := f.AddMany(ctx, present); return err }(),
		func() error { _, err := p.AddMany(ctx, present); return err }(),
	} {
		if step != nil {
			t.Fatalf("setup: %v", step)
		}
	}
	any1 := func(v any) bool { return true }
	ops := []stallOp{
		{"ContainsMany", func(ctx context.Context) (any, error) { return f.ContainsMany(ctx, present) }, allTrue},
		{"AddMany", func(ctx context.Context) (any, error) { return f.AddMany(ctx, absent) }, any1},
		{"Contains", func(ctx context.Context) (any, error) { return f.Contains(ctx, present[0]) },
			func(v any) bool { return v == true }},
		{"Add", func(ctx context.Context) (any, error) { return f.Add(ctx, present[1]) },
			func(v any) bool { return v == false }},
		{"Count", func(ctx context.Context) (any, error) { return f.Count(ctx) }, any1},
		{"Info", func(ctx context.Context) (any, error) { return f.Info(ctx) }, any1},
		{"Init", func(ctx context.Context) (any, error) { return aux.Init(ctx, 100000, 0.001) },
			func(v any) bool { return v == false }},
		{"Expire", func(ctx context.Context) (any, error) { return aux.Expire(ctx, time.Hour) }, any1},
		{"Persist", func(ctx context.Context) (any, error) { return aux.Persist(ctx) }, any1},
		{"Delete", func(ctx context.Context) (any, error) { return gone.Delete(ctx) },
			func(v any) bool { return v == false }},
		{"partitioned Contains", func(ctx context.Context) (any, error) { return p.Contains(ctx, present[2]) },
			func(v any) bool { return v == true }},
		{"partitioned ContainsMany", func(ctx context.Context) (any, error) { return p.ContainsMany(ctx, present) },
			allTrue},
		{"partitioned AddMany", func(ctx context.Context) (any, error) { return p.AddMany(ctx, absent) }, any1},
	}
	control := func(when string) {
		outs, vals := runStallOps(ops)
		for i, o := range outs {
			if o.err != nil || !ops[i].check(vals[i]) {
				t.Errorf("%s, %s: %v, %v", when, o.name, vals[i], o.err)
			}
		}
	}
	control("before the stall") // every connection the calls use is up
	r, err := dialRESP(srv.addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer r.close()
	stalledAt := time.Now()
	if stall == "pause" {
		r.must(t, "CLIENT", "PAUSE", "1500", "ALL")
	} else {
		_ = srv.cmd.Process.Signal(syscall.SIGSTOP)
	}
	outs, _ = runStallOps(ops)
	if stall == "sigstop" {
		_ = srv.cmd.Process.Signal(syscall.SIGCONT)
	}
	late := machineLate(stalledAt) // the test run's probe (lateness_test.go)
	if err := srv.waitReady(10 * time.Second); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
	control("after the stall")
	bound := stallCmdTimeout + 50*time.Millisecond + late
	for _, o := range outs {
		if !errors.Is(o.err, ErrTimeout) || o.took > bound || (o.err != nil && strings.Contains(o.err.Error(), "cannot connect")) {
			broke = append(broke, fmt.Sprintf("%s: %v after %v (bound %v)", o.name, o.err, o.took.Round(time.Millisecond),
				bound.Round(time.Millisecond)))
		}
	}
	return broke, outs
}

func TestStalledServerCallsEndAtTheCommandTimeout(t *testing.T) {
	for _, stall := range []string{"pause", "sigstop"} {
		t.Run(stall, func(t *testing.T) {
			broke, outs := stallThrough(t, stall, stallCmdTimeout)
			for _, b := range broke {
				t.Errorf("%s", b)
			}
			t.Logf("%s: %d calls, %d broke the rule", stall, len(outs), len(broke))
		})
	}
}

func TestStalledServerNegativeControl(t *testing.T) {
	broke, outs := stallThrough(t, "pause", 3*stallCmdTimeout)
	if len(broke) != len(outs) {
		t.Errorf("the harness flagged %d of %d calls that waited 3x the timeout: %v", len(broke), len(outs), broke)
	}
}
