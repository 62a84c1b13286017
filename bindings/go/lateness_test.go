package bloomguard

// How late this machine wakes a sleeping goroutine, for bounds on elapsed time in tests: a probe
// naps 2 ms at a time for the whole test run and records how late each nap ended. A bound is the
// operation's own (its deadline plus a fixed slack) plus the worst lateness seen meanwhile (on a
// loaded machine, under -race, beside a second copy of the suite, every goroutine is woken late -
// the operation's too), never a number hoped for.

import (
	"sync"
	"time"
)

const probeNap = 2 * time.Millisecond

type lateSample struct {
	at   time.Time
	late time.Duration
}

var probe struct {
	once    sync.Once
	mu      sync.Mutex
	samples []lateSample // a ring of the last 4096 naps (8 s at least)
	next    int
}

// startLatenessProbe starts the probe (once; TestMain calls it).
func startLatenessProbe() {
	probe.once.Do(func() {
		probe.samples = make([]lateSample, 4096)
		go func() {
			for {
				t0 := time.Now()
				time.Sleep(probeNap)
				t1 := time.Now()
				probe.mu.Lock()
				probe.samples[probe.next%len(probe.samples)] = lateSample{t1, max(0, t1.Sub(t0)-probeNap)}
				probe.next++
				probe.mu.Unlock()
			}
		}()
	})
}

// machineLate is the worst lateness of a nap that ended since `since` (less 50 ms).
func machineLate(since time.Time) time.Duration {
	startLatenessProbe()
	from := since.Add(-50 * time.Millisecond)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	var worst time.Duration
	for _, s := range probe.samples {
		if s.at.After(from) && s.late > worst {
			worst = s.late
		}
	}
	return worst
}
