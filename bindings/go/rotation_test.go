package bloomguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ---- helpers -------------------------------------------------------------------------------------

// stagingKeys are the rotation's keys of filter name: lease hash, next bitmap, delta bitmap
// (named like the config key).
func stagingKeys(name string) []string {
	keys := make([]string, 0, 3)
	for _, s := range []string{"rotation", "next", "delta"} {
		if strings.Contains(name, "{") {
			keys = append(keys, name+":"+s)
		} else {
			keys = append(keys, "{"+name+"}:"+s)
		}
	}
	return keys
}

// existing counts which of keys exist (EXISTS).
func existing(t testing.TB, r *respConn, keys ...string) int64 {
	t.Helper()
	n, ok := r.must(t, append([]string{"EXISTS"}, keys...)...).(int64)
	if !ok {
		t.Fatalf("EXISTS: not an integer")
	}
	return n
}

func wantNoStaging(t testing.TB, r *respConn, name string) {
	t.Helper()
	if n := existing(t, r, stagingKeys(name)...); n != 0 {
		t.Fatalf("%d staging keys of %q are left", n, name)
	}
}

func makeItems(prefix string, n int) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return items
}

func wantInfo(t testing.TB, f *Filter, n int64, p float64) Info {
	t.Helper()
	size, k, err := OptimalParams(n, p)
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Size: size, HashIterations: k, ExpectedInsertions: n, FalseProbability: p}
	info, err := f.Info(context.Background())
	if err != nil || info != want {
		t.Fatalf("Info: %+v %v, want %+v", info, err, want)
	}
	return info
}

func wantAllPresent(t testing.TB, f *Filter, items [][]byte) {
	t.Helper()
	present, err := f.ContainsMany(context.Background(), items)
	if err != nil {
		t.Fatalf("ContainsMany: %v", err)
	}
	for i, ok := range present {
		if !ok {
			t.Fatalf("%q is absent (%d items)", items[i], len(items))
		}
	}
}

func countPresent(t testing.TB, f *Filter, items [][]byte) int {
	t.Helper()
	present, err := f.ContainsMany(context.Background(), items)
	if err != nil {
		t.Fatalf("ContainsMany: %v", err)
	}
	n := 0
	for _, ok := range present {
		if ok {
			n++
		}
	}
	return n
}

// bitmapOf is the bitmap Redisson would hold for items at (size, k): SETBIT order, trailing zero
// bytes trimmed (the length of a string built by SETBIT).
func bitmapOf(t testing.TB, items [][]byte, size uint64, k uint32) []byte {
	t.Helper()
	b := make([]byte, (size+7)/8)
	for _, it := range items {
		idx, err := Indexes(it, size, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range idx {
			b[o/8] |= 0x80 >> (o % 8)
		}
	}
	return bytes.TrimRight(b, "\x00")
}

// noRotationsLeft checks that every rotation's cgo.Handle was deleted.
func noRotationsLeft(t testing.TB) {
	t.Helper()
	if n := rotationsLive.Load(); n != 0 {
		t.Fatalf("%d rotation handles are still live", n)
	}
}

// ---- tests -----------------------------------------------------------------------------------------

// Swap to other parameters: the new config, exactly the bitmap Redisson would have for the items
// fed to the rotation, no staging keys left, the live filter untouched until the commit, the TTL
// carried over, and the statistics.
func TestRotateSwap(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	name := f.Name()
	r := raw(t)
	old := makeItems("old", 500)
	if _, err := f.AddMany(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Expire(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	next := makeItems("new", 3000)

	var rot *Rotation
	calls := 0
	err := f.Rotate(ctx, 5000, 0.001, Swap, func(rt *Rotation) error {
		calls++
		rot = rt
		if n := existing(t, r, stagingKeys(name)[0]); n != 1 {
			t.Errorf("no lease key during the rotation")
		}
		if err := rt.AddMany(next[:2000]); err != nil {
			return err
		}
		for i, it := range next[2000:] {
			var err error
			if i%2 == 0 {
				err = rt.Add(it)
			} else {
				err = rt.AddString(string(it))
			}
			if err != nil {
				return err
			}
		}
		if err := rt.AddMany(nil); err != nil {
			return err
		}
		if items, bytes, _ := rt.Stats(); items != 3000 || bytes != 0 {
			t.Errorf("Stats before the commit: %d items, %d bytes", items, bytes)
		}
		// readers still see the old generation
		wantInfo(t, f, 1000, 0.01)
		wantAllPresent(t, f, old)
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("Rotate: %v (fn called %d times)", err, calls)
	}
	info := wantInfo(t, f, 5000, 0.001)
	wantAllPresent(t, f, next)
	if n := countPresent(t, f, old); n > 10 {
		t.Errorf("%d of 500 items not fed to the rotation are still present (p=0.001)", n)
	}
	want := bitmapOf(t, next, info.Size, info.HashIterations)
	if got, _ := r.must(t, "GET", name).(string); got != string(want) {
		t.Fatalf("bitmap: %d bytes, want %d (Redisson's for the fed items)", len(got), len(want))
	}
	wantNoStaging(t, r, name)
	for _, key := range []string{name, "{" + name + "}:config"} {
		if ttl, _ := r.must(t, "PTTL", key).(int64); ttl <= 0 || ttl > 3600000 {
			t.Errorf("PTTL %s = %d: the time to live did not carry over", key, ttl)
		}
	}

	items, uploaded, elapsed := rot.Stats()
	if items != 3000 || uploaded != uint64(len(want)) || elapsed <= 0 {
		t.Fatalf("Stats: %d items, %d bytes uploaded (bitmap %d), %v", items, uploaded, len(want), elapsed)
	}
	time.Sleep(5 * time.Millisecond)
	if i2, u2, e2 := rot.Stats(); i2 != items || u2 != uploaded || e2 != elapsed {
		t.Fatalf("Stats changed after Rotate returned: %d %d %v", i2, u2, e2)
	}
	// the Rotation is over once Rotate returned
	for what, err := range map[string]error{
		"Add":       rot.Add([]byte("late")),
		"AddString": rot.AddString("late"),
		"AddMany":   rot.AddMany([][]byte{[]byte("late")}),
		"AddMany0":  rot.AddMany(nil),
	} {
		if e := wantCode(t, err, CodeInvalid, ErrInvalid); !strings.Contains(e.Message, "is over") {
			t.Errorf("%s after Rotate: %q", what, e.Message)
		}
	}
	noRotationsLeft(t)

	// the same parameters again, through a hash-tag name's filter
	f2 := openFilter(t, c, "{go-rot}"+uniqueName(t))
	if _, err := f2.Init(ctx, 100, 0.01); err != nil {
		t.Fatal(err)
	}
	if err := f2.Rotate(ctx, 100, 0.01, Swap, func(rt *Rotation) error {
		if n := existing(t, r, stagingKeys(f2.Name())[0]); n != 1 {
			t.Errorf("no lease key %s", stagingKeys(f2.Name())[0])
		}
		return rt.AddString("tagged")
	}); err != nil {
		t.Fatal(err)
	}
	wantInfo(t, f2, 100, 0.01)
	wantAllPresent(t, f2, [][]byte{[]byte("tagged")})
	wantNoStaging(t, r, f2.Name())
}

// The rotation's Add methods allocate nothing on the Go heap (items are copied into C memory).
func TestRotateAddAllocs(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	batch := makeItems("b", 16)
	item := []byte("some-item")
	err := f.Rotate(ctx, 1000, 0.01, Swap, func(rt *Rotation) error {
		for what, fn := range map[string]func(){
			"Add":       func() { rt.Add(item) },
			"AddString": func() { rt.AddString(string(item)) },
			"AddMany":   func() { rt.AddMany(batch) },
		} {
			if n := testing.AllocsPerRun(200, fn); n != 0 {
				t.Errorf("%s: %v allocations per call", what, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantAllPresent(t, f, append(batch, item))
}

// Naive: delete, tryInit, add in round trips of WithBatch items; no upload, no staging keys.
func TestRotateNaive(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	if _, err := f.AddString(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	next := makeItems("naive", 100)
	var phases []Phase
	var rot *Rotation
	err := f.Rotate(ctx, 2000, 0.02, Naive, func(rt *Rotation) error {
		rot = rt
		// the naive rebuild: the live filter is already the new, empty one
		wantInfo(t, f, 2000, 0.02)
		if ok, err := f.ContainsString(ctx, "old"); err != nil || ok {
			t.Errorf("old item during a naive rotation: %v %v", ok, err)
		}
		if err := rt.AddMany(next[:50]); err != nil {
			return err
		}
		for _, it := range next[50:] {
			if err := rt.Add(it); err != nil {
				return err
			}
		}
		return nil
	}, WithBatch(7), WithProgress(func(p Phase, items, done, total uint64) error {
		if done != 0 || total != 0 {
			t.Errorf("naive progress with upload figures %d/%d", done, total)
		}
		phases = append(phases, p)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wantInfo(t, f, 2000, 0.02)
	wantAllPresent(t, f, next)
	wantNoStaging(t, r, f.Name())
	if items, uploaded, _ := rot.Stats(); items != 100 || uploaded != 0 {
		t.Fatalf("Stats: %d items, %d bytes", items, uploaded)
	}
	if len(phases) < 2 || phases[0] != PhaseBuilding || phases[len(phases)-1] != PhaseDone {
		t.Fatalf("naive phases %v", phases)
	}
	for _, p := range phases[:len(phases)-1] {
		if p != PhaseBuilding {
			t.Fatalf("naive phases %v", phases)
		}
	}
	noRotationsLeft(t)
}

// Items added to the filter (through this handle, another handle and another client) while a
// Swap rotation runs, up to and across its commit, are all present afterwards; goroutines share
// the Rotation too.
func TestRotateConcurrentAdds(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	c2 := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	handles := []*Filter{f, openFilter(t, c, f.Name()), openFilter(t, c2, f.Name())}
	base := makeItems("base", 20000)

	const adders = 6
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		addedMu sync.Mutex
		added   [][]byte
		addErrs atomic.Int64
		firstE  atomic.Value
	)
	startAdders := func() {
		for g := 0; g < adders; g++ {
			h := handles[g%len(handles)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine [][]byte
				for i := 0; !stop.Load() || i < 20; i++ {
					it := []byte(fmt.Sprintf("live-%d-%d", g, i))
					if _, err := h.Add(ctx, it); err != nil {
						addErrs.Add(1)
						firstE.CompareAndSwap(nil, err)
						continue
					}
					mine = append(mine, it)
				}
				addedMu.Lock()
				added = append(added, mine...)
				addedMu.Unlock()
			}()
		}
	}

	err := f.Rotate(ctx, 50000, 0.01, Swap, func(rt *Rotation) error {
		startAdders()
		// four goroutines feed the rotation at once (its calls are serialized)
		var feed sync.WaitGroup
		errs := make(chan error, 4)
		for q := 0; q < 4; q++ {
			feed.Add(1)
			go func() {
				defer feed.Done()
				part := base[q*5000 : (q+1)*5000]
				for i := 0; i < len(part); i += 500 {
					if err := rt.AddMany(part[i : i+500]); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		feed.Wait()
		close(errs)
		time.Sleep(100 * time.Millisecond) // adders keep going
		return <-errs
	})
	// the adders run across the commit, then stop
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if n := addErrs.Load(); n != 0 {
		t.Fatalf("%d adds failed during the rotation, first: %v", n, firstE.Load())
	}
	wantInfo(t, f, 50000, 0.01)
	wantAllPresent(t, f, base)
	wantAllPresent(t, f, added)
	t.Logf("%d items added by %d goroutines during the rotation", len(added), adders)
	noRotationsLeft(t)
}

// An error from fn aborts: Rotate returns it as is, the live filter is untouched, the staging
// keys are removed at once, and the lease is free for the next rotation.
func TestRotateFnErrorAborts(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	name := f.Name()
	r := raw(t)
	if _, err := f.AddString(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := f.Rotate(ctx, 4000, 0.01, Swap, func(rt *Rotation) error {
		if err := rt.AddMany(makeItems("next", 100)); err != nil {
			return err
		}
		// an add to the live filter during the rotation also records into the delta key
		if _, err := f.AddString(ctx, "during"); err != nil {
			return err
		}
		if n := existing(t, r, stagingKeys(name)...); n != 2 {
			t.Errorf("%d staging keys during the rotation, want 2 (lease and delta)", n)
		}
		return fmt.Errorf("loading: %w", boom)
	})
	if !errors.Is(err, boom) || err.Error() != "loading: boom" {
		t.Fatalf("Rotate: %v, want fn's error", err)
	}
	wantNoStaging(t, r, name)
	wantInfo(t, f, 1000, 0.01)
	wantAllPresent(t, f, [][]byte{[]byte("kept"), []byte("during")})
	if ok, _ := f.ContainsString(ctx, "next-1"); ok {
		t.Error("an item of the aborted rotation is present")
	}
	// the lease was released: the next rotation begins at once
	if err := f.Rotate(ctx, 1000, 0.01, Swap, func(rt *Rotation) error { return boom }); err != boom {
		t.Fatalf("second Rotate: %v", err)
	}
	wantNoStaging(t, r, name)
	noRotationsLeft(t)
}

// A panic in fn aborts the rotation, then goes on with the same value.
func TestRotatePanicAborts(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	type myPanic struct{ n int }
	func() {
		defer func() {
			if v := recover(); v != (myPanic{42}) {
				t.Fatalf("recovered %v, want myPanic{42}", v)
			}
		}()
		f.Rotate(ctx, 4000, 0.01, Swap, func(rt *Rotation) error {
			rt.AddString("x")
			panic(myPanic{42})
		})
		t.Fatal("Rotate returned after fn panicked")
	}()
	wantNoStaging(t, r, f.Name())
	wantInfo(t, f, 1000, 0.01)
	noRotationsLeft(t)
	if err := f.Rotate(ctx, 1000, 0.01, Swap, func(rt *Rotation) error { return rt.AddString("y") }); err != nil {
		t.Fatalf("Rotate after the panic: %v", err)
	}
}

type progressCall struct {
	phase              Phase
	items, done, total uint64
}

// The progress function sees the phases in order: building (throttled to 50ms), uploading (once
// at the start, then after every chunk), committing, done; with the upload's figures: how far it
// got of the bitmap up to its last non-zero byte (0 / 0 before the upload). Stats counts the bytes
// actually sent: a sparse bitmap's all-zero chunks are skipped.
func TestRotateProgress(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)

	run := func(n int, expected int64, pause time.Duration) (calls []progressCall, used uint64, rot *Rotation) {
		t.Helper()
		size, k, _ := OptimalParams(expected, 0.01)
		items := makeItems(fmt.Sprintf("p%d", expected), n)
		batch := max(n/4, 1)
		err := f.Rotate(ctx, expected, 0.01, Swap, func(rt *Rotation) error {
			rot = rt
			for i := 0; i < n; i += batch {
				if err := rt.AddMany(items[i:min(i+batch, n)]); err != nil {
					return err
				}
				time.Sleep(pause) // past the 50ms throttle: each batch reports
			}
			return nil
		}, WithChunkBytes(4096), WithThreads(2), WithProgress(func(p Phase, items, done, total uint64) error {
			calls = append(calls, progressCall{p, items, done, total})
			if _, _, el := rot.Stats(); el <= 0 { // Stats from the progress function
				t.Errorf("Stats elapsed %v", el)
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		wantAllPresent(t, f, items)
		used = uint64(len(bitmapOf(t, items, size, k)))
		var last progressCall
		for i, cl := range calls {
			wantTotal := used
			if cl.phase == PhaseBuilding {
				wantTotal = 0
			}
			if cl.total != wantTotal || cl.done > cl.total {
				t.Fatalf("call %d %+v: bytesTotal, want %d", i, cl, wantTotal)
			}
			if i > 0 && (cl.phase < last.phase || cl.done < last.done || cl.items < last.items) {
				t.Fatalf("call %d %+v after %+v: not in order", i, cl, last)
			}
			last = cl
		}
		if last.phase != PhaseDone || last.items != uint64(n) || last.done != used {
			t.Fatalf("last call %+v, want done with %d items and %d bytes", last, n, used)
		}
		return calls, used, rot
	}

	// dense: every chunk is sent
	calls, used, rot := run(20000, 200000, 60*time.Millisecond)
	count := map[Phase]int{}
	for _, cl := range calls {
		count[cl.phase]++
	}
	chunks := int((used + 4095) / 4096)
	if count[PhaseBuilding] != 4 || count[PhaseUploading] != 1+chunks || count[PhaseCommitting] != 1 ||
		count[PhaseDone] != 1 || len(calls) != 4+1+chunks+1+1 {
		t.Fatalf("phases %v for %d chunks of %d bytes", count, chunks, used)
	}
	if it, up, _ := rot.Stats(); it != 20000 || up != used {
		t.Fatalf("Stats %d items %d bytes, want all %d bytes sent", it, up, used)
	}

	// sparse: 3 items in a 1.2 MB bitmap; at most one chunk per set bit, plus the last, travels
	calls, used, rot = run(3, 1000000, 0)
	it, up, _ := rot.Stats()
	if it != 3 || up == 0 || up > 4096*(3*7+1) || up >= used {
		t.Fatalf("sparse: Stats %d items %d bytes sent of %d", it, up, used)
	}
	t.Logf("sparse: %d of %d bytes sent in %d progress calls", up, used, len(calls))
	for _, ph := range []Phase{PhaseBuilding, PhaseUploading, PhaseCommitting, PhaseDone, Phase(9)} {
		t.Logf("%d: %v", int(ph), ph)
	}
}

// An error from the progress function aborts the rotation, and Rotate returns it: during the
// upload (from the commit), and during the build (from Add, which fn then ignores). At
// PhaseDone the rotation has committed and the error is ignored.
func TestRotateProgressErrorAborts(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	errStop := errors.New("stop here")
	items := makeItems("q", 5000)

	var phases []Phase
	err := f.Rotate(ctx, 100000, 0.01, Swap, func(rt *Rotation) error {
		return rt.AddMany(items)
	}, WithChunkBytes(4096), WithProgress(func(p Phase, _, _, _ uint64) error {
		phases = append(phases, p)
		if p == PhaseUploading {
			return errStop
		}
		return nil
	}))
	if err != errStop {
		t.Fatalf("Rotate: %v, want the progress function's error", err)
	}
	if fmt.Sprint(phases) != "[building uploading]" {
		t.Fatalf("phases %v", phases)
	}
	wantNoStaging(t, r, f.Name())
	wantInfo(t, f, 1000, 0.01)

	// during the build: the Add fails with it, the rotation stays aborted even if fn returns nil
	var addErrs []error
	err = f.Rotate(ctx, 100000, 0.01, Swap, func(rt *Rotation) error {
		addErrs = append(addErrs, rt.AddMany(items[:10]), rt.AddString("after"), rt.AddMany(items))
		if n := existing(t, r, stagingKeys(f.Name())...); n != 0 {
			t.Errorf("%d staging keys after the abort, before fn returned", n)
		}
		return nil
	}, WithProgress(func(p Phase, _, _, _ uint64) error { return errStop }))
	if err != errStop {
		t.Fatalf("Rotate: %v, want the progress function's error", err)
	}
	for i, e := range addErrs {
		if e != errStop {
			t.Fatalf("add %d: %v, want the progress function's error", i, e)
		}
	}
	wantNoStaging(t, r, f.Name())
	wantInfo(t, f, 1000, 0.01)

	// at PhaseDone: ignored, committed
	err = f.Rotate(ctx, 3000, 0.01, Swap, func(rt *Rotation) error { return rt.AddString("done") },
		WithProgress(func(p Phase, _, _, _ uint64) error {
			if p == PhaseDone {
				return errStop
			}
			return nil
		}))
	if err != nil {
		t.Fatalf("Rotate with an error at PhaseDone: %v", err)
	}
	wantInfo(t, f, 3000, 0.01)
	noRotationsLeft(t)
}

// A panic in the progress function is not let through the library's frames: the rotation aborts
// and the panic is raised again, with the same value, where the library was called (the commit
// in Rotate, or an Add in fn).
func TestRotateProgressPanic(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	for _, at := range []Phase{PhaseBuilding, PhaseUploading, PhaseDone} {
		var fnErr error
		got := func() (v any) {
			defer func() { v = recover() }()
			f.Rotate(ctx, 2000, 0.01, Swap, func(rt *Rotation) error {
				fnErr = rt.AddMany(makeItems("z", 100))
				return fnErr
			}, WithProgress(func(p Phase, _, _, _ uint64) error {
				if p == at {
					panic("progress panic at " + p.String())
				}
				return nil
			}))
			return nil
		}()
		if got != "progress panic at "+at.String() {
			t.Fatalf("at %v: recovered %v", at, got)
		}
		wantNoStaging(t, r, f.Name())
		if at == PhaseDone {
			wantInfo(t, f, 2000, 0.01) // it had committed
		} else {
			wantInfo(t, f, 1000, 0.01)
		}
		noRotationsLeft(t)
	}
}

// A context cancelled or past its deadline while the rotation runs aborts it: Add fails with
// ctx.Err() (and the staging keys go at once), the progress callback stops the upload, the commit
// is not made; Rotate returns ctx.Err().
func TestRotateContextCancel(t *testing.T) {
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	name := f.Name()
	items := makeItems("c", 10000)

	// cancelled between two adds; fn returns the Add's error
	ctx, cancel := context.WithCancel(context.Background())
	err := f.Rotate(ctx, 5000, 0.01, Swap, func(rt *Rotation) error {
		if err := rt.AddMany(items[:100]); err != nil {
			return err
		}
		cancel()
		err := rt.AddMany(items[100:])
		if n := existing(t, r, stagingKeys(name)...); n != 0 {
			t.Errorf("%d staging keys right after the cancelled add", n)
		}
		return err
	})
	if err != context.Canceled {
		t.Fatalf("Rotate: %v, want context.Canceled", err)
	}
	wantNoStaging(t, r, name)
	wantInfo(t, f, 1000, 0.01)

	// cancelled, fn ignores it and returns nil: still no commit
	ctx, cancel = context.WithCancel(context.Background())
	err = f.Rotate(ctx, 5000, 0.01, Swap, func(rt *Rotation) error {
		rt.AddMany(items)
		cancel()
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("Rotate with fn ignoring the cancel: %v", err)
	}
	wantInfo(t, f, 1000, 0.01)

	// cancelled by another goroutine while fn keeps feeding batches (each checked by the progress
	// callback or the next add)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	started := time.Now()
	batches := 0
	err = f.Rotate(ctx, 5000000, 0.01, Swap, func(rt *Rotation) error {
		for {
			if err := rt.AddMany(items); err != nil {
				return fmt.Errorf("batch %d: %w", batches, err)
			}
			batches++
			if time.Since(started) > 30*time.Second {
				return errors.New("never cancelled")
			}
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Rotate cancelled mid-build: %v", err)
	}
	t.Logf("cancelled after %d batches, %v", batches, time.Since(started))
	wantNoStaging(t, r, name)

	// cancelled during the upload: the callback after the chunk stops it
	ctx, cancel = context.WithCancel(context.Background())
	var phases []Phase
	err = f.Rotate(ctx, 100000, 0.01, Swap, func(rt *Rotation) error { return rt.AddMany(items) },
		WithChunkBytes(4096), WithProgress(func(p Phase, _, _, _ uint64) error {
			phases = append(phases, p)
			if p == PhaseUploading {
				cancel()
			}
			return nil
		}))
	if err != context.Canceled {
		t.Fatalf("Rotate cancelled mid-upload: %v", err)
	}
	if fmt.Sprint(phases) != "[building uploading]" {
		t.Fatalf("phases %v", phases)
	}
	wantNoStaging(t, r, name)
	wantInfo(t, f, 1000, 0.01)

	// a deadline that passes while fn works: no commit
	ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	err = f.Rotate(ctx, 5000, 0.01, Swap, func(rt *Rotation) error {
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	if err != context.DeadlineExceeded {
		t.Fatalf("Rotate past its deadline: %v", err)
	}
	wantNoStaging(t, r, name)
	wantInfo(t, f, 1000, 0.01)
	noRotationsLeft(t)
}

// A second rotation of the same filter, from the same handle, another handle or another client,
// fails at once with ErrRotationInProgress; its fn is not called. After the first commits, it
// succeeds.
func TestRotateInProgress(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	c2 := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	others := []*Filter{f, openFilter(t, c, f.Name()), openFilter(t, c2, f.Name())}
	err := f.Rotate(ctx, 2000, 0.01, Swap, func(rt *Rotation) error {
		for i, o := range others {
			err := o.Rotate(ctx, 3000, 0.01, Swap, func(*Rotation) error {
				t.Errorf("handle %d: fn of the second rotation called", i)
				return nil
			})
			e := wantCode(t, err, CodeRotationInProgress, ErrRotationInProgress)
			if !strings.Contains(e.Message, "in progress") || !strings.Contains(e.Message, f.Name()) {
				t.Errorf("handle %d: message %q", i, e.Message)
			}
		}
		return rt.AddString("first")
	})
	if err != nil {
		t.Fatal(err)
	}
	wantInfo(t, f, 2000, 0.01)
	if err := others[2].Rotate(ctx, 3000, 0.01, Swap, func(rt *Rotation) error { return rt.AddString("second") }); err != nil {
		t.Fatalf("after the first committed: %v", err)
	}
	wantInfo(t, f, 3000, 0.01)
	noRotationsLeft(t)
}

// WithWait: the second rotation waits for the first to end (then begins on the committed filter);
// a shorter wait runs out with ErrRotationInProgress; a context cancelled or past its deadline
// ends the wait early with an error that is both ErrRotationInProgress and ctx.Err().
func TestRotateWait(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	c2 := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	f2 := openFilter(t, c2, f.Name())

	type result struct {
		err     error
		elapsed time.Duration
	}
	// holds the lease for hold while second runs, and returns second's result
	during := func(hold time.Duration, second func() error) result {
		ch := make(chan result, 1)
		err := f.Rotate(ctx, 2000, 0.01, Swap, func(rt *Rotation) error {
			go func() {
				start := time.Now()
				err := second()
				ch <- result{err, time.Since(start)}
			}()
			time.Sleep(hold)
			return rt.AddString("first")
		})
		if err != nil {
			t.Fatalf("first Rotate: %v", err)
		}
		return <-ch
	}

	res := during(400*time.Millisecond, func() error {
		return f2.Rotate(ctx, 3000, 0.01, Swap, func(rt *Rotation) error {
			// it began after the first one's commit
			wantInfo(t, f2, 2000, 0.01)
			return rt.AddString("second")
		}, WithWait(10*time.Second))
	})
	if res.err != nil || res.elapsed < 300*time.Millisecond {
		t.Fatalf("waiting rotation: %v after %v", res.err, res.elapsed)
	}
	wantInfo(t, f, 3000, 0.01)
	wantAllPresent(t, f, [][]byte{[]byte("second")})

	res = during(800*time.Millisecond, func() error {
		return f2.Rotate(ctx, 3000, 0.01, Swap, func(*Rotation) error { return errors.New("began") },
			WithWait(150*time.Millisecond))
	})
	wantCode(t, res.err, CodeRotationInProgress, ErrRotationInProgress)
	if bound := 200*time.Millisecond + machineLate(time.Now().Add(-res.elapsed)); res.elapsed < 140*time.Millisecond ||
		res.elapsed > bound {
		t.Fatalf("a 150ms wait took %v (at most %v)", res.elapsed, bound)
	}

	cctx, cancel := context.WithCancel(ctx)
	res = during(1500*time.Millisecond, func() error {
		time.AfterFunc(100*time.Millisecond, cancel)
		return f2.Rotate(cctx, 3000, 0.01, Swap, func(*Rotation) error { return errors.New("began") },
			WithWait(10*time.Second))
	})
	wantCode(t, res.err, CodeRotationInProgress, ErrRotationInProgress)
	if !errors.Is(res.err, context.Canceled) || res.elapsed > 1200*time.Millisecond {
		t.Fatalf("cancelled wait: %v after %v", res.err, res.elapsed)
	}

	dctx, cancel2 := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel2()
	res = during(1500*time.Millisecond, func() error {
		return f2.Rotate(dctx, 3000, 0.01, Swap, func(*Rotation) error { return errors.New("began") },
			WithWait(10*time.Second))
	})
	wantCode(t, res.err, CodeRotationInProgress, ErrRotationInProgress)
	if !errors.Is(res.err, context.DeadlineExceeded) || res.elapsed > 1200*time.Millisecond {
		t.Fatalf("wait past the deadline: %v after %v", res.err, res.elapsed)
	}
	t.Logf("%v", res.err)
	noRotationsLeft(t)
}

// Bad input fails before anything is written. (Locked is not tested here: the library lands it
// separately.)
func TestRotateBadInput(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	fn := func(*Rotation) error {
		t.Error("fn called")
		return nil
	}
	//lint:ignore SA1012 a nil context is what is tested
	wantCode(t, f.Rotate(nil, 1000, 0.01, Swap, fn), CodeInvalid, ErrInvalid) //nolint:staticcheck
	wantCode(t, f.Rotate(ctx, 1000, 0.01, Swap, nil), CodeInvalid, ErrInvalid)

	e := wantCode(t, f.Rotate(ctx, 1000, 0.01, Strategy(9), fn), CodeInvalid, ErrInvalid)
	if !strings.Contains(e.Message, "unknown strategy 9") {
		t.Errorf("Strategy(9): %q", e.Message)
	}
	for _, s := range []Strategy{Swap, Naive} {
		e = wantCode(t, f.Rotate(ctx, 1000, 1.5, s, fn), CodeBadParams, ErrBadParams)
		if !strings.Contains(e.Message, "Bloom filter false probability can't be greater than 1") {
			t.Errorf("%v with p=1.5: %q", s, e.Message)
		}
	}
	for _, tc := range []struct {
		opt  RotateOption
		want string
	}{
		{WithLease(time.Millisecond), "WithLease(1ms)"},
		{WithWait(-time.Second), "WithWait(-1s)"},
		{WithWait(2 * time.Hour), "WithWait(2h0m0s)"},
		{WithStagingTTL(10 * time.Millisecond), "WithStagingTTL(10ms)"},
		{WithThreads(0), "WithThreads(0)"},
		{WithThreads(257), "WithThreads(257)"},
		{WithChunkBytes(100), "WithChunkBytes(100)"},
		{WithBatch(0), "WithBatch(0)"},
	} {
		e := wantCode(t, f.Rotate(ctx, 1000, 0.01, Swap, fn, nil, tc.opt), CodeInvalid, ErrInvalid)
		if !strings.HasPrefix(e.Message, tc.want+": ") {
			t.Errorf("%s: %q", tc.want, e.Message)
		}
	}
	wantNoStaging(t, r, f.Name())
	wantInfo(t, f, 1000, 0.01)

	// every option at a valid value
	if err := f.Rotate(ctx, 1000, 0.01, Swap, func(rt *Rotation) error { return rt.AddString("ok") },
		WithLease(time.Second), WithWait(time.Second), WithStagingTTL(time.Minute), WithThreads(3),
		WithChunkBytes(8192), WithBatch(10), WithProgress(nil), nil); err != nil {
		t.Fatalf("valid options: %v", err)
	}

	f.Close()
	wantCode(t, f.Rotate(ctx, 1000, 0.01, Swap, fn), CodeClosed, ErrClosed)
	noRotationsLeft(t)
}

// Closing the Filter while it rotates does not stop the rotation; the C filter is released when
// the rotation ends.
func TestRotateFilterClosedDuring(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	other := openFilter(t, c, f.Name())
	err := f.Rotate(ctx, 2000, 0.01, Swap, func(rt *Rotation) error {
		f.Close()
		if _, err := f.AddString(ctx, "x"); !errors.Is(err, ErrClosed) {
			t.Errorf("Add on the closed filter: %v", err)
		}
		if n := f.h.refs.Load(); n != 1 {
			t.Errorf("refs %d during the rotation of a closed filter, want 1", n)
		}
		return rt.AddString("after close")
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.h.refs.Load(); n != 0 {
		t.Fatalf("refs %d after the rotation, want 0", n)
	}
	wantInfo(t, other, 2000, 0.01)
	wantAllPresent(t, other, [][]byte{[]byte("after close")})
	noRotationsLeft(t)
}

// runtime.Goexit in the progress function (t.FailNow there) ends the goroutine without the
// library finishing its call: the deferred unlocks still run, and Rotate's deferred end aborts
// the rotation (staging keys removed, handle deleted), so the next rotation begins at once.
func TestRotateProgressGoexit(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	r := raw(t)
	for _, at := range []Phase{PhaseBuilding, PhaseUploading} {
		done := make(chan bool)
		go func() {
			returned := false
			defer func() { done <- returned }()
			f.Rotate(ctx, 2000, 0.01, Swap, func(rt *Rotation) error {
				return rt.AddString("x")
			}, WithProgress(func(p Phase, _, _, _ uint64) error {
				if p == at {
					runtime.Goexit()
				}
				return nil
			}))
			returned = true
		}()
		if <-done {
			t.Fatalf("at %v: Rotate returned", at)
		}
		wantNoStaging(t, r, f.Name())
		wantInfo(t, f, 1000, 0.01)
		noRotationsLeft(t)
		if err := f.Rotate(ctx, 1000, 0.01, Swap, func(rt *Rotation) error { return rt.AddString("y") }); err != nil {
			t.Fatalf("after a Goexit at %v: %v", at, err)
		}
	}
}

// Goroutines beginning rotations of one filter at once, each failing for a reason of its own
// (another rotation holds the lease, through Redis; fpp > 1; no expected insertions): each error
// carries its own begin's message, never another goroutine's that landed on the filter's shared
// message slot meanwhile (the C begin used to copy its call's message from there).
func TestRotateConcurrentBeginsKeepTheirOwnMessages(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 1000, 0.01)
	begin := func(n int64, fpp float64) func() error {
		return func() error { return f.Rotate(ctx, n, fpp, Swap, func(*Rotation) error { return nil }) }
	}
	kinds := []ownMessageKind{
		{begin(1000, 0.01), CodeRotationInProgress, "in progress"},
		{begin(1000, 2.0), CodeBadParams, "can't be greater than 1"},
		{begin(0, 0.01), CodeBadParams, "expected insertions must be positive"},
	}
	held, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- f.Rotate(ctx, 1000, 0.01, Swap, func(*Rotation) error {
			close(held)
			<-release
			return errors.New("held long enough")
		})
	}()
	<-held
	crossed, wrong, example := crossedMessages(kinds, 400)
	close(release)
	if err := <-holder; err == nil || err.Error() != "held long enough" {
		t.Errorf("the holding rotation ended with %v", err)
	}
	if wrong > 0 {
		t.Errorf("%d begins failed with another error, e.g. %s", wrong, example)
	}
	if crossed > 0 {
		t.Errorf("%d begins carried another begin's message, e.g. %s", crossed, example)
	}
}
