package bloomguard_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
)

// The examples with an Output comment need no server and run with the tests; the others need a
// Redis server at redis://127.0.0.1:6379 and are only compiled.

func ExampleHash128() {
	h1, h2 := bloomguard.Hash128([]byte("apple"))
	fmt.Printf("%016x %016x\n", h1, h2)
	// Output: 39b73f0e523f1f74 8f9d978d8a2abf00
}

func ExampleOptimalParams() {
	size, k, err := bloomguard.OptimalParams(1000000, 0.01)
	fmt.Println(size, k, err)

	_, _, err = bloomguard.OptimalParams(1000, 1.5)
	fmt.Println(errors.Is(err, bloomguard.ErrBadParams))
	// Output:
	// 9585058 7 <nil>
	// true
}

func ExampleIndexes() {
	// the bits Redisson sets for "apple" in a filter made by tryInit(100, 0.01)
	size, k, _ := bloomguard.OptimalParams(100, 0.01)
	idx, err := bloomguard.Indexes([]byte("apple"), size, k)
	fmt.Println(size, k, idx, err)
	// Output: 958 7 [640 786 506 652 334 480 200] <nil>
}

func ExampleOpen() {
	client, err := bloomguard.Open("redis://127.0.0.1:6379/0",
		bloomguard.WithCommandTimeout(500*time.Millisecond),
		bloomguard.WithPoolSize(8))
	if err != nil {
		log.Fatal(err) // e.g. ErrConn, ErrAuth, ErrBadURL
	}
	defer client.Close()

	products, err := client.Filter("products")
	if err != nil {
		log.Fatal(err)
	}
	defer products.Close()
}

func ExampleClient_Filter() {
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// keys: "users{eu}" and "users{eu}:config" (with a hash tag the config key keeps it)
	users, err := client.Filter("users{eu}")
	if err != nil {
		log.Fatal(err)
	}
	defer users.Close()
}

// openProducts is what the examples below start from.
func openProducts() (*bloomguard.Client, *bloomguard.Filter) {
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	products, err := client.Filter("products")
	if err != nil {
		log.Fatal(err)
	}
	return client, products
}

func ExampleFilter_Init() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	// Redisson's tryInit: writes the config only if the filter does not exist yet
	created, err := products.Init(context.Background(), 1000000, 0.01)
	if err != nil {
		log.Fatal(err) // ErrBadParams carries Redisson's message
	}
	fmt.Println("created:", created)
}

func ExampleFilter_Add() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	added, err := products.Add(context.Background(), []byte("sku-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new bits:", added)
}

func ExampleFilter_AddMany() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := products.AddMany(ctx, [][]byte{[]byte("sku-1"), []byte("sku-2"), []byte("sku-3")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("items that set a new bit:", n)
}

func ExampleFilter_Contains() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	// the context's deadline is the call's timeout
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	present, err := products.Contains(ctx, []byte("sku-42"))
	switch {
	case errors.Is(err, bloomguard.ErrNotInitialized):
		fmt.Println("no such filter")
	case errors.Is(err, context.DeadlineExceeded): // also errors.Is(err, bloomguard.ErrTimeout)
		fmt.Println("Redis too slow: fall back to the database")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("maybe present:", present)
	}
}

func ExampleFilter_ContainsString() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	present, err := products.ContainsString(context.Background(), "sku-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(present)
}

func ExampleFilter_ContainsMany() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	skus := [][]byte{[]byte("sku-1"), []byte("sku-99")}
	present, err := products.ContainsMany(context.Background(), skus)
	if err != nil {
		log.Fatal(err)
	}
	for i, p := range present {
		fmt.Printf("%s: %v\n", skus[i], p)
	}
}

func ExampleFilter_Count() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	n, err := products.Count(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("about", n, "items")
}

func ExampleFilter_Info() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	info, err := products.Info(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bits, k=%d, n=%d, p=%v\n", info.Size, info.HashIterations, info.ExpectedInsertions,
		info.FalseProbability)
}

func ExampleFilter_Delete() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	deleted, err := products.Delete(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("existed:", deleted)
}

func ExampleFilter_Expire() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	if _, err := products.Expire(context.Background(), 24*time.Hour); err != nil {
		log.Fatal(err)
	}
}

func ExampleFilter_Persist() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	if _, err := products.Persist(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// skuBatches stands for reading the source of truth (a database, a file) in batches.
func skuBatches(ctx context.Context, yield func([][]byte) error) error {
	batch := make([][]byte, 0, 10000)
	for i := 0; i < 1_000_000; i++ {
		batch = append(batch, fmt.Appendf(nil, "sku-%d", i))
		if len(batch) == cap(batch) {
			if err := yield(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return yield(batch)
}

func ExampleFilter_Rotate() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Rebuild "products" for 2 million items at 1% while it keeps serving: readers see the old
	// generation until one atomic swap, and items other services add meanwhile are kept.
	err := products.Rotate(ctx, 2_000_000, 0.01, bloomguard.Swap, func(r *bloomguard.Rotation) error {
		// read the source of truth here, after the rotation began
		return skuBatches(ctx, r.AddMany) // one library call per batch, hashed on all cores
	},
		bloomguard.WithWait(time.Minute), // if another rotation runs, wait for it
		bloomguard.WithProgress(func(phase bloomguard.Phase, items, done, total uint64) error {
			log.Printf("%v: %d items, %d/%d bytes uploaded", phase, items, done, total)
			return nil // an error here would abort the rotation
		}))
	switch {
	case errors.Is(err, bloomguard.ErrRotationInProgress):
		log.Print("another rotation still runs; nothing changed")
	case err != nil:
		log.Fatal(err) // aborted: the filter is unchanged, the staging keys are gone
	}
}

func ExampleError() {
	_, _, err := bloomguard.OptimalParams(-1, 0.01)
	var e *bloomguard.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, errors.Is(err, bloomguard.ErrBadParams))
	}
	// Output: BG_EBADPARAMS true
}

func ExampleClient_Lock() {
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// one Lock per goroutine that needs exclusion: a Lock is one holder (reentrant)
	lock, err := client.Lock("products") // key "products:lock", Redisson's RLock layout
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Close()
}

func ExampleLock_Acquire() {
	client, lock := openProductsLock()
	defer client.Close()
	defer lock.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	token, err := lock.Acquire(ctx, bloomguard.LockExclusive) // waits up to the deadline
	if errors.Is(err, bloomguard.ErrLocked) {
		log.Printf("still taken: %v", err) // the message names the holder and its lease
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(context.Background())
	// ... the critical section; pass token to the storage you write (fencing) ...
	_ = token
}

func ExampleLock_TryAcquire() {
	client, lock := openProductsLock()
	defer client.Close()
	defer lock.Close()
	if _, err := lock.TryAcquire(context.Background(), bloomguard.LockRead); err == nil {
		defer lock.Release(context.Background())
		// ... read, shared with other readers ...
	}
}

func ExampleLock_Held() {
	client, lock := openProductsLock()
	defer client.Close()
	defer lock.Close()
	hold, err := lock.Held()
	if errors.Is(err, bloomguard.ErrLocked) {
		log.Printf("the lease ran out: %v", err) // the hold is lost; Release reports it too
	}
	fmt.Println(hold.Mode, hold.Count, hold.Token)
}

func ExampleNewPolicy() {
	db := map[string]bool{"sku-42": true} // the source of truth behind the filter
	policy, err := bloomguard.NewPolicy(
		bloomguard.WithChain(bloomguard.FailConnection,
			bloomguard.ActionRetry, bloomguard.ActionSnapshot, bloomguard.ActionCallback, bloomguard.ActionAssumePresent),
		bloomguard.WithBreaker(5, time.Second),
		bloomguard.WithCallbackRate(50, 50), // protects the database behind the fallback
		bloomguard.WithFallback(func(ctx context.Context, items [][]byte, present []bool) error {
			for i, it := range items {
				present[i] = db[string(it)]
			}
			return nil // an error declines: the chain moves on
		}))
	if err != nil {
		log.Fatal(err)
	}
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	products, err := client.Filter("products", bloomguard.WithPolicy(policy))
	if err != nil {
		log.Fatal(err)
	}
	defer products.Close()
}

func ExampleFilter_SetPolicy() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()
	policy, err := bloomguard.NewPolicy() // the defaults: retry briefly, then fail open
	if err != nil {
		log.Fatal(err)
	}
	if err := products.SetPolicy(policy); err != nil {
		log.Fatal(err)
	}
}

func ExampleFilter_ContainsSource() {
	client, products := openProducts() // with a Policy (WithPolicy, SetPolicy)
	defer client.Close()
	defer products.Close()
	a, err := products.ContainsSource(context.Background(), []byte("sku-42"))
	if err != nil {
		log.Fatal(err)
	}
	if a.Source.Degraded() {
		log.Printf("answered by %v because %s", a.Source, a.Reason)
	}
	fmt.Println(a.Present)
}

func ExampleFilter_Stats() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()
	s, err := products.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Queries, s.AnswersRedis, s.Breaker, s.BreakerTrips, s.Failures[bloomguard.FailTimeout])
}

func ExampleFilter_RefreshSnapshot() {
	client, products := openProducts()
	defer client.Close()
	defer products.Close()
	if err := products.RefreshSnapshot(context.Background()); err != nil {
		log.Printf("no snapshot: %v", err)
	}
	// or in the background: bloomguard.WithSnapshotRefresh(time.Minute) in the Policy
}

func openProductsLock() (*bloomguard.Client, *bloomguard.Lock) {
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	lock, err := client.Lock("products")
	if err != nil {
		log.Fatal(err)
	}
	return client, lock
}

func ExampleFilter_AddManyStrings() {
	client, err := bloomguard.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	skus, err := client.Filter("skus")
	if err != nil {
		log.Fatal(err)
	}
	defer skus.Close()
	ctx := context.Background()
	if _, err := skus.Init(ctx, 1_000_000, 0.01); err != nil {
		log.Fatal(err)
	}
	// a []string as it comes from a database query: no conversion to [][]byte
	if _, err := skus.AddManyStrings(ctx, []string{"sku-1", "sku-2"}); err != nil {
		log.Fatal(err)
	}
	present, err := skus.ContainsManyStrings(ctx, []string{"sku-1", "sku-3"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(present) // [true false]
}
