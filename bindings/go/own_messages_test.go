package bloomguard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ownMessageKind is one way to fail: the call, the error it must return, the text its message must hold.
type ownMessageKind struct {
	fail func() error
	code Code
	want string
}

// crossedMessages runs two goroutines per kind (rounds calls each, 4 s at most) and counts the
// failures whose message was not their own, and those that failed otherwise.
func crossedMessages(kinds []ownMessageKind, rounds int) (crossed, wrong int64, example string) {
	var nCrossed, nWrong atomic.Int64
	var first atomic.Value
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for _, k := range kinds {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds && time.Now().Before(deadline); i++ {
					var e *Error
					if err := k.fail(); !errors.As(err, &e) || e.Code != k.code {
						nWrong.Add(1)
						first.CompareAndSwap(nil, "wanted "+k.code.String()+", got "+errString(err))
						continue
					} else if !strings.Contains(e.Message, k.want) {
						nCrossed.Add(1)
						first.CompareAndSwap(nil, k.want+" got "+e.Message)
					}
				}
			}()
		}
	}
	wg.Wait()
	example, _ = first.Load().(string)
	return nCrossed.Load(), nWrong.Load(), example
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// foreignLockOption is a client option handed to a lock open, which the library refuses
// (ErrNotSupported, "WithX is a client option": the library names BG_OPT_X, the error the
// option function): the public LockOptions are all lock options.
func foreignLockOption(o Option) LockOption {
	var s openSettings
	o(&s)
	return lockOption(s.sets[0])
}

func checkOwnMessages(t *testing.T, kinds []ownMessageKind) {
	t.Helper()
	crossed, wrong, example := crossedMessages(kinds, 300)
	if wrong > 0 {
		t.Errorf("%d calls failed otherwise, e.g. %s", wrong, example)
	}
	if crossed > 0 {
		t.Errorf("%d calls carried another goroutine's message, e.g. %s", crossed, example)
	}
}

// TestFilterLockOpensKeepTheirOwnMessages: Filter.Lock reads its open's own message
// (bg_lock_open_filter_ex), not the filter's shared slot, while other opens fail on that filter
// for other reasons. The binding cannot express the old read from a test (no cgo in _test files):
// this test failed against the old Filter.Lock (which read bg_filter_errmsg_copy).
func TestFilterLockOpensKeepTheirOwnMessages(t *testing.T) {
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	lockWith := func(o Option) func() error {
		opt := foreignLockOption(o)
		return func() error {
			l, err := f.Lock(opt)
			if err == nil {
				l.Close()
			}
			return err
		}
	}
	checkOwnMessages(t, []ownMessageKind{
		{lockWith(WithPoolSize(2)), CodeNotSupported, "WithPoolSize is a client option"},
		{lockWith(WithDB(1)), CodeNotSupported, "WithDB is a client option"},
		{lockWith(WithTracking(true)), CodeNotSupported, "WithTracking is a client option"},
	})
}

// TestClientLockOpensKeepTheirOwnMessages: Client.Lock reads its open's own message
// (bg_lock_open_ex), not the client's shared slot: bad names (BG_EBADNAME, naming the name) and a
// refused option at once on one client. It failed against the old Client.Lock.
func TestClientLockOpensKeepTheirOwnMessages(t *testing.T) {
	c := openClient(t)
	lock := func(name string, opts ...LockOption) func() error {
		return func() error {
			l, err := c.Lock(name, opts...)
			if err == nil {
				l.Close()
			}
			return err
		}
	}
	checkOwnMessages(t, []ownMessageKind{
		{lock("a{}"), CodeBadName, `"a{}"`},
		{lock("b{"), CodeBadName, `"b{"`},
		{lock("c", foreignLockOption(WithPoolSize(2))), CodeNotSupported, "WithPoolSize is a client option"},
	})
}

// TestClientCallsKeepTheirOwnMessages: on a client whose server is gone, pings (no connection),
// filter opens and lock opens with bad names fail at once; each returns its call's own message
// (bg_client_ping_ex, bg_filter_open_ex, bg_lock_open_ex), not the client's shared slot. It
// failed against the old Ping and Filter, which read bg_client_errmsg_copy.
func TestClientCallsKeepTheirOwnMessages(t *testing.T) {
	srv, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	c, err := Open(srv.url, WithConnectTimeout(2*time.Second), WithCommandTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.stopProcess()
	ctx := context.Background()
	first := wantCode(t, c.Ping(ctx), CodeConn, ErrConn)
	if first.Message == "" || strings.Contains(first.Message, `"`) {
		t.Fatalf("the ping's message %q: empty, or naming a name", first.Message)
	}
	filter := func(name string) func() error {
		return func() error {
			f, err := c.Filter(name)
			if err == nil {
				f.Close()
			}
			return err
		}
	}
	checkOwnMessages(t, []ownMessageKind{
		{func() error { return c.Ping(ctx) }, CodeConn, first.Message},
		{filter("f{}"), CodeBadName, `"f{}"`},
		{filter("g{"), CodeBadName, `"g{"`},
		{func() error { _, err := c.Lock("a{}"); return err }, CodeBadName, `"a{}"`},
	})
}
