package bloomguard

/*
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <bloomguard.h>

#cgo noescape bg_filter_histogram
#cgo nocallback bg_filter_histogram
#cgo noescape bg_client_stat
#cgo nocallback bg_client_stat
#cgo nocallback bgo_take

// Events reach Go through a ring in C, never by a call into Go on the library's thread: the
// library may emit an event inside a call marked nocallback (a query whose breaker opens), or on
// a thread of its own holding a lock of a connection. The observer copies the event into the
// ring (one process-wide ring: it is never freed, so an event delivered after its client went
// is harmless) and writes a byte to a pipe; a goroutine reads the pipe and hands the events out.
#define BGO_RING 512
typedef struct bgo_event {
	uintptr_t sink;
	int kind;
	int64_t v[BG_EVENT_NVALUES];
	char name[160];
	char msg[512];
} bgo_event;

static pthread_mutex_t bgo_mu = PTHREAD_MUTEX_INITIALIZER;
static bgo_event bgo_ring[BGO_RING];
static unsigned bgo_head, bgo_len;
static uint64_t bgo_dropped;
static int bgo_wake = -1;

static void bgo_observe(void *ud, int kind, const char *name, const int64_t *v, size_t nv, const char *msg) {
	pthread_mutex_lock(&bgo_mu);
	if (bgo_len == BGO_RING) {   // full: the oldest goes
		bgo_head = (bgo_head + 1) % BGO_RING;
		bgo_len--;
		bgo_dropped++;
	}
	bgo_event *e = &bgo_ring[(bgo_head + bgo_len) % BGO_RING];
	bgo_len++;
	e->sink = (uintptr_t)ud;
	e->kind = kind;
	memset(e->v, 0, sizeof e->v);
	memcpy(e->v, v, (nv < BG_EVENT_NVALUES ? nv : BG_EVENT_NVALUES) * sizeof *v);
	snprintf(e->name, sizeof e->name, "%s", name);
	snprintf(e->msg, sizeof e->msg, "%s", msg);
	int fd = bgo_wake;
	pthread_mutex_unlock(&bgo_mu);
	if (fd >= 0) {
		ssize_t ignored = write(fd, "e", 1);   // non-blocking: a full pipe has wakes enough
		(void)ignored;
	}
}

static void bgo_set_wake(int fd) {
	pthread_mutex_lock(&bgo_mu);
	bgo_wake = fd;
	pthread_mutex_unlock(&bgo_mu);
}

// Moves up to max events to out; *dropped: events the full ring lost since the last take.
static size_t bgo_take(bgo_event *out, size_t max, uint64_t *dropped) {
	size_t n = 0;
	pthread_mutex_lock(&bgo_mu);
	for (; n < max && bgo_len; n++, bgo_len--) {
		out[n] = bgo_ring[bgo_head];
		bgo_head = (bgo_head + 1) % BGO_RING;
	}
	*dropped = bgo_dropped;
	bgo_dropped = 0;
	pthread_mutex_unlock(&bgo_mu);
	return n;
}

static int bgo_attach(bg_client *c, uintptr_t sink) { return bg_client_set_observer(c, bgo_observe, (void *)sink); }
static int bgo_detach(bg_client *c) { return bg_client_set_observer(c, NULL, NULL); }
*/
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
	"weak"
)

// ---- events --------------------------------------------------------------------------------------

// EventKind is what happened (BG_EVENT_*, bloomguard/observe.h).
type EventKind int

const (
	EventBreakerOpen     EventKind = C.BG_EVENT_BREAKER_OPEN      // the circuit breaker opened
	EventBreakerHalfOpen EventKind = C.BG_EVENT_BREAKER_HALF_OPEN // its cooldown ended: one probe goes through
	EventBreakerClosed   EventKind = C.BG_EVENT_BREAKER_CLOSED    // a call reached the server again
	EventDegraded        EventKind = C.BG_EVENT_DEGRADED          // answers from the policy (sampled)
	EventRotationBegin   EventKind = C.BG_EVENT_ROTATION_BEGIN    // a rotation took its lease
	EventRotationCommit  EventKind = C.BG_EVENT_ROTATION_COMMIT   // a rotation's generation went live
	EventRotationAbort   EventKind = C.BG_EVENT_ROTATION_ABORT    // aborted, or failed
	EventFailover        EventKind = C.BG_EVENT_FAILOVER          // a Sentinel-managed master changed
	EventClusterMap      EventKind = C.BG_EVENT_CLUSTER_MAP       // slots served by other masters
	EventConnectionLost  EventKind = C.BG_EVENT_CONNECTION_LOST   // a connection that was up failed
	EventLockLost        EventKind = C.BG_EVENT_LOCK_LOST         // a held lock, or a rotation's lease, gone
)

// String is the kind's name ("breaker_open", ...), or "EventKind(n)".
func (k EventKind) String() string {
	if p := C.bg_event_name(C.int(k)); p != nil {
		return C.GoString(p)
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one event of a client, its filters, locks and rotations (bloomguard/observe.h).
type Event struct {
	Kind    EventKind
	Name    string    // the filter or lock; "" for the client's own (connections, the cluster map, a failover)
	Message string    // for a human; never a password
	Time    time.Time // when the binding took it from the library (shortly after it happened)
	// The values (those a kind does not use are zero):
	Status   Code          // the failure (breaker open, degraded, rotation abort, connection lost); 0 when none
	Source   Source        // degraded: where the last answer came from
	Count    int64         // breaker open: consecutive failures; degraded: answers since the last event; cluster map: slots that moved; connection lost: its round trips; lock lost: the fencing token
	Strategy Strategy      // rotations
	Items    int64         // rotations: items added
	Bytes    int64         // rotations: bytes uploaded
	Duration time.Duration // rotation commit / abort: since begin; breaker closed: how long it was not; breaker open: its cooldown
	First    bool          // cluster map: the first map the client loaded
}

// Level is the slog level the event is logged at: Warn for a breaker that opens, degraded
// answers, a failover, a lost connection or lock, a rotation that failed; Info otherwise.
func (e Event) Level() slog.Level {
	switch e.Kind {
	case EventBreakerOpen, EventDegraded, EventFailover, EventConnectionLost, EventLockLost:
		return slog.LevelWarn
	case EventRotationAbort:
		if e.Status != CodeAborted {
			return slog.LevelWarn
		}
	}
	return slog.LevelInfo
}

// WithLogger logs the client's events to logger (log/slog): its message, with the attributes
// "event" (the kind), "name" and the values that apply. Events are handed over by a goroutine
// of the binding, in order, shortly after they happen (never on the library's threads), until
// Close.
func WithLogger(logger *slog.Logger) Option {
	return func(o *openSettings) { o.logger = logger }
}

// WithEventHandler calls fn with each event of the client (as WithLogger, from the binding's
// event goroutine, one at a time, until Close). fn should return quickly: the next events wait.
func WithEventHandler(fn func(Event)) Option {
	return func(o *openSettings) { o.onEvent = fn }
}

// WithDegradedEventsPerSecond bounds the degraded-answer events told per filter handle
// (BG_OPT_DEGRADED_EVENTS_PER_S; default 1, 0..1000000; 0 tells none: the answers are still
// counted in Stats).
func WithDegradedEventsPerSecond(n int) Option {
	return intOption("WithDegradedEventsPerSecond", C.BG_OPT_DEGRADED_EVENTS_PER_S, int64(n))
}

// WithHistograms turns the latency histograms of the client's filters on (default) or off
// (BG_OPT_HISTOGRAMS).
func WithHistograms(on bool) Option { return boolOption("WithHistograms", C.BG_OPT_HISTOGRAMS, on) }

type eventSink struct {
	logger  *slog.Logger
	onEvent func(Event)
}

var (
	sinks      sync.Map // uintptr -> *eventSink
	nextSink   atomic.Uintptr
	eventsOnce sync.Once
	eventsErr  error
)

// attachObserver installs the library's observer on p when the options ask for events: the
// sink's id (0: none).
func attachObserver(p *C.bg_client, opts []Option) (uintptr, error) {
	var s openSettings
	apply(&s, opts)
	if s.logger == nil && s.onEvent == nil {
		return 0, nil
	}
	eventsOnce.Do(startEvents)
	if eventsErr != nil {
		return 0, eventsErr
	}
	id := nextSink.Add(1)
	sinks.Store(id, &eventSink{logger: s.logger, onEvent: s.onEvent})
	if st := C.bgo_attach(p, C.uintptr_t(id)); st != C.BG_OK {
		sinks.Delete(id)
		return 0, newError(st, "bg_client_set_observer failed")
	}
	return id, nil
}

// detachObserver removes it (before the client is closed): events already in the ring for the
// sink are dropped.
func detachObserver(p *C.bg_client, id uintptr) {
	if id == 0 {
		return
	}
	C.bgo_detach(p)
	sinks.Delete(id)
}

// eventsPipe makes a non-blocking, close-on-exec pipe on every platform (pipe2 is not on macOS):
// under syscall.ForkLock, as the os package does there, so that no fork sees it before it is
// close-on-exec.
func eventsPipe() ([2]int, error) {
	var fds [2]int
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := syscall.Pipe(fds[:]); err != nil {
		return fds, err
	}
	for _, fd := range fds {
		syscall.CloseOnExec(fd)
		if err := syscall.SetNonblock(fd, true); err != nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			return fds, err
		}
	}
	return fds, nil
}

func startEvents() {
	fds, err := eventsPipe()
	if err != nil {
		eventsErr = fmt.Errorf("bloomguard: cannot make the events pipe: %w", err)
		return
	}
	r := os.NewFile(uintptr(fds[0]), "bloomguard-events") // non-blocking: read through the netpoller
	C.bgo_set_wake(C.int(fds[1]))
	go deliverEvents(r)
}

func deliverEvents(r *os.File) {
	wake := make([]byte, 256)
	buf := (*[64]C.bgo_event)(C.malloc(C.size_t(unsafe.Sizeof(C.bgo_event{})) * 64))
	for {
		if _, err := r.Read(wake); err != nil {
			return
		}
		for {
			var dropped C.uint64_t
			n := int(C.bgo_take(&buf[0], 64, &dropped))
			if dropped > 0 {
				dropNotice(uint64(dropped))
			}
			for i := 0; i < n; i++ {
				deliver(&buf[i])
			}
			if n < 64 {
				break
			}
		}
	}
}

func deliver(ce *C.bgo_event) {
	v, ok := sinks.Load(uintptr(ce.sink))
	if !ok {
		return
	}
	s := v.(*eventSink)
	e := Event{
		Kind:     EventKind(ce.kind),
		Name:     C.GoString(&ce.name[0]),
		Message:  C.GoString(&ce.msg[0]),
		Time:     time.Now(),
		Status:   Code(ce.v[C.BG_EV_STATUS]),
		Source:   Source(ce.v[C.BG_EV_SOURCE]),
		Count:    int64(ce.v[C.BG_EV_COUNT]),
		Strategy: Strategy(ce.v[C.BG_EV_STRATEGY]),
		Items:    int64(ce.v[C.BG_EV_ITEMS]),
		Bytes:    int64(ce.v[C.BG_EV_BYTES]),
		Duration: time.Duration(ce.v[C.BG_EV_DURATION_US]) * time.Microsecond,
		First:    ce.v[C.BG_EV_FIRST] != 0,
	}
	if s.logger != nil {
		s.logger.LogAttrs(context.Background(), e.Level(), e.Message, e.attrs()...)
	}
	if s.onEvent != nil {
		s.onEvent(e)
	}
}

// dropNotice tells every logger that events were lost (more than the ring holds came at once).
func dropNotice(n uint64) {
	sinks.Range(func(_, v any) bool {
		if l := v.(*eventSink).logger; l != nil {
			l.Warn("bloomguard: events were dropped (more came at once than the binding holds)", "dropped", n)
		}
		return true
	})
}

func (e Event) attrs() []slog.Attr {
	a := []slog.Attr{slog.String("event", e.Kind.String())}
	if e.Name != "" {
		a = append(a, slog.String("name", e.Name))
	}
	if e.Status != 0 {
		a = append(a, slog.String("status", e.Status.String()))
	}
	switch e.Kind {
	case EventDegraded:
		a = append(a, slog.String("source", e.Source.String()), slog.Int64("count", e.Count))
	case EventBreakerOpen, EventClusterMap, EventConnectionLost:
		a = append(a, slog.Int64("count", e.Count))
	case EventRotationBegin, EventRotationCommit, EventRotationAbort:
		a = append(a, slog.String("strategy", e.Strategy.String()), slog.Int64("items", e.Items),
			slog.Int64("bytes", e.Bytes), slog.Duration("duration", e.Duration))
	case EventBreakerClosed:
		a = append(a, slog.Duration("duration", e.Duration))
	}
	return a
}

// ---- histograms ---------------------------------------------------------------------------------

// Operation is what a histogram measures (BG_OP_*): db.client.operation.duration's
// db.operation.name, or a rotation per strategy.
type Operation int

const (
	OpContains     Operation = C.BG_OP_CONTAINS      // Contains, ContainsMany, Query (one histogram for all)
	OpAdd          Operation = C.BG_OP_ADD           // Add, AddMany
	OpInit         Operation = C.BG_OP_INIT          // Init
	OpCount        Operation = C.BG_OP_COUNT         // Count
	OpInfo         Operation = C.BG_OP_INFO          // Info
	OpDelete       Operation = C.BG_OP_DELETE        // Delete
	OpExpire       Operation = C.BG_OP_EXPIRE        // Expire
	OpPersist      Operation = C.BG_OP_PERSIST       // Persist
	OpRotateSwap   Operation = C.BG_OP_ROTATE_SWAP   // a Swap rotation, begin to commit or abort
	OpRotateNaive  Operation = C.BG_OP_ROTATE_NAIVE  // a Naive rotation
	OpRotateLocked Operation = C.BG_OP_ROTATE_LOCKED // a Locked rotation
)

// Operations lists every Operation.
var Operations = []Operation{OpContains, OpAdd, OpInit, OpCount, OpInfo, OpDelete, OpExpire, OpPersist,
	OpRotateSwap, OpRotateNaive, OpRotateLocked}

// String is the operation's name ("contains", ..., "rotate_locked").
func (o Operation) String() string {
	if p := C.bg_op_name(C.int(o)); p != nil {
		return C.GoString(p)
	}
	return fmt.Sprintf("Operation(%d)", int(o))
}

// IsRotation tells a rotation (begin to commit or abort) from a filter operation.
func (o Operation) IsRotation() bool { return o >= OpRotateSwap && o <= OpRotateLocked }

// RotationStrategy is the Strategy of a rotation's Operation.
func (o Operation) RotationStrategy() Strategy {
	switch o {
	case OpRotateSwap:
		return Swap
	case OpRotateNaive:
		return Naive
	case OpRotateLocked:
		return Locked
	}
	return 0
}

// Outcome is how an operation ended (BG_OUTCOME_*): OutcomeOK, a failure class (error.type), or
// for rotations aborted by their caller.
type Outcome int

const (
	OutcomeOK             Outcome = C.BG_OUTCOME_OK        // succeeded (a policy's answer too)
	OutcomeNotInitialized Outcome = C.BG_FAIL_NOTINIT      // ErrNotInitialized
	OutcomeConfigChanged  Outcome = C.BG_FAIL_CONFIG       // ErrConfigChanged
	OutcomeLocked         Outcome = C.BG_FAIL_LOCKED       // ErrLocked
	OutcomeConnection     Outcome = C.BG_FAIL_CONNECTION   // ErrConn
	OutcomeTimeout        Outcome = C.BG_FAIL_TIMEOUT      // ErrTimeout
	OutcomeServer         Outcome = C.BG_FAIL_SERVER       // ErrServer (OOM, READONLY, LOADING, BUSY, CLUSTERDOWN)
	OutcomeCorrupt        Outcome = C.BG_FAIL_CORRUPT      // ErrCorrupt, ErrWrongType
	OutcomeOther          Outcome = C.BG_FAIL_OTHER        // any other failure
	OutcomeCancelled      Outcome = C.BG_OUTCOME_CANCELLED // ErrCanceled: the context ended
	OutcomeAborted        Outcome = C.BG_OUTCOME_ABORTED   // a rotation its body or caller aborted
)

// String is the outcome's name ("ok", "timeout", ..., "aborted").
func (o Outcome) String() string {
	if p := C.bg_outcome_name(C.int(o)); p != nil {
		return C.GoString(p)
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// HistogramBuckets is the number of buckets of every histogram (the last is open-ended).
const HistogramBuckets = C.BG_HIST_BUCKETS

// HistogramBounds are the buckets' upper bounds in seconds: 2^i microseconds.
var HistogramBounds = func() []float64 {
	b := make([]float64, HistogramBuckets-1)
	for i := range b {
		b[i] = float64(uint64(1)<<i) / 1e6
	}
	return b
}()

// Histogram is one latency histogram of a filter handle: Counts[i] operations took d with
// Bounds[i-1] < d <= Bounds[i] (the last count: longer than every bound); Count of them in all,
// Sum seconds together.
type Histogram struct {
	Operation Operation
	Outcome   Outcome
	Bounds    []float64 // shared: do not modify
	Counts    []uint64
	Count     uint64
	Sum       float64
}

// Histogram reads one of the handle's latency histograms (kept by the C library: no cost per
// call beyond two atomic additions).
func (f *Filter) Histogram(op Operation, outcome Outcome) (Histogram, error) {
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return Histogram{}, errFilterClosed()
	}
	return readHistogram(f.h.p, op, outcome)
}

// Histograms reads every histogram of the handle that has counted an operation.
func (f *Filter) Histograms() ([]Histogram, error) {
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	if f.h.p == nil {
		return nil, errFilterClosed()
	}
	var out []Histogram
	for _, op := range Operations {
		for o := OutcomeOK; o <= OutcomeAborted; o++ {
			h, err := readHistogram(f.h.p, op, o)
			if err != nil {
				return nil, err
			}
			if h.Count > 0 {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func readHistogram(p *C.bg_filter, op Operation, outcome Outcome) (Histogram, error) {
	var counts [HistogramBuckets]C.uint64_t
	var count C.uint64_t
	var sum C.double
	if st := C.bg_filter_histogram(p, C.int(op), C.int(outcome), nil, &counts[0], HistogramBuckets, &count, &sum); st != C.BG_OK {
		return Histogram{}, newError(st, fmt.Sprintf("bg_filter_histogram(%v, %v): %s", op, outcome, Code(st).Description()))
	}
	h := Histogram{Operation: op, Outcome: outcome, Bounds: HistogramBounds, Counts: make([]uint64, HistogramBuckets),
		Count: uint64(count), Sum: float64(sum)}
	for i := range counts {
		h.Counts[i] = uint64(counts[i])
	}
	return h, nil
}

// ---- the client's counters and filters -------------------------------------------------------------

// ClientStats are a client's counters (BG_CLIENT_STAT_*).
type ClientStats struct {
	Connections           int64 // open now (db.client.connection.count)
	ConnectionsLost       int64 // failed after they were up
	TrackingInvalidations int64 // invalidations pushed by the server (WithTracking)
	ClusterMoved          int64
	ClusterAsk            int64
	ClusterBusyRetries    int64
	ClusterMapReloads     int64
	ClusterMapChanges     int64 // reloads that found slots served elsewhere
	Failovers             int64 // Sentinel: moves to another master
	Events                int64 // events handed to the observer (WithLogger, WithEventHandler)
}

// Stats reads the client's counters (no round trip).
func (c *Client) Stats() (ClientStats, error) {
	c.h.mu.RLock()
	defer c.h.mu.RUnlock()
	if c.h.p == nil {
		return ClientStats{}, errClientClosed()
	}
	var s ClientStats
	for _, f := range []struct {
		id  C.int
		dst *int64
	}{
		{C.BG_CLIENT_STAT_CONNECTIONS, &s.Connections}, {C.BG_CLIENT_STAT_CONNECTIONS_LOST, &s.ConnectionsLost},
		{C.BG_CLIENT_STAT_TRACKING_INVALIDATIONS, &s.TrackingInvalidations},
		{C.BG_CLIENT_STAT_CLUSTER_MOVED, &s.ClusterMoved}, {C.BG_CLIENT_STAT_CLUSTER_ASK, &s.ClusterAsk},
		{C.BG_CLIENT_STAT_CLUSTER_BUSY_RETRIES, &s.ClusterBusyRetries},
		{C.BG_CLIENT_STAT_CLUSTER_MAP_RELOADS, &s.ClusterMapReloads},
		{C.BG_CLIENT_STAT_CLUSTER_MAP_CHANGES, &s.ClusterMapChanges}, {C.BG_CLIENT_STAT_FAILOVERS, &s.Failovers},
		{C.BG_CLIENT_STAT_EVENTS, &s.Events},
	} {
		var v C.int64_t
		if st := C.bg_client_stat(c.h.p, f.id, &v); st != C.BG_OK {
			return ClientStats{}, newError(st, fmt.Sprintf("bg_client_stat(%d): %s", f.id, Code(st).Description()))
		}
		*f.dst = int64(v)
	}
	return s, nil
}

// the filters opened from each client (weakly held), for OpenFilters
type filterSet struct {
	mu sync.Mutex
	fs []weak.Pointer[Filter]
}

var openFilters sync.Map // *clientHandle -> *filterSet

func trackFilter(h *clientHandle, f *Filter) {
	v, _ := openFilters.LoadOrStore(h, &filterSet{})
	set := v.(*filterSet)
	set.mu.Lock()
	set.fs = append(set.fs, weak.Make(f))
	set.mu.Unlock()
}

// OpenFilters returns the filters opened from c that are still open (what the OpenTelemetry and
// Prometheus instrumentation read).
func (c *Client) OpenFilters() []*Filter {
	v, ok := openFilters.Load(c.h)
	if !ok {
		return nil
	}
	set := v.(*filterSet)
	set.mu.Lock()
	defer set.mu.Unlock()
	var out []*Filter
	kept := set.fs[:0]
	for _, w := range set.fs {
		f := w.Value()
		if f == nil || f.closed() {
			continue
		}
		kept = append(kept, w)
		out = append(out, f)
	}
	clear(set.fs[len(kept):])
	set.fs = kept
	return out
}

func (f *Filter) closed() bool {
	f.h.mu.RLock()
	defer f.h.mu.RUnlock()
	return f.h.p == nil
}
