package bloomguard

/*
#include <bloomguard.h>

// Never calls Go (see filter.go).
#cgo noescape bg_filter_stat
#cgo nocallback bg_filter_stat
*/
import "C"

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

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

// RefreshSnapshot downloads the filter's bitmap and config into its local snapshot now (with or
// without a policy), replacing the one held once complete; ActionSnapshot answers from it. The
// download is consistent (it starts over when the filter is rebuilt meanwhile: 3 attempts, then
// ErrConfigChanged; ErrRotationInProgress during a rotation). Memory: Size/8 bytes.
func (f *Filter) RefreshSnapshot(ctx context.Context) error {
	p, c, err := f.begin(ctx)
	if err != nil {
		return err
	}
	st := C.bg_filter_snapshot_refresh_ex(p, c.p)
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
	TrackedReads          int64         // query round trips that sent only BITFIELD_RO (native: BF.MEXISTS) (WithTracking)
	TrackedStale          int64         // of those, answers dropped for an invalidation and asked again
	// Redis Cluster: the client's counters (the same for every filter of one Client; 0 standalone).
	ClusterMoved       int64 // MOVED redirects followed
	ClusterAsk         int64 // ASK redirects followed
	ClusterBusyRetries int64 // TRYAGAIN / CLUSTERDOWN / LOADING answers waited out
	ClusterMapReloads  int64 // slot map reloads
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
	{C.BG_STAT_TRACKED_READS, func(s *Stats, v int64) { s.TrackedReads = v }},
	{C.BG_STAT_TRACKED_STALE, func(s *Stats, v int64) { s.TrackedStale = v }},
	{C.BG_STAT_CLUSTER_MOVED, func(s *Stats, v int64) { s.ClusterMoved = v }},
	{C.BG_STAT_CLUSTER_ASK, func(s *Stats, v int64) { s.ClusterAsk = v }},
	{C.BG_STAT_CLUSTER_BUSY_RETRIES, func(s *Stats, v int64) { s.ClusterBusyRetries = v }},
	{C.BG_STAT_CLUSTER_MAP_RELOADS, func(s *Stats, v int64) { s.ClusterMapReloads = v }},
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
