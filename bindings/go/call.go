package bloomguard

// #include <bloomguard.h>
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// maxCallTimeout is the longest per-call timeout bg_call_set_timeout_ms accepts (1 hour).
const maxCallTimeout = 3600000 * time.Millisecond

// call is one bg_call: the per-call timeout going in, the exact status and message coming out.
// A bg_call must not be shared by two calls in flight, so each network method takes one from the
// pool for its duration. Pooled objects dropped by the GC free their C memory through a cleanup.
type call struct {
	p           *C.bg_call
	hasDeadline bool
	stop        func() bool   // stops the context.AfterFunc that cancels the C call
	fired       chan struct{} // closed once that func has cancelled it
}

var callPool = sync.Pool{New: func() any {
	var p *C.bg_call
	if C.bg_call_new(&p) != C.BG_OK || p == nil {
		return nil
	}
	c := &call{p: p}
	runtime.AddCleanup(c, func(p *C.bg_call) { C.bg_call_free(p) }, p)
	return c
}}

// checkContext rejects a nil context and returns the error of one already done.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return errorf(CodeInvalid, "nil context.Context")
	}
	return ctx.Err()
}

// beginCall checks ctx and returns a call whose timeout is ctx's deadline (rounded up to a whole
// millisecond, at most an hour), or the client's command timeout when ctx has no deadline.
// An already cancelled or expired ctx returns ctx.Err() (or context.DeadlineExceeded) and no call.
func beginCall(ctx context.Context) (*call, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	var ms int64
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		d := time.Until(dl)
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		if d > maxCallTimeout {
			d = maxCallTimeout
		}
		ms = int64((d + time.Millisecond - 1) / time.Millisecond)
	}
	c, _ := callPool.Get().(*call)
	if c == nil {
		return nil, errorf(CodeNoMemory, "bg_call_new: out of memory")
	}
	c.hasDeadline = hasDeadline
	if st := C.bg_call_set_timeout_ms(c.p, C.int64_t(ms)); st != C.BG_OK {
		callPool.Put(c)
		return nil, newError(st, "bg_call_set_timeout_ms rejected the timeout")
	}
	c.watch(ctx)
	return c, nil
}

// watch makes the end of ctx cancel the C call in flight (bg_call_cancel, which is just an
// atomic store, from context.AfterFunc's goroutine): every wait inside the library - a lock,
// another rotation, a write-locked filter, the policy's backoff - then ends within about 50ms
// with BG_ECANCELED, leaving nothing behind. A context that can never end costs nothing.
func (c *call) watch(ctx context.Context) {
	if ctx.Done() == nil {
		return
	}
	fired := make(chan struct{})
	p := c.p
	c.fired = fired
	c.stop = context.AfterFunc(ctx, func() {
		C.bg_call_cancel(p)
		close(fired)
	})
}

// unwatch stops the cancelling func, or waits for it if it already runs, and clears the C
// call's cancel flag: the pooled object must not cancel its next call.
func (c *call) unwatch() {
	if c.stop != nil && !c.stop() {
		<-c.fired
	}
	c.stop, c.fired = nil, nil
	C.bg_call_clear_cancel(c.p) // also after a cancel by Lock.Close
}

// cancelled turns the BG_ECANCELED of a call whose ctx ended into an error of code (the wait's
// own: CodeLocked for a lock wait, CodeRotationInProgress for a rotation's, CodeCanceled for the
// others) that also unwraps to ctx.Err(); a deadline that ended a wait of a filter call is a
// timeout (ErrTimeout and context.DeadlineExceeded), as when the library's own deadline ends it.
func cancelled(ctx context.Context, code Code, msg string) error {
	msg = inGoWords(msg)
	cerr := contextError(ctx)
	if cerr == nil {
		return errorf(CodeCanceled, msg)
	}
	if code == CodeCanceled && cerr == context.DeadlineExceeded {
		code = CodeTimeout
	}
	return &Error{Code: code, cause: cerr, Message: msg + " (stopped waiting: " + cerr.Error() + ")"}
}

// end returns the call to the pool and turns st into an error carrying this call's own message.
func (c *call) end(ctx context.Context, st C.int) error {
	c.unwatch()
	var err error
	if st != C.BG_OK {
		err = statusError(ctx, st, C.GoString(C.bg_call_errmsg(c.p)), c.hasDeadline)
	}
	callPool.Put(c)
	return err
}

// statusError is the error of a filter call that ended with st and its message msg (nil for
// BG_OK): a cancel by ctx is ErrCanceled and ctx.Err() (see cancelled); a timeout of a call whose
// timeout was ctx's deadline also unwraps to context.DeadlineExceeded.
func statusError(ctx context.Context, st C.int, msg string, hasDeadline bool) error {
	switch {
	case st == C.BG_OK:
		return nil
	case st == C.BG_ECANCELED:
		return cancelled(ctx, CodeCanceled, msg)
	case hasDeadline:
		return withDeadline(ctx, newError(st, msg))
	}
	return newError(st, msg)
}

// takeCall is a pooled bg_call for a submitted operation: the driver sets its timeout; the
// queue, not the call, is what a cancel goes through (bg_queue_cancel), so it needs no watch.
func takeCall() (*call, error) {
	c, _ := callPool.Get().(*call)
	if c == nil {
		return nil, errorf(CodeNoMemory, "bg_call_new: out of memory")
	}
	return c, nil
}

// release returns an unused call to the pool.
func (c *call) release() {
	c.unwatch()
	callPool.Put(c)
}

// gate bounds how many blocking calls of one client (with its filters) are inside C at once (the
// queue's calls hold no thread and pass no gate). A call blocked in C holds an OS thread: without the gate, thousands of goroutines queueing for a
// pool of 4 connections would each hold a thread (and Go aborts the program at 10,000 threads).
// Waiting here costs a goroutine only. The bound is well above the pool size, so the library's
// own pool wait (and its "all connections busy" error) still works as documented.
type gate chan struct{}

const minInFlight = 256

func newGate(poolSize int64) gate {
	n := int64(minInFlight)
	if 2*poolSize > n {
		n = 2 * poolSize
	}
	return make(gate, n)
}

// enter waits for a slot; ctx ends the wait. A deadline reached here is a timeout like one
// reached in C (ErrTimeout and context.DeadlineExceeded).
func (g gate) enter(ctx context.Context) error {
	select {
	case g <- struct{}{}:
		return nil
	default:
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return &Error{Code: CodeTimeout, cause: context.DeadlineExceeded, Message: fmt.Sprintf(
				"the deadline passed while %d calls of this client were in progress", cap(g))}
		}
		return ctx.Err()
	}
}

func (g gate) leave() { <-g }
