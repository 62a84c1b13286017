package bloomguard

// TestCluster: the binding against a real Redis Cluster (cluster_helpers_test.go): one node's URL
// and the seed list, filters on every master, Filter.Node, the cluster counters, and goroutines
// querying and adding through a migration of the filter's slot by hand (ASK, TRYAGAIN, MOVED):
// 0 errors, 0 false negatives, 0 lost adds. The routing is C's (tests/c/test_cluster.c has the
// negative control). Skipped with -short.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func clusterNameOn(t *testing.T, c *testCluster, master int, prefix string) string {
	for i := 0; i < 100000; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if c.owner(clusterSlot(name)) == master {
			return name
		}
	}
	t.Fatalf("no name for master %d", master)
	return ""
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	c := startCluster(t)
	ctx := context.Background()
	var masters []int
	for i, n := range c.nodes {
		if n.isMaster {
			masters = append(masters, i)
		}
	}
	items := make([][]byte, 200)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("item-%d", i))
	}

	t.Run("every master", func(t *testing.T) {
		for _, url := range []string{c.url, c.seeds} {
			cl, err := Open(url)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range masters {
				f, err := cl.Filter(clusterNameOn(t, c, m, "go-spread"))
				if err != nil {
					t.Fatal(err)
				}
				f.Delete(ctx)
				if _, err := f.Init(ctx, 1000, 0.01); err != nil {
					t.Fatal(err)
				}
				if _, err := f.AddMany(ctx, items); err != nil {
					t.Fatal(err)
				}
				got, err := f.ContainsMany(ctx, items)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range got {
					if !p {
						t.Errorf("item %d absent on master %d", i, m)
					}
				}
				addr, slot, err := f.Node()
				if want := fmt.Sprintf("127.0.0.1:%d", c.nodes[m].port); err != nil || addr != want || slot != clusterSlot(f.Name()) {
					t.Errorf("Node() = %q, %d, %v; want %q, %d", addr, slot, err, want, clusterSlot(f.Name()))
				}
				f.Delete(ctx)
				f.Close()
			}
			cl.Close()
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if _, err := Open(c.url+"/2", WithConnectAtOpen(true)); err == nil || !strings.Contains(err.Error(), "only db 0") {
			t.Errorf("db 2 in a cluster: %v", err)
		}
		if _, err := Open(c.seeds, WithCluster(ClusterOff)); err == nil || !strings.Contains(err.Error(), "only a Redis Cluster takes") {
			t.Errorf("seeds with cluster mode off: %v", err)
		}
	})

	t.Run("goroutines through a migration", func(t *testing.T) {
		src := masters[0]
		dst := c.otherMaster(src)
		cl, err := Open(c.url)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		name := clusterNameOn(t, c, src, "go-migr")
		slot := clusterSlot(name)
		f, err := cl.Filter(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Delete(ctx)
		present := make([][]byte, 2000)
		for i := range present {
			present[i] = []byte(fmt.Sprintf("p-%d", i))
		}
		if _, err := f.Init(ctx, 10000, 0.01); err != nil {
			t.Fatal(err)
		}
		if _, err := f.AddMany(ctx, present); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var errs, falseNegatives atomic.Int64
		var mu sync.Mutex
		var acked [][]byte
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func(seed int) {
				defer wg.Done()
				for i := seed; !stop.Load(); i += 37 {
					from := i % 1900
					qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					got, err := f.ContainsMany(qctx, present[from:from+1+i%64])
					cancel()
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					for _, p := range got {
						if !p {
							falseNegatives.Add(1)
						}
					}
				}
			}(r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				item := []byte(fmt.Sprintf("ack-%d", i))
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, err := f.Add(actx, item)
				cancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				mu.Lock()
				acked = append(acked, item)
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
		time.Sleep(200 * time.Millisecond)
		for _, to := range []int{dst, src} {
			steps := []func() error{
				func() error { return c.migrateBegin(slot, to) },
				func() error { time.Sleep(100 * time.Millisecond); return c.migrateKey(slot, to, "{"+name+"}:config") },
				func() error { time.Sleep(200 * time.Millisecond); return c.migrateAllKeys(slot, to) },
				func() error { return c.migrateEnd(slot, to) },
			}
			for _, step := range steps {
				if err := step(); err != nil {
					stop.Store(true)
					wg.Wait()
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		stop.Store(true)
		wg.Wait()
		if errs.Load() != 0 || falseNegatives.Load() != 0 {
			t.Errorf("%d errors (first: %v), %d false negatives", errs.Load(), firstErr.Load(), falseNegatives.Load())
		}
		got, err := f.ContainsMany(ctx, acked)
		if err != nil || len(acked) == 0 {
			t.Fatalf("%v (%d acknowledged)", err, len(acked))
		}
		for i, p := range got {
			if !p {
				t.Errorf("acknowledged add %s lost", acked[i])
			}
		}
		s, err := f.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.ClusterAsk == 0 || s.ClusterMoved == 0 || s.ClusterBusyRetries == 0 {
			t.Errorf("redirect counters: %+v", s)
		}
		t.Logf("%d acknowledged adds; %d MOVED, %d ASK, %d busy retries, %d map reloads", len(acked), s.ClusterMoved,
			s.ClusterAsk, s.ClusterBusyRetries, s.ClusterMapReloads)
		f.Delete(ctx)
	})
}
