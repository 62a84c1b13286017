package bloomguard

// #include <stdlib.h>
// #include <bloomguard.h>
import "C"

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// errbufSize is the room for a message from the C library (its messages are at most 512 bytes).
const errbufSize = 512

// Client is a pool of connections to one Redis server (bg_client). It is safe for concurrent use
// by any number of goroutines; each call takes a pooled connection for its duration.
//
// Filters opened from a Client keep the underlying pool alive: closing the Client while filters
// are open is safe, and the connections go away when the last of them is closed.
type Client struct {
	h       *clientHandle
	g       gate // bounds the calls in C at once, shared with the filters
	cleanup runtime.Cleanup
}

type clientHandle struct {
	mu   sync.RWMutex // held for reading by every call, for writing by close
	p    *C.bg_client // nil once closed
	qs   *queueSet    // the client's reference to its queues (nil: WithQueues(0))
	sink uintptr      // its events' sink (observe.go), 0: none
}

func (h *clientHandle) close() {
	h.mu.Lock()
	p, qs := h.p, h.qs
	h.p, h.qs = nil, nil
	h.mu.Unlock()
	if p != nil {
		qs.unref() // the queues hold their own references to the C client
		detachObserver(p, h.sink)
		openFilters.Delete(h)
		C.bg_client_close(p)
	}
}

// Open parses the URL, checks the options, the TLS files and that credentials are complete, and
// returns the client without connecting: the first call that needs the server connects, within
// its context's deadline, so a client opened while Redis is down works once it is back (its calls
// meanwhile answered by the filter's Policy). WithConnectAtOpen(true) reaches the server in Open
// instead, so a bad address or password fails here.
//
// URLs (user and password may be %-encoded, a host may be [IPv6]; an empty user or password is
// none; the port defaults to 6379, and 26379 for a sentinel):
//   - redis://[user[:password]@]host[:port][/db][?db=N]: one server, or a Redis Cluster it belongs
//     to (found by asking it, unless WithCluster says otherwise);
//   - redis://[user[:password]@]host1[:port1],host2[:port2],...: the seeds of a Redis Cluster;
//   - rediss://...: the same over TLS (WithTLSCAFile, WithTLSCertFile, ... for the certificates);
//   - redis-sentinel://[user[:password]@]host1[:port1][,...][/db]#MASTER: the master the sentinels
//     name MASTER (rediss-sentinel:// over TLS; WithSentinelPassword for the sentinels' own);
//   - unix:///path/to.sock[?db=N]: a server's unix socket.
func Open(url string, opts ...Option) (*Client, error) {
	if strings.IndexByte(url, 0) >= 0 {
		return nil, errorf(CodeBadURL, "the URL contains a NUL byte")
	}
	o, set, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	// no client yet to carry a failure's message: it is on the call (bg_client_open_ex)
	c0, err := beginCall(context.Background())
	if err != nil {
		freeOptions(o)
		return nil, err
	}
	curl := C.CString(url)
	var p *C.bg_client
	st := C.bg_client_open_ex(&p, c0.p, curl, o)
	C.free(unsafe.Pointer(curl))
	freeOptions(o)
	if err := c0.end(context.Background(), st); err != nil {
		return nil, err
	}
	h := &clientHandle{p: p}
	if h.sink, err = attachObserver(p, opts); err != nil {
		C.bg_client_close(p)
		return nil, err
	}
	if set.queues > 0 {
		if h.qs, err = openQueues(p, set.queues); err != nil {
			detachObserver(p, h.sink)
			C.bg_client_close(p)
			return nil, err
		}
	}
	c := &Client{h: h, g: newGate(set.poolSize)}
	c.cleanup = runtime.AddCleanup(c, (*clientHandle).close, h)
	return c, nil
}

// Close releases the client. It is idempotent and safe to call concurrently with other calls
// (it waits for calls in flight). Filters opened from the client keep working until they are
// closed themselves. Close always returns nil.
func (c *Client) Close() error {
	if c == nil || c.h == nil {
		return nil
	}
	c.cleanup.Stop()
	c.h.close()
	return nil
}

// Ping makes a round trip to the server (PING) on a pooled connection. ctx's deadline bounds it
// (else the client's command timeout does); the error carries this ping's own message
// (bg_client_ping_ex), never another goroutine's failure on the same client.
func (c *Client) Ping(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := c.g.enter(ctx); err != nil {
		return err
	}
	defer c.g.leave()
	c.h.mu.RLock()
	defer c.h.mu.RUnlock()
	if c.h.p == nil {
		return errClientClosed()
	}
	call, err := beginCall(ctx)
	if err != nil {
		return err
	}
	return call.end(ctx, C.bg_client_ping_ex(c.h.p, call.p))
}

func errClientClosed() error { return errorf(CodeClosed, "the client is closed") }
func errFilterClosed() error { return errorf(CodeClosed, "the filter is closed") }

// FilterOption configures a Filter handle when it is opened (WithPolicy).
type FilterOption func(*filterSettings)

type filterSettings struct {
	policy    *Policy
	policySet bool
	native    bool
}

// Filter opens a handle on the Bloom filter stored under name (no I/O). It fails with ErrBadName
// when the filter's bitmap and config keys would hash to different cluster slots (e.g. "a{}b").
// The Filter may be shared by any number of goroutines.
func (c *Client) Filter(name string, opts ...FilterOption) (*Filter, error) {
	var s filterSettings
	apply(&s, opts)
	if strings.IndexByte(name, 0) >= 0 {
		return nil, errorf(CodeInvalid, "the filter name contains a NUL byte")
	}
	c.h.mu.RLock()
	defer c.h.mu.RUnlock()
	if c.h.p == nil {
		return nil, errClientClosed()
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p *C.bg_filter
	open := func(call *C.bg_call) C.int { return C.bg_filter_open_ex(&p, call, c.h.p, cname) }
	if s.native {
		open = func(call *C.bg_call) C.int { return C.bg_filter_open_native_ex(&p, call, c.h.p, cname) }
	}
	if err := openWithCall(open); err != nil {
		return nil, err
	}
	h := newFilterHandle(p, c.h.qs.ref())
	if s.policySet && s.policy != nil {
		if err := h.setPolicy(s.policy); err != nil {
			h.close()
			return nil, err
		}
	}
	f := &Filter{h: h, g: c.g, qs: h.qs, name: name, native: s.native}
	f.cleanup = runtime.AddCleanup(f, (*filterHandle).close, h)
	trackFilter(c.h, f)
	return f, nil
}
