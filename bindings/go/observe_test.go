package bloomguard

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// events collects what an event handler hears.
type events struct {
	mu sync.Mutex
	ev []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

// waitFor waits (bounded) until an event of kind was heard: its index, or -1.
func (e *events) waitFor(kind EventKind, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		e.mu.Lock()
		for i, ev := range e.ev {
			if ev.Kind == kind {
				e.mu.Unlock()
				return i
			}
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *events) get(i int) Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ev[i]
}

// syncBuffer is a bytes.Buffer a slog handler may write from the events goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A real breaker trip (CLIENT PAUSE) and a real rotation reach the handler and the slog logger
// (Warn for the breaker opening, Info for the rotation); the client's URL carries a password that
// no log line holds. The control: a client without a logger or handler hears nothing (its events
// counter stays 0) through the same faults.
func TestEventsBreakerAndRotation(t *testing.T) {
	ctx := context.Background()
	r := raw(t)
	const password = "go-obs-Secret-pw"
	r.must(t, "ACL", "SETUSER", "goobs", "on", ">"+password, "~*", "&*", "+@all")
	defer r.must(t, "ACL", "DELUSER", "goobs")
	url := fmt.Sprintf("redis://goobs:%s@%s", password, testServer.addr)
	var heard events
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := Open(url, WithCommandTimeout(200*time.Millisecond), WithLogger(logger), WithEventHandler(heard.add))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	quiet := openClient(t, WithCommandTimeout(200*time.Millisecond)) // the control
	for _, cl := range []*Client{c, quiet} {
		f := initFilter(t, cl, 1000, 0.01)
		if err := f.SetPolicy(mustPolicy(t, WithBreaker(2, 300*time.Millisecond),
			WithChain(FailTimeout, ActionAssumePresent))); err != nil {
			t.Fatal(err)
		}
		r.must(t, "CLIENT", "PAUSE", "1200", "ALL")
		for i := 0; i < 4; i++ {
			if _, err := f.Contains(ctx, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		r.must(t, "PING") // the pause is over
		time.Sleep(350 * time.Millisecond)
		if _, err := f.Contains(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := f.Rotate(ctx, 1000, 0.01, Swap, func(rot *Rotation) error { return rot.Add([]byte("x")) }); err != nil {
			t.Fatal(err)
		}
	}
	open := heard.waitFor(EventBreakerOpen, 5*time.Second)
	closed := heard.waitFor(EventBreakerClosed, 5*time.Second)
	commit := heard.waitFor(EventRotationCommit, 5*time.Second)
	if open < 0 || closed < open || commit < 0 {
		t.Fatalf("events: open %d, closed %d, commit %d: %+v", open, closed, commit, heard.ev)
	}
	if e := heard.get(open); e.Status != CodeTimeout || e.Count != 2 || e.Duration != 300*time.Millisecond ||
		!strings.HasPrefix(e.Name, "go:") {
		t.Fatalf("breaker open: %+v", e)
	}
	if e := heard.get(commit); e.Strategy != Swap || e.Items != 1 || e.Bytes <= 0 || e.Duration <= 0 {
		t.Fatalf("rotation commit: %+v", e)
	}
	if heard.waitFor(EventDegraded, time.Second) < 0 {
		t.Fatal("no degraded event")
	}
	text := logs.String()
	for _, want := range []string{`"level":"WARN","msg":"circuit breaker of filter`, `"event":"breaker_open"`,
		`"level":"INFO","msg":"rotation of filter`, `"event":"rotation_commit"`, `"strategy":"swap"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, password) || !strings.Contains(url, password) {
		t.Fatalf("the password is in the log:\n%s", text)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	q, err := quiet.Stats()
	if err != nil {
		t.Fatal(err)
	}
	heard.mu.Lock()
	n := int64(len(heard.ev))
	heard.mu.Unlock()
	if s.Events < 5 || s.Events != n || q.Events != 0 || s.Connections < 1 {
		t.Fatalf("events counted %d (heard %d), without an observer %d; connections %d", s.Events, n, q.Events,
			s.Connections)
	}
}

// The histograms count the operations made, by operation and outcome, and agree with the
// counters; WithHistograms(false) records nothing (the control).
func TestHistogramsCountOperations(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		c := openClient(t, WithHistograms(on))
		f := initFilter(t, c, 1000, 0.01)
		for i := 0; i < 7; i++ {
			if _, err := f.Add(ctx, []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 12; i++ {
			if _, err := f.Contains(ctx, []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		missing := openFilter(t, c, uniqueName(t))
		if _, err := missing.Count(ctx); err == nil {
			t.Fatal("Count of a missing filter succeeded")
		}
		hs, err := f.Histograms()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, h := range hs {
			got[h.Operation.String()+"/"+h.Outcome.String()] = h.Count
			var sum uint64
			for _, n := range h.Counts {
				sum += n
			}
			if sum != h.Count || len(h.Counts) != len(h.Bounds)+1 || h.Sum <= 0 {
				t.Fatalf("%+v", h)
			}
		}
		miss, err := missing.Histogram(OpCount, OutcomeNotInitialized)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{"contains/ok": 12, "add/ok": 7, "init/ok": 1}
		if !on {
			want = map[string]uint64{}
			if miss.Count != 0 {
				t.Fatalf("histograms off: %+v", miss)
			}
		} else if miss.Count != 1 {
			t.Fatalf("count of a missing filter: %+v", miss)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("histograms (on=%v): %v, want %v", on, got, want)
		}
		if open := c.OpenFilters(); len(open) != 2 {
			t.Fatalf("open filters: %d", len(open))
		}
		missing.Close()
		if open := c.OpenFilters(); len(open) != 1 || open[0] != f {
			t.Fatalf("open filters after a close: %v", open)
		}
	}
	if HistogramBounds[0] != 1e-6 || HistogramBounds[HistogramBuckets-2] != 134.217728 {
		t.Fatalf("bounds %v", HistogramBounds)
	}
}
