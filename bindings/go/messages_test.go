package bloomguard

// Messages speak Go: what a Go user reads in an error names no C function, type or macro
// (bg_*, BG_*, bgi_*, NULL) - options by their With function. Each message comes from a real
// failure (or the URL and option checks, which need no server).

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

var cWords = regexp.MustCompile(`\bbgi?_[a-z_]+|\bBG_[A-Z_]+|\bNULL\b`)

func TestMessagesForbiddenWordsControl(t *testing.T) {
	for _, planted := range []string{"give BG_OPT_TLS_CA_FILE", "rejected by bg_call_set_timeout_ms", "bgi_err", "is NULL"} {
		if !cWords.MatchString(planted) {
			t.Errorf("the check misses %q", planted)
		}
	}
	if got := inGoWords("give BG_OPT_TLS_CA_FILE, or BG_OPT_NOT_AN_OPTION"); got != "give WithTLSCAFile, or BG_OPT_NOT_AN_OPTION" {
		t.Errorf("inGoWords: %q", got)
	}
}

func TestMessagesNameNoCInternals(t *testing.T) {
	var msgs []string
	keep := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		msgs = append(msgs, what+": "+err.Error())
	}
	_, err := Open("redis://user@127.0.0.1:1")
	keep("user without password", err)
	_, err = Open(testServer.url, WithPoolSize(0))
	keep("pool size 0", err)
	_, err = Open(testServer.url, WithCluster(ClusterOn), WithDB(3))
	keep("cluster with a db", err)
	_, err = Open("rediss://127.0.0.1:1", WithTLSCertFile("/no/such/cert"))
	keep("a client certificate without its key", err)
	_, err = Open("nope://x")
	keep("a bad scheme", err)

	ctx := context.Background()
	c := openClient(t, WithCommandTimeout(5*time.Second))
	f := openFilter(t, c, uniqueName(t))
	_, err = f.ContainsString(ctx, "x")
	keep("not initialized", err)
	if _, err := f.Init(ctx, 100, 0.01); err != nil {
		t.Fatal(err)
	}
	r := raw(t)
	r.must(t, "CLIENT", "PAUSE", "1500", "ALL")
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = f.ContainsString(dctx, "x")
	cancel()
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a deadline: %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	keep("a deadline", err)
	want := 10
	if f.qs != nil { // a blocking call (WithQueues(0)) waiting for a reply ends at its deadline, not its cancel
		cctx, cancel2 := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel2)
		_, err = f.ContainsString(cctx, "y")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancel: %v, want context.Canceled", err)
		}
		keep("a cancel", err)
	} else {
		want--
	}
	r.must(t, "CLIENT", "UNPAUSE")
	_, err = f.Expire(ctx, -time.Second)
	keep("a negative ttl", err)
	f.Delete(ctx)

	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer ln.Close()
	silent, err := Open("redis://"+ln.Addr().String(), WithConnectTimeout(300*time.Millisecond),
		WithCommandTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	sf, err := silent.Filter("x")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	_, err = sf.ContainsString(ctx, "x")
	keep("a server that never answers", err)

	var bad []string
	for _, m := range msgs {
		if cWords.MatchString(m) {
			bad = append(bad, m)
		}
	}
	if len(bad) > 0 {
		t.Errorf("C names in messages:\n%s", strings.Join(bad, "\n"))
	}
	if len(msgs) != want {
		t.Errorf("%d messages, want %d:\n%s", len(msgs), want, strings.Join(msgs, "\n"))
	}
}
