package bloomguard

// What an operation in flight keeps alive, and what a close waits for: a Filter closed while its
// operations are in flight on the queue lets them finish with their answers; a Client closed while
// its first operation waits for a server that never answers returns at once.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

func TestFilterCloseWithOperationsInFlight(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 10000, 1e-9)
	if f.qs == nil {
		t.Skip("WithQueues(0) (BG_TEST_QUEUES=0): blocking calls, no queue to have operations in flight on")
	}
	items := make([]string, 40)
	for i := range items {
		items[i] = fmt.Sprintf("present-%d", i)
		if _, err := f.AddString(ctx, items[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := raw(t)
	r.must(t, "CLIENT", "PAUSE", "300", "ALL") // every reply held: all are in flight at the close
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i, it := range items {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if ok, err := f.ContainsString(ctx, it); err != nil || !ok {
				errs <- fmt.Errorf("Contains(%q) = %v, %v; want true", it, ok, err)
			}
		}()
		go func() {
			defer wg.Done()
			if ok, err := f.ContainsString(ctx, fmt.Sprintf("absent-%d", i)); err != nil || ok {
				errs <- fmt.Errorf("Contains(absent-%d) = %v, %v; want false", i, ok, err)
			}
		}()
	}
	if !waitFor(5*time.Second, func() bool { return f.qs.inflight() == int64(2*len(items)) }) {
		t.Fatalf("%d operations in flight, want %d", f.qs.inflight(), 2*len(items))
	}
	f.Close() // returns once they ended (each holds the handle open)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := f.ContainsString(ctx, items[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Contains after Close: %v, want ErrClosed", err)
	}
}

// The queue is closed (the filter and the client closed, the only operation cancelled) while its
// discovery of a server that never answers still runs: the closes return at once.
func TestCloseDuringDiscoveryIsPrompt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepted: connects complete, nothing answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Open("redis://"+ln.Addr().String(), append(testQueues(), WithConnectTimeout(2*time.Second),
		WithCommandTimeout(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Filter("silent")
	if err != nil {
		t.Fatal(err)
	}
	if f.qs == nil {
		f.Close()
		c.Close()
		t.Skip("WithQueues(0) (BG_TEST_QUEUES=0): blocking calls, no queue")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.ContainsString(ctx, "x")
		done <- err
	}()
	if !waitFor(5*time.Second, func() bool { return f.qs.inflight() == 1 }) {
		t.Fatal("the operation never went in flight")
	}
	time.Sleep(50 * time.Millisecond) // the discovery waits for the server now
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled operation: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled operation did not end")
	}
	t0 := time.Now()
	f.Close()
	c.Close() // the last reference: the queue closes, its discovery still waiting for the server
	took := time.Since(t0)
	bound := 50*time.Millisecond + machineLate(t0)
	if took > bound {
		t.Errorf("closing took %v while a discovery waited for a silent server (bound %v)", took, bound)
	}
}
