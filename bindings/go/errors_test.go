package bloomguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sentinels maps every code to its sentinel.
var sentinels = map[Code]error{
	CodeInvalid:            ErrInvalid,
	CodeNoMemory:           ErrNoMemory,
	CodeBadURL:             ErrBadURL,
	CodeBadName:            ErrBadName,
	CodeBadParams:          ErrBadParams,
	CodeNotSupported:       ErrNotSupported,
	CodeConn:               ErrConn,
	CodeTimeout:            ErrTimeout,
	CodeAuth:               ErrAuth,
	CodeServer:             ErrServer,
	CodeProto:              ErrProto,
	CodeNotInitialized:     ErrNotInitialized,
	CodeConfigChanged:      ErrConfigChanged,
	CodeCorrupt:            ErrCorrupt,
	CodeWrongType:          ErrWrongType,
	CodeLocked:             ErrLocked,
	CodeRotationInProgress: ErrRotationInProgress,
	CodeAborted:            ErrAborted,
	CodeClosed:             ErrClosed,
	CodeCanceled:           ErrCanceled,
	CodeTLS:                ErrTLS,
	CodeFull:               ErrFull,
}

// The Go side knows every status code of include/bloomguard/errors.h, with the same value and
// a sentinel: a code added to the header without a Go counterpart fails here.
func TestErrorCodesMatchHeader(t *testing.T) {
	b, err := os.ReadFile("../../include/bloomguard/errors.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := regexp.MustCompile(`(?m)^#define (BG_(?:OK|E[A-Z]+))\s+(-?\d+)`).FindAllStringSubmatch(string(b), -1)
	if len(defs) < 20 {
		t.Fatalf("found only %d status codes in errors.h", len(defs))
	}
	for _, d := range defs {
		v, _ := strconv.Atoi(d[2])
		code := Code(v)
		if code.String() != d[1] {
			t.Errorf("%s = %d: Code(%d).String() = %s", d[1], v, v, code)
		}
		if code == CodeOK {
			continue
		}
		s, ok := sentinels[code]
		if !ok {
			t.Errorf("%s has no sentinel", d[1])
			continue
		}
		if code.Description() == "unknown status" {
			t.Errorf("%s: bg_strerror does not know it", d[1])
		}
		e := &Error{Code: code, Message: "some message"}
		if !errors.Is(e, s) {
			t.Errorf("errors.Is(%s error, its sentinel) is false", d[1])
		}
		for other, otherSentinel := range sentinels {
			if other != code && errors.Is(e, otherSentinel) {
				t.Errorf("a %s error matches the sentinel of %s", d[1], other)
			}
		}
		if errors.Is(e, context.DeadlineExceeded) {
			t.Errorf("%s: a plain error is context.DeadlineExceeded", d[1])
		}
	}
	if len(sentinels) != len(defs)-1 {
		t.Errorf("%d sentinels for %d error codes in the header", len(sentinels), len(defs)-1)
	}
}

func TestErrorValues(t *testing.T) {
	e := &Error{Code: CodeNotInitialized, Message: `contains: Bloom filter "x" is not initialized`}
	if e.Error() != `bloomguard: contains: Bloom filter "x" is not initialized` {
		t.Errorf("Error() = %q", e.Error())
	}
	if got := ErrTimeout.Error(); got != "bloomguard: timed out" {
		t.Errorf("sentinel text %q", got)
	}
	if Code(-99).String() != "BG_STATUS(-99)" || Code(-99).Description() != "unknown status" {
		t.Errorf("unknown code: %s %q", Code(-99), Code(-99).Description())
	}
	// wrapped by the caller, still matched
	wrapped := fmt.Errorf("loading users: %w", e)
	if !errors.Is(wrapped, ErrNotInitialized) {
		t.Error("errors.Is through %w")
	}
	var got *Error
	if !errors.As(wrapped, &got) || got.Code != CodeNotInitialized || got != e {
		t.Error("errors.As through %w")
	}
	// a non-*Error target never matches
	if errors.Is(e, errors.New("bloomguard: Bloom filter is not initialized")) {
		t.Error("matched a foreign error")
	}

	// a timeout caused by the context's deadline is both
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	err := withDeadline(ctx, newError(-8, "the server did not answer"))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline timeout: %v", err)
	}
	// a connection failure once the deadline passed is DeadlineExceeded too; other errors are not
	if err := withDeadline(ctx, newError(-7, "lost")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline conn: %v", err)
	}
	if err := withDeadline(ctx, newError(-12, "not init")); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("not initialized at the deadline became DeadlineExceeded: %v", err)
	}
	if err := withDeadline(context.Background(), newError(-7, "lost")); errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a connection failure before the deadline became DeadlineExceeded: %v", err)
	}
}

func TestVersion(t *testing.T) {
	if VersionNumber() != HeaderVersionNumber {
		t.Fatalf("library %d (%s), headers %d", VersionNumber(), Version(), HeaderVersionNumber)
	}
	want := fmt.Sprintf("%d.%d.%d", HeaderVersionNumber/10000, HeaderVersionNumber/100%100, HeaderVersionNumber%100)
	if Version() != want {
		t.Fatalf("Version %q, want %q", Version(), want)
	}
	switch HashImpl() {
	case "avx2", "sse41", "portable":
	default:
		t.Fatalf("HashImpl %q", HashImpl())
	}
}

func TestBeginCallTimeouts(t *testing.T) {
	// sub-millisecond deadlines round up (never 0, which would mean "the client's timeout"), and
	// far deadlines are capped at the C maximum: both are accepted by bg_call_set_timeout_ms
	for _, d := range []time.Duration{50 * time.Microsecond, time.Millisecond, 2 * time.Hour} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		c, err := beginCall(ctx)
		cancel()
		if err != nil {
			if d < time.Millisecond && err == context.DeadlineExceeded {
				continue // the microseconds may already be over
			}
			t.Fatalf("deadline in %v: %v", d, err)
		}
		if !c.hasDeadline {
			t.Fatalf("deadline in %v: not marked", d)
		}
		c.release()
	}
	c, err := beginCall(context.Background())
	if err != nil || c.hasDeadline {
		t.Fatalf("no deadline: %v", err)
	}
	c.release()
}

// Every option (BG_OPT_*) of include/bloomguard/options.h has its Option (client options),
// RotateOption (BG_OPT_ROTATE_*) or LockOption (BG_OPT_LOCK_*): the values come from the header
// through cgo, so only a missing option can drift.
func TestOptionsMatchHeader(t *testing.T) {
	b, err := os.ReadFile("../../include/bloomguard/options.h")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]Option{
		"BG_OPT_CONNECT_TIMEOUT_MS":    WithConnectTimeout(time.Second),
		"BG_OPT_COMMAND_TIMEOUT_MS":    WithCommandTimeout(time.Second),
		"BG_OPT_POOL_SIZE":             WithPoolSize(1),
		"BG_OPT_DB":                    WithDB(0),
		"BG_OPT_CONFIG_RETRIES":        WithConfigRetries(1),
		"BG_OPT_WRITE_LOCK_WAIT_MS":    WithWriteLockWait(time.Second),
		"BG_OPT_TRACKING":              WithTracking(false),
		"BG_OPT_PIPELINE":              WithPipeline(false),
		"BG_OPT_PIPELINE_CONNS":        WithPipelineConns(2),
		"BG_OPT_PIPELINE_SPIN_US":      WithPipelineSpin(50 * time.Microsecond),
		"BG_OPT_CONNECT_AT_OPEN":       WithConnectAtOpen(true),
		"BG_OPT_DEGRADED_EVENTS_PER_S": WithDegradedEventsPerSecond(2),
		"BG_OPT_HISTOGRAMS":            WithHistograms(false),
		"BG_OPT_NATIVE_MAX_BYTES":      WithNativeMaxBytes(1 << 20),
		"BG_OPT_CLUSTER":               WithCluster(ClusterOff),
		"BG_OPT_WAIT_REPLICAS":         WithWaitReplicas(1),
		"BG_OPT_WAIT_TIMEOUT_MS":       WithWaitTimeout(time.Second),
		"BG_OPT_USERNAME":              WithUsername("u"),
		"BG_OPT_PASSWORD":              WithPassword("p"),
		"BG_OPT_SENTINEL_USERNAME":     WithSentinelUsername("su"),
		"BG_OPT_SENTINEL_PASSWORD":     WithSentinelPassword("sp"),
		"BG_OPT_TLS_CA_FILE":           WithTLSCAFile("ca.crt"),
		"BG_OPT_TLS_CA_DIR":            WithTLSCADir("/etc/ssl/certs"),
		"BG_OPT_TLS_CERT_FILE":         WithTLSCertFile("c.crt"),
		"BG_OPT_TLS_KEY_FILE":          WithTLSKeyFile("c.key"),
		"BG_OPT_TLS_SERVER_NAME":       WithTLSServerName("localhost"),
		"BG_OPT_TLS_VERIFY":            WithTLSVerify(false),
		"BG_OPT_CLIENT_NAME":           WithClientName("n"),
	}
	rotateCovered := map[string]RotateOption{
		"BG_OPT_ROTATE_LEASE_MS":       WithLease(time.Second),
		"BG_OPT_ROTATE_WAIT_MS":        WithWait(time.Second),
		"BG_OPT_ROTATE_STAGING_TTL_MS": WithStagingTTL(time.Minute),
		"BG_OPT_ROTATE_THREADS":        WithThreads(2),
		"BG_OPT_ROTATE_CHUNK_BYTES":    WithChunkBytes(4096),
		"BG_OPT_ROTATE_BATCH":          WithBatch(10),
		"BG_OPT_ROTATE_NICE":           WithNice(5),
		"BG_OPT_ROTATE_PARTITIONS":     WithPartitions(4),
	}
	lockCovered := map[string]LockOption{
		"BG_OPT_LOCK_LEASE_MS":    WithLockLease(time.Second),
		"BG_OPT_LOCK_RENEW":       WithLockRenewal(false),
		"BG_OPT_LOCK_SUBSCRIBE":   WithLockSubscribe(false),
		"BG_OPT_LOCK_POLL_MAX_MS": WithLockPollMax(time.Second),
	}
	defs := regexp.MustCompile(`(?m)^#define (BG_OPT_[A-Z_]+)\s+(\d+)`).FindAllStringSubmatch(string(b), -1)
	if len(defs) == 0 {
		t.Fatal("no BG_OPT_* in options.h")
	}
	clientOptions, rotateOptions, lockOptions := 0, 0, 0
	for _, d := range defs {
		if _, ok := goOptionNames[d[1]]; !ok { // messages.go: an error names it by its function
			t.Errorf("%s has no entry in goOptionNames", d[1])
		}
		var sets []setting
		switch {
		case strings.HasPrefix(d[1], "BG_OPT_ROTATE_"):
			rotateOptions++
			opt, ok := rotateCovered[d[1]]
			if !ok {
				t.Errorf("%s (%s) has no RotateOption in the Go binding", d[1], d[2])
				continue
			}
			var s rotateSettings
			opt(&s)
			sets = s.sets
		case strings.HasPrefix(d[1], "BG_OPT_LOCK_"):
			lockOptions++
			opt, ok := lockCovered[d[1]]
			if !ok {
				t.Errorf("%s (%s) has no LockOption in the Go binding", d[1], d[2])
				continue
			}
			var s lockSettings
			opt(&s)
			sets = s.sets
		default:
			clientOptions++
			opt, ok := covered[d[1]]
			if !ok {
				t.Errorf("%s (%s) has no Option in the Go binding", d[1], d[2])
				continue
			}
			var s openSettings
			opt(&s)
			sets = s.sets
		}
		if len(sets) != 1 || strconv.Itoa(int(sets[0].id)) != d[2] {
			t.Errorf("%s = %s: the option sets %+v", d[1], d[2], sets)
			continue
		}
		// each one is accepted by bg_options_set_*
		o, err := newOptions(sets)
		if err != nil {
			t.Errorf("%s: %v", d[1], err)
		}
		freeOptions(o)
	}
	if clientOptions != len(covered) || rotateOptions != len(rotateCovered) || lockOptions != len(lockCovered) {
		t.Errorf("%d client, %d rotation and %d lock options in the header, %d, %d and %d in the binding",
			clientOptions, rotateOptions, lockOptions, len(covered), len(rotateCovered), len(lockCovered))
	}
	// WithLockWait is the binding's own (the wait goes to each acquire)
	var ls lockSettings
	WithLockWait(time.Second)(&ls)
	if len(ls.sets) != 0 || !ls.waitSet || ls.wait != time.Second {
		t.Errorf("WithLockWait: %+v", ls)
	}
	// WithProgress sets no library option
	var s rotateSettings
	WithProgress(func(Phase, uint64, uint64, uint64) error { return nil })(&s)
	if len(s.sets) != 0 || s.progress == nil {
		t.Errorf("WithProgress: %+v", s)
	}
}

// Every setting (BG_POLICY_*), failure class, action, source and counter (BG_STAT_*) of
// policy.h, call.h and stats.h is bound: a PolicyOption setting it, a constant, a Stats field. (The
// constants' values are checked at compile time in abi.go; this catches missing ones.)
func TestPolicyMatchesHeader(t *testing.T) {
	b, err := os.ReadFile("../../include/bloomguard/policy.h")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile("../../include/bloomguard/stats.h")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile("../../include/bloomguard/call.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := func(src []byte, prefix string) map[string]int {
		m := map[string]int{}
		for _, d := range regexp.MustCompile(`(?m)^#define (`+prefix+`[A-Z_]+)\s+(\d+)`).FindAllStringSubmatch(string(src), -1) {
			v, _ := strconv.Atoi(d[2])
			m[d[1]] = v
		}
		if len(m) == 0 {
			t.Fatalf("no %s* in the header", prefix)
		}
		return m
	}
	settings := map[string]PolicyOption{
		"BG_POLICY_RETRY_COUNT":          WithRetries(1),
		"BG_POLICY_BACKOFF_BASE_MS":      WithBackoff(time.Millisecond, time.Second),
		"BG_POLICY_BACKOFF_MAX_MS":       WithBackoff(time.Millisecond, time.Second),
		"BG_POLICY_JITTER_PCT":           WithJitter(10),
		"BG_POLICY_BREAKER_THRESHOLD":    WithBreaker(3, time.Second),
		"BG_POLICY_BREAKER_COOLDOWN_MS":  WithBreaker(3, time.Second),
		"BG_POLICY_CALLBACK_RATE":        WithCallbackRate(5, 5),
		"BG_POLICY_CALLBACK_BURST":       WithCallbackRate(5, 5),
		"BG_POLICY_SNAPSHOT_INTERVAL_MS": WithSnapshotRefresh(time.Second),
		"BG_POLICY_SNAPSHOT_MAX_AGE_MS":  WithSnapshotMaxAge(time.Second),
		"BG_POLICY_SNAPSHOT_CHUNK_BYTES": WithSnapshotChunkBytes(8192),
	}
	for name, id := range defs(b, "BG_POLICY_") {
		if name == "BG_POLICY_MAX_CHAIN" {
			continue // a limit, not a setting (MaxChain)
		}
		opt, ok := settings[name]
		if !ok {
			t.Errorf("%s (%d) has no PolicyOption", name, id)
			continue
		}
		var p Policy
		opt(&p)
		found := false
		for _, s := range p.sets {
			found = found || int(s.id) == id
		}
		if !found {
			t.Errorf("%s = %d: its option sets %+v", name, id, p.sets)
		}
		if _, err := NewPolicy(opt); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(defs(b, "BG_FAIL_")); n != len(FailureClasses) {
		t.Errorf("%d BG_FAIL_* in the header, %d FailureClasses", n, len(FailureClasses))
	}
	for name, v := range defs(b, "BG_ACT_") {
		if Action(v).String() == fmt.Sprintf("Action(%d)", v) {
			t.Errorf("%s (%d) has no Action", name, v)
		}
	}
	for name, v := range defs(cb, "BG_SOURCE_") {
		if Source(v).String() == fmt.Sprintf("Source(%d)", v) {
			t.Errorf("%s (%d) has no Source", name, v)
		}
	}
	for name, v := range defs(b, "BG_BREAKER_") {
		if BreakerState(v).String() == fmt.Sprintf("BreakerState(%d)", v) {
			t.Errorf("%s (%d) has no BreakerState", name, v)
		}
	}
	bound := map[int]bool{}
	for _, f := range statFields {
		bound[int(f.id)] = true
	}
	for _, c := range FailureClasses {
		bound[100+int(c)] = true // Stats.Failures, read by offset (checked in abi.go)
	}
	stats := defs(sb, "BG_STAT_")
	for name, id := range stats {
		if !bound[id] {
			t.Errorf("%s (%d) is not read by Stats", name, id)
		}
	}
	if len(bound) != len(stats) {
		t.Errorf("Stats reads %d counters, the header has %d", len(bound), len(stats))
	}
}
