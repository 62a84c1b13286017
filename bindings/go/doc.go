// Package bloomguard is the Go binding (cgo) of bloomguard: Bloom filters stored in Redis exactly
// as Redisson's RBloomFilter stores them, so Java services using Redisson and Go services using
// this package share the same filters.
//
//	client, err := bloomguard.Open("redis://127.0.0.1:6379")
//	...
//	products, err := client.Filter("products")
//	created, err := products.Init(ctx, 1_000_000, 0.01) // Redisson's tryInit
//	added, err := products.AddString(ctx, "sku-42")
//	present, err := products.ContainsString(ctx, "sku-42")
//
// # Contexts
//
// Every method that talks to Redis takes a context.Context first. A context that is already
// cancelled or past its deadline returns ctx.Err() without calling the library. Otherwise the
// deadline becomes the timeout of that call (a per-call bg_call). When the deadline is what made
// the call time out, the error satisfies both errors.Is(err, ErrTimeout) and
// errors.Is(err, context.DeadlineExceeded). Without a deadline the client's command timeout
// (WithCommandTimeout) applies.
//
// A filter call (on the submission queue, below) ends when its deadline passes, whatever it
// waits for; the cancel of its context ends it at once (bg_queue_cancel), also while its request
// waits for the server: ErrCanceled and context.Canceled. A blocking call (Rotate, locks, Ping,
// RefreshSnapshot, filter calls with WithQueues(0)) is bounded in each network wait by the
// timeout, and the end of its context cancels it in C (context.AfterFunc calls bg_call_cancel):
// every wait of the library - a lock, another rotation, a write-locked filter, the policy's
// backoff - ends within about 50ms; Lock.Acquire then fails with ErrLocked and ctx.Err(),
// Rotate's wait with ErrRotationInProgress and ctx.Err(). A round trip a blocking call already
// sent ends by its own timeout.
//
// # Calls in flight
//
// Filter calls (Init, Add, AddMany, Contains, ContainsMany, ContainsSource, Count, Info, Delete,
// Expire, Persist) hold no OS thread while Redis answers: each Client has WithQueues(n) (default
// 1) submission queues of the C library (bloomguard/queue.h), each with its own connections and
// one driver goroutine. A call sends its request to a driver and waits on a channel; the driver
// submits requests (one cgo call each, which returns at once) and polls the queue (one cgo call
// per batch of completions) when requests came or when the queue's fd, watched by Go's
// netpoller, becomes readable. 1,024 goroutines with a call in flight each run on a handful of OS
// threads.
//
// # Errors
//
// Failures are *Error values carrying the library's status Code and the exact message of that
// call. Each status code has a sentinel (ErrNotInitialized, ErrTimeout, ErrRotationInProgress,
// ...) for errors.Is; errors.As gives the *Error.
//
// # Items
//
// Items are bytes: Add and Contains take a []byte (nil and empty are the same, valid, item);
// AddString and ContainsString pass a string's bytes without copying (the library keeps no
// pointer after the call). Batches (AddMany, ContainsMany) are copied into one C allocation
// per call, so the cgo pointer rules hold with no pinning and no Go allocation per item.
//
// # Rotation
//
// Filter.Rotate rebuilds a live filter, to the same or other parameters, while it keeps serving:
//
//	err := products.Rotate(ctx, 10_000_000, 0.01, bloomguard.Swap, func(r *bloomguard.Rotation) error {
//		// read the source of truth here, after the rotation began
//		return r.AddMany(batch) // as many calls as needed
//	})
//
// fn returning nil commits (Swap: one atomic swap; readers never see a missing or half-built
// filter, and items added meanwhile through bloomguard are kept); an error, a panic or a done
// context aborts (Swap: the live filter is untouched, the staging keys are removed at once). A
// second rotation of the filter gets ErrRotationInProgress, or waits (WithWait). WithProgress reports
// the phases and can abort. The progress function is Go code called by the library: it reaches
// C as a runtime/cgo.Handle, through a //export trampoline (callbacks.go), and is never called
// after Rotate returns.
//
// # Locks
//
// Client.Lock opens a distributed lock (Redisson's RLock layout, plus reader/writer modes) with
// fencing tokens and a renewed lease:
//
//	lock, err := client.Lock("products")
//	token, err := lock.Acquire(ctx, bloomguard.LockExclusive) // waits as long as ctx allows
//	defer lock.Release(ctx)
//
// Each Lock is one holder (a library lock owner, not an OS thread: reentrant, releasable from any
// goroutine, pinning no thread): give each goroutine that needs exclusion its own Lock.
//
// # Degrade policy
//
// A Policy (NewPolicy) decides what a filter answers when Redis cannot: per failure class a chain
// of actions (retry, local snapshot, a Go Fallback rate-limited by a token bucket, assume present
// or absent, error), with a circuit breaker. WithPolicy or Filter.SetPolicy installs it;
// ContainsSource tells where an answer came from, Stats reads the counters. The Fallback gets the
// query's ctx, reached through a //export trampoline (callbacks.go) and runtime/cgo.Handle values;
// a panic in it becomes a *PanicError of the query. It runs on behalf of the driver of the
// client's queue, inside its poll, while the queue's other operations wait (see Fallback).
//
// # Concurrency and lifetime
//
// A Client (a pool of connections) and a Filter may be shared by any number of goroutines. Close
// is idempotent on both and waits for calls in flight; later calls fail with ErrClosed. Filters
// keep their client's pool alive, so closing the Client before its filters is safe. A cleanup
// (runtime.AddCleanup) closes handles that were never closed, as a safety net only. Each client
// lets at most max(256, 2*pool size) blocking calls into C at once (a call blocked in C holds an
// OS thread); the others wait as goroutines, and their context ends that wait too.
//
// # Layout of the package
//
//	link.go      the library compiled in from internal/clib (generated: scripts/go-amalgamate.py)
//	nocgo.go     without cgo, the one error that says so
//	errors.go    Code, *Error and the sentinels (one per BG_E* status)
//	abi.go       compile-time checks that constants written out in Go equal the header's
//	options.go   Option values for Open (bg_options)
//	call.go      the per-call bg_call (context deadline in, status and message out), the gate
//	client.go    Client, Open, Filter, FilterOption
//	filter.go    Filter operations: a request each, run on the queue or by a blocking _ex call
//	native.go    WithNative, Filter.InitNative, NativeInfo, WithNativeMaxBytes: the server's BF.* filters
//	queue.go     the submission queue's driver: requests, submits, polls, the fd in the netpoller
//	items.go     batches laid out in C memory
//	hash.go      Hash128, Indexes, OptimalParams (no server)
//	version.go   library and header versions
//	rotation.go  Filter.Rotate, Rotation, Strategy, Phase, RotateOption (bg_rotation)
//	lock.go      Client.Lock, Lock (one lock owner per Lock), LockMode, LockOption (bg_lock)
//	policy.go    Policy, PolicyOption, FailureClass, Action, WithPolicy, Filter.SetPolicy (bg_policy)
//	fallback.go  Fallback, PanicError, and the C side of the fallback (adapter, query thread-local,
//	             the query path that may call back)
//	answer.go    Source, Answer, ContainsSource, ContainsManySource, the query path choice
//	stats.go     Stats, BreakerState, Filter.Stats, RefreshSnapshot (bg_filter_stat, snapshot)
//	observe.go   events (WithLogger, WithEventHandler, Event: a C ring and a pipe to a goroutine, never
//	             a call into Go on the library's thread), Filter.Histogram(s), Client.Stats,
//	             Client.OpenFilters; the otel module (bindings/go/otel) exports them
//	callbacks.go the //export trampolines through which C calls Go functions (runtime/cgo.Handle
//	             as userdata); a file with //export may only declare, not define, C functions in
//	             its preamble, hence its own file
//
// Functions that can call back into Go (bg_rotation_add, _add_many, _commit, and the queries of
// a filter whose policy has a Go fallback) must not carry the "#cgo nocallback" marking that
// filter.go gives the others, and get no Go pointers.
package bloomguard
