package bloomguard

// #include <stdlib.h>
// #include <bloomguard.h>
import "C"

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unsafe"
)

// Option configures a Client at Open (bloomguard/options.h). Values out of range make Open fail
// with ErrInvalid and a message naming the option.
type Option func(*openSettings)

type openSettings struct {
	sets   []setting
	queues int  // WithQueues
	badQ   bool // WithQueues out of range
	// events (observe.go): not options of the library, the binding's own
	logger  *slog.Logger
	onEvent func(Event)
}

// openPlan is what buildOptions found besides the library's options: what the binding itself
// does with them.
type openPlan struct {
	poolSize int64 // asked for (0: the library's default)
	queues   int   // submission queues (0: blocking calls)
}

type setting struct {
	name  string // for messages: "WithPoolSize(0)"
	id    C.int
	isStr bool
	isMS  bool // a time.Duration sent as milliseconds (for the range in messages)
	i     int64
	s     string
	err   error // rejected before C (e.g. a NUL byte in a string)
}

func intSetting(name string, id C.int, v int64) setting {
	return setting{name: fmt.Sprintf("%s(%d)", name, v), id: id, i: v}
}

// durationSetting rounds d up to a whole millisecond: a positive duration never becomes 0 ms.
func durationSetting(name string, id C.int, d time.Duration) setting {
	ms := int64(d / time.Millisecond)
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	return setting{name: fmt.Sprintf("%s(%v)", name, d), id: id, i: ms, isMS: true}
}

func intOption(name string, id C.int, v int64) Option {
	set := intSetting(name, id, v)
	return func(o *openSettings) { o.sets = append(o.sets, set) }
}

func durationOption(name string, id C.int, d time.Duration) Option {
	set := durationSetting(name, id, d)
	return func(o *openSettings) { o.sets = append(o.sets, set) }
}

func boolOption(name string, id C.int, on bool) Option {
	set := boolSetting(name, id, on)
	return func(o *openSettings) { o.sets = append(o.sets, set) }
}

func stringOption(name string, id C.int, v string, secret bool) Option {
	shown := fmt.Sprintf("%s(%q)", name, v)
	if secret {
		shown = name + "(...)"
	}
	var err error
	if strings.IndexByte(v, 0) >= 0 {
		err = errorf(CodeInvalid, shown+": the value contains a NUL byte")
	}
	return func(o *openSettings) {
		o.sets = append(o.sets, setting{name: shown, id: id, isStr: true, s: v, err: err})
	}
}

// WithConnectTimeout bounds each TCP/unix connect (BG_OPT_CONNECT_TIMEOUT_MS; default 2s,
// 1ms..1h, rounded up to a whole millisecond).
func WithConnectTimeout(d time.Duration) Option {
	return durationOption("WithConnectTimeout", C.BG_OPT_CONNECT_TIMEOUT_MS, d)
}

// WithCommandTimeout is the timeout of a call whose context has no deadline
// (BG_OPT_COMMAND_TIMEOUT_MS; default 1s, 1ms..1h). A context deadline replaces it for that call.
func WithCommandTimeout(d time.Duration) Option {
	return durationOption("WithCommandTimeout", C.BG_OPT_COMMAND_TIMEOUT_MS, d)
}

// WithPoolSize sets how many connections the client keeps (BG_OPT_POOL_SIZE; default 4, 1..1024).
// A call waits for a free connection when all are busy.
func WithPoolSize(n int) Option { return intOption("WithPoolSize", C.BG_OPT_POOL_SIZE, int64(n)) }

// WithQueues sets how many submission queues carry the client's filter calls (Init, Add,
// AddMany, Contains, ContainsMany, ContainsSource, Count, Info, Delete, Expire, Persist): each
// is a queue of the C library with connections of its own (WithPipelineConns per server), driven
// by one goroutine that submits the calls and polls the queue when its fd, watched by Go's
// netpoller, becomes readable; a calling goroutine waits on a channel, holding no OS thread.
// Default 1; 0..64. 0: no queue - each filter call blocks an OS thread in C until Redis answers
// (at most max(256, 2*pool size) calls of a client in C at once; the others wait as goroutines).
// Rotations, locks and Ping are blocking calls either way.
func WithQueues(n int) Option {
	return func(o *openSettings) {
		o.queues = n
		o.badQ = n < 0 || n > maxQueues
	}
}

const (
	defaultQueues = 1
	maxQueues     = 64
)

// WithDB selects the database, overriding the URL's (BG_OPT_DB; 0..1000000).
func WithDB(db int) Option { return intOption("WithDB", C.BG_OPT_DB, int64(db)) }

// WithConfigRetries bounds the transparent retries when another client changed the filter's
// config under a call (BG_OPT_CONFIG_RETRIES; default 5, 0..100).
func WithConfigRetries(n int) Option {
	return intOption("WithConfigRetries", C.BG_OPT_CONFIG_RETRIES, int64(n))
}

// WithWriteLockWait bounds how long a query waits while its filter is write-locked by an in-place
// rebuild (Locked strategy) before it fails with ErrLocked, which a Policy can answer
// (BG_OPT_WRITE_LOCK_WAIT_MS; default 100 ms, 0..1 h; never past the context's deadline).
func WithWriteLockWait(d time.Duration) Option {
	return intOption("WithWriteLockWait", C.BG_OPT_WRITE_LOCK_WAIT_MS, d.Milliseconds())
}

// WithTracking turns tracked queries on (the default) or off (BG_OPT_TRACKING). On: where
// hiredis >= 1.0 and Redis >= 6 allow it, the client's connections speak RESP3 with CLIENT
// TRACKING (OPTIN), and a query whose filter config and write lock were already checked on its
// connection sends only BITFIELD_RO; any change to either key makes the server push an
// invalidation ahead of the answer, which is then dropped and the query asked again with the full
// check. Off: every query sends the full MULTI check. Stats.TrackedReads and TrackedStale count
// them.
func WithTracking(on bool) Option { return boolOption("WithTracking", C.BG_OPT_TRACKING, on) }

// WithPipeline turns multiplexed connections on (the default) or off (BG_OPT_PIPELINE). On:
// concurrent calls of one Client (any number of goroutines) share a few connections per server,
// their commands written together and their replies matched in order; bulk and
// connection-stateful steps (rotation uploads, snapshots, steps followed by WAIT) keep pooled
// connections of their own. Off: every call takes a pooled connection (WithPoolSize).
func WithPipeline(on bool) Option { return boolOption("WithPipeline", C.BG_OPT_PIPELINE, on) }

// WithPipelineConns sets the multiplexed connections per server, per cluster node
// (BG_OPT_PIPELINE_CONNS; default 2, 1..64).
func WithPipelineConns(n int) Option {
	return intOption("WithPipelineConns", C.BG_OPT_PIPELINE_CONNS, int64(n))
}

// WithPipelineSpin lets a call waiting for its reply on a multiplexed connection spin (yielding
// the CPU) up to d before it sleeps (BG_OPT_PIPELINE_SPIN_US; default 0: it sleeps at once;
// 0..1 ms): a reply due within d then costs no sleep and no wake-up, for CPU spent spinning.
func WithPipelineSpin(d time.Duration) Option {
	return intOption("WithPipelineSpin", C.BG_OPT_PIPELINE_SPIN_US, d.Microseconds())
}

// WithConnectAtOpen makes Open reach the server (the cluster, the sentinels and their master)
// and fail as the first call would: a wrong address or password, a refused certificate
// (BG_OPT_CONNECT_AT_OPEN; default false: Open checks the URL, the options, the TLS files and
// that credentials are complete, and connects nothing; the first call that needs the server
// connects, within its context's deadline, so a client opened while Redis is down works once it
// is back, its calls meanwhile answered by the filter's Policy).
func WithConnectAtOpen(on bool) Option {
	return boolOption("WithConnectAtOpen", C.BG_OPT_CONNECT_AT_OPEN, on)
}

// WithWaitReplicas makes every add, lock acquire / release and rotation commit wait for n replicas
// to acknowledge it (WAIT n, in the same round trip; BG_OPT_WAIT_REPLICAS, default 0: off); fewer
// within WithWaitTimeout is ErrTimeout (the master applied it, a failover may lose it; a lock
// acquire then gives the hold back).
func WithWaitReplicas(n int) Option {
	return intOption("WithWaitReplicas", C.BG_OPT_WAIT_REPLICAS, int64(n))
}

// WithWaitTimeout bounds that WAIT (BG_OPT_WAIT_TIMEOUT_MS; default 1 s).
func WithWaitTimeout(d time.Duration) Option {
	return intOption("WithWaitTimeout", C.BG_OPT_WAIT_TIMEOUT_MS, d.Milliseconds())
}

// WithTLSCAFile sets the PEM file of the CAs to trust (BG_OPT_TLS_CA_FILE; default: the system's
// trust store: SSL_CERT_FILE / SSL_CERT_DIR, else each Linux distribution's usual bundle, none
// found being ErrTLS at open; docs/servers.md). Any WithTLS* option, or a rediss:// URL, turns TLS
// on for every connection; a refused certificate or an unusable file is ErrTLS.
func WithTLSCAFile(path string) Option {
	return stringOption("WithTLSCAFile", C.BG_OPT_TLS_CA_FILE, path, false)
}

// WithTLSCADir sets a directory of hashed CA certificates (BG_OPT_TLS_CA_DIR).
func WithTLSCADir(dir string) Option {
	return stringOption("WithTLSCADir", C.BG_OPT_TLS_CA_DIR, dir, false)
}

// WithTLSCertFile sets the PEM client certificate (BG_OPT_TLS_CERT_FILE), with WithTLSKeyFile.
func WithTLSCertFile(path string) Option {
	return stringOption("WithTLSCertFile", C.BG_OPT_TLS_CERT_FILE, path, false)
}

// WithTLSKeyFile sets the client certificate's PEM private key (BG_OPT_TLS_KEY_FILE).
func WithTLSKeyFile(path string) Option {
	return stringOption("WithTLSKeyFile", C.BG_OPT_TLS_KEY_FILE, path, false)
}

// WithTLSServerName sets the SNI and the name the server's certificate must be for
// (BG_OPT_TLS_SERVER_NAME; default: the host connected to).
func WithTLSServerName(name string) Option {
	return stringOption("WithTLSServerName", C.BG_OPT_TLS_SERVER_NAME, name, false)
}

// WithTLSVerify turns the check of the server's certificate and name off (false: testing only)
// or on (the default) (BG_OPT_TLS_VERIFY).
func WithTLSVerify(on bool) Option { return boolOption("WithTLSVerify", C.BG_OPT_TLS_VERIFY, on) }

// ClusterMode says whether Open expects a Redis Cluster (BG_OPT_CLUSTER).
type ClusterMode int

const (
	ClusterOff  ClusterMode = C.BG_CLUSTER_OFF  // one server, as is (several hosts in the URL are refused)
	ClusterOn   ClusterMode = C.BG_CLUSTER_ON   // the URL must name cluster nodes (ErrNotSupported otherwise)
	ClusterAuto ClusterMode = C.BG_CLUSTER_AUTO // the default: the first reachable host of the URL says (CLUSTER SLOTS)
)

// WithCluster sets the cluster mode (BG_OPT_CLUSTER; default ClusterAuto). In a cluster every
// call goes to the master serving its filter's or lock's hash slot; the URL may name several
// seeds: "redis://[user[:password]@]host1:port1,host2:port2,...".
func WithCluster(mode ClusterMode) Option {
	return intOption("WithCluster", C.BG_OPT_CLUSTER, int64(mode))
}

// WithUsername sets the ACL user, overriding the URL's (BG_OPT_USERNAME).
func WithUsername(user string) Option {
	return stringOption("WithUsername", C.BG_OPT_USERNAME, user, false)
}

// WithPassword sets the password, overriding the URL's (BG_OPT_PASSWORD). It never appears in
// error messages.
func WithPassword(password string) Option {
	return stringOption("WithPassword", C.BG_OPT_PASSWORD, password, true)
}

// WithSentinelUsername sets the ACL user for the sentinels of a redis-sentinel:// URL, whose
// userinfo is the data nodes' (BG_OPT_SENTINEL_USERNAME; default none).
func WithSentinelUsername(user string) Option {
	return stringOption("WithSentinelUsername", C.BG_OPT_SENTINEL_USERNAME, user, false)
}

// WithSentinelPassword sets the sentinels' password (BG_OPT_SENTINEL_PASSWORD; default none). It
// never appears in error messages.
func WithSentinelPassword(password string) Option {
	return stringOption("WithSentinelPassword", C.BG_OPT_SENTINEL_PASSWORD, password, true)
}

// WithClientName sets the CLIENT SETNAME of every connection (BG_OPT_CLIENT_NAME; default
// "bloomguard").
func WithClientName(name string) Option {
	return stringOption("WithClientName", C.BG_OPT_CLIENT_NAME, name, false)
}

// buildOptions turns opts into a bg_options object (nil when there are none; the caller frees it)
// and returns what the binding does with them (openPlan).
func buildOptions(opts []Option) (*C.bg_options, openPlan, error) {
	s := openSettings{queues: defaultQueues}
	apply(&s, opts)
	plan := openPlan{queues: s.queues}
	if s.badQ {
		return nil, plan, errorf(CodeInvalid, fmt.Sprintf("WithQueues(%d): must be 0..%d", s.queues, maxQueues))
	}
	if len(s.sets) == 0 {
		return nil, plan, nil
	}
	for _, set := range s.sets {
		if set.id == C.BG_OPT_POOL_SIZE {
			plan.poolSize = set.i
		}
	}
	p, err := newOptions(s.sets)
	if err != nil {
		return nil, plan, err
	}
	return p, plan, nil
}

// newOptions makes a bg_options object holding sets, in order (a later value of an option
// replaces an earlier one). A value the library rejects fails with a message naming the option.
func newOptions(sets []setting) (*C.bg_options, error) {
	var p *C.bg_options
	if st := C.bg_options_new(&p); st != C.BG_OK {
		return nil, newError(st, "bg_options_new failed")
	}
	for _, set := range sets {
		if set.err != nil {
			C.bg_options_free(p)
			return nil, set.err
		}
		var st C.int
		if set.isStr {
			cs := C.CString(set.s)
			st = C.bg_options_set_str(p, set.id, cs)
			C.free(unsafe.Pointer(cs))
		} else {
			st = C.bg_options_set_int(p, set.id, C.int64_t(set.i))
		}
		if st != C.BG_OK {
			C.bg_options_free(p)
			msg := set.name + ": " + Code(st).Description()
			if st == C.BG_EINVAL && !set.isStr {
				msg += optionRange(set.id, set.isMS)
			}
			return nil, newError(st, msg)
		}
	}
	return p, nil
}

// optionRange is "; must be LO..HI" for an integer option, from the library's own table
// (bg_options_bounds): the binding keeps no copy of the ranges.
func optionRange(id C.int, ms bool) string {
	var lo, hi C.int64_t
	if C.bg_options_bounds(id, &lo, &hi) != C.BG_OK {
		return ""
	}
	if ms {
		return fmt.Sprintf("; must be %v..%v", time.Duration(lo)*time.Millisecond, time.Duration(hi)*time.Millisecond)
	}
	return fmt.Sprintf("; must be %d..%d", int64(lo), int64(hi))
}

// freeOptions frees what buildOptions returned (nil is fine).
func freeOptions(o *C.bg_options) { C.bg_options_free(o) }

// apply runs each option (nil ones are skipped) on the settings they fill: every constructor's
// functional options (Option, FilterOption, LockOption, RotateOption, PolicyOption).
func apply[S any, O ~func(*S)](s *S, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
}
