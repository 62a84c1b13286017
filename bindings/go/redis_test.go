package bloomguard

// Test fixture: a real redis-server on a free 127.0.0.1 port (and a unix socket), started by
// TestMain and stopped by its pid; and a tiny RESP client over net.Conn to look at what the
// library wrote, or to pause the server.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testServer is the server every test shares.
var testServer *redisServer

type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	port int
	addr string // 127.0.0.1:port
	url  string // redis://127.0.0.1:port
	sock string // unix socket path

	exited chan error // receives cmd.Wait's result once the process is gone
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	srv, err := startRedis()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start redis-server: %v\n"+
			"(install it - Debian: apt-get install redis-server - or set BG_REDIS_SERVER to its path)\n", err)
		return 2
	}
	testServer = srv
	defer srv.stop()
	startLatenessProbe()
	code := m.Run()
	select { // a server that died under the tests: say why, before its directory goes
	case err := <-srv.exited:
		srv.exited <- err
		fmt.Fprintf(os.Stderr, "the test redis-server exited during the tests (%v); its log:\n%s\n", err, readLog(srv.dir))
	default:
	}
	return code
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startRedis() (*redisServer, error) {
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
	// A port taken between freePort and the server's bind makes the server exit: try a few.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &redisServer{dir: dir, port: port, addr: fmt.Sprintf("127.0.0.1:%d", port),
			sock: filepath.Join(dir, "redis.sock")}
		s.url = "redis://" + s.addr
		s.cmd = exec.Command(path,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--unixsocket", s.sock, "--unixsocketperm", "700",
			"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", "redis.log",
			"--enable-debug-command", "local")
		// the server must not outlive the test binary if it dies without running the cleanup
		s.cmd.SysProcAttr = diesWithTest()
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.exited = make(chan error, 1)
		go func() { s.exited <- s.cmd.Wait() }()
		if err := s.waitReady(10 * time.Second); err != nil {
			s.stopProcess()
			lastErr = err
			continue
		}
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// waitReady polls PING until the server answers, it exits, or the time is up.
func (s *redisServer) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.exited:
			s.exited <- err // keep it for stopProcess
			return fmt.Errorf("redis-server exited at start (%v); log: %s", err, readLog(s.dir))
		default:
		}
		if r, err := dialRESP(s.addr); err == nil {
			_, perr := r.do("PING")
			r.close()
			if perr == nil {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server did not answer PING within %v; log: %s", limit, readLog(s.dir))
}

// stopProcess stops the server this fixture started, by its pid: SIGTERM, then SIGKILL after 5s.
func (s *redisServer) stopProcess() {
	select {
	case err := <-s.exited:
		s.exited <- err
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
		return
	case <-time.After(5 * time.Second):
	}
	_ = s.cmd.Process.Kill()
	err := <-s.exited
	s.exited <- err
}

func (s *redisServer) stop() {
	s.stopProcess()
	os.RemoveAll(s.dir)
}

func readLog(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// ---- a tiny RESP2 client ------------------------------------------------------------------------

type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// respError is an error reply from the server.
type respError string

func (e respError) Error() string { return string(e) }

func dialRESP(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (r *respConn) close() { r.c.Close() }

// do sends one command and reads its reply: string (simple or bulk), int64, nil, []any, or a
// respError as the error. Every read is bounded by a 10s deadline.
func (r *respConn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(r.c, b.String()); err != nil {
		return nil, err
	}
	return r.read()
}

func (r *respConn) read() (any, error) {
	line, err := r.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("bad RESP line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := r.read()
			var re respError
			if err != nil && !errors.As(err, &re) {
				return nil, err
			}
			if err != nil {
				v = err // an error inside an array (EXEC) is an element
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown RESP type in %q", line)
}

// raw opens a RESP connection to the test server, closed with the test.
func raw(t testing.TB) *respConn {
	t.Helper()
	r, err := dialRESP(testServer.addr)
	if err != nil {
		t.Fatalf("dial %s: %v", testServer.addr, err)
	}
	t.Cleanup(r.close)
	return r
}

// must runs a command on r and fails the test on an error reply.
func (r *respConn) must(t testing.TB, args ...string) any {
	t.Helper()
	v, err := r.do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}
