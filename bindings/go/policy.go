package bloomguard

/*
#include <stdlib.h>
#include <bloomguard.h>

// These never call Go (see filter.go for why that matters).
#cgo noescape bg_policy_new
#cgo nocallback bg_policy_new
#cgo noescape bg_policy_set_chain
#cgo nocallback bg_policy_set_chain
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"strconv"
	"time"
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
	apply(p, opts)
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

// policyRange is "; must be LO..HI" for a setting, from the library's own table (bg_policy_bounds).
func policyRange(id C.int, ms bool) string {
	var lo, hi C.int64_t
	if C.bg_policy_bounds(id, &lo, &hi) != C.BG_OK {
		return ""
	}
	off := ""
	if id == C.BG_POLICY_SNAPSHOT_INTERVAL_MS {
		off = " (or 0: never)"
	}
	if ms {
		return fmt.Sprintf("; must be %v..%v%s", time.Duration(lo)*time.Millisecond, time.Duration(hi)*time.Millisecond, off)
	}
	return fmt.Sprintf("; must be %d..%d%s", int64(lo), int64(hi), off)
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
			msg := s.name + ": " + Code(st).Description()
			if st == C.BG_EINVAL {
				msg += policyRange(s.id, s.isMS)
			}
			return fail(newError(st, msg))
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
		if st := setFallback(cp, fallback); st != C.BG_OK {
			return fail(newError(st, "bg_policy_set_fallback failed"))
		}
	}
	return cp, nil
}

// fallbackBox is what a filter's policy handle points to: the Go fallback of that policy.
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
