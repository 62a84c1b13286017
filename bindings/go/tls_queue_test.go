package bloomguard

// The Go binding over TLS, on the queue: a TLS-only port of a redis-server of the test's own, with
// the test certificates of scripts/tls-certs.sh; 500 goroutines asking about items whose answers
// they know (single and batch queries, adds then queries of the added items, a partitioned
// filter's fan-outs): 0 false negatives, 0 errors. The controls show the answers came over a
// verified TLS connection: the same port refuses a client that trusts another CA (ErrTLS) and one
// that speaks plain RESP.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startTLSRedis starts a redis-server of the test's own with a TLS port presenting the test
// certificates (made in a temporary directory): the server (its plain port serves the fixture's
// own checks), the TLS port's rediss:// URL, and the certificates' directory.
func startTLSRedis(t *testing.T) (*redisServer, string, string) {
	t.Helper()
	if !LibraryFeatures().Has(FeatureTLS) {
		t.Skip("the library was built without TLS")
	}
	certs := t.TempDir()
	out, err := exec.Command("bash", filepath.Join("..", "..", "scripts", "tls-certs.sh"), certs).CombinedOutput()
	if err != nil {
		t.Skipf("cannot make the test certificates (openssl?): %v\n%s", err, out)
	}
	tlsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startRedisOn(0, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(certs, "server.crt"), "--tls-key-file", filepath.Join(certs, "server.key"),
		"--tls-ca-cert-file", filepath.Join(certs, "ca.crt"), "--tls-auth-clients", "no")
	if err != nil {
		t.Fatalf("start a TLS redis-server: %v", err)
	}
	t.Cleanup(srv.stop)
	return srv, fmt.Sprintf("rediss://127.0.0.1:%d", tlsPort), certs
}

func TestTLSQueueKnownAnswers(t *testing.T) {
	_, url, certs := startTLSRedis(t)
	ctx := context.Background()
	c, err := Open(url, WithTLSCAFile(filepath.Join(certs, "ca.crt")), WithQueues(2))
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	defer c.Close()
	present, absent := stallItems("tls-in", 2000), stallItems("tls-out", 2000)
	var filters []*Filter
	for i, parts := range []int{0, 8} {
		f, err := c.Filter(fmt.Sprintf("go-tls-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.InitPartitioned(ctx, 200000, 1e-9, parts); err != nil {
			t.Fatalf("init over TLS: %v", err)
		}
		if _, err := f.AddMany(ctx, present); err != nil {
			t.Fatalf("add over TLS: %v", err)
		}
		filters = append(filters, f)
	}
	var answers, falseNeg, falsePos, errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 500; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			f := filters[rnd.Intn(len(filters))]
			for i := 0; i < 20; i++ {
				switch rnd.Intn(3) {
				case 0: // one item, its answer known
					in := rnd.Intn(2) == 0
					item := absent[rnd.Intn(len(absent))]
					if in {
						item = present[rnd.Intn(len(present))]
					}
					got, err := f.Contains(ctx, item)
					if err != nil {
						fail(err)
						continue
					}
					answers.Add(1)
					if in && !got {
						falseNeg.Add(1)
					} else if !in && got {
						falsePos.Add(1)
					}
				case 1: // a batch of present and absent items
					batch, want := make([][]byte, 16), make([]bool, 16)
					for k := range batch {
						want[k] = rnd.Intn(2) == 0
						if want[k] {
							batch[k] = present[rnd.Intn(len(present))]
						} else {
							batch[k] = absent[rnd.Intn(len(absent))]
						}
					}
					got, err := f.ContainsMany(ctx, batch)
					if err != nil {
						fail(err)
						continue
					}
					for k := range got {
						answers.Add(1)
						if want[k] && !got[k] {
							falseNeg.Add(1)
						} else if !want[k] && got[k] {
							falsePos.Add(1)
						}
					}
				default: // an add of an item of its own, then a query of it
					item := []byte(fmt.Sprintf("tls-added-%d-%d", seed, i))
					if _, err := f.Add(ctx, item); err != nil {
						fail(err)
						continue
					}
					got, err := f.Contains(ctx, item)
					if err != nil {
						fail(err)
						continue
					}
					answers.Add(1)
					if !got {
						falseNeg.Add(1)
					}
				}
			}
		}(int64(g))
	}
	wg.Wait()
	t.Logf("over TLS: %d answers, %d false negatives, %d false positives, %d errors", answers.Load(),
		falseNeg.Load(), falsePos.Load(), errs.Load())
	if falseNeg.Load() != 0 || errs.Load() != 0 {
		t.Errorf("%d false negatives, %d errors (first: %v)", falseNeg.Load(), errs.Load(), firstErr.Load())
	}
	if answers.Load() < 10000 {
		t.Errorf("only %d answers", answers.Load())
	}

	// the controls: the port speaks TLS only, and verifies
	other, err := Open(url, WithTLSCAFile(filepath.Join(certs, "other-ca.crt")), WithQueues(1))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	of, err := other.Filter("go-tls-0")
	if err != nil {
		t.Fatal(err)
	}
	defer of.Close()
	if _, err := of.Contains(ctx, present[0]); !errors.Is(err, ErrTLS) {
		t.Errorf("a client trusting another CA: %v, want ErrTLS", err)
	}
	plain, err := Open("redis"+url[len("rediss"):], WithQueues(1), WithConnectTimeout(500*time.Millisecond),
		WithCommandTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pf, err := plain.Filter("go-tls-0")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if _, err := pf.Contains(ctx, present[0]); err == nil {
		t.Errorf("plain RESP to the TLS port answered")
	}
}
