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
	"syscall"
	"testing"
	"time"
)

// startRedisOn starts a redis-server of the test's own on port (0: a free one) with extra
// arguments; stop() stops it and removes its directory, stopProcess() only stops it.
func startRedisOn(port int, extra ...string) (*redisServer, error) {
	bin := os.Getenv("BG_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bloomguard-go-redis-")
	if err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s := &redisServer{dir: dir, port: port, addr: fmt.Sprintf("127.0.0.1:%d", port), sock: filepath.Join(dir, "redis.sock")}
	s.url = "redis://" + s.addr
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "redis.log", "--enable-debug-command", "local"}, extra...)
	s.cmd = exec.Command(path, args...)
	s.cmd.SysProcAttr = diesWithTest()
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.cmd.Wait() }()
	if err := s.waitReady(10 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// sigpipeChild is the scenario the child process runs (TestSIGPIPEChild): a big call (about 3 MB
// of commands: several writes) to connections the server closed, by CLIENT KILL or its idle
// timeout. The Go runtime keeps SIGPIPE's default action for signals it does not handle.
func sigpipeChild(t *testing.T, url, kind string) {
	ctx := context.Background()
	c, err := Open(url, WithPipeline(kind != "pooled"), WithConnectAtOpen(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Filter("go-sigpipe-" + kind)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	items := make([][]byte, 20000)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("sigpipe-%d", i))
	}
	if _, err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Init(ctx, 100000, 0.01); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(url, "redis://")
	if kind == "idle" {
		// waits for the event: the server closed every bloomguard connection (bounded: 10 s)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := dialRESP(addr)
			if err != nil {
				t.Fatal(err)
			}
			list, _ := r.do("CLIENT", "LIST")
			r.close()
			if s, _ := list.(string); !strings.Contains(s, "name=bloomguard") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server kept the idle connections for 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	} else {
		r, err := dialRESP(addr)
		if err != nil {
			t.Fatal(err)
		}
		r.do("CLIENT", "KILL", "TYPE", "normal")
		r.close()
	}
	got, err := f.ContainsManySource(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != SourceRedis {
		t.Fatalf("answered by %v", got.Source)
	}
	for i, p := range got.Present {
		if !p {
			t.Fatalf("item %d absent", i)
		}
	}
}

// TestSIGPIPEChild runs only as the child of TestNoSIGPIPE.
func TestSIGPIPEChild(t *testing.T) {
	spec := os.Getenv("BG_GO_SIGPIPE_CHILD")
	if spec == "" {
		t.Skip("the child of TestNoSIGPIPE")
	}
	url, kind, _ := strings.Cut(spec, " ")
	sigpipeChild(t, url, kind)
}

// TestNoSIGPIPE: a big call that meets a connection the server closed (CLIENT KILL on pooled and
// bulk calls; redis.conf `timeout 1`, no fault at all) answers from Redis, and the process lives.
// Each case runs in a child of the test binary, so a SIGPIPE shows as its death.
func TestNoSIGPIPE(t *testing.T) {
	idle, err := startRedisOn(0, "--timeout", "1")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.stop()
	for _, tc := range []struct{ url, kind string }{
		{testServer.url, "pooled"}, {testServer.url, "bulk"}, {idle.url, "idle"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSIGPIPEChild$", "-test.v")
		cmd.Env = append(os.Environ(), "BG_GO_SIGPIPE_CHILD="+tc.url+" "+tc.kind)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Errorf("%s: the process was killed by %v", tc.kind, ws.Signal())
				continue
			}
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSIGPIPEChild") {
			t.Errorf("%s: %v\n%s", tc.kind, err, out)
		}
	}
}

// TestOpenDuringAnOutage: Open connects nothing, so a client opened while its server is down
// works: a filter with the default Policy answers from it meanwhile, one without fails with
// ErrConn, and the same client answers from Redis once the server is back. The control:
// WithConnectAtOpen fails at Open.
func TestOpenDuringAnOutage(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	ctx := context.Background()
	_, err = Open(url, WithConnectAtOpen(true))
	wantCode(t, err, CodeConn, ErrConn)
	c, err := Open(url)
	if err != nil {
		t.Fatalf("Open during the outage: %v", err)
	}
	defer c.Close()
	p, err := NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := c.Filter("go-outage", WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	plain, err := c.Filter("go-outage")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	got, err := guarded.ContainsSource(ctx, []byte("a"))
	if err != nil || got.Source != SourceAssumedPresent || !got.Present {
		t.Fatalf("during the outage: %+v, %v", got, err)
	}
	_, err = plain.Contains(ctx, []byte("a"))
	wantCode(t, err, CodeConn, ErrConn)

	srv, err := startRedisOn(port)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	if _, err := plain.Init(ctx, 1000, 0.01); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Add(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // the guarded one once its breaker lets a call through
	for {
		got, err = guarded.ContainsSource(ctx, []byte("a"))
		if (err == nil && got.Source == SourceRedis) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || got.Source != SourceRedis || !got.Present {
		t.Fatalf("after the server came back: %+v, %v", got, err)
	}
}
