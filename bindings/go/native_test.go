package bloomguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// redisbloomPath is $BG_REDISBLOOM, else what scripts/redisbloom.sh prints (it installs the pinned
// wheel once). A module that cannot be had fails the test: native tests never skip for it.
func redisbloomPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BG_REDISBLOOM"); p != "" {
		return p
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "redisbloom.sh"))
	out, err := exec.Command("bash", script).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("scripts/redisbloom.sh gave no redisbloom.so: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func startBloom(t *testing.T) *redisServer {
	t.Helper()
	s, err := startRedisOn(0, "--loadmodule", redisbloomPath(t))
	if err != nil {
		t.Fatalf("redis-server with RedisBloom: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

func TestNativeFilter(t *testing.T) {
	s := startBloom(t)
	ctx := context.Background()
	c, err := Open(s.url, testQueues()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Filter("gonat", WithNative())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Native() {
		t.Fatal("Native() is false")
	}
	if _, err := f.Contains(ctx, []byte("a")); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("a missing native filter: %v, want ErrNotInitialized", err)
	}
	if created, err := f.InitNative(ctx, 10, 0.01, ExpansionNonScaling); err != nil || !created {
		t.Fatalf("InitNative: %v %v", created, err)
	}
	if created, err := f.Init(ctx, 10, 0.01); err != nil || created {
		t.Fatalf("Init again: %v %v (want kept)", created, err)
	}
	if added, err := f.AddString(ctx, "a"); err != nil || !added {
		t.Fatalf("AddString: %v %v", added, err)
	}
	present, err := f.ContainsManyStrings(ctx, []string{"a", "b"})
	if err != nil || !present[0] || present[1] {
		t.Fatalf("ContainsManyStrings: %v %v", present, err)
	}
	if n, err := f.Count(ctx); err != nil || n != 1 {
		t.Fatalf("Count: %d %v", n, err)
	}
	info, err := f.Info(ctx)
	if err != nil || !info.Native || info.ExpectedInsertions != 10 {
		t.Fatalf("Info: %+v %v", info, err)
	}
	ni, err := f.NativeInfo(ctx)
	if err != nil || ni.Capacity != 10 || ni.Items != 1 || ni.Expansion != 0 {
		t.Fatalf("NativeInfo: %+v %v", ni, err)
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	if _, err := f.AddManyStrings(ctx, many); !errors.Is(err, ErrFull) {
		t.Fatalf("20 items into a NONSCALING filter of 10: %v, want ErrFull", err)
	}
	// the other kind under the name, refused by name
	p, _ := c.Filter("gonat")
	defer p.Close()
	if _, err := p.Contains(ctx, []byte("a")); !errors.Is(err, ErrWrongType) || !strings.Contains(err.Error(), "native") {
		t.Fatalf("a Redisson-layout handle on a native key: %v, want ErrWrongType naming it", err)
	}
	// a rotation: swap into a staging key, one RENAME
	g, _ := c.Filter("gorot", WithNative())
	defer g.Close()
	if _, err := g.InitNative(ctx, 1000, 0.01, ExpansionDefault); err != nil {
		t.Fatal(err)
	}
	err = g.Rotate(ctx, 2000, 0.01, Swap, func(r *Rotation) error {
		if _, err := g.AddString(ctx, "during"); err != nil {
			return err
		}
		return r.AddManyStrings([]string{"x", "y"})
	})
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	present, err = g.ContainsManyStrings(ctx, []string{"x", "y", "during"})
	if err != nil || !present[0] || !present[1] || !present[2] {
		t.Fatalf("after the rotation: %v %v", present, err)
	}
	if ni, err := g.NativeInfo(ctx); err != nil || ni.Capacity != 2000 {
		t.Fatalf("NativeInfo after the rotation: %+v %v", ni, err)
	}
	if _, err := f.InitNative(ctx, 10, 0.01, -2); !errors.Is(err, ErrBadParams) {
		t.Fatalf("expansion -2: %v, want ErrBadParams", err)
	}
	h, _ := c.Filter("gohuge", WithNative())
	defer h.Close()
	if _, err := h.InitNative(ctx, 100000000000, 1e-6, ExpansionDefault); !errors.Is(err, ErrBadParams) {
		t.Fatalf("a 450 GB reservation: %v, want ErrBadParams", err)
	}
}

// A native filter's repeated queries send BF.MEXISTS alone once the server tracks its key (the
// server counts one BF.MEXISTS per query and no EVALSHA), and a DEL between two of them is never
// answered false: the invalidation arrives ahead of the reply, and the query asks again with the
// full check (ErrNotInitialized). With tracking off: MULTI, TYPE, BF.MEXISTS, EXEC every time.
func TestNativeQueriesTrackedRead(t *testing.T) {
	s := startBloom(t)
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			c, err := Open(s.url, WithTracking(on), WithPoolSize(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			name := "gonread-" + strconv.FormatBool(on)
			f, err := c.Filter(name, WithNative())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.InitNative(ctx, 1000, 0.01, ExpansionDefault); err != nil {
				t.Fatal(err)
			}
			if _, err := f.AddString(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			r, err := dialRESP(s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			r.must(t, "CONFIG", "RESETSTAT")
			const n = 40
			for i := 0; i < n; i++ {
				if ok, err := f.ContainsString(ctx, "a"); err != nil || !ok {
					t.Fatalf("ContainsString: %v %v", ok, err)
				}
			}
			info, _ := r.must(t, "INFO", "commandstats").(string)
			calls := func(cmd string) int {
				i := strings.Index(info, "cmdstat_"+cmd+":calls=")
				if i < 0 {
					return 0
				}
				var v int
				fmt.Sscanf(info[i+len("cmdstat_"+cmd+":calls="):], "%d", &v)
				return v
			}
			st := stats(t, f)
			if calls("evalsha") != 0 || calls("bf.mexists") != n {
				t.Errorf("%d queries: %d EVALSHA, %d BF.MEXISTS", n, calls("evalsha"), calls("bf.mexists"))
			}
			if on && (st.TrackedReads < n-2 || calls("type") != n-int(st.TrackedReads)) {
				t.Errorf("tracking on: %d tracked reads, %d TYPE of %d queries", st.TrackedReads, calls("type"), n)
			}
			if !on && (st.TrackedReads != 0 || calls("type") != n) {
				t.Errorf("tracking off: %d tracked reads, %d TYPE of %d queries", st.TrackedReads, calls("type"), n)
			}
			r.must(t, "DEL", name)
			if ok, err := f.ContainsString(ctx, "a"); !errors.Is(err, ErrNotInitialized) {
				t.Fatalf("after a DEL: %v %v, want ErrNotInitialized", ok, err)
			}
			// the invalidation may be read before that query is built (the queue's reader takes
			// pushes as they come: then no verdict, the check) or after its reply (a tracked read,
			// dropped): either way no tracked answer may stand
			if after := stats(t, f); on && after.TrackedReads-st.TrackedReads != after.TrackedStale-st.TrackedStale {
				t.Errorf("a tracked read after the DEL was not dropped: tracked %d -> %d, stale %d -> %d",
					st.TrackedReads, after.TrackedReads, st.TrackedStale, after.TrackedStale)
			}
		})
	}
}
