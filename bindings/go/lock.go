package bloomguard

/*
#include <stdlib.h>
#include <bloomguard.h>

// None of these calls Go: out-parameters may stay on the Go stack (see filter.go).
#cgo noescape bg_lock_open_ex
#cgo nocallback bg_lock_open_ex
#cgo noescape bg_lock_open_filter_ex
#cgo nocallback bg_lock_open_filter_ex
#cgo noescape bg_lock_acquire_owner_ex
#cgo nocallback bg_lock_acquire_owner_ex
#cgo noescape bg_lock_held_owner_ex
#cgo nocallback bg_lock_held_owner_ex
#cgo noescape bg_lock_holder_id_owner
#cgo nocallback bg_lock_holder_id_owner
#cgo noescape bg_lock_owner_new
#cgo nocallback bg_lock_owner_new
#cgo noescape bg_lock_errmsg_copy
#cgo nocallback bg_lock_errmsg_copy
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// LockMode is how a Lock is held (BG_LOCK_*).
type LockMode int

const (
	// LockExclusive: one holder; stored exactly as Redisson's RLock stores it, so a Java service
	// holding redisson.getLock(name + ":lock") and a Go one exclude each other. BG_LOCK_EXCLUSIVE.
	LockExclusive LockMode = 1
	// LockRead: shared with other readers; excluded by writers (bloomguard's own reader layout on
	// the same key), with writer preference. BG_LOCK_READ.
	LockRead LockMode = 2
	// LockWrite: one holder excluding readers: the same hold as LockExclusive. BG_LOCK_WRITE.
	LockWrite LockMode = 3
)

// String is the mode's name ("read"), or "LockMode(n)".
func (m LockMode) String() string {
	switch m {
	case LockExclusive:
		return "exclusive"
	case LockRead:
		return "read"
	case LockWrite:
		return "write"
	}
	return "LockMode(" + strconv.Itoa(int(m)) + ")"
}

// LockOption configures a Lock when it is opened. Values out of range make Client.Lock fail with
// ErrInvalid and a message naming the option.
type LockOption func(*lockSettings)

type lockSettings struct {
	sets    []setting
	wait    time.Duration // the longest Acquire waits; < 0: as long as ctx allows
	waitSet bool
	owner   *LockOwner // nil: the Lock is an owner of its own
}

func lockOption(set setting) LockOption {
	return func(s *lockSettings) { s.sets = append(s.sets, set) }
}

func boolSetting(name string, id C.int, v bool) setting {
	set := setting{name: fmt.Sprintf("%s(%t)", name, v), id: id}
	if v {
		set.i = 1
	}
	return set
}

// WithLockLease sets the lease of a hold (PEXPIRE of the key; BG_OPT_LOCK_LEASE_MS; default 30s
// like Redisson's lockWatchdogTimeout, 30ms..1h). The library renews every hold every third of it.
func WithLockLease(d time.Duration) LockOption {
	return lockOption(durationSetting("WithLockLease", C.BG_OPT_LOCK_LEASE_MS, d))
}

// WithLockRenewal turns the renewal of holds on (the default) or off (BG_OPT_LOCK_RENEW): without
// it a hold ends when its lease runs out, and the next Release reports ErrLocked.
func WithLockRenewal(on bool) LockOption {
	return lockOption(boolSetting("WithLockRenewal", C.BG_OPT_LOCK_RENEW, on))
}

// WithLockSubscribe makes waiters listen on the unlock channel (the default) or only poll
// (BG_OPT_LOCK_SUBSCRIBE).
func WithLockSubscribe(on bool) LockOption {
	return lockOption(boolSetting("WithLockSubscribe", C.BG_OPT_LOCK_SUBSCRIBE, on))
}

// WithLockPollMax sets the longest sleep between two tries when polling (BG_OPT_LOCK_POLL_MAX_MS;
// default 100ms, 1ms..1min).
func WithLockPollMax(d time.Duration) LockOption {
	return lockOption(durationSetting("WithLockPollMax", C.BG_OPT_LOCK_POLL_MAX_MS, d))
}

// WithLockWait bounds how long Acquire waits for a taken lock (0: a single try), also when ctx
// would allow longer; then Acquire fails with ErrLocked, the message naming the holder. Without
// it Acquire waits as long as ctx allows. At most one hour (longer is cut to an hour).
func WithLockWait(d time.Duration) LockOption {
	return func(s *lockSettings) {
		s.wait, s.waitSet = max(d, 0), true
	}
}

// WithLockOwner makes o the Lock's holder instead of an owner of the Lock's own: Locks (of
// different names) opened with one LockOwner are one holder, e.g. a job that takes several locks
// in one goroutine and releases them in another. Two Locks of one name are still two holders
// (the holder id's UUID is the Lock's). A nil o is ignored.
func WithLockOwner(o *LockOwner) LockOption {
	return func(s *lockSettings) {
		if o != nil {
			s.owner = o
		}
	}
}

// LockOwner is a library lock owner (bg_lock_owner) that several Locks can share (WithLockOwner).
// Its number (Seq) follows the ':' of its holder ids. It is freed when no longer reachable; a
// hold it still has then stays held until its Lock is closed (which releases it).
type LockOwner struct {
	p *C.bg_lock_owner
}

// NewLockOwner makes an owner (no round trip).
func NewLockOwner() (*LockOwner, error) {
	var p *C.bg_lock_owner
	if st := C.bg_lock_owner_new(&p); st != C.BG_OK {
		return nil, newError(st, "bg_lock_owner_new: out of memory")
	}
	o := &LockOwner{p: p}
	// a Lock keeps its LockOwner reachable, so no Lock call runs after this
	runtime.AddCleanup(o, func(p *C.bg_lock_owner) { C.bg_lock_owner_free(p) }, p)
	return o, nil
}

// Seq is the owner's number, unique in the process.
func (o *LockOwner) Seq() uint64 { return uint64(C.bg_lock_owner_seq(o.p)) }

// Holds is the number of Locks on which the owner holds (or is acquiring) the lock.
func (o *LockOwner) Holds() int { return int(C.bg_lock_owner_holds(o.p)) }

// Lock is a distributed lock in Redis on the key Name()+":lock" (bg_lock): exclusive (Redisson's
// RLock layout) or reader/writer, with a fencing token per hold, a lease renewed while held, and
// waits bounded by a context.
//
// # Who holds it
//
// Each Lock is one holder: the library's lock owner (bg_lock_owner) made for it, not an OS
// thread, so a Lock costs no thread of its own and goroutines may move between threads freely
// (the holder id is "<UUID>:<owner number>", Redisson's "<UUID>:<thread id>" layout). Hence:
//
//   - Acquire, Release and Held may be called from any goroutine: Release need not run on the
//     goroutine that acquired (unlike sync.Mutex's rules, nothing ties a hold to a goroutine);
//   - holds are reentrant: a second Acquire through the same Lock while it is held succeeds at
//     once (the count goes up; Release once per Acquire) - it does NOT exclude another goroutine
//     using the same Lock;
//   - for mutual exclusion between goroutines, give each its own Lock (Client.Lock makes no round
//     trip): Locks exclude each other, in this process or any other, as do Redisson clients;
//   - a Lock's Acquire, TryAcquire, Release and Retire run one at a time: while an Acquire waits,
//     the same Lock's Release waits for it (or for its own ctx). Held and HolderID never wait. A
//     cancelled ctx or Close ends a wait within about 50ms (bg_call_cancel).
//
// One library thread renews the holds of every Lock of the process (10,000 held Locks cost no
// extra threads); Close releases whatever is still held. A Lock is safe for concurrent use;
// Close it when done (a cleanup closes a forgotten one, as a safety net only).
type Lock struct {
	h       *lockHandle
	name    string
	key     string
	cleanup runtime.Cleanup
}

// lockHandle owns the C lock and the Lock's owner (unless shared: WithLockOwner).
type lockHandle struct {
	mu     sync.RWMutex // held for reading by every call (for its whole run), for writing by close
	p      *C.bg_lock   // nil once closed
	owner  *C.bg_lock_owner
	shared *LockOwner // WithLockOwner's (kept reachable while the Lock is open); nil: owner is the Lock's
	// the library refuses overlapping calls of one owner on one lock: they take turns here
	turn chan struct{}
	// the C calls of waiting Acquires, which close cancels before it waits for them
	wmu     sync.Mutex
	waiting map[*C.bg_call]struct{}
	closing bool
	wait    time.Duration
	hasMax  bool
}

// run runs fn with the open handle; ErrClosed once closed.
func (h *lockHandle) run(fn func(p *C.bg_lock, o *C.bg_lock_owner)) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.p == nil {
		return errorf(CodeClosed, "the lock is closed")
	}
	fn(h.p, h.owner)
	return nil
}

// runTurn is run for the calls that change the hold: one at a time, waiting for the turn no
// longer than ctx allows.
func (h *lockHandle) runTurn(ctx context.Context, fn func(p *C.bg_lock, o *C.bg_lock_owner)) error {
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return cancelled(ctx, CodeLocked, "waiting for another call of this Lock")
	}
	defer func() { <-h.turn }()
	return h.run(fn)
}

// track records a waiting Acquire's call (false once closing: the Lock is closed).
func (h *lockHandle) track(p *C.bg_call) bool {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if h.closing {
		return false
	}
	if h.waiting == nil {
		h.waiting = make(map[*C.bg_call]struct{})
	}
	h.waiting[p] = struct{}{}
	return true
}

// untrack forgets it; true when close cancelled it meanwhile.
func (h *lockHandle) untrack(p *C.bg_call) bool {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	delete(h.waiting, p)
	return h.closing
}

func (h *lockHandle) close() {
	// waiting Acquires stop waiting (within ~50ms) so that close need not wait out their waits
	h.wmu.Lock()
	h.closing = true
	for p := range h.waiting {
		C.bg_call_cancel(p)
	}
	h.wmu.Unlock()
	h.mu.Lock()
	p, o, shared := h.p, h.owner, h.shared
	h.p, h.owner, h.shared = nil, nil, nil
	h.mu.Unlock()
	if p == nil {
		return
	}
	C.bg_lock_close(p) // releases what the owner still holds (from this goroutine: any thread will do)
	if shared == nil {
		C.bg_lock_owner_free(o) // the Lock's own: holds nothing now
	}
	runtime.KeepAlive(shared) // a shared owner is freed by its own cleanup, after this
}

// Lock opens a lock on the key name+":lock" (name is typically a filter's name; no round trip).
// It fails with ErrBadName when the lock's keys would not share one cluster slot (e.g. "a{}b").
// See Lock for who holds it: open one Lock per goroutine that needs exclusion.
func (c *Client) Lock(name string, opts ...LockOption) (*Lock, error) {
	var s lockSettings
	apply(&s, opts)
	if strings.IndexByte(name, 0) >= 0 {
		return nil, errorf(CodeInvalid, "the lock name contains a NUL byte")
	}
	o, err := newOptions(s.sets)
	if err != nil {
		return nil, err
	}
	defer freeOptions(o)
	c.h.mu.RLock()
	defer c.h.mu.RUnlock()
	if c.h.p == nil {
		return nil, errClientClosed()
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p *C.bg_lock
	if err := openWithCall(func(call *C.bg_call) C.int { return C.bg_lock_open_ex(&p, call, c.h.p, cname, o) }); err != nil {
		return nil, err
	}
	return newLock(p, name, s)
}

// Lock opens the filter's own lock (key "{NAME}:lock", in the filter's cluster slot; a Java
// service shares it as redisson.getLock("{NAME}:lock")). While it is held in LockWrite mode the filter's
// queries, in every process, wait up to WithWriteLockWait and then fail with ErrLocked (which a
// Policy answers): this is how the Locked strategy rebuilds in place, and how a caller can make
// in-place writes of its own. Exclusive and read holds do not stop queries.
func (f *Filter) Lock(opts ...LockOption) (*Lock, error) {
	var s lockSettings
	apply(&s, opts)
	o, err := newOptions(s.sets)
	if err != nil {
		return nil, err
	}
	defer freeOptions(o)
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return nil, errFilterClosed()
	}
	var p *C.bg_lock
	if err := openWithCall(func(call *C.bg_call) C.int { return C.bg_lock_open_filter_ex(&p, call, f.h.p, o) }); err != nil {
		return nil, err
	}
	return newLock(p, f.name, s)
}

// openWithCall runs an open (no I/O) with a bg_call of its own: a failure carries that call's
// message, not the handle's shared slot, where another goroutine's failure may land meanwhile.
func openWithCall(open func(call *C.bg_call) C.int) error {
	c, err := beginCall(context.Background())
	if err != nil {
		return err
	}
	return c.end(context.Background(), open(c.p))
}

func newLock(p *C.bg_lock, name string, s lockSettings) (*Lock, error) {
	var o *C.bg_lock_owner
	if s.owner != nil {
		o = s.owner.p
	} else if st := C.bg_lock_owner_new(&o); st != C.BG_OK {
		C.bg_lock_close(p)
		return nil, newError(st, "bg_lock_owner_new: out of memory")
	}
	h := &lockHandle{p: p, owner: o, shared: s.owner, turn: make(chan struct{}, 1),
		wait: min(s.wait, maxCallTimeout), hasMax: s.waitSet}
	l := &Lock{h: h, name: name, key: C.GoString(C.bg_lock_key(p))}
	l.cleanup = runtime.AddCleanup(l, (*lockHandle).close, h)
	return l, nil
}

// Name is the name the lock was opened with.
func (l *Lock) Name() string { return l.name }

// Key is the lock's Redis key: Name()+":lock".
func (l *Lock) Key() string { return l.key }

// Close releases every hold still held through the Lock (errors ignored) and frees it. Idempotent; it waits for calls in flight (a waiting Acquire is cancelled: ErrClosed);
// later calls fail with ErrClosed. Close always returns nil.
func (l *Lock) Close() error {
	if l == nil || l.h == nil {
		return nil
	}
	l.cleanup.Stop()
	l.h.close()
	return nil
}

// HolderID is the Lock's holder id, "<UUID>:<owner number>": the hash field that names it in
// Redis while it holds the lock (the UUID is made at random for each Lock, the number is its
// library lock owner's; Redisson's RLock puts a thread id there). Empty once closed.
func (l *Lock) HolderID() string {
	var id string
	l.h.run(func(p *C.bg_lock, o *C.bg_lock_owner) {
		var buf [128]C.char
		C.bg_lock_holder_id_owner(p, o, &buf[0], C.size_t(len(buf)))
		id = C.GoString(&buf[0])
	})
	return id
}

// Hold is what a Lock holds (Held).
type Hold struct {
	Mode  LockMode // the mode of the Acquire that started the hold; 0 when nothing is held
	Count uint32   // the reentrancy count (Acquire calls not yet released)
	Token uint64   // the hold's fencing token
}

// Held returns what the Lock holds, without a round trip. The error is ErrLocked when the
// library's renewal found the hold lost (its lease ran out, or the key was deleted): Hold then
// still describes it, until Release (which fails with ErrLocked too) forgets it.
func (l *Lock) Held() (Hold, error) {
	var hold Hold
	var st C.int
	var msg string
	if err := l.h.run(func(p *C.bg_lock, o *C.bg_lock_owner) {
		var mode C.int
		var count C.uint32_t
		var token C.uint64_t
		st = C.bg_lock_held_owner_ex(p, nil, o, &mode, &count, &token)
		hold = Hold{Mode: LockMode(mode), Count: uint32(count), Token: uint64(token)}
		if st != C.BG_OK {
			msg = lockErrmsg(p)
		}
	}); err != nil {
		return Hold{}, err
	}
	if st != C.BG_OK {
		return hold, newError(st, msg)
	}
	return hold, nil
}

func lockErrmsg(p *C.bg_lock) string {
	var buf [errbufSize]C.char
	C.bg_lock_errmsg_copy(p, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// Acquire takes the lock in mode and returns the hold's fencing token: strictly increasing across
// every hold of this lock by any bloomguard process (pass it to the storage you write, so a
// stale holder's writes can be refused). A reentrant Acquire (the Lock holds it already) returns
// at once with the token of the hold it re-enters.
//
// Waiting: while the lock is taken Acquire waits (woken by the unlock message, see
// WithLockSubscribe) as long as ctx allows, at most WithLockWait if set. When WithLockWait runs
// out: ErrLocked, the message naming the holder and its lease. When ctx ends the wait: an error
// that is ErrLocked and ctx.Err() (context.Canceled, or context.DeadlineExceeded - a deadline
// that falls during a round trip gives ErrTimeout and context.DeadlineExceeded instead).
// ctx's deadline is also the timeout of each round trip, as for filter calls.
//
// Other errors: ErrLocked at once when the Lock's earlier hold was lost (its lease ran out; it
// holds nothing now), ErrInvalid for an unknown mode or an upgrade (Acquire(LockExclusive or
// LockWrite) while holding LockRead: release first), connection errors as usual (the lock is then
// not held by this call), ErrClosed.
func (l *Lock) Acquire(ctx context.Context, mode LockMode) (token uint64, err error) {
	if err := checkContext(ctx); err != nil {
		return 0, err
	}
	c, err := beginCall(ctx) // ctx's end cancels the library's wait (call.watch)
	if err != nil {
		return 0, err
	}
	wait := maxCallTimeout
	if l.h.hasMax {
		wait = l.h.wait
	}
	if !l.h.track(c.p) {
		c.release()
		return 0, errorf(CodeClosed, "the lock is closed")
	}
	var st C.int
	var tok C.uint64_t
	runErr := l.h.runTurn(ctx, func(p *C.bg_lock, o *C.bg_lock_owner) {
		st = C.bg_lock_acquire_owner_ex(p, c.p, o, C.int(mode), C.int64_t(wait/time.Millisecond), &tok)
	})
	closed := l.h.untrack(c.p)
	if runErr != nil {
		c.release()
		return 0, runErr
	}
	switch st {
	case C.BG_OK:
		c.release()
		return uint64(tok), nil
	case C.BG_ECANCELED:
		msg := C.GoString(C.bg_call_errmsg(c.p))
		c.release()
		if contextError(ctx) == nil && closed {
			return 0, errorf(CodeClosed, "the lock was closed while Acquire waited")
		}
		// still taken when ctx ended the wait: ErrLocked and ctx.Err()
		return 0, cancelled(ctx, CodeLocked, msg)
	}
	return 0, c.end(ctx, st)
}

// TryAcquire is Acquire with a single try: ErrLocked at once when the lock is taken.
func (l *Lock) TryAcquire(ctx context.Context, mode LockMode) (token uint64, err error) {
	if err := checkContext(ctx); err != nil {
		return 0, err
	}
	c, err := beginCall(ctx)
	if err != nil {
		return 0, err
	}
	var st C.int
	var tok C.uint64_t
	if err := l.h.runTurn(ctx, func(p *C.bg_lock, o *C.bg_lock_owner) {
		st = C.bg_lock_acquire_owner_ex(p, c.p, o, C.int(mode), 0, &tok)
	}); err != nil {
		c.release()
		return 0, err
	}
	return uint64(tok), c.end(ctx, st)
}

// Release undoes one Acquire; the last one ends the hold and wakes the waiters (Redisson's too).
// ErrInvalid when the Lock holds nothing; ErrLocked when its hold was lost meanwhile (the lease
// ran out; the lock may be someone else's now and is left alone; the Lock holds nothing after
// that). A failed round trip leaves the hold in place (still renewed): Release again.
func (l *Lock) Release(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	c, err := beginCall(ctx)
	if err != nil {
		return err
	}
	var st C.int
	if err := l.h.runTurn(ctx, func(p *C.bg_lock, o *C.bg_lock_owner) { st = C.bg_lock_release_owner_ex(p, c.p, o) }); err != nil {
		c.release()
		return err
	}
	return c.end(ctx, st)
}

// Retire retires the lock's name: it deletes the fencing-token counter (and the readers and
// writers bookkeeping keys) only when nobody holds the lock - in any mode, from any process,
// Redisson's RLock included - and no writer waits for it, checked and deleted in one
// server-side step. deleted reports whether a counter existed. ErrLocked (the message names a
// holder) when the lock is in use; nothing is deleted then.
//
// The counter otherwise lives forever, on purpose: it keeps fencing tokens from going
// backwards. After Retire the name's tokens restart from 1, so retire only a name that will not
// be locked again while tokens drawn from it may still be checked.
func (l *Lock) Retire(ctx context.Context) (deleted bool, err error) {
	if err := checkContext(ctx); err != nil {
		return false, err
	}
	c, err := beginCall(ctx)
	if err != nil {
		return false, err
	}
	var st, del C.int
	if err := l.h.run(func(p *C.bg_lock, _ *C.bg_lock_owner) { st = C.bg_lock_retire_ex(p, c.p, &del) }); err != nil {
		c.release()
		return false, err
	}
	return del != 0, c.end(ctx, st)
}
