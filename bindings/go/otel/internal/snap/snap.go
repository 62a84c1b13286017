// Package snap reads, in one pass, every number the bloomguard instrumentation exports for a
// client: the C library's histograms and counters of its open filters (one call per histogram,
// none per query), summed per filter name (or over every name, when names are left out for
// cardinality), and the client's own counters. The OpenTelemetry and Prometheus packages format
// the same snapshot, so they agree.
package snap

import (
	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

// HistKey names a histogram: the filter ("" when names are left out), the operation or the
// rotation's strategy, and the outcome.
type HistKey struct {
	Filter  string
	Op      bloomguard.Operation
	Outcome bloomguard.Outcome
}

// Hist is a summed histogram.
type Hist struct {
	Counts []uint64
	Count  uint64
	Sum    float64
}

// AnswerKey names an answers counter.
type AnswerKey struct {
	Filter string
	Source bloomguard.Source
}

// Snapshot is every exported number at one collection.
type Snapshot struct {
	Durations     map[HistKey]*Hist // filter operations (db.client.operation.duration)
	Rotations     map[HistKey]*Hist // rotations (bloomguard.rotation.duration, bloomguard.rotations)
	Answers       map[AnswerKey]int64
	Breaker       map[string]bloomguard.BreakerState // the most open state among a name's handles
	Connections   int64
	Moved, Ask    int64
	Invalidations int64
}

// Sources are the answer sources exported (bloomguard.answers).
var Sources = []bloomguard.Source{bloomguard.SourceRedis, bloomguard.SourceSnapshot, bloomguard.SourceCallback,
	bloomguard.SourceAssumedPresent, bloomguard.SourceAssumedAbsent}

var breakerRank = map[bloomguard.BreakerState]int{bloomguard.BreakerClosed: 0, bloomguard.BreakerHalfOpen: 1,
	bloomguard.BreakerOpen: 2}

// Read reads c's snapshot; filterNames false sums every filter into one series (Filter "").
func Read(c *bloomguard.Client, filterNames bool) *Snapshot {
	s := &Snapshot{Durations: map[HistKey]*Hist{}, Rotations: map[HistKey]*Hist{}, Answers: map[AnswerKey]int64{},
		Breaker: map[string]bloomguard.BreakerState{}}
	for _, f := range c.OpenFilters() {
		name := ""
		if filterNames {
			name = f.Name()
		}
		hs, err := f.Histograms()
		if err != nil { // closed meanwhile
			continue
		}
		for _, h := range hs {
			into := s.Durations
			if h.Operation.IsRotation() {
				into = s.Rotations
			}
			k := HistKey{name, h.Operation, h.Outcome}
			sum := into[k]
			if sum == nil {
				sum = &Hist{Counts: make([]uint64, len(h.Counts))}
				into[k] = sum
			}
			for i, n := range h.Counts {
				sum.Counts[i] += n
			}
			sum.Count += h.Count
			sum.Sum += h.Sum
		}
		st, err := f.Stats()
		if err != nil {
			continue
		}
		counts := map[bloomguard.Source]int64{bloomguard.SourceRedis: st.AnswersRedis,
			bloomguard.SourceSnapshot: st.AnswersSnapshot, bloomguard.SourceCallback: st.AnswersCallback,
			bloomguard.SourceAssumedPresent: st.AnswersAssumedPresent, bloomguard.SourceAssumedAbsent: st.AnswersAssumedAbsent}
		for src, n := range counts {
			s.Answers[AnswerKey{name, src}] += n
		}
		if old, ok := s.Breaker[name]; !ok || breakerRank[st.Breaker] > breakerRank[old] {
			s.Breaker[name] = st.Breaker
		}
	}
	if cs, err := c.Stats(); err == nil { // a closed client: its filters still count, its own read 0
		s.Connections, s.Moved, s.Ask, s.Invalidations = cs.Connections, cs.ClusterMoved, cs.ClusterAsk,
			cs.TrackingInvalidations
	}
	return s
}

// RotationOutcome is bloomguard.rotation.outcome and error.type ("" for none) of an outcome.
func RotationOutcome(o bloomguard.Outcome) (string, string) {
	switch o {
	case bloomguard.OutcomeOK:
		return "committed", ""
	case bloomguard.OutcomeAborted:
		return "aborted", ""
	}
	return "failed", o.String()
}

// ErrorType is error.type of an operation's outcome ("" for a success).
func ErrorType(o bloomguard.Outcome) string {
	if o == bloomguard.OutcomeOK {
		return ""
	}
	return o.String()
}

// SourceName is bloomguard.answer.source of a source ("assumed_present": the same in every language).
func SourceName(s bloomguard.Source) string {
	b := []byte(s.String())
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}
