// Command bloomguard-service is a net/http service whose Bloom filter is rebuilt every hour -
// compressed here to twice a second - while it answers requests.
//
// The filter stands in front of a "database" (a map of user ids): GET /users/{id} asks the filter
// first and reads the database only when the filter says "maybe", so a false "absent" (a false
// negative) would report a real user as missing. POST /users/{id} creates a user: the row first,
// then the filter (a rebuild that read the database before the row was there began before the
// add, so the add reaches the new generation too). A goroutine rebuilds the filter from the
// database with a swap rotation, again and again. A client loop in the same program drives the
// service over HTTP and checks every answer against the database; the program exits 1 unless
// there were 0 errors, 0 false negatives and at least 2 rebuilds.
//
//	go run . [URL] [SECONDS] [swap|naive]
//
// naive (delete, then add everything again) is the rebuild that fails; the program catches it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

const (
	filterName = "example:go:users"
	expected   = 100_000
	fpp        = 0.001
	clients    = 8
	// the hourly rebuild, compressed
	rebuildEvery = 500 * time.Millisecond
)

// database is the source of truth the filter guards.
type database struct {
	mu  sync.RWMutex
	ids map[string]struct{}
}

func (d *database) has(id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.ids[id]
	return ok
}

func (d *database) insert(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids[id] = struct{}{}
}

func (d *database) all() [][]byte {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([][]byte, 0, len(d.ids))
	for id := range d.ids {
		out = append(out, []byte(id))
	}
	return out
}

type service struct {
	filter   *bloomguard.Filter
	db       *database
	strategy bloomguard.Strategy
}

// lookup answers 200 (the user exists) or 404; X-Filter says whether the database was asked.
func (s *service) lookup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	maybe, err := s.filter.ContainsString(r.Context(), id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !maybe {
		w.Header().Set("X-Filter", "absent")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("X-Filter", "maybe")
	if !s.db.has(id) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *service) create(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.db.insert(id) // the row first, then the filter
	if _, err := s.filter.AddString(r.Context(), id); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// rebuild is the hourly job: read the source of truth after the rotation began, then commit.
func (s *service) rebuild(ctx context.Context) error {
	return s.filter.Rotate(ctx, expected, fpp, s.strategy, func(r *bloomguard.Rotation) error {
		return r.AddMany(s.db.all())
	}, bloomguard.WithWait(5*time.Second))
}

type counts struct{ lookups, dbReads, errors, falseNegatives, rebuilds, added atomic.Int64 }

// pick is an id to look up, and whether that user exists (known before the lookup): users
// user:new:0 .. created-1 were created (their POST returned), even ids below 40,000 exist.
func pick(rnd *rand.Rand, created int64) (string, bool) {
	if created > 0 && rnd.IntN(4) == 0 {
		return "user:new:" + strconv.FormatInt(rnd.Int64N(created), 10), true
	}
	i := rnd.IntN(80_000)
	return "user:" + strconv.Itoa(i), i < 40_000 && i%2 == 0
}

func main() {
	url, seconds, strategy := "redis://127.0.0.1:6379", 5.0, bloomguard.Swap
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	if len(os.Args) > 2 {
		seconds, _ = strconv.ParseFloat(os.Args[2], 64)
	}
	if len(os.Args) > 3 && os.Args[3] == "naive" {
		strategy = bloomguard.Naive
	}
	if err := run(url, time.Duration(seconds*float64(time.Second)), strategy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(url string, d time.Duration, strategy bloomguard.Strategy) error {
	ctx := context.Background()
	client, err := bloomguard.Open(url, bloomguard.WithCommandTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer client.Close()
	filter, err := client.Filter(filterName)
	if err != nil {
		return err
	}
	defer filter.Close()

	db := &database{ids: map[string]struct{}{}}
	for i := 0; i < 40_000; i += 2 { // even ids exist, odd ones do not
		db.insert("user:" + strconv.Itoa(i))
	}
	svc := &service{filter: filter, db: db, strategy: strategy}
	if _, err := filter.Delete(ctx); err != nil {
		return err
	}
	if err := svc.rebuild(ctx); err != nil { // the first build, before the service answers
		return err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", svc.lookup)
	mux.HandleFunc("POST /users/{id}", svc.create)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	server := &http.Server{Handler: mux}
	go server.Serve(ln)
	base := "http://" + ln.Addr().String()

	var c counts
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the rebuild job
		defer wg.Done()
		tick := time.NewTicker(rebuildEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := svc.rebuild(ctx); err != nil {
					fmt.Fprintln(os.Stderr, "rebuild failed:", err)
					c.errors.Add(1)
				} else {
					c.rebuilds.Add(1)
				}
			}
		}
	}()

	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients + 1}}
	request := func(method, path string) (*http.Response, error) {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := httpc.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body) // read to the end: the connection is reused
			resp.Body.Close()
		}
		return resp, err
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for i := 0; i < clients; i++ { // clients: lookups checked against the database
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, 1))
			for !stopped() {
				id, exists := pick(rnd, c.added.Load())
				resp, err := request(http.MethodGet, "/users/"+id)
				c.lookups.Add(1)
				switch {
				case err != nil || resp.StatusCode == http.StatusInternalServerError:
					fmt.Fprintln(os.Stderr, "lookup failed:", err, statusOf(resp))
					c.errors.Add(1)
				case resp.Header.Get("X-Filter") == "absent" && exists:
					c.falseNegatives.Add(1)
				case resp.Header.Get("X-Filter") == "maybe":
					c.dbReads.Add(1)
				}
			}
		}(uint64(i))
	}
	wg.Add(1)
	go func() { // a client creating users
		defer wg.Done()
		for n := 0; !stopped(); n++ {
			resp, err := request(http.MethodPost, "/users/user:new:"+strconv.Itoa(n))
			if err != nil || resp.StatusCode != http.StatusCreated {
				fmt.Fprintln(os.Stderr, "create failed:", err, statusOf(resp))
				c.errors.Add(1)
				return
			}
			c.added.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// d, and at least 2 rebuilds (a loaded machine is slower)
	for end := time.Now().Add(d); time.Now().Before(end) || c.rebuilds.Load() < 2 && time.Since(end) < 30*time.Second; {
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	shutdown, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	server.Shutdown(shutdown)

	// every user created during the rebuilds is in the filter after them
	all := db.all()
	present, err := filter.ContainsMany(ctx, all)
	if err != nil {
		return err
	}
	for _, p := range present {
		if !p {
			c.falseNegatives.Add(1)
		}
	}
	if _, err := filter.Delete(ctx); err != nil {
		return err
	}
	fmt.Printf("lookups=%d database_reads=%d errors=%d false_negatives=%d rebuilds=%d added=%d\n",
		c.lookups.Load(), c.dbReads.Load(), c.errors.Load(), c.falseNegatives.Load(), c.rebuilds.Load(), c.added.Load())
	if c.errors.Load() != 0 || c.falseNegatives.Load() != 0 || c.rebuilds.Load() < 2 || c.lookups.Load() == 0 {
		return errors.New("FAILED: errors, false negatives, or fewer than 2 rebuilds")
	}
	return nil
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return ""
	}
	return resp.Status
}
