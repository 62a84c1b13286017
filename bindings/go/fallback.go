package bloomguard

/*
#include <stdint.h>
#include <stdlib.h>
#include <bloomguard.h>

// The //export of callbacks.go (declared here: a file with //export may not define C functions).
extern int bgoFallback(uintptr_t policy, uintptr_t query, uintptr_t driver, uint64_t tag, void *items, size_t *lens,
                       size_t n, uint8_t *present);

// The queue a driver runs on this thread and the driver's cgo.Handle (queue.go).
extern __thread bg_queue *bgo_driving;
extern __thread uintptr_t bgo_driver;

// The Go query running on this thread (a runtime/cgo.Handle), set around the library calls that
// may run the fallback: the library calls it on the querying thread, so the fallback learns which
// query it answers (its context, where to report a panic) without C holding a Go pointer.
static __thread uintptr_t bgo_query;

// The bg_fallback_fn of every policy with a Go fallback: userdata is the policy's cgo.Handle. For
// a submitted query the driver's queue says which operation runs (bg_queue_running), and the
// driver maps its tag to the request; a blocking query set bgo_query. The driver's side is asked
// first: a blocking query whose fallback called runtime.Goexit never restored bgo_query, and the
// thread may drive a queue later.
static int bgo_fallback(void *userdata, const void *const *items, const size_t *lens, size_t n,
                        uint8_t *present) {
	uint64_t tag = 0;
	if (bgo_driving && bg_queue_running(bgo_driving, &tag) == BG_OK)
		return bgoFallback((uintptr_t)userdata, 0, bgo_driver, tag, (void *)items, (size_t *)lens, n, present);
	return bgoFallback((uintptr_t)userdata, bgo_query, 0, 0, (void *)items, (size_t *)lens, n, present);
}

static int bgo_policy_set_fallback(bg_policy *p, uintptr_t handle) {
	return bg_policy_set_fallback(p, bgo_fallback, (void *)handle);
}

// The query path taken while the filter's policy has a Go fallback: not marked nocallback, and
// given C memory only (the goroutine's stack may move while the fallback runs).
static int bgo_contains_many_cb(bg_filter *f, bg_call *call, const void *const *items, const size_t *lens,
                                size_t n, uint8_t *present, uintptr_t query) {
	uintptr_t outer = bgo_query;
	bgo_query = query;
	int st = bg_filter_contains_many_ex(f, call, items, lens, n, present);
	bgo_query = outer;
	return st;
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

// The Go fallback of a policy: its type, how the library reaches it (a C adapter installed with
// the filter's cgo.Handle as userdata, the query's own handle in a C thread-local), and the query
// path used while a filter's policy has one. The //export itself is in callbacks.go.

// Fallback answers a degraded query when the chain reaches ActionCallback: it sets present[i] for
// items[i] and returns nil, or returns an error to decline (the chain moves on to its next action;
// what it wrote to present is dropped). It gets the query's ctx, and runs only during a query of a
// filter whose policy holds it (never after Filter.Close or SetPolicy replaced it and the queries
// under way ended). items are copies: they may be kept. It may be called by several goroutines at
// once, at most WithCallbackRate times per second per filter handle. It must not use the same
// filter (that can deadlock against SetPolicy and Close).
//
// Where it runs: the library calls it on the thread that drives the client's submission queue,
// inside the queue's poll (or inside the submit, when an open breaker sends a query to the chain
// at once); the driver runs it on a goroutine of its own and waits for it. Keep it quick: the
// other operations of that queue wait meanwhile. A filter call it makes with the ctx it was given
// (or one derived from it) is a blocking call, so that it does not wait for that driver; one made
// with another context may wait for ever. With WithQueues(0) it runs on the goroutine of the
// query, inside its blocking call.
//
// A panic in it is recovered before it can reach the library's frames: the library sees a
// decline, and the query fails with a *PanicError (whatever the rest of the chain answered).
// runtime.Goexit in it ends its goroutine and the query's (the query does not return); the filter
// stays usable. With WithQueues(0) the library's frames of that query are abandoned with what
// they held (a reference to the policy): do not rely on it.
type Fallback func(ctx context.Context, items [][]byte, present []bool) error

// PanicError is the error of a query whose Fallback panicked.
type PanicError struct {
	Value any    // what the fallback panicked with
	Stack []byte // the fallback's stack when it panicked
}

// Error says that the fallback panicked, and with what.
func (e *PanicError) Error() string {
	return fmt.Sprintf("bloomguard: the fallback panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// setFallback installs the C adapter with the handle of the filter's fallback box.
func setFallback(cp *C.bg_policy, h cgo.Handle) C.int {
	return C.bgo_policy_set_fallback(cp, C.uintptr_t(h))
}

type fallbackBox struct{ fn Fallback }

// fallbacksLive counts the policy handles that exist (tests check none is left behind).
var fallbacksLive atomic.Int64

// fallbackQuery is one query that may run the fallback: its context, and what the fallback left
// for it (a panic).
type fallbackQuery struct {
	ctx   context.Context
	panic *PanicError
}

// onFallback is the fallback callback (callbacks.go). It returns false to decline.
func onFallback(box *fallbackBox, q *fallbackQuery, items [][]byte, present []bool, inDriver bool) (answered bool) {
	ctx := context.Background()
	if q != nil {
		ctx = q.ctx
	}
	if inDriver { // filter calls made with this ctx must not wait for the driver that waits for this fallback
		ctx = context.WithValue(ctx, inFallbackKey{}, true)
	}
	defer func() {
		if v := recover(); v != nil {
			answered = false
			if q != nil && q.panic == nil {
				q.panic = &PanicError{Value: v, Stack: debug.Stack()}
			}
		}
	}()
	return box.fn(ctx, items, present) == nil
}

// inFallbackKey marks the ctx given to a fallback that a queue's driver runs (and the contexts
// derived from it): a filter call made with it is a blocking call (Filter.do), since the driver
// of its queue may be the one waiting for the fallback.
type inFallbackKey struct{}

// containsCallback is a query made while the filter's policy has a Go fallback: the batch is in C
// memory, so is present; the query's cgo.Handle reaches the fallback through bgo_query.
func containsCallback(ctx context.Context, p *C.bg_filter, c *call, b cItems, n int, present []bool) (C.int, *PanicError) {
	out := (*C.uint8_t)(C.malloc(C.size_t(max(n, 1))))
	defer C.free(unsafe.Pointer(out))
	q := &fallbackQuery{ctx: ctx}
	qh := cgo.NewHandle(q)
	defer qh.Delete()
	st := C.bgo_contains_many_cb(p, c.p, b.ptrs, b.lens, C.size_t(n), out, C.uintptr_t(qh))
	for i, v := range unsafe.Slice((*byte)(unsafe.Pointer(out)), n) {
		present[i] = v != 0
	}
	return st, q.panic
}
