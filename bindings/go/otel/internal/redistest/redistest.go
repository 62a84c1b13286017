// Package redistest starts a real redis-server for this module's tests ($BG_REDIS_SERVER or
// redis-server from PATH) on a free loopback port, and speaks RESP to it (CLIENT PAUSE, ...).
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a running redis-server, stopped (by its pid) when the test ends.
type Server struct {
	Addr string // 127.0.0.1:port
	URL  string
}

// Start starts one for t.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv("BG_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "redis.log")
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", bin, err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), URL: fmt.Sprintf("redis://127.0.0.1:%d", port)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if r, err := s.Do("PING"); err == nil && r == "PONG" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer PING in 10 s", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do runs one command on a fresh connection: a status or bulk reply as a string, an integer in
// decimal, an error reply as an error.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

// Must is Do that fails t on an error.
func (s *Server) Must(t testing.TB, args ...string) string {
	t.Helper()
	r, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}
