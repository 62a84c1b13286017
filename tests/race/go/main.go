// Command race_worker is the Go worker of the cross-language race suite (tests/race/README.md),
// through the bloomguard Go binding.
//
// Roles, as in the C worker (tests/race/c/race_worker.c):
//
//	query   queries base items and items whose add already returned OK (read from the added
//	        file before they are queried), one at a time and in batches, from -goroutines
//	        goroutines at once on one Filter: their calls go through the binding's submission
//	        queue (-queues; 0: the blocking calls);
//	add     appends each new item to the database file, adds it, and appends it to the added
//	        file only once the add returned OK;
//	rotate  -count rotations in a row, each reading the database file after the rotation began.
//
// Prints one JSON line of counts; exits 2 only on a harness failure.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

const batchSize = 64

type args struct {
	url, filter, role, strategy, items, db, added, stop, ready, id, kind string
	duration                                                       time.Duration
	count                                                          int
	expected                                                       []int64
	fpp                                                            float64
	holdMS, pauseUS                                                int
	goroutines, queues                                             int
	partitions                                                     int
}

type counts struct {
	Lang           string `json:"lang"`
	Role           string `json:"role"`
	Strategy       string `json:"strategy"`
	Queries        int64  `json:"queries"`
	Checked        int64  `json:"checked"`
	Errors         int64  `json:"errors"`
	FalseNegatives int64  `json:"false_negatives"`
	Adds           int64  `json:"adds"`
	AddErrors      int64  `json:"add_errors"`
	Rotations      int64  `json:"rotations"`
	RotationErrors int64  `json:"rotation_errors"`
	Locked         int64  `json:"locked"` // of the errors: ErrLocked (waited out the 10 s write-lock wait)
	// the client's Redis Cluster counters (Stats.Cluster*; 0 standalone)
	ClusterMoved   int64  `json:"cluster_moved"`
	ClusterAsk     int64  `json:"cluster_ask"`
	ClusterBusy    int64  `json:"cluster_busy"`
	ClusterReloads int64  `json:"cluster_reloads"`
	LastExpected   int64  `json:"last_expected"`
	Tracked        int64  `json:"tracked"`   // queries that read the bits alone (BG_STAT_TRACKED_READS)
	CanTrack       bool   `json:"can_track"` // the library has FeatureTracking (hiredis >= 1.0)
	FirstError     string `json:"first_error"`
	// --partitions: 1 if this worker's tryInit created the filter (the harness made it first), and
	// the P its Info then read
	InitCreated *int64 `json:"init_created,omitempty"`
	Partitions  *int64 `json:"partitions,omitempty"`
}

func (c *counts) note(format string, a ...any) {
	if c.FirstError == "" {
		c.FirstError = fmt.Sprintf(format, a...)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "race worker: "+format+"\n", a...)
	os.Exit(2)
}

// readLines returns the complete lines of path from offset on, and the offset past them (a line
// still being written waits for the next call).
func readLines(path string, offset int64) ([][]byte, int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	data = data[offset:]
	end := bytes.LastIndexByte(data, '\n') + 1
	if end == 0 {
		return nil, offset
	}
	return bytes.Split(data[:end-1], []byte("\n")), offset + int64(end)
}

// appendLine writes "item\n" with one write on an O_APPEND file: lines never interleave.
func appendLine(f *os.File, item string) {
	if _, err := f.Write([]byte(item + "\n")); err != nil {
		fail("%v", err)
	}
}

func touch(path string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		f.Close()
	}
}

func stopper(a *args) func() bool {
	deadline := time.Now().Add(a.duration)
	return func() bool {
		if time.Now().After(deadline) {
			return true
		}
		if a.stop == "" {
			return false
		}
		_, err := os.Stat(a.stop)
		return err == nil
	}
}

// runQuery runs a.goroutines readers at once on the one Filter (the binding's submission queue
// carries their calls: many in flight, no OS thread each), each as the C worker's loop; one of
// them keeps the shared pool of items fresh.
func runQuery(ctx context.Context, a *args, f *bloomguard.Filter, c *counts) {
	pool, _ := readLines(a.items, 0)
	if len(pool) == 0 {
		fail("no base items in %s", a.items)
	}
	var mu sync.RWMutex // guards pool
	var addedOff int64
	var refreshed time.Time
	stop := stopper(a)
	var wg sync.WaitGroup
	var ready sync.Once
	all := make([]counts, a.goroutines)
	for g := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &all[g]
			batch := make([][]byte, batchSize)
			for !stop() {
				if g == 0 && time.Since(refreshed) > 20*time.Millisecond { // items added meanwhile: checked from now on
					more, off := readLines(a.added, addedOff)
					mu.Lock()
					pool, addedOff = append(pool, more...), off
					mu.Unlock()
					refreshed = time.Now()
				}
				mu.RLock()
				item := pool[rand.IntN(len(pool))]
				for j := range batch {
					batch[j] = pool[rand.IntN(len(pool))]
				}
				mu.RUnlock()
				c.Queries++
				c.Checked++
				if ok, err := f.Contains(ctx, item); err != nil {
					c.Errors++
					if errors.Is(err, bloomguard.ErrLocked) {
						c.Locked++
					}
					c.note("contains: %v", err)
				} else if !ok {
					c.FalseNegatives++
					c.note("false negative: %s", item)
				}
				c.Queries++
				c.Checked += batchSize
				if present, err := f.ContainsMany(ctx, batch); err != nil {
					c.Errors++
					if errors.Is(err, bloomguard.ErrLocked) {
						c.Locked++
					}
					c.note("contains_many: %v", err)
				} else {
					for j, ok := range present {
						if !ok {
							c.FalseNegatives++
							c.note("false negative: %s", batch[j])
						}
					}
				}
				ready.Do(func() { touch(a.ready) })
				if a.pauseUS > 0 {
					time.Sleep(time.Duration(a.pauseUS) * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	for _, x := range all {
		c.Queries += x.Queries
		c.Checked += x.Checked
		c.Errors += x.Errors
		c.Locked += x.Locked
		c.FalseNegatives += x.FalseNegatives
		if x.FirstError != "" {
			c.note("%s", x.FirstError)
		}
	}
}

func runAdd(ctx context.Context, a *args, f *bloomguard.Filter, c *counts) {
	open := func(p string) *os.File {
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fail("%v", err)
		}
		return fh
	}
	db, added := open(a.db), open(a.added)
	defer db.Close()
	defer added.Close()
	touch(a.ready)
	stop := stopper(a)
	for seq := 0; seq < a.count && !stop(); seq++ {
		item := fmt.Sprintf("add-%s-%d", a.id, seq)
		appendLine(db, item) // the database first
		if _, err := f.AddString(ctx, item); err != nil {
			c.AddErrors++
			c.note("add: %v", err)
		} else {
			c.Adds++
			appendLine(added, item)
		}
		if a.pauseUS > 0 {
			time.Sleep(time.Duration(a.pauseUS) * time.Microsecond)
		}
	}
}

func runRotate(ctx context.Context, a *args, f *bloomguard.Filter, c *counts) {
	strategy := map[string]bloomguard.Strategy{
		"swap": bloomguard.Swap, "locked": bloomguard.Locked, "naive": bloomguard.Naive}[a.strategy]
	touch(a.ready)
	stop := stopper(a)
	for i := 0; i < a.count && !stop(); i++ {
		expected := a.expected[i%len(a.expected)]
		err := f.Rotate(ctx, expected, a.fpp, strategy, func(r *bloomguard.Rotation) error {
			items, _ := readLines(a.db, 0) // read after the rotation began, as rotation.h asks
			if err := r.AddMany(items); err != nil {
				return err
			}
			time.Sleep(time.Duration(a.holdMS) * time.Millisecond) // adds and queries land meanwhile
			return nil
		})
		if err != nil {
			c.RotationErrors++
			c.note("rotation: %v", err)
			time.Sleep(10 * time.Millisecond)
		} else {
			c.Rotations++
			c.LastExpected = expected
		}
	}
}

// initPartitioned is a service's start-up: Redisson's tryInit, of a partitioned filter, which keeps
// the config already there (the harness made it), then Info, whose P the harness compares. A
// failure is the harness's (exit 2), as a failed open is.
func initPartitioned(ctx context.Context, a *args, f *bloomguard.Filter, c *counts) {
	created, err := f.InitPartitioned(ctx, a.expected[0], a.fpp, a.partitions)
	if err != nil {
		fail("init --partitions %d of %s: %v", a.partitions, a.filter, err)
	}
	info, err := f.Info(ctx)
	if err != nil {
		fail("info of %s: %v", a.filter, err)
	}
	var made, parts int64 = 0, int64(info.Partitions)
	if created {
		made = 1
	}
	c.InitCreated, c.Partitions = &made, &parts
}

func parseArgs() *args {
	a := &args{}
	var duration float64
	var expected string
	flag.StringVar(&a.url, "url", "", "redis URL")
	flag.StringVar(&a.filter, "filter", "", "filter name")
	flag.StringVar(&a.role, "role", "", "query, add or rotate")
	flag.StringVar(&a.strategy, "strategy", "", "swap, locked or naive")
	flag.StringVar(&a.items, "items", "", "base items file")
	flag.StringVar(&a.db, "db", "", "database file")
	flag.StringVar(&a.added, "added", "", "added items file")
	flag.StringVar(&a.stop, "stop", "", "stop when this file exists")
	flag.StringVar(&a.ready, "ready", "", "created once running")
	flag.StringVar(&a.id, "id", "go", "adder's item prefix")
	flag.Float64Var(&duration, "duration", 60, "seconds (cap)")
	flag.IntVar(&a.count, "count", 1000000, "rotations or adds (cap)")
	flag.StringVar(&expected, "expected", "", "N[,N...]: rotation i uses the (i mod len)th")
	flag.Float64Var(&a.fpp, "fpp", 0.01, "false probability")
	flag.IntVar(&a.holdMS, "hold-ms", 0, "pause before each commit")
	flag.IntVar(&a.pauseUS, "pause-us", 0, "pause between operations")
	flag.IntVar(&a.goroutines, "goroutines", 8, "query: readers at once (each pausing --pause-us between loops)")
	flag.IntVar(&a.queues, "queues", 1, "the client's submission queues (bloomguard.WithQueues; 0: blocking calls)")
	flag.StringVar(&a.kind, "kind", "redisson", "redisson, or native: the server's own BF.* filter")
	flag.IntVar(&a.partitions, "partitions", 0, "a partitioned filter's P: tryInit with the first --expected, --fpp and P at start")
	flag.Parse()
	a.duration = time.Duration(duration * float64(time.Second))
	for _, s := range strings.Split(expected, ",") {
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail("--expected: %v", err)
		}
		a.expected = append(a.expected, n)
	}
	if a.url == "" || a.filter == "" || a.items == "" || a.db == "" || a.added == "" {
		fail("--url, --filter, --items, --db and --added are required")
	}
	if (a.role == "rotate" || a.partitions != 0) && len(a.expected) == 0 {
		fail("rotate and --partitions need --expected")
	}
	return a
}

func main() {
	a := parseArgs()
	ctx := context.Background()
	// generous timeouts: the suite judges correctness, not latency on a loaded machine; a query
	// waits out a LOCKED rewrite for up to 10 s (the default 100 ms is for services); config retries:
	// tests/race/README.md, "Config retries"
	client, err := bloomguard.Open(a.url, bloomguard.WithCommandTimeout(10*time.Second),
		bloomguard.WithConnectTimeout(10*time.Second), bloomguard.WithWriteLockWait(10*time.Second),
		bloomguard.WithConfigRetries(20), bloomguard.WithQueues(a.queues))
	if err != nil {
		fail("connect %s: %v", a.url, err)
	}
	defer client.Close()
	var fopts []bloomguard.FilterOption
	switch a.kind {
	case "native":
		fopts = append(fopts, bloomguard.WithNative())
	case "redisson":
	default:
		fail("--kind: redisson or native, not %q", a.kind)
	}
	f, err := client.Filter(a.filter, fopts...)
	if err != nil {
		fail("open %s: %v", a.filter, err)
	}
	defer f.Close()
	c := &counts{Lang: "go", Role: a.role, Strategy: a.strategy}
	if a.partitions != 0 {
		initPartitioned(ctx, a, f, c)
	}
	switch a.role {
	case "query":
		runQuery(ctx, a, f, c)
		if s, err := f.Stats(); err == nil {
			c.Tracked = s.TrackedReads
		}
		c.CanTrack = bloomguard.LibraryFeatures().Has(bloomguard.FeatureTracking)
	case "add":
		runAdd(ctx, a, f, c)
	case "rotate":
		runRotate(ctx, a, f, c)
	default:
		fail("unknown role %q", a.role)
	}
	if st, err := f.Stats(); err == nil {
		c.ClusterMoved, c.ClusterAsk = st.ClusterMoved, st.ClusterAsk
		c.ClusterBusy, c.ClusterReloads = st.ClusterBusyRetries, st.ClusterMapReloads
	}
	out, _ := json.Marshal(c)
	fmt.Println(string(out))
}
