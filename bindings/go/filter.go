package bloomguard

/*
#include <bloomguard.h>

// The library keeps no pointer it is given beyond the call (noescape), and these functions never
// call Go (nocallback): together they let the out-parameters stay on the Go stack (cgo only
// drops the forced escape when both are declared). A function that will run a Go callback (a
// policy fallback, a rotation step) must NOT be marked nocallback: the runtime would panic.
#cgo noescape bg_filter_init_partitioned_ex
#cgo nocallback bg_filter_init_partitioned_ex
#cgo noescape bg_filter_add_many_ex
#cgo nocallback bg_filter_add_many_ex
#cgo noescape bg_filter_contains_many_ex
#cgo nocallback bg_filter_contains_many_ex
#cgo noescape bg_filter_count_ex
#cgo nocallback bg_filter_count_ex
#cgo noescape bg_filter_info_partitioned_ex
#cgo nocallback bg_filter_info_partitioned_ex
#cgo noescape bg_filter_delete_ex
#cgo nocallback bg_filter_delete_ex
#cgo noescape bg_filter_expire_ex
#cgo nocallback bg_filter_expire_ex
#cgo noescape bg_filter_persist_ex
#cgo nocallback bg_filter_persist_ex
#cgo noescape bg_filter_node
#cgo nocallback bg_filter_node
#cgo noescape bgo_add1
#cgo nocallback bgo_add1
#cgo noescape bgo_contains1
#cgo nocallback bgo_contains1

// One item through the batch forms (the header has no _ex form for a single item): the
// one-element arrays live on the C stack, so the Go side passes only the item's own bytes.
static int bgo_add1(bg_filter *f, bg_call *call, const void *item, size_t len, size_t *added) {
	return bg_filter_add_many_ex(f, call, &item, &len, 1, added);
}
static int bgo_contains1(bg_filter *f, bg_call *call, const void *item, size_t len, uint8_t *present) {
	return bg_filter_contains_many_ex(f, call, &item, &len, 1, present);
}
*/
import "C"

import (
	"context"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Filter is a handle on one Bloom filter stored in Redis exactly as Redisson's RBloomFilter
// stores it: the bitmap at Name() and the config hash at Name()+":config" when the name contains
// '{', else "{"+Name()+"}:config".
//
// Every network method takes a context first: an already cancelled or expired context returns
// ctx.Err() without touching the network; otherwise the context's deadline becomes the call's
// timeout (bounding each network wait of the call: the pool, connecting, sending, each reply),
// and a call without a deadline uses the client's command timeout. Cancelling the context ends
// the library's waits (a write-locked filter, the policy's backoff) within about 50ms:
// ErrCanceled and context.Canceled.
//
// A Filter is safe for concurrent use. Close it when done; a finalizer-like cleanup closes a
// forgotten one, but only when the garbage collector gets to it.
type Filter struct {
	h       *filterHandle
	g       gate      // shared with the client: bounds its blocking calls in C
	qs      *queueSet // the client's queues (nil: WithQueues(0), every call blocks in C)
	name    string
	native  bool // opened WithNative: the server's BF.* filter (native.go)
	cleanup runtime.Cleanup
}

// filterHandle owns the C filter. Calls hold mu for reading; a rotation, which uses the C filter
// across many calls and runs the caller's code in between, holds a reference instead (holding mu
// for reading that long would let a waiting Close block the filter's other calls, including those
// made from inside the rotation). The C filter is closed when the handle is closed and no
// rotation holds it any more.
type filterHandle struct {
	mu   sync.RWMutex // held for reading by every call, for writing by close and SetPolicy
	p    *C.bg_filter // nil once closed
	c    *C.bg_filter // the C filter, valid until refs drops to 0
	refs atomic.Int64 // 1 while open, plus 1 per rotation in progress
	// the cgo.Handle of the Go fallback of the filter's policy, 0 when it has none: queries then
	// take the callback path (fallback.go). Written under mu held for writing; deleted once the
	// library can no longer call it (policy replaced, or the C filter closed).
	fallback cgo.Handle
	qs       *queueSet // a reference to the client's queues, given back with the C filter
}

func newFilterHandle(p *C.bg_filter, qs *queueSet) *filterHandle {
	h := &filterHandle{p: p, c: p, qs: qs}
	h.refs.Store(1)
	return h
}

func (h *filterHandle) close() {
	h.mu.Lock()
	open := h.p != nil
	h.p = nil
	h.mu.Unlock()
	if open {
		h.unref()
	}
}

// ref returns the C filter with a reference taken (released by unref), or nil once closed.
func (h *filterHandle) ref() *C.bg_filter {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.p == nil {
		return nil
	}
	h.refs.Add(1) // the open handle's own reference is held: refs > 1 now
	return h.p
}

func (h *filterHandle) unref() {
	if h.refs.Add(-1) == 0 {
		C.bg_filter_close(h.c)
		if h.fallback != 0 { // the library never calls it after the close
			h.fallback.Delete()
			h.fallback = 0
			fallbacksLive.Add(-1)
		}
		h.qs.unref()
	}
}

// Info is the filter's config hash.
type Info struct {
	Size               uint64  // bits in the bitmap (a partitioned filter: in all its partitions)
	HashIterations     uint32  // k, the number of bit indexes per item
	ExpectedInsertions int64   // 0 when the config hash lacks the field
	FalseProbability   float64 // 0 when the config hash lacks the field
	Partitions         uint32  // a partitioned filter's partitions (InitPartitioned); 0 for Redisson's layout
	// Native: a native filter (WithNative). Its Size is 8 x the bytes the server reports,
	// ExpectedInsertions its capacity, HashIterations and FalseProbability 0 (NativeInfo has the rest).
	Native bool
}

// Name is the filter's name (the key of its bitmap).
func (f *Filter) Name() string { return f.name }

// Node says where the filter lives: "host:port" of the master serving its hash slot now, per the
// client's slot map (a Redis Cluster) or of the server (standalone), and the slot. No round trip.
func (f *Filter) Node() (addr string, slot int, err error) {
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return "", 0, errFilterClosed()
	}
	var buf [320]C.char
	var s C.int32_t
	if st := C.bg_filter_node(f.h.p, &buf[0], C.size_t(len(buf)), &s); st != C.BG_OK {
		return "", 0, newError(st, C.GoString(C.bg_filter_errmsg(f.h.p)))
	}
	return C.GoString(&buf[0]), int(s), nil
}

// Close releases the handle. It is idempotent, safe to call concurrently with other calls (it
// waits for calls in flight), and later calls fail with ErrClosed. A rotation in progress
// (Rotate) is not interrupted: it keeps the C filter until it ends. Close always returns nil.
func (f *Filter) Close() error {
	if f == nil || f.h == nil {
		return nil
	}
	f.cleanup.Stop()
	f.h.close()
	return nil
}

// begin checks ctx, waits for a slot of the client's gate, takes a bg_call (its timeout computed
// after that wait) and holds the handle open for the call: a blocking call (WithQueues(0)).
func (f *Filter) begin(ctx context.Context) (*C.bg_filter, *call, error) {
	if err := checkContext(ctx); err != nil {
		return nil, nil, err
	}
	if err := f.g.enter(ctx); err != nil {
		return nil, nil, err
	}
	c, err := beginCall(ctx)
	if err != nil {
		f.g.leave()
		return nil, nil, err
	}
	f.h.mu.RLock()
	if f.h.p == nil {
		f.h.mu.RUnlock()
		c.release()
		f.g.leave()
		return nil, nil, errFilterClosed()
	}
	return f.h.p, c, nil
}

func (f *Filter) end(ctx context.Context, c *call, st C.int) error {
	f.h.mu.RUnlock()
	f.g.leave()
	return c.end(ctx, st)
}

// do runs r and fills in its outcome: submitted to one of the client's queues while the calling
// goroutine waits on a channel, or, with WithQueues(0), by the blocking call (doBlocking). Either
// way the handle stays open until the operation ended.
func (f *Filter) do(ctx context.Context, r *request) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if f.qs == nil || ctx.Value(inFallbackKey{}) != nil { // no queue, or called by a fallback a driver waits for
		return f.doBlocking(ctx, r)
	}
	c, err := takeCall()
	if err != nil {
		return err
	}
	defer callPool.Put(c)
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return errFilterClosed()
	}
	r.f, r.call, r.ctx = f.h.p, c, ctx
	r.deadline, r.hasDeadline = ctx.Deadline()
	if f.h.fallback != 0 && (r.op == opContains || r.op == opContainsMany) {
		r.fb = &fallbackQuery{ctx: ctx}
	}
	f.qs.pick().do(ctx, r)
	if r.goexit { // the fallback ended its goroutine: so ends the query's, as when it ran on it
		runtime.Goexit()
	}
	return r.err()
}

// doBlocking is do by a blocking call, holding this goroutine's OS thread in C (WithQueues(0)).
func (f *Filter) doBlocking(ctx context.Context, r *request) error {
	p, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	var st C.int
	switch r.op {
	case opContains, opContainsMany:
		return f.query(ctx, p, c, r)
	case opAdd:
		var added C.size_t
		st = C.bgo_add1(p, c.p, r.item, C.size_t(r.n), &added)
		r.value = int64(added)
	case opAddMany:
		var n C.size_t
		st = C.bg_filter_add_many_ex(p, c.p, r.items.ptrs, r.items.lens, C.size_t(r.n), &n)
		r.value = int64(n)
	case opCount:
		var n C.int64_t
		st = C.bg_filter_count_ex(p, c.p, &n)
		r.value = int64(n)
	case opInfo:
		var (
			size C.uint64_t
			k    C.uint32_t
			n    C.int64_t
			fpp  C.double
		)
		var parts C.uint32_t
		st = C.bg_filter_info_partitioned_ex(p, c.p, &size, &k, &n, &fpp, &parts)
		r.info = Info{Size: uint64(size), HashIterations: uint32(k), ExpectedInsertions: int64(n),
			FalseProbability: float64(fpp), Partitions: uint32(parts)}
	case opInit:
		var cr C.int
		st = C.bg_filter_init_partitioned_ex(p, c.p, C.int64_t(r.arg), C.double(r.fpp), C.int64_t(r.parts), &cr)
		r.value = int64(cr)
	case opInitNative:
		var cr C.int
		st = C.bg_filter_init_native_ex(p, c.p, C.int64_t(r.arg), C.double(r.fpp), C.int32_t(r.parts), &cr)
		r.value = int64(cr)
	case opDelete:
		var d C.int
		st = C.bg_filter_delete_ex(p, c.p, &d)
		r.value = int64(d)
	case opExpire:
		var a C.int
		st = C.bg_filter_expire_ex(p, c.p, C.int64_t(r.arg), &a)
		r.value = int64(a)
	case opPersist:
		var a C.int
		st = C.bg_filter_persist_ex(p, c.p, &a)
		r.value = int64(a)
	}
	return f.end(ctx, c, st)
}

// query is doBlocking for a query (it ends the call begun by f.begin): through the callback path
// when the filter's policy has a Go fallback. The source, and a degraded answer's failure, are
// read when r.wantSource.
func (f *Filter) query(ctx context.Context, p *C.bg_filter, c *call, r *request) (err error) {
	var st C.int
	var pe *PanicError
	if f.h.fallback != 0 { // read under the handle's read lock: SetPolicy cannot change it meanwhile
		b, n := r.items, r.n
		if r.op == opContains {
			one := [][]byte{unsafe.Slice((*byte)(r.item), r.n)}
			if b, err = marshalItems(one); err != nil {
				f.end(ctx, c, C.BG_OK)
				return err
			}
			defer b.free()
			n = 1
		}
		var present [1]bool
		out := r.present
		if r.op == opContains {
			out = present[:]
		}
		// A fallback calling runtime.Goexit (t.FailNow in a test) ends this goroutine inside the
		// library call: let go of the handle and the gate then, so that SetPolicy and Close do not
		// wait for ever (the bg_call is dropped, not reused; the library's frames are abandoned).
		returned := false
		defer func() {
			if !returned {
				f.h.mu.RUnlock()
				f.g.leave()
			}
		}()
		st, pe = containsCallback(ctx, p, c, b, n, out)
		returned = true
		if present[0] {
			r.value = 1
		}
	} else if r.op == opContains {
		var present C.uint8_t
		st = C.bgo_contains1(p, c.p, r.item, C.size_t(r.n), &present)
		r.value = int64(present)
	} else {
		st = C.bg_filter_contains_many_ex(p, c.p, r.items.ptrs, r.items.lens, C.size_t(r.n),
			(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(r.present))))
	}
	if r.wantSource && st == C.BG_OK {
		r.source = Source(C.bg_call_source(c.p))
		if r.source.Degraded() {
			r.msg = C.GoString(C.bg_call_errmsg(c.p))
			r.degraded = C.bg_call_degraded_status(c.p)
		}
	}
	err = f.end(ctx, c, st)
	if pe != nil {
		return pe
	}
	return err
}

// ready checks what a call with nothing to send checks: ctx, and that the handle is open.
func (f *Filter) ready(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return errFilterClosed()
	}
	return nil
}

// Init is Redisson's tryInit: it computes the bitmap size and hash count for expectedInsertions
// items at false probability fpp (see OptimalParams) and writes the config hash only if it does
// not exist. created is true if this call wrote it; when a config was already there it is kept
// and used from then on, even if its parameters differ. Rejected parameters give ErrBadParams
// with Redisson's message.
func (f *Filter) Init(ctx context.Context, expectedInsertions int64, fpp float64) (created bool, err error) {
	r := newRequest(opInit)
	defer r.release()
	r.arg, r.fpp = expectedInsertions, fpp
	err = f.do(ctx, r)
	return r.value != 0, err
}

// InitPartitioned is Init for a partitioned filter of partitions bitmaps (1..16384), spread over
// the cluster's slots, of any total size (docs/layout.md): each item lives in one partition, so a
// single-item call is still one key and one round trip; Redisson cannot read it. Every other
// method works on it as on a plain filter; Info reports Partitions. partitions 0 is Init. A
// partitions out of range gives ErrInvalid; partitions too few or too many for the size give
// ErrBadParams saying how many fit.
func (f *Filter) InitPartitioned(ctx context.Context, expectedInsertions int64, fpp float64,
	partitions int) (created bool, err error) {
	r := newRequest(opInit)
	defer r.release()
	r.arg, r.fpp, r.parts = expectedInsertions, fpp, int64(partitions)
	err = f.do(ctx, r)
	return r.value != 0, err
}

// Add adds one item (nil and empty are the same, valid, item). added is true if at least one of
// the item's bits was newly set.
func (f *Filter) Add(ctx context.Context, item []byte) (added bool, err error) {
	return f.add1(ctx, unsafe.Pointer(unsafe.SliceData(item)), len(item))
}

// AddString adds the UTF-8 bytes of s (what Redisson's StringCodec stores), without copying them.
func (f *Filter) AddString(ctx context.Context, s string) (added bool, err error) {
	return f.add1(ctx, unsafe.Pointer(unsafe.StringData(s)), len(s))
}

func (f *Filter) add1(ctx context.Context, data unsafe.Pointer, n int) (bool, error) {
	r := newRequest(opAdd)
	defer r.release()
	if n > 0 {
		r.item, r.n = data, n
	}
	err := f.do(ctx, r)
	return r.value != 0, err
}

// AddMany adds items in one round trip (the library splits a huge batch into windows). added is
// how many items set at least one new bit. Items are copied into one C buffer for the call.
func (f *Filter) AddMany(ctx context.Context, items [][]byte) (added int, err error) {
	return addMany(ctx, f, items)
}

// AddManyStrings is AddMany for the UTF-8 bytes of each string (Redisson's StringCodec): the
// batch is copied once into C memory, as AddMany's, with no conversion to [][]byte.
func (f *Filter) AddManyStrings(ctx context.Context, items []string) (added int, err error) {
	return addMany(ctx, f, items)
}

func addMany[T itemBytes](ctx context.Context, f *Filter, items []T) (added int, err error) {
	if len(items) == 0 {
		return 0, f.ready(ctx)
	}
	if err := checkContext(ctx); err != nil {
		return 0, err
	}
	b, err := marshalItems(items)
	if err != nil {
		return 0, err
	}
	defer b.free()
	r := newRequest(opAddMany)
	defer r.release()
	r.items, r.n = b, len(items)
	err = f.do(ctx, r)
	return int(r.value), err
}

// Contains reports whether item may be in the filter (false: certainly not). A filter that does
// not exist gives ErrNotInitialized, never a silent false.
func (f *Filter) Contains(ctx context.Context, item []byte) (bool, error) {
	return f.contains1(ctx, unsafe.Pointer(unsafe.SliceData(item)), len(item))
}

// ContainsString is Contains for the UTF-8 bytes of s, without copying them.
func (f *Filter) ContainsString(ctx context.Context, s string) (bool, error) {
	return f.contains1(ctx, unsafe.Pointer(unsafe.StringData(s)), len(s))
}

func (f *Filter) contains1(ctx context.Context, data unsafe.Pointer, n int) (bool, error) {
	r := newRequest(opContains)
	defer r.release()
	if n > 0 {
		r.item, r.n = data, n
	}
	err := f.do(ctx, r)
	return err == nil && r.value != 0, err
}

// ContainsMany asks for every item in one round trip; present[i] answers items[i].
func (f *Filter) ContainsMany(ctx context.Context, items [][]byte) (present []bool, err error) {
	return containsManyOf(ctx, f, items)
}

// ContainsManyStrings is ContainsMany for the UTF-8 bytes of each string (Redisson's StringCodec).
func (f *Filter) ContainsManyStrings(ctx context.Context, items []string) (present []bool, err error) {
	return containsManyOf(ctx, f, items)
}

func containsManyOf[T itemBytes](ctx context.Context, f *Filter, items []T) (present []bool, err error) {
	if len(items) == 0 {
		if err := f.ready(ctx); err != nil {
			return nil, err
		}
		return []bool{}, nil
	}
	// A Go bool is one byte holding 0 or 1, which is exactly what the library writes.
	present = make([]bool, len(items))
	if _, err := containsMany(ctx, f, items, present, false); err != nil {
		return nil, err
	}
	return present, nil
}

// containsMany runs a query of items (at least one), its answers into present; with source,
// the request's outcome is kept for the caller's provenance (a *request the caller releases).
func containsMany[T itemBytes](ctx context.Context, f *Filter, items []T, present []bool, source bool) (*request,
	error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	b, err := marshalItems(items)
	if err != nil {
		return nil, err
	}
	defer b.free()
	r := newRequest(opContainsMany)
	r.items, r.n, r.present, r.wantSource = b, len(items), present, source
	err = f.do(ctx, r)
	if !source {
		r.release()
		return nil, err
	}
	return r, err
}

// Count is Redisson's estimate of the number of items added:
// round(-size / k * ln(1 - bitsSet / size)).
func (f *Filter) Count(ctx context.Context) (int64, error) {
	r := newRequest(opCount)
	defer r.release()
	err := f.do(ctx, r)
	return r.value, err
}

// Info reads the filter's config hash in one round trip.
func (f *Filter) Info(ctx context.Context) (Info, error) {
	r := newRequest(opInfo)
	defer r.release()
	if err := f.do(ctx, r); err != nil {
		return Info{}, err
	}
	r.info.Native = f.native
	return r.info, nil
}

// Delete removes the bitmap and the config hash; deleted is true if anything existed.
func (f *Filter) Delete(ctx context.Context) (deleted bool, err error) {
	r := newRequest(opDelete)
	defer r.release()
	err = f.do(ctx, r)
	return r.value != 0, err
}

// Expire sets a time to live on both keys (PEXPIRE; a positive ttl, rounded up to a whole
// millisecond). applied is true if any key changed.
func (f *Filter) Expire(ctx context.Context, ttl time.Duration) (applied bool, err error) {
	ms := int64(ttl / time.Millisecond)
	if ttl > 0 && ttl%time.Millisecond != 0 {
		ms++
	}
	r := newRequest(opExpire)
	defer r.release()
	r.arg = ms
	err = f.do(ctx, r)
	return r.value != 0, err
}

// Persist clears the time to live of both keys (PERSIST); applied is true if any key changed.
func (f *Filter) Persist(ctx context.Context) (applied bool, err error) {
	r := newRequest(opPersist)
	defer r.release()
	err = f.do(ctx, r)
	return r.value != 0, err
}
