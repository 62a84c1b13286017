package bloomguard

/*
#include <stdint.h>
#include <stdlib.h>
#include <bloomguard.h>

// These never call Go: their out-parameters may stay on the Go stack (see filter.go).
// bg_rotation_add, bg_rotation_add_many and bg_rotation_commit run the progress callback, which
// is Go (callbacks.go): they must NOT be marked nocallback (the runtime would panic), and no Go
// pointer is passed to them (items go through C memory).
#cgo noescape bg_rotation_begin_ex
#cgo nocallback bg_rotation_begin_ex
#cgo noescape bg_rotation_stats
#cgo nocallback bg_rotation_stats
#cgo noescape bg_filter_errmsg_copy
#cgo nocallback bg_filter_errmsg_copy

// The //export of callbacks.go (declared here: a file with //export may not define C functions).
extern int bgoProgress(uintptr_t handle, int phase, uint64_t items, uint64_t bytes_done,
                       uint64_t bytes_total);

// The bg_progress_fn of every rotation: userdata is the rotation's runtime/cgo.Handle.
static int bgo_progress(void *userdata, int phase, uint64_t items, uint64_t bytes_done,
                        uint64_t bytes_total) {
	return bgoProgress((uintptr_t)userdata, phase, items, bytes_done, bytes_total);
}

static int bgo_rotation_set_progress(bg_rotation *r, uintptr_t handle) {
	return bg_rotation_set_progress(r, bgo_progress, (void *)handle);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime/cgo"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Strategy is how Rotate rebuilds a filter (BG_ROTATE_*).
type Strategy int

const (
	// Swap builds the next generation in memory on this client (hashing on all cores), uploads it
	// in bounded chunks to staging keys that carry a TTL, and swaps bitmap and config in one atomic
	// server-side step. Readers see the old generation until the swap, then the new one; items
	// added through bloomguard (any process) while the rotation runs are kept; a second rotation
	// of the filter gets ErrRotationInProgress (or waits, WithWait). BG_ROTATE_SWAP.
	Swap Strategy = 1
	// Naive is the rebuild that fails in production, kept to reproduce it in tests and demos:
	// delete, tryInit, then add straight into the live keys (readers see a missing or partial
	// filter meanwhile, and an aborted Naive rotation leaves the partial filter). It takes no
	// lease: other rotations do not stop it. BG_ROTATE_NAIVE.
	Naive Strategy = 2
	// Locked rebuilds in place under the filter's write lock (see Lock). Libraries built before
	// the strategy landed answer ErrNotSupported. BG_ROTATE_LOCKED.
	Locked Strategy = 3
)

// String is the strategy's name ("swap"), or "Strategy(n)".
func (s Strategy) String() string {
	switch s {
	case Swap:
		return "swap"
	case Naive:
		return "naive"
	case Locked:
		return "locked"
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// Phase is the stage a rotation reports to its progress function (BG_PHASE_*).
type Phase int

const (
	PhaseBuilding   Phase = 1 // items are being added to the next generation
	PhaseUploading  Phase = 2 // Swap: the next generation is being uploaded to the staging keys
	PhaseCommitting Phase = 3 // Swap: the atomic swap
	PhaseDone       Phase = 4 // committed
)

// String is the phase's name ("uploading"), or "Phase(n)".
func (p Phase) String() string {
	switch p {
	case PhaseBuilding:
		return "building"
	case PhaseUploading:
		return "uploading"
	case PhaseCommitting:
		return "committing"
	case PhaseDone:
		return "done"
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// RotateOption configures one Rotate call (the BG_OPT_ROTATE_* options of bg_rotation_begin,
// and the progress function). Values out of range make Rotate fail with ErrInvalid, before
// anything is sent, with a message naming the option.
type RotateOption func(*rotateSettings)

type rotateSettings struct {
	sets     []setting
	waitMS   int64
	progress func(Phase, uint64, uint64, uint64) error
}

func rotateOption(set setting) RotateOption {
	return func(s *rotateSettings) { s.sets = append(s.sets, set) }
}

// WithLease sets the rotator's lease (BG_OPT_ROTATE_LEASE_MS; default 30s, 100ms..1h). A
// background thread renews it every third of its length; a rotator that dies blocks the next
// rotation for one lease at most.
func WithLease(d time.Duration) RotateOption {
	return rotateOption(durationSetting("WithLease", C.BG_OPT_ROTATE_LEASE_MS, d))
}

// WithWait makes Rotate wait up to d for another rotation of the filter to end instead of failing
// at once with ErrRotationInProgress (BG_OPT_ROTATE_WAIT_MS; default 0, at most 1h). The end of
// ctx cancels the wait (within about 50ms): the error is then both ErrRotationInProgress and
// ctx.Err(). Swap only: Naive does not look for other rotations.
func WithWait(d time.Duration) RotateOption {
	set := durationSetting("WithWait", C.BG_OPT_ROTATE_WAIT_MS, d)
	return func(s *rotateSettings) {
		s.sets = append(s.sets, set)
		s.waitMS = set.i
	}
}

// WithStagingTTL sets the time to live of the staging keys, renewed with the lease, so that a
// dead rotator's keys go away on their own (BG_OPT_ROTATE_STAGING_TTL_MS; default 5 min, 1s..24h).
// While the lease is held they get at least the lease, so none expires under a live rotation.
func WithStagingTTL(d time.Duration) RotateOption {
	return rotateOption(durationSetting("WithStagingTTL", C.BG_OPT_ROTATE_STAGING_TTL_MS, d))
}

// WithThreads sets how many threads hash the items of a Swap rotation (BG_OPT_ROTATE_THREADS;
// default: the online CPUs - 1, at least 1; 1..256).
func WithThreads(n int) RotateOption {
	return rotateOption(intSetting("WithThreads", C.BG_OPT_ROTATE_THREADS, int64(n)))
}

// WithChunkBytes sets the size of each upload step of a Swap rotation
// (BG_OPT_ROTATE_CHUNK_BYTES; default 1 MiB, 4096..64 MiB).
func WithChunkBytes(n int) RotateOption {
	return rotateOption(intSetting("WithChunkBytes", C.BG_OPT_ROTATE_CHUNK_BYTES, int64(n)))
}

// WithNice raises the nice value of the threads that hash a large build by n (BG_OPT_ROTATE_NICE;
// default 10, 0..19), so that on a busy machine the rebuild yields the CPU to the queries; 0 runs
// the build on the calling thread too, at its priority.
func WithNice(n int) RotateOption {
	return rotateOption(intSetting("WithNice", C.BG_OPT_ROTATE_NICE, int64(n)))
}

// WithPartitions sets the partitions of the generation a rotation of a partitioned filter builds
// (BG_OPT_ROTATE_PARTITIONS; default: as many as the live generation has; 1..16384). A plain
// filter's rotation refuses it.
func WithPartitions(n int) RotateOption {
	return rotateOption(intSetting("WithPartitions", C.BG_OPT_ROTATE_PARTITIONS, int64(n)))
}

// WithBatch sets how many items a Naive rotation sends per round trip (BG_OPT_ROTATE_BATCH;
// default 1000, 1..1000000).
func WithBatch(n int) RotateOption {
	return rotateOption(intSetting("WithBatch", C.BG_OPT_ROTATE_BATCH, int64(n)))
}

// WithProgress sets a function the library calls while the rotation runs: while building at most
// every 50ms (after an Add or AddMany), after every uploaded chunk, and at each phase change. items
// is the number of items added so far; bytesDone and bytesTotal are the upload's progress (Swap:
// the upload covers the bitmap up to its last non-zero byte; both are 0 before it starts).
//
// Returning an error aborts the rotation: the Add, AddMany or commit during which it was called
// fails with that error, the rotation cannot commit any more, and Rotate returns it (or what fn
// returned). At PhaseDone the rotation has already committed and an error is ignored. A panic in
// fn aborts the rotation too, and is raised again, with the same value, on the goroutine that
// called Add, AddMany or Rotate.
//
// fn runs on the goroutine of the Add, AddMany or Rotate (commit) call that reported, never two
// at a time, and never after Rotate returned. It must not call the Rotation's Add, AddString or
// AddMany (that deadlocks); Stats is fine.
func WithProgress(fn func(phase Phase, items, bytesDone, bytesTotal uint64) error) RotateOption {
	return func(s *rotateSettings) { s.progress = fn }
}

// rotationsLive counts the rotations whose cgo.Handle exists (tests check it drops back to 0).
var rotationsLive atomic.Int64

// Rotation is the rotation in progress that Rotate hands to its fn: add the items of the next
// generation to it. Its methods are safe for concurrent use (the calls into the library are made
// one at a time), but it is valid only until fn returns: later calls fail with ErrInvalid.
type Rotation struct {
	f        *Filter
	ctx      context.Context
	done     <-chan struct{} // ctx.Done(), nil when ctx cannot end
	progress func(Phase, uint64, uint64, uint64) error
	start    time.Time

	mu         sync.Mutex     // one library call on the rotation at a time; guards what follows
	p          *C.bg_rotation // nil once Rotate freed it
	over       bool           // committing or ended: no more items
	err        error          // why the rotation can no longer commit (sticky)
	scratch    unsafe.Pointer // C copy of a single item (Add, AddString)
	scratchCap int
	// Set by the progress callback during a library call made under mu, read after it returns.
	stopCause error // the progress function's error, or ctx.Err()
	panicked  bool
	panicVal  any

	items   atomic.Uint64
	bytes   atomic.Uint64
	elapsed atomic.Int64 // the final elapsed time once ended
	ended   atomic.Bool
}

// Rotate rebuilds the filter for expectedInsertions items at false probability fpp (the same or
// other parameters than today's) while queries and adds keep running, with strategy Swap (what
// to use), Naive or Locked.
//
// Rotate begins the rotation (taking its lease), then calls fn, which adds the items of the next
// generation with the Rotation's Add, AddString or AddMany. Read the source of truth inside fn,
// not before: every item added to the filter before the rotation began must be in what fn feeds
// it (Swap keeps items added through bloomguard after that point on its own). When fn returns nil
// Rotate commits (Swap: uploads the next generation and swaps it in, atomically); when fn returns
// an error Rotate aborts (Swap: nothing changes, the staging keys are removed at once; Naive has
// already rebuilt the live filter in part) and returns that error as is. If fn panics, Rotate
// aborts and the panic goes on.
//
// A rotation that can no longer commit stays aborted even if fn returns nil: then Rotate returns
// the error that ended it. That happens when an Add, AddString or AddMany failed (the items of
// that call may be missing), when the progress function returned an error (WithProgress), and
// when ctx ends.
//
// Contexts: a ctx already done returns ctx.Err() without calling the library. While the rotation
// runs, ctx is checked at every Add and AddMany, by the progress callback (at most every 50ms while
// building, after every uploaded chunk) and before the commit; once it is done the rotation is
// aborted and Rotate returns ctx.Err() (unless fn returned another error). ctx's deadline does not
// bound the library's individual network steps, which use the client's command timeout.
//
// Errors: ErrRotationInProgress when another rotation of the filter holds the lease (see
// WithWait), ErrBadParams for rejected parameters, ErrNotSupported for Locked (older libraries), ErrInvalid for an
// unknown strategy or a bad option, ErrClosed when the filter is closed. Closing the Filter while
// it rotates does not stop the rotation.
func (f *Filter) Rotate(ctx context.Context, expectedInsertions int64, fpp float64, strategy Strategy,
	fn func(*Rotation) error, opts ...RotateOption) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if fn == nil {
		return errorf(CodeInvalid, "Rotate: fn is nil")
	}
	var s rotateSettings
	apply(&s, opts)
	o, err := newOptions(s.sets)
	if err != nil {
		return err
	}
	fp := f.h.ref()
	if fp == nil {
		C.bg_options_free(o)
		return errFilterClosed()
	}
	defer f.h.unref() // after r.end (defers run last in, first out): the C filter outlives the rotation
	rp, err := f.beginRotation(ctx, fp, o, expectedInsertions, fpp, strategy, s.waitMS)
	C.bg_options_free(o)
	if err != nil {
		return err
	}
	r := &Rotation{f: f, ctx: ctx, done: ctx.Done(), progress: s.progress, start: time.Now(), p: rp}
	h := cgo.NewHandle(r)
	rotationsLive.Add(1)
	C.bgo_rotation_set_progress(rp, C.uintptr_t(h))
	defer r.end(h) // aborts unless committed, also when fn panics; no callback after it

	if err := fn(r); err != nil {
		return err
	}
	return r.commit()
}

// beginRotation calls bg_rotation_begin_ex, waiting up to waitMS for another rotation to end;
// ctx's end cancels the wait (call.watch), which then fails with ErrRotationInProgress and
// ctx.Err().
func (f *Filter) beginRotation(ctx context.Context, fp *C.bg_filter, o *C.bg_options, n int64, fpp float64,
	strategy Strategy, waitMS int64) (*C.bg_rotation, error) {
	if st := C.bg_options_set_int(o, C.BG_OPT_ROTATE_WAIT_MS, C.int64_t(waitMS)); st != C.BG_OK {
		return nil, newError(st, fmt.Sprintf("WithWait: %d ms: %s", waitMS, Code(st).Description()))
	}
	if err := f.g.enter(ctx); err != nil {
		return nil, err
	}
	defer f.g.leave()
	c, err := beginCall(ctx)
	if err != nil {
		return nil, err
	}
	var rp *C.bg_rotation
	st := C.bg_rotation_begin_ex(&rp, c.p, fp, C.int64_t(n), C.double(fpp), C.int(strategy), o)
	if st == C.BG_OK {
		c.release()
		return rp, nil
	}
	msg := C.GoString(C.bg_call_errmsg(c.p))
	c.release()
	if st == C.BG_ECANCELED {
		return nil, cancelled(ctx, CodeRotationInProgress, msg)
	}
	return nil, newError(st, msg)
}

// contextError is ctx.Err(), or context.DeadlineExceeded once the deadline has passed even if
// ctx's timer has not fired yet.
func contextError(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// Add adds one item to the next generation (nil and empty are the same, valid, item). The bytes
// are copied; the caller may reuse item at once.
func (r *Rotation) Add(item []byte) error {
	return r.add1("Add", item)
}

// AddString adds the UTF-8 bytes of s to the next generation.
func (r *Rotation) AddString(s string) error {
	return r.add1("AddString", unsafe.Slice(unsafe.StringData(s), len(s)))
}

func (r *Rotation) add1(what string, item []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ready(what); err != nil {
		return err
	}
	// a C copy: a Go pointer must not be passed to a function that calls back into Go (the
	// goroutine's stack may move meanwhile), and the copy keeps item from escaping
	n := len(item)
	if n > r.scratchCap {
		c := max(n, 64, 2*r.scratchCap)
		p := C.realloc(r.scratch, C.size_t(c))
		if p == nil {
			return r.fail(errorf(CodeNoMemory, what+": out of memory copying the item"))
		}
		r.scratch, r.scratchCap = p, c
	}
	var data unsafe.Pointer
	if n > 0 {
		copy(unsafe.Slice((*byte)(r.scratch), n), item)
		data = r.scratch
	}
	return r.call(func(p *C.bg_rotation) C.int { return C.bg_rotation_add(p, data, C.size_t(n)) }, 1)
}

// AddMany adds a batch to the next generation in one library call (which hashes it on all cores
// for Swap, and sends it in round trips of WithBatch items for Naive). The batch is copied into one
// C allocation, with no Go allocation per item.
func (r *Rotation) AddMany(items [][]byte) error {
	return rotationAddMany(r, items)
}

// AddManyStrings is AddMany for the UTF-8 bytes of each string (Redisson's StringCodec).
func (r *Rotation) AddManyStrings(items []string) error {
	return rotationAddMany(r, items)
}

func rotationAddMany[T itemBytes](r *Rotation, items []T) error {
	if len(items) == 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ready("AddMany")
	}
	b, merr := marshalItems(items) // before taking the lock: goroutines copy their batches in parallel
	if merr == nil {
		defer b.free()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ready("AddMany"); err != nil {
		return err
	}
	if merr != nil { // like any failed add, it ends the rotation
		return r.fail(merr)
	}
	return r.call(func(p *C.bg_rotation) C.int {
		return C.bg_rotation_add_many(p, b.ptrs, b.lens, C.size_t(len(items)))
	}, len(items))
}

// Stats returns the items added so far, the bytes uploaded (Swap, during the commit: the bytes
// actually sent, all-zero chunks being skipped) and the time since the rotation began (bg_rotation_stats). It may be called at any time, from any goroutine (the progress
// function too); once Rotate has returned it keeps returning the final figures.
func (r *Rotation) Stats() (items, bytesUploaded uint64, elapsed time.Duration) {
	items, bytesUploaded = r.items.Load(), r.bytes.Load()
	if r.ended.Load() {
		return items, bytesUploaded, time.Duration(r.elapsed.Load())
	}
	return items, bytesUploaded, time.Since(r.start)
}

func errRotationOver(what, name string) error {
	return errorf(CodeInvalid, fmt.Sprintf(
		"rotation %s: the rotation of %q is over (fn returned; Rotate commits or has returned)", what, name))
}

// ready checks, under mu, that another call may be made: the rotation is still open, has not
// failed, and ctx is not done (then the rotation is aborted at once).
func (r *Rotation) ready(what string) error {
	if r.p == nil || r.over {
		return errRotationOver(what, r.f.name)
	}
	if r.err != nil {
		return r.err
	}
	select {
	case <-r.done:
		return r.fail(contextError(r.ctx))
	default:
	}
	return nil
}

// fail makes err the rotation's final error and aborts it (the staging keys are removed and the
// lease released now rather than when fn returns; the library ignores a second abort).
func (r *Rotation) fail(err error) error {
	r.err = err
	C.bg_rotation_abort(r.p)
	return err
}

// call runs one library call that may call the progress function, under mu (held by the caller),
// through a slot of the client's gate. added is the number of items the call adds on success.
// A panic of the progress function is raised again here, once the library has returned; deferred
// unlocks by the caller keep mu consistent even if the progress function calls runtime.Goexit.
func (r *Rotation) call(c func(*C.bg_rotation) C.int, added int) error {
	if err := r.f.g.enter(r.ctx); err != nil { // fails only once ctx is done
		return r.fail(contextError(r.ctx))
	}
	r.stopCause, r.panicked, r.panicVal = nil, false, nil
	before := r.items.Load() // the library's count too: both change only under mu
	st := func() C.int {
		defer r.f.g.leave()
		return c(r.p)
	}()
	if r.panicked {
		v := r.panicVal
		r.fail(errorf(CodeAborted, fmt.Sprintf("the progress function panicked: %v", v)))
		panic(v)
	}
	if st == C.BG_OK {
		r.items.Store(before + uint64(added)) // the progress callback may have stored it already
		return nil
	}
	var err error
	if r.stopCause != nil {
		err = r.stopCause
	} else if cerr := contextError(r.ctx); st == C.BG_ECANCELED && cerr != nil {
		err = cerr // ctx ended a wait of the library (a Locked commit's, for the write lock): as when it stops fn
	} else {
		err = newError(st, C.GoString(C.bg_rotation_errmsg(r.p)))
	}
	r.refreshStats()
	return r.fail(err)
}

// commit is Rotate's last step once fn returned nil.
func (r *Rotation) commit() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ready("commit"); err != nil {
		r.over = true
		return err
	}
	r.over = true
	// with a call watching ctx: its end cancels a Locked commit's wait for the write lock
	c, err := beginCall(r.ctx)
	if err != nil {
		return r.fail(err)
	}
	err = r.call(func(p *C.bg_rotation) C.int { return C.bg_rotation_commit_ex(p, c.p) }, 0)
	c.release()
	r.refreshStats()
	return err
}

func (r *Rotation) refreshStats() {
	var items, bytes C.uint64_t
	if C.bg_rotation_stats(r.p, &items, &bytes, nil) == C.BG_OK {
		r.items.Store(uint64(items))
		r.bytes.Store(uint64(bytes))
	}
}

// end frees the rotation (aborting it unless it committed) and then its handle: the library never
// calls the progress function after bg_rotation_free, so no callback can reach a deleted handle.
func (r *Rotation) end(h cgo.Handle) {
	r.mu.Lock() // waits for calls in flight from goroutines fn started
	defer r.mu.Unlock()
	r.refreshStats()
	C.bg_rotation_free(r.p)
	r.p = nil
	r.over = true
	C.free(r.scratch)
	r.scratch, r.scratchCap = nil, 0
	r.elapsed.Store(int64(time.Since(r.start)))
	r.ended.Store(true)
	h.Delete()
	rotationsLive.Add(-1)
}

// onProgress is the progress callback (callbacks.go), run during a library call made under mu.
// It returns true to make the library abort the rotation.
func (r *Rotation) onProgress(phase Phase, items, bytesDone, bytesTotal uint64) (stop bool) {
	r.refreshStats() // Stats is the library's own figures (bytesDone is not bytes sent)
	if r.progress != nil {
		err := r.callProgress(phase, items, bytesDone, bytesTotal)
		if r.panicked {
			return true // ignored at PhaseDone; the panic is raised again once the library returned
		}
		if err != nil && phase != PhaseDone {
			r.stopCause = err
			return true
		}
	}
	if phase == PhaseDone {
		return false // committed: nothing left to abort
	}
	select {
	case <-r.done:
		r.stopCause = contextError(r.ctx)
		return true
	default:
	}
	return false
}

// callProgress runs the progress function, turning a panic into r.panicked: a panic must not
// unwind through the library's frames.
func (r *Rotation) callProgress(phase Phase, items, bytesDone, bytesTotal uint64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.panicked, r.panicVal = true, v
		}
	}()
	return r.progress(phase, items, bytesDone, bytesTotal)
}
