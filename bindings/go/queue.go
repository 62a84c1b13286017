package bloomguard

/*
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <bloomguard.h>

// What a request asks (request.op); the same numbers as the Go constants op*.
enum { BGO_CONTAINS = 1, BGO_CONTAINS_MANY, BGO_ADD, BGO_ADD_MANY, BGO_COUNT, BGO_INFO, BGO_INIT, BGO_DELETE,
       BGO_EXPIRE, BGO_PERSIST, BGO_INIT_NATIVE };

// The queue a driver is running on this thread, and the driver's cgo.Handle, while it submits or
// polls: the fallback adapter (fallback.go) learns from them which request it answers for.
__thread bg_queue *bgo_driving;
__thread uintptr_t bgo_driver;

// One submit: the call's timeout (0: none beyond the client's command timeout per request), then
// the operation. Refused: the status, the message on the call.
static int bgo_submit(bg_queue *q, uintptr_t driver, uint64_t tag, int op, bg_filter *f, bg_call *call,
                      int64_t timeout_ms, const void *item, size_t len, const void *const *items,
                      const size_t *lens, size_t n, int64_t arg, double fpp, int64_t parts) {
	int st = bg_call_set_timeout_ms(call, timeout_ms);
	if (st != BG_OK) return st;
	bg_queue *outer_q = bgo_driving;
	uintptr_t outer_d = bgo_driver;
	bgo_driving = q;
	bgo_driver = driver;
	switch (op) {
	case BGO_CONTAINS: st = bg_filter_contains_submit_ex(f, call, q, tag, item, len); break;
	case BGO_CONTAINS_MANY: st = bg_filter_contains_many_submit_ex(f, call, q, tag, items, lens, n); break;
	case BGO_ADD: st = bg_filter_add_submit_ex(f, call, q, tag, item, len); break;
	case BGO_ADD_MANY: st = bg_filter_add_many_submit_ex(f, call, q, tag, items, lens, n); break;
	case BGO_COUNT: st = bg_filter_count_submit_ex(f, call, q, tag); break;
	case BGO_INFO: st = bg_filter_info_submit_ex(f, call, q, tag); break;
	case BGO_INIT: st = bg_filter_init_partitioned_submit_ex(f, call, q, tag, arg, fpp, parts); break;
	case BGO_DELETE: st = bg_filter_delete_submit_ex(f, call, q, tag); break;
	case BGO_EXPIRE: st = bg_filter_expire_submit_ex(f, call, q, tag, arg); break;
	case BGO_PERSIST: st = bg_filter_persist_submit_ex(f, call, q, tag); break;
	case BGO_INIT_NATIVE: st = bg_filter_init_native_submit_ex(f, call, q, tag, arg, fpp, (int32_t)parts); break;
	default: st = BG_EINVAL;
	}
	bgo_driving = outer_q;
	bgo_driver = outer_d;
	return st;
}

// A completion as the driver reads it: the pointers stay valid until the next poll.
typedef struct bgo_done {
	uint64_t tag;
	int64_t value;
	const uint8_t *present;
	size_t npresent;
	const char *msg;   // the failure's message, or a degraded answer's cause; NULL otherwise
	int32_t status, source, degraded;
	uint32_t info_k, info_parts;
	uint64_t info_size;
	int64_t info_n;
	double info_fpp;
} bgo_done;

// Polls q without waiting and describes up to max completions in out (one cgo call per batch).
// *readable: the fd is readable still (more to do now), which Go's edge-triggered netpoller
// would not report again - asked only when the batch did not fill.
static size_t bgo_poll(bg_queue *q, uintptr_t driver, bg_completion **cs, bgo_done *out, size_t max, int *readable) {
	size_t n = 0;
	bg_queue *outer_q = bgo_driving;
	uintptr_t outer_d = bgo_driver;
	bgo_driving = q;
	bgo_driver = driver;
	bg_queue_poll(q, 0, cs, max, &n);
	bgo_driving = outer_q;
	bgo_driver = outer_d;
	for (size_t i = 0; i < n; i++) {
		bg_completion *c = cs[i];
		bgo_done *d = &out[i];
		d->tag = bg_completion_tag(c);
		d->status = bg_completion_status(c);
		d->source = bg_completion_source(c);
		d->degraded = bg_completion_degraded_status(c);
		d->value = bg_completion_value(c);
		d->present = bg_completion_present(c, &d->npresent);
		d->msg = d->status != BG_OK || d->source > BG_SOURCE_REDIS ? bg_completion_errmsg(c) : NULL;
		if (bg_completion_info(c, &d->info_size, &d->info_k, &d->info_n, &d->info_fpp) != BG_OK) {
			d->info_size = 0, d->info_k = 0, d->info_n = 0, d->info_fpp = 0;
		}
		if (bg_completion_partitions(c, &d->info_parts) != BG_OK) d->info_parts = 0;
	}
	*readable = 0;
	if (n < max) {
		struct pollfd p = {.fd = bg_queue_fd(q), .events = POLLIN};
		*readable = poll(&p, 1, 0) > 0;
	}
	return n;
}

static bgo_done *bgo_done_array(size_t n) { return calloc(n, sizeof(bgo_done)); }
static bg_completion **bgo_completion_array(size_t n) { return calloc(n, sizeof(bg_completion *)); }
*/
import "C"

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The submission queue underneath the filter calls (bloomguard/queue.h).
//
// A Client has one or more queues (WithQueues), each with connections of its own, driven by a
// goroutine of its own (driver.run): it takes requests from a channel, submits them (one cgo call
// each, which returns at once), and polls the queue (one cgo call per batch of completions) when
// requests came or the queue's fd became readable. That fd waits in Go's netpoller: a watcher
// goroutine parks in a RawConn.Read of a dup of it and tells the driver when it fires. A caller's
// goroutine sends its request and waits on the request's channel: no OS thread waits for Redis,
// whatever the number of calls in flight.
//
// The C library serializes nothing: one goroutine (the driver) submits and polls each queue;
// bg_queue_cancel, which any thread may call, is the only call into a queue made elsewhere.

// opKind is what a request asks; the values are the C side's BGO_*.
type opKind C.int

const (
	opContains     opKind = C.BGO_CONTAINS
	opContainsMany opKind = C.BGO_CONTAINS_MANY
	opAdd          opKind = C.BGO_ADD
	opAddMany      opKind = C.BGO_ADD_MANY
	opCount        opKind = C.BGO_COUNT
	opInfo         opKind = C.BGO_INFO
	opInit         opKind = C.BGO_INIT
	opDelete       opKind = C.BGO_DELETE
	opExpire       opKind = C.BGO_EXPIRE
	opPersist      opKind = C.BGO_PERSIST
	opInitNative   opKind = C.BGO_INIT_NATIVE
)

// pollBatch is how many completions one poll hands out; requestBacklog how many requests wait
// for a driver before senders wait to send (as goroutines: it bounds memory, not threads).
const (
	pollBatch      = 256
	requestBacklog = 4096
)

// request is one filter operation: its arguments, then its outcome. Pooled; a caller owns it
// from newRequest to release, and the driver between the send and the signal on done.
type request struct {
	op    opKind
	f     *C.bg_filter
	item  unsafe.Pointer // one item (Go memory; the submit copies it)
	n     int            // its length, or the batch's item count
	items cItems         // a batch (C memory)
	arg   int64          // init: expected insertions; expire: ms
	fpp   float64
	parts int64 // init: a partitioned filter's partitions (0: Redisson's layout); a native init: its expansion

	ctx         context.Context
	deadline    time.Time
	hasDeadline bool
	call        *call
	fb          *fallbackQuery // the query's side of a Go fallback, nil when the policy has none
	wantSource  bool           // a blocking query reads the answer's source (doBlocking)

	tag       atomic.Uint64 // set by the driver before the submit (0: not submitted yet)
	cancelled atomic.Bool   // ctx ended: the driver must not submit it, or cancels it
	done      chan struct{} // signalled once the outcome is in

	// the outcome
	status   C.int
	msg      string
	value    int64
	source   Source
	degraded C.int
	present  []bool // contains_many: where the answers go (the caller's)
	info     Info
	goexit   bool // the fallback called runtime.Goexit: the caller's goroutine ends too
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest(op opKind) *request {
	r := requestPool.Get().(*request)
	r.op = op
	return r
}

// release drops what the request refers to and returns it to the pool.
func (r *request) release() {
	done := r.done
	*r = request{done: done}
	requestPool.Put(r)
}

// err is the request's failure as the blocking call would return it (nil on success).
func (r *request) err() error {
	if r.fb != nil && r.fb.panic != nil {
		return r.fb.panic
	}
	return statusError(r.ctx, r.status, r.msg, r.hasDeadline)
}

// queueSet is a client's queues, shared by its filters: closed when the client and every filter
// opened from it are closed (refs).
type queueSet struct {
	drivers []*driver
	refs    atomic.Int64
}

// openQueues opens n queues on the client p, each with its driver and watcher goroutines.
func openQueues(p *C.bg_client, n int) (*queueSet, error) {
	s := &queueSet{}
	s.refs.Store(1)
	for i := 0; i < n; i++ {
		d, err := openDriver(p)
		if err != nil {
			s.close()
			return nil, err
		}
		s.drivers = append(s.drivers, d)
	}
	return s, nil
}

func (s *queueSet) ref() *queueSet {
	if s != nil {
		s.refs.Add(1)
	}
	return s
}

func (s *queueSet) unref() {
	if s != nil && s.refs.Add(-1) == 0 {
		s.close()
	}
}

func (s *queueSet) close() {
	for _, d := range s.drivers {
		d.close()
	}
	s.drivers = nil
}

// inflight is the number of operations submitted to the queues and not yet completed.
func (s *queueSet) inflight() int64 {
	var n int64
	for _, d := range s.drivers {
		n += d.inflight.Load()
	}
	return n
}

// pick is the queue for the next request: any of them (each has its own connections).
func (s *queueSet) pick() *driver {
	if len(s.drivers) == 1 {
		return s.drivers[0]
	}
	return s.drivers[rand.Uint32()%uint32(len(s.drivers))]
}

// driver owns one bg_queue: the only goroutine that submits to it and polls it.
type driver struct {
	q       *C.bg_queue
	handle  cgo.Handle // of the driver itself, for the fallback adapter
	reqs    chan *request
	ready   chan struct{} // the watcher: the fd fired
	stop    chan struct{}
	stopped chan struct{}
	file    *os.File // a dup of the queue's fd, in the netpoller

	inflight atomic.Int64 // operations submitted and not yet completed (for tests)

	// the driver goroutine's own
	tag     uint64
	pending map[uint64]*request // submitted, not completed
	cs      **C.bg_completion   // pollBatch of them (C memory)
	out     *C.bgo_done         // pollBatch of them (C memory)
}

func openDriver(client *C.bg_client) (*driver, error) {
	var q *C.bg_queue
	if st := C.bg_queue_open(&q, client); st != C.BG_OK {
		return nil, newError(st, "cannot open a submission queue: "+C.GoString(C.bg_client_errmsg(client)))
	}
	fd, err := syscall.Dup(int(C.bg_queue_fd(q)))
	if err == nil {
		syscall.CloseOnExec(fd)
		if err = syscall.SetNonblock(fd, true); err != nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		C.bg_queue_close(q)
		return nil, errorf(CodeNoMemory, "cannot watch the submission queue's fd: "+err.Error())
	}
	d := &driver{
		q:       q,
		reqs:    make(chan *request, requestBacklog),
		ready:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		file:    os.NewFile(uintptr(fd), "bloomguard-queue"),
		pending: make(map[uint64]*request),
		cs:      C.bgo_completion_array(pollBatch),
		out:     C.bgo_done_array(pollBatch),
	}
	rc, err := d.file.SyscallConn()
	if err != nil || d.cs == nil || d.out == nil {
		d.file.Close()
		C.free(unsafe.Pointer(d.cs))
		C.free(unsafe.Pointer(d.out))
		C.bg_queue_close(q)
		return nil, errorf(CodeNoMemory, fmt.Sprintf("cannot set up the submission queue's driver (%v)", err))
	}
	d.handle = cgo.NewHandle(d)
	go d.watch(rc)
	go d.run()
	return d, nil
}

// close stops the driver (every request not yet completed fails with ErrClosed) and closes the
// queue. Callers hold no request of it any more (the set's refs).
func (d *driver) close() {
	close(d.stop)
	<-d.stopped
	d.file.Close() // ends the watcher's Read
	C.bg_queue_close(d.q)
	C.free(unsafe.Pointer(d.cs))
	C.free(unsafe.Pointer(d.out))
	d.handle.Delete()
}

// watch parks on the netpoller until the queue's fd fires, and tells the driver each time. The
// notice is sent from inside the Read callback - after the first, each call follows a readiness
// edge - so that no edge falls between a notice and the next wait.
func (d *driver) watch(rc syscall.RawConn) {
	rc.Read(func(uintptr) bool {
		select {
		case d.ready <- struct{}{}:
		default: // a notice is pending: the driver will poll after this edge anyway
		}
		return false
	}) // returns once the file is closed
}

func (d *driver) run() {
	defer close(d.stopped)
	for {
		select {
		case r := <-d.reqs:
			// A caller's send made this goroutine the next to run: let the callers that are
			// runnable too send theirs first, so that one turn takes them all (one write).
			runtime.Gosched()
			d.submit(r)
		case <-d.ready:
		case <-d.stop:
			d.shutdown()
			return
		}
		d.turn()
	}
}

// turn submits the requests waiting and polls, until nothing is left to do now.
func (d *driver) turn() {
	for {
	take:
		for i := 0; i < pollBatch; i++ {
			select {
			case r := <-d.reqs:
				d.submit(r)
			default:
				break take
			}
		}
		n, readable := d.poll()
		if n < pollBatch && !readable && len(d.reqs) == 0 {
			return
		}
	}
}

// submit hands r to the queue, or completes it at once: cancelled or past its deadline before it
// was sent, or refused by the library.
func (d *driver) submit(r *request) {
	if r.cancelled.Load() {
		d.finish(r, C.BG_ECANCELED, "cancelled before it was sent (the context ended)")
		return
	}
	var ms int64
	if r.hasDeadline {
		left := time.Until(r.deadline)
		if left <= 0 {
			d.finish(r, C.BG_ETIMEOUT, "the deadline passed before the operation was sent")
			return
		}
		ms = int64(min((left+time.Millisecond-1)/time.Millisecond, maxCallTimeout/time.Millisecond))
	}
	d.tag++
	tag := d.tag
	r.tag.Store(tag)
	d.pending[tag] = r // first: a fallback run inside the submit (open breaker) looks it up
	st := C.bgo_submit(d.q, C.uintptr_t(d.handle), C.uint64_t(tag), C.int(r.op), r.f, r.call.p, C.int64_t(ms),
		r.item, C.size_t(r.n), r.items.ptrs, r.items.lens, C.size_t(r.n), C.int64_t(r.arg), C.double(r.fpp),
		C.int64_t(r.parts))
	if st != C.BG_OK {
		delete(d.pending, tag)
		d.finish(r, st, C.GoString(C.bg_call_errmsg(r.call.p)))
		return
	}
	d.inflight.Add(1)
	if r.cancelled.Load() { // its ctx ended while it was being submitted: the caller's cancel may have missed it
		C.bg_queue_cancel(d.q, C.uint64_t(tag))
	}
}

// faultCrossed is the negative control of the tests of crossed answers (never set otherwise):
// each completion of a batch goes to the request of the one before it.
var faultCrossed atomic.Bool

// poll hands out up to pollBatch completions to their requests. readable: more to do now.
func (d *driver) poll() (n int, readable bool) {
	var more C.int
	n = int(C.bgo_poll(d.q, C.uintptr_t(d.handle), d.cs, d.out, pollBatch, &more))
	outs := unsafe.Slice(d.out, n)
	crossed := n > 1 && faultCrossed.Load()
	for i := range outs {
		o := &outs[i]
		tag := uint64(o.tag)
		if crossed {
			tag = uint64(outs[(i+n-1)%n].tag)
		}
		r := d.pending[tag]
		if r == nil {
			continue
		}
		delete(d.pending, tag)
		d.inflight.Add(-1)
		r.status = C.int(o.status)
		r.value = int64(o.value)
		r.source = Source(o.source)
		r.degraded = C.int(o.degraded)
		if o.msg != nil {
			r.msg = C.GoString(o.msg)
		}
		if r.present != nil && o.present != nil {
			copy(r.present, unsafe.Slice((*bool)(unsafe.Pointer(o.present)), int(o.npresent)))
		}
		if r.op == opInfo && o.status == C.BG_OK {
			r.info = Info{Size: uint64(o.info_size), HashIterations: uint32(o.info_k),
				ExpectedInsertions: int64(o.info_n), FalseProbability: float64(o.info_fpp),
				Partitions: uint32(o.info_parts)}
		}
		r.done <- struct{}{}
	}
	return n, more != 0
}

func (d *driver) finish(r *request, st C.int, msg string) {
	r.status, r.msg = st, msg
	r.done <- struct{}{}
}

// shutdown fails what is left: requests still waiting to be sent, and any in the queue.
func (d *driver) shutdown() {
	for {
		select {
		case r := <-d.reqs:
			d.finish(r, C.BG_ECLOSED, "the client was closed")
			continue
		default:
		}
		break
	}
	for tag, r := range d.pending {
		delete(d.pending, tag)
		d.inflight.Add(-1)
		d.finish(r, C.BG_ECLOSED, "the client was closed")
	}
}

// do runs r on driver d and waits for its outcome. The end of ctx cancels the operation in C
// (bg_queue_cancel): it completes with BG_ECANCELED at the driver's next poll, and nothing of it
// keeps running. A deadline is left to the library, which has it as the call's timeout and ends
// the operation with BG_ETIMEOUT when it passes.
func (d *driver) do(ctx context.Context, r *request) {
	select {
	case d.reqs <- r:
	default:
		select { // the backlog is full: wait as a goroutine
		case d.reqs <- r:
		case <-ctx.Done():
			r.status = C.BG_ECANCELED
			r.msg = "cancelled while waiting to be sent (the context ended)"
			if ctx.Err() == context.DeadlineExceeded {
				r.status = C.BG_ETIMEOUT
				r.msg = "the deadline passed while the operation waited to be sent"
			}
			return
		}
	}
	done := ctx.Done()
	if done == nil {
		<-r.done
		return
	}
	select {
	case <-r.done:
		return
	case <-done:
	}
	if ctx.Err() != context.DeadlineExceeded {
		r.cancelled.Store(true)
		if tag := r.tag.Load(); tag != 0 {
			C.bg_queue_cancel(d.q, C.uint64_t(tag))
		}
	}
	<-r.done
}

// fallbackRequest is the request a fallback called by driver handle's queue answers for: the
// one with the tag bg_queue_running gave (fallback.go).
func fallbackRequest(handle C.uintptr_t, tag C.uint64_t) *request {
	d := cgo.Handle(handle).Value().(*driver)
	if faultFallbackTag.Load() {
		tag++
	}
	return d.pending[uint64(tag)]
}

// faultFallbackTag is the negative control of the test that a fallback gets its own query's
// context (never set otherwise): the fallback is told the next operation's.
var faultFallbackTag atomic.Bool

// runIsolated runs a fallback that the driver's poll (or submit) called, on a goroutine of its
// own while the driver waits: runtime.Goexit in it (t.FailNow) must not end the driver in the
// middle of the library's frames. It returns whether fn answered and whether it called Goexit.
func runIsolated(fn func() bool) (answered, goexit bool) {
	done := make(chan struct{})
	returned := false
	go func() {
		defer close(done)
		answered = fn()
		returned = true
	}()
	<-done
	runtime.KeepAlive(done)
	return answered, !returned
}
