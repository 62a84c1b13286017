package bloomguard

/*
#include <stdint.h>
#include <stdlib.h>
#include <bloomguard.h>

// These never call Go (see filter.go for why that matters).
#cgo noescape bg_policy_new
#cgo nocallback bg_policy_new
#cgo noescape bg_filter_stat
#cgo nocallback bg_filter_stat
#cgo noescape bg_policy_set_chain
#cgo nocallback bg_policy_set_chain

// The //export of callbacks.go (declared here: a file with //export may not define C functions).
extern int bgoFallback(uintptr_t policy, uintptr_t query, void *items, size_t *lens, size_t n, uint8_t *present);

// The Go query running on this thread (a runtime/cgo.Handle), set around the library calls that
// may run the fallback: the library calls it on the querying thread, so the fallback learns which
// query it answers (its context, where to report a panic) without C holding a Go pointer.
static __thread uintptr_t bgo_query;

// The bg_fallback_fn of every policy with a Go fallback: userdata is the policy's cgo.Handle.
static int bgo_fallback(void *userdata, const void *const *items, const size_t *lens, size_t n,
                        uint8_t *present) {
	return bgoFallback((uintptr_t)userdata, bgo_query, (void *)items, (size_t *)lens, n, present);
}

static int bgo_policy_set_fallback(bg_policy *p, uintptr_t handle) {
	return bg_policy_set_fallback(p, bgo_fallback, (void *)handle);
}

// The query paths taken while the filter's policy has a Go fallback: not marked nocallback, and
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
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"
)

// FailureClass is the class of a failed step of a query or add (BG_FAIL_*); the Policy maps each
// to a chain of Actions. ErrInvalid (a caller's mistake) is never degraded.
type FailureClass int

const (
	FailNotInitialized FailureClass = 1 // ErrNotInitialized: no config hash (never initialized, or deleted by a rebuild)
	FailConfigChanged  FailureClass = 2 // ErrConfigChanged: the config kept changing during the call
	FailLocked         FailureClass = 3 // ErrLocked: the filter is write-locked and the wait was exceeded
	FailConnection     FailureClass = 4 // ErrConn: cannot connect, or the connection was lost
	FailTimeout        FailureClass = 5 // ErrTimeout: no answer within the command timeout or the deadline
	FailServer         FailureClass = 6 // ErrServer: an error reply (OOM, READONLY, LOADING, BUSY, ...)
	FailCorrupt        FailureClass = 7 // ErrCorrupt, ErrWrongType
	FailOther          FailureClass = 8 // any other status (ErrAuth, ErrProto, ErrNoMemory, ...)
)

var failureNames = [...]string{"", "not-initialized", "config-changed", "locked", "connection", "timeout",
	"server", "corrupt", "other"}

// String is the class's name ("connection"), or "FailureClass(n)".
func (c FailureClass) String() string {
	if c >= FailNotInitialized && c <= FailOther {
		return failureNames[c]
	}
	return "FailureClass(" + strconv.Itoa(int(c)) + ")"
}

// FailureClasses lists every class, in order.
var FailureClasses = []FailureClass{FailNotInitialized, FailConfigChanged, FailLocked, FailConnection,
	FailTimeout, FailServer, FailCorrupt, FailOther}

// Action is a step of a chain (BG_ACT_*), tried in order until one answers.
type Action int

const (
	// ActionRetry runs the step again, up to WithRetries times, with a backoff (WithBackoff,
	// WithJitter), never past the call's deadline.
	ActionRetry Action = 1
	// ActionSnapshot answers from the local snapshot (RefreshSnapshot, WithSnapshotRefresh), if
	// there is one not older than WithSnapshotMaxAge.
	ActionSnapshot Action = 2
	// ActionCallback asks the Go fallback (WithFallback), if set and the token bucket
	// (WithCallbackRate) has a token; it may decline.
	ActionCallback Action = 3
	// ActionAssumePresent answers "present" for every item (fail-open: no false negatives).
	ActionAssumePresent Action = 4
	// ActionAssumeAbsent answers "absent" for every item (fail-closed).
	ActionAssumeAbsent Action = 5
	// ActionError stops: the call fails with the failure's error.
	ActionError Action = 6
)

var actionNames = [...]string{"", "retry", "snapshot", "callback", "assume-present", "assume-absent", "error"}

// String is the action's name ("assume-present"), or "Action(n)".
func (a Action) String() string {
	if a >= ActionRetry && a <= ActionError {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// MaxChain is the longest chain WithChain accepts (BG_POLICY_MAX_CHAIN).
const MaxChain = 8

// Source is where a query's answer came from (BG_SOURCE_*).
type Source int

const (
	SourceNone           Source = 0 // no answer: the call failed
	SourceRedis          Source = 1 // the server answered
	SourceSnapshot       Source = 2 // the local snapshot of the bitmap
	SourceCallback       Source = 3 // the Go fallback
	SourceAssumedPresent Source = 4 // ActionAssumePresent
	SourceAssumedAbsent  Source = 5 // ActionAssumeAbsent
)

var sourceNames = [...]string{"none", "redis", "snapshot", "callback", "assumed-present", "assumed-absent"}

// String is the source's name ("snapshot"), or "Source(n)".
func (s Source) String() string {
	if s >= SourceNone && s <= SourceAssumedAbsent {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Degraded reports whether the answer came from the policy rather than from Redis.
func (s Source) Degraded() bool { return s >= SourceSnapshot }

// BreakerState is the circuit breaker's state (BG_BREAKER_*).
type BreakerState int

const (
	BreakerClosed   BreakerState = 0 // calls go to Redis
	BreakerOpen     BreakerState = 1 // queries go straight to the chain, adds fail at once
	BreakerHalfOpen BreakerState = 2 // open, and one probe call is in flight
)

// String is the state's name ("open"), or "BreakerState(n)".
func (b BreakerState) String() string {
	switch b {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(b)) + ")"
}

// Fallback answers a degraded query when the chain reaches ActionCallback: it sets present[i] for
// items[i] and returns nil, or returns an error to decline (the chain moves on to its next action;
// what it wrote to present is dropped). It runs on the goroutine of the query, with that query's
// ctx, and only during a query of a filter whose policy holds it (never after Filter.Close or
// SetPolicy replaced it and the queries under way ended). items are copies: they may be kept.
// It may be called by several goroutines at once, at most WithCallbackRate times per second per
// filter handle. It must not use the same filter (that can deadlock against SetPolicy and Close).
//
// A panic in it is recovered before it can reach the library's frames: the library sees a
// decline, and the query fails with a *PanicError (whatever the rest of the chain answered).
// runtime.Goexit in it ends the goroutine; the filter stays usable, but the library's frames of
// that query are abandoned with what they held (a reference to the policy): do not rely on it.
type Fallback func(ctx context.Context, items [][]byte, present []bool) error

// PanicError is the error of a query whose Fallback panicked.
type PanicError struct {
	Value any    // what the fallback panicked with
	Stack []byte // the fallback's stack when it panicked
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("bloomguard: the fallback panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

type chainSetting struct {
	class FailureClass
	acts  []Action
}

// PolicyOption configures a Policy (NewPolicy).
type PolicyOption func(*Policy)

// Policy is what a filter answers when Redis cannot: per FailureClass a chain of Actions, the
// retry, breaker, token-bucket and snapshot settings, and the Go Fallback (bg_policy). It is an
// immutable value: give it to any number of filters (WithPolicy, Filter.SetPolicy), each of which
// gets its own copy (its own breaker, token bucket, counters and snapshot).
//
// Defaults (NewPolicy with no options; a cache-penetration guard: retry briefly, then fail open):
// FailNotInitialized, FailConfigChanged, FailConnection, FailServer: ActionRetry,
// ActionAssumePresent; FailLocked, FailTimeout, FailCorrupt: ActionAssumePresent; FailOther:
// ActionError; 2 retries, backoff 10ms doubling up to 100ms, 50% jitter; breaker after 5
// failures, 1s cooldown; fallback 100 calls/s, burst 100; no snapshot refresh, snapshots of any age.
type Policy struct {
	sets     []setting
	chains   []chainSetting // applied in order
	fallback Fallback
}

// NewPolicy makes a policy from the defaults and opts, checked by the library: a value out of
// range gives ErrInvalid, an unknown class or action ErrNotSupported, with a message naming the
// option.
func NewPolicy(opts ...PolicyOption) (*Policy, error) {
	p := &Policy{}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	cp, err := p.build(0)
	if err != nil {
		return nil, err
	}
	C.bg_policy_free(cp)
	return p, nil
}

func policyInt(name string, id C.int, v int64) PolicyOption {
	set := intSetting(name, id, v)
	return func(p *Policy) { p.sets = append(p.sets, set) }
}

func policyDuration(name string, id C.int, d time.Duration) PolicyOption {
	set := durationSetting(name, id, d)
	return func(p *Policy) { p.sets = append(p.sets, set) }
}

// WithChain sets the chain of a failure class: 1..MaxChain actions tried in order.
func WithChain(class FailureClass, actions ...Action) PolicyOption {
	acts := append([]Action(nil), actions...)
	return func(p *Policy) { p.chains = append(p.chains, chainSetting{class, acts}) }
}

// WithRetries sets the attempts of one ActionRetry (BG_POLICY_RETRY_COUNT; default 2, 0..100).
func WithRetries(n int) PolicyOption {
	return policyInt("WithRetries", C.BG_POLICY_RETRY_COUNT, int64(n))
}

// WithBackoff sets the wait before the first retry, doubled for each next one, and the longest
// wait (BG_POLICY_BACKOFF_BASE_MS, default 10ms, 0..1min; BG_POLICY_BACKOFF_MAX_MS, default
// 100ms, 0..10min).
func WithBackoff(base, maxWait time.Duration) PolicyOption {
	b := durationSetting("WithBackoff(base)", C.BG_POLICY_BACKOFF_BASE_MS, base)
	m := durationSetting("WithBackoff(max)", C.BG_POLICY_BACKOFF_MAX_MS, maxWait)
	return func(p *Policy) { p.sets = append(p.sets, b, m) }
}

// WithJitter shortens each backoff wait by a random 0..pct percent (BG_POLICY_JITTER_PCT;
// default 50, 0..100).
func WithJitter(pct int) PolicyOption {
	return policyInt("WithJitter", C.BG_POLICY_JITTER_PCT, int64(pct))
}

// WithBreaker sets the circuit breaker: it opens after threshold consecutive connection or timeout
// failures (0 turns it off; BG_POLICY_BREAKER_THRESHOLD, default 5, 0..1000000) and lets one probe
// through after cooldown (BG_POLICY_BREAKER_COOLDOWN_MS, default 1s, 1ms..1h).
func WithBreaker(threshold int, cooldown time.Duration) PolicyOption {
	t := intSetting("WithBreaker(threshold)", C.BG_POLICY_BREAKER_THRESHOLD, int64(threshold))
	c := durationSetting("WithBreaker(cooldown)", C.BG_POLICY_BREAKER_COOLDOWN_MS, cooldown)
	return func(p *Policy) { p.sets = append(p.sets, t, c) }
}

// WithCallbackRate sets the fallback's token bucket: perSecond calls (0: unlimited;
// BG_POLICY_CALLBACK_RATE, default 100, 0..1000000) and a bucket of burst tokens, full at first
// (BG_POLICY_CALLBACK_BURST, default 100, 1..1000000). An empty bucket skips ActionCallback.
func WithCallbackRate(perSecond, burst int) PolicyOption {
	r := intSetting("WithCallbackRate(perSecond)", C.BG_POLICY_CALLBACK_RATE, int64(perSecond))
	b := intSetting("WithCallbackRate(burst)", C.BG_POLICY_CALLBACK_BURST, int64(burst))
	return func(p *Policy) { p.sets = append(p.sets, r, b) }
}

// WithSnapshotRefresh downloads the filter's snapshot in a background thread this often, the first
// at once (BG_POLICY_SNAPSHOT_INTERVAL_MS; default 0 = never, else 100ms..24h).
func WithSnapshotRefresh(interval time.Duration) PolicyOption {
	return policyDuration("WithSnapshotRefresh", C.BG_POLICY_SNAPSHOT_INTERVAL_MS, interval)
}

// WithSnapshotMaxAge makes ActionSnapshot skip an older snapshot (BG_POLICY_SNAPSHOT_MAX_AGE_MS;
// default 0 = any age, at most a year).
func WithSnapshotMaxAge(d time.Duration) PolicyOption {
	return policyDuration("WithSnapshotMaxAge", C.BG_POLICY_SNAPSHOT_MAX_AGE_MS, d)
}

// WithSnapshotChunkBytes sets the bytes per GETRANGE of a snapshot download
// (BG_POLICY_SNAPSHOT_CHUNK_BYTES; default 1 MiB, 4096..64 MiB).
func WithSnapshotChunkBytes(n int) PolicyOption {
	return policyInt("WithSnapshotChunkBytes", C.BG_POLICY_SNAPSHOT_CHUNK_BYTES, int64(n))
}

// WithFallback sets the Go function ActionCallback asks (nil: none). See Fallback.
func WithFallback(fn Fallback) PolicyOption {
	return func(p *Policy) { p.fallback = fn }
}

// build makes the C policy; fallback is the cgo.Handle of the filter's fallback box (0: none).
func (p *Policy) build(fallback cgo.Handle) (*C.bg_policy, error) {
	var cp *C.bg_policy
	if st := C.bg_policy_new(&cp); st != C.BG_OK {
		return nil, newError(st, "bg_policy_new failed")
	}
	fail := func(err error) (*C.bg_policy, error) {
		C.bg_policy_free(cp)
		return nil, err
	}
	for _, s := range p.sets {
		if st := C.bg_policy_set_int(cp, s.id, C.int64_t(s.i)); st != C.BG_OK {
			return fail(newError(st, s.name+": "+Code(st).Description()))
		}
	}
	for _, ch := range p.chains {
		class, acts := ch.class, ch.acts
		var buf [MaxChain + 1]C.int
		n := min(len(acts), len(buf))
		for i := 0; i < n; i++ {
			buf[i] = C.int(acts[i])
		}
		st := C.bg_policy_set_chain(cp, C.int(class), &buf[0], C.size_t(len(acts)))
		if st != C.BG_OK {
			return fail(newError(st, fmt.Sprintf("WithChain(%v, %v): %s", class, acts, Code(st).Description())))
		}
	}
	if fallback != 0 {
		if st := C.bgo_policy_set_fallback(cp, C.uintptr_t(fallback)); st != C.BG_OK {
			return fail(newError(st, "bg_policy_set_fallback failed"))
		}
	}
	return cp, nil
}

// fallbackBox is what a filter's policy handle points to: the Go fallback of that policy.
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
func onFallback(box *fallbackBox, q *fallbackQuery, items [][]byte, present []bool) (answered bool) {
	ctx := context.Background()
	if q != nil {
		ctx = q.ctx
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

// WithPolicy gives the Filter a copy of p when it is opened (see Filter.SetPolicy).
func WithPolicy(p *Policy) FilterOption {
	return func(s *filterSettings) { s.policy, s.policySet = p, true }
}

// SetPolicy gives the filter a copy of p (nil: no policy, the default - failures then come back
// as errors, with no breaker). It resets the breaker (closed) and the token bucket (full), keeps
// the counters and the snapshot, and starts or stops the background snapshot refresh. It waits
// for the filter's calls in flight (they keep the policy they started with).
func (f *Filter) SetPolicy(p *Policy) error {
	return f.h.setPolicy(p)
}

func (h *filterHandle) setPolicy(p *Policy) error {
	var box cgo.Handle
	if p != nil && p.fallback != nil {
		box = cgo.NewHandle(&fallbackBox{fn: p.fallback})
		fallbacksLive.Add(1)
	}
	dropBox := func(b cgo.Handle) {
		if b != 0 {
			b.Delete()
			fallbacksLive.Add(-1)
		}
	}
	var cp *C.bg_policy
	if p != nil {
		var err error
		if cp, err = p.build(box); err != nil {
			dropBox(box)
			return err
		}
		defer C.bg_policy_free(cp)
	}
	// The write lock waits for the calls in flight, and keeps new ones out until the filter's
	// fallback flag matches the policy: a call that may run a Go fallback must not take a
	// nocallback path (the runtime would abort).
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		dropBox(box)
		return errFilterClosed()
	}
	if st := C.bg_filter_set_policy(h.p, cp); st != C.BG_OK {
		dropBox(box)
		return newError(st, filterErrmsg(h.p))
	}
	old := h.fallback
	h.fallback = box
	dropBox(old) // no call is in flight, and new ones use the new policy: never called again
	return nil
}

func filterErrmsg(p *C.bg_filter) string {
	var buf [errbufSize]C.char
	C.bg_filter_errmsg_copy(p, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

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

// Answer is a query's answer with its provenance.
type Answer struct {
	Present bool   // for ContainsSource; unused by ContainsManySource
	Source  Source // where the answer came from
	// Reason is the library's message of the failure the policy answered for ("" when Redis
	// answered). The C API gives no status for it (bg_call_status is BG_OK after a degraded answer).
	Reason string
}

// BatchAnswer is ContainsManySource's answer: one Source for the call (for a batch larger than
// 16384 items, the items Redis answered before the failure keep Redis's answers).
type BatchAnswer struct {
	Present []bool
	Source  Source
	Reason  string
}

// ContainsSource is Contains with the answer's provenance: which Source answered, and the failure
// a degraded answer stands in for.
func (f *Filter) ContainsSource(ctx context.Context, item []byte) (Answer, error) {
	a, err := f.ContainsManySource(ctx, [][]byte{item})
	if err != nil {
		return Answer{}, err
	}
	return Answer{Present: a.Present[0], Source: a.Source, Reason: a.Reason}, nil
}

// ContainsManySource is ContainsMany with the answer's provenance.
func (f *Filter) ContainsManySource(ctx context.Context, items [][]byte) (BatchAnswer, error) {
	p, c, err := f.begin(ctx)
	if err != nil {
		return BatchAnswer{}, err
	}
	a := BatchAnswer{Present: make([]bool, len(items))}
	if len(items) == 0 {
		return a, f.end(ctx, c, C.BG_OK)
	}
	a.Source, a.Reason, err = f.query(ctx, p, c, items, a.Present, true)
	if err != nil {
		return BatchAnswer{}, err
	}
	return a, nil
}

// query runs one query on a call begun by f.begin (and ends it): through the callback path when
// the filter's policy has a Go fallback. With want, it also returns the answer's source and, for a
// degraded answer, the failure's message.
func (f *Filter) query(ctx context.Context, p *C.bg_filter, c *call, items [][]byte, present []bool,
	want bool) (src Source, reason string, err error) {
	b, err := marshalItems(items)
	if err != nil {
		f.end(ctx, c, C.BG_OK)
		return 0, "", err
	}
	defer b.free()
	var st C.int
	var pe *PanicError
	if f.h.fallback != 0 { // read under the handle's read lock: SetPolicy cannot change it meanwhile
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
		st, pe = containsCallback(ctx, p, c, b, len(items), present)
		returned = true
	} else {
		st = C.bg_filter_contains_many_ex(p, c.p, b.ptrs, b.lens, C.size_t(len(items)),
			(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(present))))
	}
	if want && st == C.BG_OK {
		src = Source(C.bg_call_source(c.p))
		if src.Degraded() {
			reason = C.GoString(C.bg_call_errmsg(c.p))
		}
	}
	err = f.end(ctx, c, st)
	if pe != nil {
		return 0, "", pe
	}
	return src, reason, err
}

// RefreshSnapshot downloads the filter's bitmap and config into its local snapshot now (with or
// without a policy), replacing the one held once complete; ActionSnapshot answers from it. The
// download is consistent (it starts over when the filter is rebuilt meanwhile: 3 attempts, then
// ErrConfigChanged; ErrRotationInProgress during a rotation). Memory: Size/8 bytes.
func (f *Filter) RefreshSnapshot(ctx context.Context) error {
	p, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	st := C.bg_filter_snapshot_refresh(p, c.p)
	return f.end(ctx, c, st)
}

// Stats are a filter handle's counters (BG_STAT_*), counted with or without a policy since the
// handle was opened. Queries and adds count calls, not items.
type Stats struct {
	Queries               int64 // Contains* calls that passed the argument checks
	AnswersRedis          int64 // queries the server answered
	AnswersSnapshot       int64
	AnswersCallback       int64
	AnswersAssumedPresent int64
	AnswersAssumedAbsent  int64
	QueryErrors           int64 // queries that failed
	Adds                  int64 // Add* calls
	AddErrors             int64
	Retries               int64 // attempts made by ActionRetry (queries and adds)
	Breaker               BreakerState
	BreakerTrips          int64 // times it opened from closed
	BreakerRejected       int64 // attempts not sent because it was open
	BreakerProbes         int64
	CallbackCalls         int64 // calls of the fallback
	CallbackRefused       int64 // ActionCallback skipped: the token bucket was empty
	CallbackDeclined      int64 // fallback calls that declined (returned an error or panicked)
	Rotations             int64 // rotations committed through this handle
	SnapshotRefreshes     int64
	SnapshotFailures      int64
	SnapshotAge           time.Duration // age of the snapshot held now; -1 when there is none
	SnapshotBytes         int64         // its bitmap's size; 0 when none
	// Failures seen, by class: every failed attempt (retries included, breaker rejections not).
	Failures map[FailureClass]int64
}

// statFields maps each BG_STAT_* counter to its field (the tests check none of the header's is
// missing).
var statFields = []struct {
	id  C.int
	set func(*Stats, int64)
}{
	{C.BG_STAT_QUERIES, func(s *Stats, v int64) { s.Queries = v }},
	{C.BG_STAT_ANSWERS_REDIS, func(s *Stats, v int64) { s.AnswersRedis = v }},
	{C.BG_STAT_ANSWERS_SNAPSHOT, func(s *Stats, v int64) { s.AnswersSnapshot = v }},
	{C.BG_STAT_ANSWERS_CALLBACK, func(s *Stats, v int64) { s.AnswersCallback = v }},
	{C.BG_STAT_ANSWERS_ASSUMED_PRESENT, func(s *Stats, v int64) { s.AnswersAssumedPresent = v }},
	{C.BG_STAT_ANSWERS_ASSUMED_ABSENT, func(s *Stats, v int64) { s.AnswersAssumedAbsent = v }},
	{C.BG_STAT_QUERY_ERRORS, func(s *Stats, v int64) { s.QueryErrors = v }},
	{C.BG_STAT_ADDS, func(s *Stats, v int64) { s.Adds = v }},
	{C.BG_STAT_ADD_ERRORS, func(s *Stats, v int64) { s.AddErrors = v }},
	{C.BG_STAT_RETRIES, func(s *Stats, v int64) { s.Retries = v }},
	{C.BG_STAT_BREAKER_STATE, func(s *Stats, v int64) { s.Breaker = BreakerState(v) }},
	{C.BG_STAT_BREAKER_TRIPS, func(s *Stats, v int64) { s.BreakerTrips = v }},
	{C.BG_STAT_BREAKER_REJECTED, func(s *Stats, v int64) { s.BreakerRejected = v }},
	{C.BG_STAT_BREAKER_PROBES, func(s *Stats, v int64) { s.BreakerProbes = v }},
	{C.BG_STAT_CALLBACK_CALLS, func(s *Stats, v int64) { s.CallbackCalls = v }},
	{C.BG_STAT_CALLBACK_REFUSED, func(s *Stats, v int64) { s.CallbackRefused = v }},
	{C.BG_STAT_CALLBACK_DECLINED, func(s *Stats, v int64) { s.CallbackDeclined = v }},
	{C.BG_STAT_ROTATIONS, func(s *Stats, v int64) { s.Rotations = v }},
	{C.BG_STAT_SNAPSHOT_REFRESHES, func(s *Stats, v int64) { s.SnapshotRefreshes = v }},
	{C.BG_STAT_SNAPSHOT_FAILURES, func(s *Stats, v int64) { s.SnapshotFailures = v }},
	{C.BG_STAT_SNAPSHOT_AGE_MS, func(s *Stats, v int64) {
		if v < 0 {
			s.SnapshotAge = -1
		} else {
			s.SnapshotAge = time.Duration(v) * time.Millisecond
		}
	}},
	{C.BG_STAT_SNAPSHOT_BYTES, func(s *Stats, v int64) { s.SnapshotBytes = v }},
}

// Stats reads the handle's counters (no round trip).
func (f *Filter) Stats() (Stats, error) {
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return Stats{}, errFilterClosed()
	}
	var s Stats
	for _, fld := range statFields {
		var v C.int64_t
		if st := C.bg_filter_stat(f.h.p, fld.id, &v); st != C.BG_OK {
			return Stats{}, newError(st, fmt.Sprintf("bg_filter_stat(%d): %s", fld.id, Code(st).Description()))
		}
		fld.set(&s, int64(v))
	}
	s.Failures = make(map[FailureClass]int64, len(FailureClasses))
	for _, cl := range FailureClasses {
		var v C.int64_t
		if st := C.bg_filter_stat(f.h.p, C.BG_STAT_FAIL_NOTINIT-1+C.int(cl), &v); st != C.BG_OK {
			return Stats{}, newError(st, fmt.Sprintf("bg_filter_stat(fail %v): %s", cl, Code(st).Description()))
		}
		s.Failures[cl] = int64(v)
	}
	return s, nil
}
