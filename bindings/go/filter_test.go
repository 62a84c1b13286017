package bloomguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var nameSeq atomic.Int64

// uniqueName is a filter name no other test uses.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("go:%s:%d", t.Name(), nameSeq.Add(1))
}

// openClient opens a client of the test server. BG_TEST_QUEUES=n gives every client of the tests
// WithQueues(n) unless the test sets it (scripts/test.sh runs the suite once with 0: the
// blocking calls).
func openClient(t testing.TB, opts ...Option) *Client {
	t.Helper()
	c, err := Open(testServer.url, append(testQueues(), opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", testServer.url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testQueues() []Option {
	v, ok := os.LookupEnv("BG_TEST_QUEUES")
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		panic("BG_TEST_QUEUES=" + v + ": not a number")
	}
	return []Option{WithQueues(n)}
}

func openFilter(t testing.TB, c *Client, name string) *Filter {
	t.Helper()
	f, err := c.Filter(name)
	if err != nil {
		t.Fatalf("Filter(%q): %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// initFilter opens a fresh filter initialized for n items at p.
func initFilter(t testing.TB, c *Client, n int64, p float64) *Filter {
	t.Helper()
	f := openFilter(t, c, uniqueName(t))
	if created, err := f.Init(context.Background(), n, p); err != nil || !created {
		t.Fatalf("Init: %v %v", created, err)
	}
	return f
}

func wantCode(t testing.TB, err error, code Code, sentinel error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error %v (%T), want code %v", err, err, code)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("errors.Is(%v, %v) is false", err, sentinel)
	}
	return e
}

func TestFilterOperations(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t)
	f := openFilter(t, c, name)
	if f.Name() != name {
		t.Fatalf("Name %q", f.Name())
	}
	r := raw(t)
	cfgKey := "{" + name + "}:config"

	// a filter that does not exist: a distinct error, never a silent false
	if ok, err := f.Contains(ctx, []byte("x")); ok || err == nil {
		t.Fatalf("Contains on a missing filter: %v %v", ok, err)
	} else if e := wantCode(t, err, CodeNotInitialized, ErrNotInitialized); !strings.Contains(e.Message, "not initialized") ||
		!strings.Contains(e.Message, name) {
		t.Fatalf("message %q", e.Message)
	}
	for what, err := range map[string]error{
		"Add":   second(f.Add(ctx, []byte("x"))),
		"Count": second(f.Count(ctx)),
		"Info":  second(f.Info(ctx)),
	} {
		if !errors.Is(err, ErrNotInitialized) {
			t.Errorf("%s on a missing filter: %v", what, err)
		}
	}

	created, err := f.Init(ctx, 1000, 0.01)
	if err != nil || !created {
		t.Fatalf("Init: %v %v", created, err)
	}
	// tryInit semantics: a second init keeps the first config
	if created, err := f.Init(ctx, 5000, 0.001); err != nil || created {
		t.Fatalf("second Init: %v %v", created, err)
	}
	info, err := f.Info(ctx)
	if err != nil || info != (Info{Size: 9585, HashIterations: 7, ExpectedInsertions: 1000, FalseProbability: 0.01}) {
		t.Fatalf("Info: %+v %v", info, err)
	}
	if v := r.must(t, "HGET", cfgKey, "size"); v != "9585" {
		t.Fatalf("config hash size %v", v)
	}

	if added, err := f.Add(ctx, []byte("alpha")); err != nil || !added {
		t.Fatalf("Add: %v %v", added, err)
	}
	if added, err := f.Add(ctx, []byte("alpha")); err != nil || added {
		t.Fatalf("Add again: %v %v", added, err)
	}
	if added, err := f.AddString(ctx, "beta"); err != nil || !added {
		t.Fatalf("AddString: %v %v", added, err)
	}
	for _, s := range []string{"alpha", "beta"} {
		if ok, err := f.Contains(ctx, []byte(s)); err != nil || !ok {
			t.Fatalf("Contains(%s): %v %v", s, ok, err)
		}
		if ok, err := f.ContainsString(ctx, s); err != nil || !ok {
			t.Fatalf("ContainsString(%s): %v %v", s, ok, err)
		}
	}
	// a substring of a longer string is its own item (no copy, but the right bytes)
	long := "alphabet"
	if ok, err := f.ContainsString(ctx, long[:5]); err != nil || !ok {
		t.Fatalf("ContainsString(substring): %v %v", ok, err)
	}
	if ok, err := f.ContainsString(ctx, long); err != nil || ok {
		t.Fatalf("ContainsString(%s): %v %v (false positive at 1%%?)", long, ok, err)
	}

	// nil and empty are the same item
	if ok, err := f.Contains(ctx, nil); err != nil || ok {
		t.Fatalf("Contains(nil) before adding it: %v %v", ok, err)
	}
	if added, err := f.Add(ctx, nil); err != nil || !added {
		t.Fatalf("Add(nil): %v %v", added, err)
	}
	if ok, err := f.Contains(ctx, []byte{}); err != nil || !ok {
		t.Fatalf("Contains([]byte{}): %v %v", ok, err)
	}
	if ok, err := f.ContainsString(ctx, ""); err != nil || !ok {
		t.Fatalf(`ContainsString(""): %v %v`, ok, err)
	}

	// batches
	var batch, absent [][]byte
	for i := 0; i < 300; i++ {
		batch = append(batch, []byte(fmt.Sprintf("item-%d", i)))
		absent = append(absent, []byte(fmt.Sprintf("absent-%d", i)))
	}
	batch = append(batch, nil, []byte{}) // the empty item again: no new bit
	n, err := f.AddMany(ctx, batch)
	if err != nil || n != 300 {
		t.Fatalf("AddMany: %d %v", n, err)
	}
	if n, err := f.AddMany(ctx, batch); err != nil || n != 0 {
		t.Fatalf("AddMany again: %d %v", n, err)
	}
	if n, err := f.AddMany(ctx, nil); err != nil || n != 0 {
		t.Fatalf("AddMany(nil): %d %v", n, err)
	}
	present, err := f.ContainsMany(ctx, append(append([][]byte{}, batch...), absent...))
	if err != nil || len(present) != len(batch)+len(absent) {
		t.Fatalf("ContainsMany: %d %v", len(present), err)
	}
	falsePositives := 0
	for i, p := range present {
		if i < len(batch) && !p {
			t.Fatalf("item %d (%q) absent", i, batch[i])
		}
		if i >= len(batch) && p {
			falsePositives++
		}
	}
	if falsePositives > 30 {
		t.Errorf("%d false positives among %d absent items", falsePositives, len(absent))
	}
	if p, err := f.ContainsMany(ctx, [][]byte{}); err != nil || len(p) != 0 {
		t.Fatalf("ContainsMany(empty): %v %v", p, err)
	}

	count, err := f.Count(ctx)
	if err != nil || count < 295 || count > 310 {
		t.Fatalf("Count: %d %v (303 added)", count, err)
	}

	// time to live on both keys
	if applied, err := f.Expire(ctx, 30*time.Second); err != nil || !applied {
		t.Fatalf("Expire: %v %v", applied, err)
	}
	for _, key := range []string{name, cfgKey} {
		if ttl, _ := r.must(t, "PTTL", key).(int64); ttl <= 0 || ttl > 30000 {
			t.Fatalf("PTTL %s = %d", key, ttl)
		}
	}
	if applied, err := f.Persist(ctx); err != nil || !applied {
		t.Fatalf("Persist: %v %v", applied, err)
	}
	for _, key := range []string{name, cfgKey} {
		if ttl := r.must(t, "PTTL", key); ttl != int64(-1) {
			t.Fatalf("PTTL %s after Persist = %v", key, ttl)
		}
	}
	if applied, err := f.Persist(ctx); err != nil || applied {
		t.Fatalf("Persist again: %v %v", applied, err)
	}
	// a sub-millisecond ttl rounds up to 1ms rather than becoming 0 (rejected)
	if applied, err := f.Expire(ctx, 1500*time.Microsecond+time.Hour); err != nil || !applied {
		t.Fatalf("Expire(1h0.0015s): %v %v", applied, err)
	}
	if ttl, _ := r.must(t, "PTTL", name).(int64); ttl <= 3599000 || ttl > 3600002 {
		t.Fatalf("PTTL %d", ttl)
	}

	if deleted, err := f.Delete(ctx); err != nil || !deleted {
		t.Fatalf("Delete: %v %v", deleted, err)
	}
	if deleted, err := f.Delete(ctx); err != nil || deleted {
		t.Fatalf("Delete again: %v %v", deleted, err)
	}
	if v := r.must(t, "EXISTS", name, cfgKey); v != int64(0) {
		t.Fatalf("EXISTS after Delete: %v", v)
	}
	if _, err := f.Contains(ctx, []byte("alpha")); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Contains after Delete: %v", err)
	}
	if applied, err := f.Expire(ctx, time.Second); err != nil || applied {
		t.Fatalf("Expire on a deleted filter: %v %v", applied, err)
	}
}

func second[T any](_ T, err error) error { return err }

// A name with a hash tag keeps its config key beside it: NAME + ":config".
func TestHashTagName(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	name := uniqueName(t) + "{tag}"
	f := openFilter(t, c, name)
	if _, err := f.Init(ctx, 100, 0.01); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddString(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if v := raw(t).must(t, "EXISTS", name, name+":config"); v != int64(2) {
		t.Fatalf("EXISTS: %v", v)
	}
	f.Delete(ctx)
}

// A larger batch than the library's window (16384 items per round trip) and chunk (1024 per step).
func TestLargeBatch(t *testing.T) {
	ctx := context.Background()
	c := openClient(t, WithCommandTimeout(30*time.Second)) // a window of 16384 items on a loaded machine
	f := initFilter(t, c, 100000, 0.001)
	items := make([][]byte, 40000)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("large-%d-%s", i, strings.Repeat("x", i%50)))
	}
	n, err := f.AddMany(ctx, items)
	if err != nil || n < len(items)-5 {
		t.Fatalf("AddMany: %d %v", n, err)
	}
	present, err := f.ContainsMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range present {
		if !p {
			t.Fatalf("item %d absent", i)
		}
	}
	if count, err := f.Count(ctx); err != nil || count < 39000 || count > 41000 {
		t.Fatalf("Count %d %v", count, err)
	}
	f.Delete(ctx)
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()

	for _, url := range []string{"", "http://127.0.0.1:6379", "redis://", "redis://127.0.0.1:notaport", "redis://a\x00b"} {
		if c, err := Open(url); err == nil {
			c.Close()
			t.Errorf("Open(%q) succeeded", url)
		} else if !errors.Is(err, ErrBadURL) {
			t.Errorf("Open(%q): %v, want ErrBadURL", url, err)
		}
	}

	// nothing listens on a free port: ErrConn, within the connect timeout - from Open with
	// WithConnectAtOpen, else from the first call (Open connects nothing)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("redis://127.0.0.1:%d", port)
	start := time.Now()
	_, err = Open(closed, WithConnectTimeout(500*time.Millisecond), WithConnectAtOpen(true))
	if e := wantCode(t, err, CodeConn, ErrConn); e.Message == "" {
		t.Fatal("no message")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Open to a closed port took %v", d)
	}
	lazy, err := Open(closed, WithConnectTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatalf("Open connected: %v", err)
	}
	wantCode(t, lazy.Ping(context.Background()), CodeConn, ErrConn)
	lazy.Close()

	for _, tc := range []struct {
		opt  Option
		code Code
		name string
	}{
		{WithPoolSize(0), CodeInvalid, "WithPoolSize(0)"},
		{WithPoolSize(1025), CodeInvalid, "WithPoolSize(1025)"},
		{WithCommandTimeout(0), CodeInvalid, "WithCommandTimeout(0s)"},
		{WithCommandTimeout(-time.Second), CodeInvalid, "WithCommandTimeout(-1s)"},
		{WithConnectTimeout(2 * time.Hour), CodeInvalid, "WithConnectTimeout(2h0m0s)"},
		{WithDB(-1), CodeInvalid, "WithDB(-1)"},
		{WithConfigRetries(101), CodeInvalid, "WithConfigRetries(101)"},
		{WithUsername("a\x00b"), CodeInvalid, `WithUsername("a\x00b")`},
		{WithPassword("p\x00w"), CodeInvalid, "WithPassword(...)"},
	} {
		_, err := Open(testServer.url, tc.opt)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.HasPrefix(e.Message, tc.name) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if strings.Contains(fmt.Sprint(err), "p\x00w") {
			t.Errorf("the password is in the message: %v", err)
		}
	}
	// sub-millisecond durations round up to the shortest valid timeout; a nil option is skipped
	o, _, err := buildOptions([]Option{WithCommandTimeout(time.Microsecond), WithConnectTimeout(time.Nanosecond), nil})
	if err != nil {
		t.Fatalf("1µs timeouts: %v", err)
	}
	freeOptions(o)

	c := openClient(t)
	_, err = c.Filter("a{}b")
	if e := wantCode(t, err, CodeBadName, ErrBadName); !strings.Contains(e.Message, "different cluster slots") {
		t.Fatalf("message %q", e.Message)
	}
	if _, err := c.Filter("a\x00b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Filter with NUL: %v", err)
	}
	// an empty name would put its config at "{}:config", another slot than ""
	if _, err := c.Filter(""); !errors.Is(err, ErrBadName) {
		t.Fatalf(`Filter(""): %v`, err)
	}

	f := initFilter(t, c, 100, 0.01)
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := f.Expire(ctx, ttl)
		if e := wantCode(t, err, CodeInvalid, ErrInvalid); !strings.Contains(e.Message, "ttl_ms must be positive") {
			t.Fatalf("Expire(%v): %q", ttl, e.Message)
		}
	}
	//lint:ignore SA1012 a nil context is bad input on purpose
	if _, err := f.Contains(nil, []byte("x")); !errors.Is(err, ErrInvalid) { //nolint:staticcheck
		t.Fatalf("nil context: %v", err)
	}

	for _, tc := range []struct {
		size uint64
		k    uint32
	}{{0, 7}, {MaxSize + 1, 7}, {100, 0}, {100, MaxHashIterations + 1}} {
		if idx, err := Indexes([]byte("x"), tc.size, tc.k); !errors.Is(err, ErrInvalid) || idx != nil {
			t.Errorf("Indexes(size %d, k %d): %v %v", tc.size, tc.k, idx, err)
		}
	}
	if idx, err := Indexes(nil, MaxSize, MaxHashIterations); err != nil || len(idx) != int(MaxHashIterations) {
		t.Errorf("Indexes at the limits: %d %v", len(idx), err)
	}
}

// Keys of the wrong type and unparsable config hashes give their own errors.
func TestBadServerState(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	r := raw(t)

	name := uniqueName(t)
	r.must(t, "HSET", "{"+name+"}:config", "size", "100", "hashIterations", "3")
	r.must(t, "LPUSH", name, "x")
	f := openFilter(t, c, name)
	_, err := f.Contains(ctx, []byte("a"))
	if e := wantCode(t, err, CodeWrongType, ErrWrongType); !strings.Contains(e.Message, "wrong Redis type") {
		t.Fatalf("message %q", e.Message)
	}
	_, err = f.AddMany(ctx, [][]byte{[]byte("a"), []byte("b")})
	wantCode(t, err, CodeWrongType, ErrWrongType)
	r.must(t, "DEL", name, "{"+name+"}:config")

	name = uniqueName(t)
	r.must(t, "SET", "{"+name+"}:config", "not a hash")
	f = openFilter(t, c, name)
	_, err = f.Info(ctx)
	wantCode(t, err, CodeWrongType, ErrWrongType)
	r.must(t, "DEL", "{"+name+"}:config")

	name = uniqueName(t)
	r.must(t, "HSET", "{"+name+"}:config", "size", "abc", "hashIterations", "3")
	f = openFilter(t, c, name)
	_, err = f.ContainsString(ctx, "a")
	wantCode(t, err, CodeCorrupt, ErrCorrupt)
	_, err = f.Count(ctx)
	wantCode(t, err, CodeCorrupt, ErrCorrupt)
	r.must(t, "DEL", "{"+name+"}:config")
}

// An expired or cancelled context returns ctx.Err() without calling C: the server sees nothing.
func TestContextAlreadyDone(t *testing.T) {
	c := openClient(t)
	f := initFilter(t, c, 100, 0.01)
	r := raw(t)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	cause := errors.New("my cause")
	withCause, cancel3 := context.WithCancelCause(context.Background())
	cancel3(cause)

	commandsBefore := serverCommands(t, r)
	for _, tc := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}, {withCause, context.Canceled}} {
		ctx := tc.ctx
		errs := map[string]error{
			"Init":           second(f.Init(ctx, 100, 0.01)),
			"Add":            second(f.Add(ctx, []byte("a"))),
			"AddString":      second(f.AddString(ctx, "a")),
			"AddMany":        second(f.AddMany(ctx, [][]byte{[]byte("a")})),
			"Contains":       second(f.Contains(ctx, []byte("a"))),
			"ContainsString": second(f.ContainsString(ctx, "a")),
			"ContainsMany":   second(f.ContainsMany(ctx, [][]byte{[]byte("a")})),
			"Count":          second(f.Count(ctx)),
			"Info":           second(f.Info(ctx)),
			"Delete":         second(f.Delete(ctx)),
			"Expire":         second(f.Expire(ctx, time.Second)),
			"Persist":        second(f.Persist(ctx)),
			"Ping":           c.Ping(ctx),
			"Rotate": f.Rotate(ctx, 100, 0.01, Swap, func(*Rotation) error {
				t.Error("Rotate called fn with a context already done")
				return nil
			}, WithWait(time.Second)),
		}
		for what, err := range errs {
			if err != tc.want {
				t.Errorf("%s: %v, want exactly %v", what, err, tc.want)
			}
		}
	}
	// one more: the first INFO itself
	if after := serverCommands(t, r); after != commandsBefore+1 {
		t.Fatalf("the server processed %d commands, want 1 (INFO)", after-commandsBefore)
	}
	if ok, err := f.ContainsString(context.Background(), "a"); err != nil || ok {
		t.Fatalf("the filter changed: %v %v", ok, err)
	}
}

func serverCommands(t *testing.T, r *respConn) int64 {
	t.Helper()
	info, _ := r.must(t, "INFO", "stats").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatal("no total_commands_processed in INFO")
	return 0
}

// The context's deadline is the call's timeout: a paused server answers a 200ms context with a
// timeout after ~200ms, which is both ErrTimeout and context.DeadlineExceeded; a longer command
// timeout on the client does not matter. Without a deadline the client's command timeout applies,
// and that timeout is not context.DeadlineExceeded. The client recovers when the server does.
func TestContextDeadline(t *testing.T) {
	c := openClient(t, WithCommandTimeout(10*time.Second), WithPoolSize(2))
	f := initFilter(t, c, 1000, 0.01)
	bg := context.Background()
	if _, err := f.AddString(bg, "present"); err != nil {
		t.Fatal(err)
	}
	r := raw(t)
	const timeout = 200 * time.Millisecond
	// the slack past the timeout, plus what the machine imposed meanwhile (machineLate): the point
	// is "the timeout, not the 10s command timeout"
	const margin = 50 * time.Millisecond
	const pause = "1500" // ms: longer than timeout + margin, so the server stays paused throughout

	// paused runs call while the server is paused and returns its error and duration; it returns
	// once the pause is over.
	paused := func(name string, call func() error) (time.Duration, error) {
		t.Helper()
		r.must(t, "CLIENT", "PAUSE", pause)
		start := time.Now()
		err := call()
		elapsed := time.Since(start)
		r.must(t, "PING") // answered when the pause ends
		t.Logf("%s: %v after %v", name, err, elapsed)
		return elapsed, err
	}

	calls := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"Contains", func(ctx context.Context) error { return second(f.ContainsString(ctx, "present")) }},
		{"AddMany", func(ctx context.Context) error { return second(f.AddMany(ctx, [][]byte{[]byte("a"), []byte("b")})) }},
		{"Count", func(ctx context.Context) error { return second(f.Count(ctx)) }},
	}
	for _, call := range calls {
		elapsed, err := paused(call.name, func() error {
			ctx, cancel := context.WithTimeout(bg, timeout)
			defer cancel()
			return call.run(ctx)
		})
		e := wantCode(t, err, CodeTimeout, ErrTimeout)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: errors.Is(err, context.DeadlineExceeded) is false: %v", call.name, err)
		}
		if e.Message == "" {
			t.Errorf("%s: no message", call.name)
		}
		if bound := timeout + margin + machineLate(time.Now().Add(-elapsed)); elapsed < timeout-20*time.Millisecond ||
			elapsed > bound {
			t.Errorf("%s: returned after %v, want %v (at most %v)", call.name, elapsed, timeout, bound)
		}
		// the client works again once the server does
		if ok, err := f.ContainsString(bg, "present"); err != nil || !ok {
			t.Fatalf("after the pause: %v %v", ok, err)
		}
	}

	// the client's command timeout, without a deadline: ErrTimeout but not DeadlineExceeded
	c2 := openClient(t, WithCommandTimeout(timeout))
	f2 := openFilter(t, c2, f.Name())
	if _, err := f2.Info(bg); err != nil {
		t.Fatal(err)
	}
	elapsed, err := paused("Contains without a deadline", func() error {
		return second(f2.ContainsString(bg, "present"))
	})
	wantCode(t, err, CodeTimeout, ErrTimeout)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a command timeout without a context deadline is context.DeadlineExceeded: %v", err)
	}
	if bound := timeout + margin + machineLate(time.Now().Add(-elapsed)); elapsed < timeout-20*time.Millisecond ||
		elapsed > bound {
		t.Errorf("returned after %v, want %v (at most %v)", elapsed, timeout, bound)
	}
	if ok, err := f2.ContainsString(bg, "present"); err != nil || !ok {
		t.Fatalf("after the pause: %v %v", ok, err)
	}
}

// Many goroutines share one client (and filter handles); each sees its own results and messages.
func TestConcurrentSharedClient(t *testing.T) {
	ctx := context.Background()
	// 4 connections for 32 goroutines: they queue for them, so give the queue time on a loaded
	// machine (the point here is sharing, not timing)
	c := openClient(t, WithPoolSize(4), WithCommandTimeout(30*time.Second))
	shared := initFilter(t, c, 100000, 0.01)
	missing := openFilter(t, c, uniqueName(t))
	const workers = 32
	const rounds = 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// a handle of its own on the same filter, closed while the others keep going
			own, err := c.Filter(shared.Name())
			if err != nil {
				errs <- err
				return
			}
			defer own.Close()
			for i := 0; i < rounds; i++ {
				item := fmt.Sprintf("w%d-i%d", w, i)
				f := shared
				if i%2 == 1 {
					f = own
				}
				if _, err := f.AddString(ctx, item); err != nil {
					errs <- fmt.Errorf("add %s: %w", item, err)
					return
				}
				if ok, err := f.Contains(ctx, []byte(item)); err != nil || !ok {
					errs <- fmt.Errorf("contains %s: %v %w", item, ok, err)
					return
				}
				if i%10 == 0 {
					batch := make([][]byte, 20)
					for j := range batch {
						batch[j] = []byte(fmt.Sprintf("%s-b%d", item, j))
					}
					if _, err := f.AddMany(ctx, batch); err != nil {
						errs <- err
						return
					}
					present, err := f.ContainsMany(ctx, batch)
					if err != nil {
						errs <- err
						return
					}
					for j, p := range present {
						if !p {
							errs <- fmt.Errorf("batch item %s-b%d absent", item, j)
						}
					}
				}
				// errors of other goroutines never leak into this call's message
				switch i % 5 {
				case 3:
					_, err := missing.ContainsString(ctx, item)
					var e *Error
					if !errors.As(err, &e) || e.Code != CodeNotInitialized || !strings.Contains(e.Message, missing.Name()) {
						errs <- fmt.Errorf("missing filter: %v", err)
					}
				case 4:
					_, err := own.Init(ctx, -int64(w)-1, 0.01)
					want := fmt.Sprintf("init: Bloom filter expected insertions must be positive, got %d", -w-1)
					var e *Error
					if !errors.As(err, &e) || e.Message != want {
						errs <- fmt.Errorf("bad init: %v, want %q", err, want)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n, err := shared.Count(ctx)
	want := int64(workers * (rounds + rounds/10*20))
	if err != nil || n < want*95/100 || n > want*105/100 {
		t.Fatalf("Count %d %v, want ~%d", n, err, want)
	}
	shared.Delete(ctx)
}

func TestCloseIdempotent(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 100, 0.01)
	name := f.Name()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Init":           second(f.Init(ctx, 100, 0.01)),
		"Add":            second(f.Add(ctx, []byte("a"))),
		"AddString":      second(f.AddString(ctx, "a")),
		"AddMany":        second(f.AddMany(ctx, [][]byte{[]byte("a")})),
		"Contains":       second(f.Contains(ctx, []byte("a"))),
		"ContainsString": second(f.ContainsString(ctx, "a")),
		"ContainsMany":   second(f.ContainsMany(ctx, [][]byte{[]byte("a")})),
		"Count":          second(f.Count(ctx)),
		"Info":           second(f.Info(ctx)),
		"Delete":         second(f.Delete(ctx)),
		"Expire":         second(f.Expire(ctx, time.Second)),
		"Persist":        second(f.Persist(ctx)),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed filter: %v", what, err)
		}
	}
	if f.Name() != name {
		t.Errorf("Name after Close: %q", f.Name())
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Filter("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Filter on a closed client: %v", err)
	}
	if err := c.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping on a closed client: %v", err)
	}
	var nilClient *Client
	var nilFilter *Filter
	if nilClient.Close() != nil || nilFilter.Close() != nil {
		t.Fatal("Close on nil")
	}

	// concurrent Close calls, while calls are in flight
	c = openClient(t)
	f = initFilter(t, c, 100, 0.01)
	var wg sync.WaitGroup
	var ok, closed atomic.Int64
	for i := 0; i < 16; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_, err := f.ContainsString(ctx, "a")
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrClosed):
					closed.Add(1)
				default:
					t.Errorf("Contains during Close: %v", err)
					return
				}
			}
		}()
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Duration(i) * time.Millisecond)
			f.Close()
			c.Close()
		}(i)
	}
	wg.Wait()
	t.Logf("%d calls answered, %d saw ErrClosed", ok.Load(), closed.Load())
	if closed.Load() == 0 {
		t.Error("no call saw the filter closed")
	}
}

// Closing the Client while filters are open is safe: the filters keep the pool alive, and the
// connections go away with the last filter.
func TestClientClosedBeforeFilters(t *testing.T) {
	ctx := context.Background()
	clientName := fmt.Sprintf("bg-go-close-%d", nameSeq.Add(1))
	c := openClient(t, WithClientName(clientName), WithPoolSize(2))
	f1 := initFilter(t, c, 100, 0.01)
	f2 := openFilter(t, c, f1.Name())
	r := raw(t)
	if n := connectionsNamed(t, r, clientName); n == 0 {
		t.Fatalf("no connection named %s", clientName)
	}
	c.Close()
	if _, err := f1.AddString(ctx, "after client close"); err != nil {
		t.Fatalf("Add after the client was closed: %v", err)
	}
	f1.Close()
	if ok, err := f2.ContainsString(ctx, "after client close"); err != nil || !ok {
		t.Fatalf("Contains on the last filter: %v %v", ok, err)
	}
	if _, err := f2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	f2.Close()
	waitConnections(t, r, clientName, 0)
}

func connectionsNamed(t *testing.T, r *respConn, name string) int {
	t.Helper()
	list, _ := r.must(t, "CLIENT", "LIST").(string)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") {
			n++
		}
	}
	return n
}

func waitConnections(t *testing.T, r *respConn, name string, want int) {
	t.Helper()
	var n int
	for i := 0; i < 250; i++ {
		if n = connectionsNamed(t, r, name); n == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d connections named %s, want %d", n, name, want)
}

// The cleanup is a safety net: a Client and Filter nobody closed are closed by the GC.
func TestCleanupSafetyNet(t *testing.T) {
	clientName := fmt.Sprintf("bg-go-gc-%d", nameSeq.Add(1))
	r := raw(t)
	func() {
		c, err := Open(testServer.url, WithClientName(clientName))
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.Filter(uniqueName(t))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Info(context.Background())
	}()
	if connectionsNamed(t, r, clientName) == 0 {
		t.Fatal("no connection")
	}
	var n int
	for i := 0; i < 250; i++ {
		runtime.GC()
		if n = connectionsNamed(t, r, clientName); n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d connections left after GC", n)
}

func TestOptions(t *testing.T) {
	ctx := context.Background()
	r := raw(t)

	c := openClient(t, WithClientName("bg-go-options"), WithDB(3), WithConfigRetries(0))
	if err := c.Ping(ctx); err != nil { // Open connects nothing: the first call does
		t.Fatal(err)
	}
	if connectionsNamed(t, r, "bg-go-options") == 0 {
		t.Fatal("WithClientName: no connection with that name")
	}
	f := initFilter(t, c, 100, 0.01)
	r3 := raw(t)
	r3.must(t, "SELECT", "3")
	if v := r3.must(t, "EXISTS", "{"+f.Name()+"}:config"); v != int64(1) {
		t.Fatalf("WithDB(3): EXISTS in db 3 = %v", v)
	}
	if v := r.must(t, "EXISTS", "{"+f.Name()+"}:config"); v != int64(0) {
		t.Fatalf("WithDB(3): EXISTS in db 0 = %v", v)
	}
	f.Delete(ctx)

	// the database from the URL, and a unix socket
	for _, url := range []string{testServer.url + "/4", "unix://" + testServer.sock + "?db=4"} {
		c, err := Open(url)
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		f := initFilter(t, c, 100, 0.01)
		r4 := raw(t)
		r4.must(t, "SELECT", "4")
		if v := r4.must(t, "EXISTS", "{"+f.Name()+"}:config"); v != int64(1) {
			t.Fatalf("%s: EXISTS in db 4 = %v", url, v)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("%s: Ping: %v", url, err)
		}
		f.Delete(ctx)
		f.Close()
		c.Close()
	}

	// one connection shared by many goroutines: they wait for it
	c1 := openClient(t, WithPoolSize(1))
	f1 := initFilter(t, c1, 1000, 0.01)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if _, err := f1.AddString(ctx, fmt.Sprint(i, "-", j)); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()

	// ACL user and password; a wrong password is ErrAuth and never shown
	user := fmt.Sprintf("bg-go-user-%d", nameSeq.Add(1))
	r.must(t, "ACL", "SETUSER", user, "on", ">right-pw-123", "~*", "&*", "+@all")
	t.Cleanup(func() { r.do("ACL", "DELUSER", user) })
	ca := openClient(t, WithUsername(user), WithPassword("right-pw-123"))
	if err := ca.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := Open(testServer.url, WithUsername(user), WithPassword("wrong-pw-456"), WithConnectAtOpen(true))
	wantCode(t, err, CodeAuth, ErrAuth)
	if strings.Contains(err.Error(), "wrong-pw-456") {
		t.Fatalf("the password is in the message: %v", err)
	}
	_, err = Open(fmt.Sprintf("redis://%s:wrong-pw-789@%s", user, testServer.addr), WithConnectAtOpen(true))
	wantCode(t, err, CodeAuth, ErrAuth)
	if strings.Contains(err.Error(), "wrong-pw-789") {
		t.Fatalf("the password is in the message: %v", err)
	}
}

// Another client rebuilding the filter with other parameters is retried transparently; with no
// retries allowed the same situation is ErrConfigChanged, never a silent false.
func TestConfigChanged(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	strict := openClient(t, WithConfigRetries(0))
	f := initFilter(t, c, 1000, 0.01)
	fs := openFilter(t, strict, f.Name())
	if _, err := f.AddString(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	// both handles have now seen the config (size 9585, k 7)
	if ok, err := fs.ContainsString(ctx, "old"); err != nil || !ok {
		t.Fatalf("Contains: %v %v", ok, err)
	}
	if ok, err := f.ContainsString(ctx, "old"); err != nil || !ok {
		t.Fatalf("Contains: %v %v", ok, err)
	}

	rebuildElsewhere(t, f.Name())

	_, err := fs.ContainsString(ctx, "new")
	if e := wantCode(t, err, CodeConfigChanged, ErrConfigChanged); e.Message == "" {
		t.Fatal("no message")
	}
	if ok, err := f.ContainsString(ctx, "new"); err != nil || !ok {
		t.Fatalf("Contains after the rebuild: %v %v", ok, err)
	}
	if info, err := f.Info(ctx); err != nil || info.ExpectedInsertions != 50000 {
		t.Fatalf("Info: %+v %v", info, err)
	}
	f.Delete(ctx)
}

// rebuildElsewhere rebuilds the filter from another client, as a Redisson service does: delete,
// init with other parameters (50000, 0.001), add "new".
func rebuildElsewhere(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	other := openFilter(t, openClient(t), name)
	if _, err := other.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Init(ctx, 50000, 0.001); err != nil {
		t.Fatal(err)
	}
	if _, err := other.AddString(ctx, "new"); err != nil {
		t.Fatal(err)
	}
}

// WithTracking is accepted both ways and answers the same, also on the very connection that read
// the filter just before another client rebuilt it with other parameters (an invalidation, or the
// full check, must notice). Whether reads are tracked at all depends on hiredis >= 1.0 and
// Redis >= 6; with tracking off none is.
func TestTracking(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			c := openClient(t, WithTracking(on), WithPoolSize(1))
			f := initFilter(t, c, 1000, 0.01)
			if _, err := f.AddMany(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 5; i++ {
				if got, err := f.ContainsMany(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil || !got[0] || !got[1] {
					t.Fatalf("ContainsMany: %v %v", got, err)
				}
			}
			rebuildElsewhere(t, f.Name())
			if ok, err := f.ContainsString(ctx, "new"); err != nil || !ok {
				t.Fatalf("Contains after the rebuild: %v %v", ok, err)
			}
			if info, err := f.Info(ctx); err != nil || info.ExpectedInsertions != 50000 {
				t.Fatalf("Info: %+v %v", info, err)
			}
			s := stats(t, f)
			if s.TrackedReads < 0 || s.TrackedStale < 0 || s.TrackedStale > s.TrackedReads {
				t.Errorf("TrackedReads %d, TrackedStale %d", s.TrackedReads, s.TrackedStale)
			}
			if !on && (s.TrackedReads != 0 || s.TrackedStale != 0) {
				t.Errorf("tracking off: TrackedReads %d, TrackedStale %d", s.TrackedReads, s.TrackedStale)
			}
			f.Delete(ctx)
		})
	}
}

// LibraryFeatures: cgo compiles the vendored hiredis 1.x with its TLS part into the binding
// (internal/clib), so it can track and speak TLS. (BG_CMAKE_ARGS=-DBG_HIREDIS=system, which
// allowed a library without both, belonged to the retired setup.sh.)
func TestLibraryFeatures(t *testing.T) {
	fs := LibraryFeatures()
	if fs&^(FeatureTracking|FeatureTLS) != 0 {
		t.Fatalf("undefined feature bits: %#x", int(fs))
	}
	if !fs.Has(FeatureTracking) {
		t.Errorf("library without FeatureTracking: internal/clib compiles hiredis >= 1.0")
	}
	if fs.Has(FeatureTLS) == notlsBuild {
		t.Errorf("FeatureTLS is %v in a build with bloomguard_notls %v", fs.Has(FeatureTLS), notlsBuild)
	}
}

// Repeated queries of an unchanged filter read the bits alone (the binding always compiles hiredis
// >= 1.0, and Redis >= 6 tracks): TrackedReads > 0. With tracking off, never.
func TestRepeatedQueriesTakeTheTrackedPath(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			c := openClient(t, WithTracking(on), WithPoolSize(1))
			f := initFilter(t, c, 1000, 0.01)
			defer f.Delete(ctx)
			if _, err := f.AddMany(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if ok, err := f.ContainsString(ctx, "a"); err != nil || !ok {
					t.Fatalf("ContainsString: %v %v", ok, err)
				}
				if got, err := f.ContainsMany(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil || !got[0] || !got[1] {
					t.Fatalf("ContainsMany: %v %v", got, err)
				}
			}
			s := stats(t, f)
			if on && s.TrackedReads <= 0 {
				t.Errorf("tracking on: TrackedReads %d after 40 queries", s.TrackedReads)
			}
			if !on && s.TrackedReads != 0 {
				t.Errorf("tracking off: TrackedReads %d", s.TrackedReads)
			}
		})
	}
}

// Thousands of goroutines on one client without queues do not become thousands of OS threads
// blocked in C: the client's gate lets a bounded number into C and the rest wait as goroutines.
// (With queues no call holds a thread: TestThreadsWithCallsInFlight.)
func TestManyGoroutinesBoundedThreads(t *testing.T) {
	threads := func() int {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skipf("no /proc/self/status: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Threads:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		t.Skip("no Threads: line")
		return 0
	}
	ctx := context.Background()
	c := openClient(t, WithCommandTimeout(30*time.Second), WithQueues(0))
	f := initFilter(t, c, 1000, 0.01)
	before := threads()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 3000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				if _, err := f.ContainsString(ctx, "x"); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	after := threads()
	t.Logf("OS threads: %d before, %d after 3000 goroutines x 3 calls (gate %d)", before, after, cap(c.g))
	if failed.Load() != 0 {
		t.Errorf("%d calls failed", failed.Load())
	}
	// Go keeps idle threads, so "after" is about the peak
	if after > before+cap(c.g)+100 {
		t.Errorf("%d OS threads for a gate of %d", after, cap(c.g))
	}
}

// A context ends the wait for the gate like it ends a wait in C (the gate bounds the blocking
// calls: every filter call of a client without queues, Ping of any client).
func TestGateWaitHonoursContext(t *testing.T) {
	c := openClient(t, WithPoolSize(1000), WithQueues(0))
	if cap(c.g) != 2000 {
		t.Fatalf("gate %d for a pool of 1000", cap(c.g))
	}
	f := initFilter(t, c, 100, 0.01)
	for len(c.g) < cap(c.g) {
		c.g <- struct{}{} // every slot taken
	}
	defer func() {
		for len(c.g) > 0 {
			<-c.g
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.ContainsString(ctx, "x")
	if d := time.Since(start); d < 90*time.Millisecond || d > time.Second {
		t.Errorf("returned after %v", d)
	}
	wantCode(t, err, CodeTimeout, ErrTimeout)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("not DeadlineExceeded: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	if err := c.Ping(ctx2); err != context.Canceled {
		t.Errorf("Ping cancelled while waiting: %v", err)
	}
	<-c.g // one slot free again: calls go through
	if ok, err := f.ContainsString(context.Background(), "x"); err != nil || ok {
		t.Errorf("after a slot was freed: %v %v", ok, err)
	}
}

// The string twins of the batch calls answer as the [][]byte ones, for the same bytes, and a
// rotation fed strings holds them.
func TestStringBatches(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := initFilter(t, c, 10000, 1e-6)
	in := []string{"s-1", "s-2", "", "ünïcödé"}
	if n, err := f.AddManyStrings(ctx, in); err != nil || n != len(in) {
		t.Fatalf("AddManyStrings: %d %v", n, err)
	}
	asBytes := make([][]byte, 0, len(in)+1)
	for _, s := range append(in, "absent") {
		asBytes = append(asBytes, []byte(s))
	}
	got, err := f.ContainsManyStrings(ctx, append(in, "absent"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.ContainsMany(ctx, asBytes)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(got) != "[true true true true false]" {
		t.Errorf("ContainsManyStrings %v, ContainsMany %v", got, want)
	}
	if n, err := f.AddMany(ctx, asBytes[:1]); err != nil || n != 0 {
		t.Errorf("re-adding s-1 as bytes: %d new, %v (the same bytes as the string)", n, err)
	}
	if err := f.Rotate(ctx, 20000, 1e-6, Swap, func(r *Rotation) error { return r.AddManyStrings(in) }); err != nil {
		t.Fatal(err)
	}
	if got, err := f.ContainsManyStrings(ctx, in); err != nil || fmt.Sprint(got) != "[true true true true]" {
		t.Errorf("after a rotation fed strings: %v %v", got, err)
	}
}
