package bloomguard

// The Go binding through a Sentinel failover, on the queue: a Sentinel deployment of the test's
// own (scripts/sentinel.sh: 1 master + 1 replica + 3 sentinels), 200 goroutines querying items
// whose answers they know while SENTINEL FAILOVER moves the master: 0 false negatives (an error
// during the switch is allowed and counted, never a wrong answer); after it, the same client
// answers and writes on the new master. The control shows the failover happened: the old master
// reports the replica role and the new one the master's.

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type sentinelSet struct {
	dir, url  string
	sentinels []string // host:port
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "set")
	script := filepath.Join("..", "..", "scripts", "sentinel.sh")
	out, err := exec.Command("bash", script, "start", dir).Output()
	if err != nil {
		t.Fatalf("scripts/sentinel.sh start: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("bash", script, "stop", dir).Run() })
	s := &sentinelSet{dir: dir, url: strings.TrimSpace(string(out))}
	m := regexp.MustCompile(`^redis-sentinel://([^#]+)#`).FindStringSubmatch(s.url)
	if m == nil {
		t.Fatalf("scripts/sentinel.sh printed %q", s.url)
	}
	s.sentinels = strings.Split(m[1], ",")
	return s
}

// masterAddr asks a sentinel where the master is.
func (s *sentinelSet) masterAddr(t *testing.T) string {
	t.Helper()
	r, err := dialRESP(s.sentinels[0])
	if err != nil {
		t.Fatalf("dial a sentinel: %v", err)
	}
	defer r.close()
	v, err := r.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "bgmaster")
	if err != nil {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v", err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %v", v)
	}
	return fmt.Sprintf("%v:%v", a[0], a[1])
}

func roleOf(t *testing.T, addr string) string {
	t.Helper()
	r, err := dialRESP(addr)
	if err != nil {
		return "unreachable"
	}
	defer r.close()
	v, err := r.do("ROLE")
	if err != nil {
		return err.Error()
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		return fmt.Sprint(a[0])
	}
	return fmt.Sprint(v)
}

func TestSentinelFailoverQueueKnownAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("a Sentinel deployment and a failover take seconds")
	}
	s := startSentinelSet(t)
	ctx := context.Background()
	c, err := Open(s.url, WithQueues(2))
	if err != nil {
		t.Fatalf("Open(%s): %v", s.url, err)
	}
	defer c.Close()
	f, err := c.Filter("go-sentinel-queue")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	present, absent := stallItems("sen-in", 2000), stallItems("sen-out", 2000)
	if _, err := f.Init(ctx, 100000, 1e-9); err != nil {
		t.Fatalf("init: %v", err)
	}
	if _, err := f.AddMany(ctx, present); err != nil {
		t.Fatalf("add: %v", err)
	}
	oldMaster := s.masterAddr(t)
	// every present item on the replica before the failover (a failover may lose what was not)
	r, err := dialRESP(oldMaster)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.do("WAIT", "1", "5000"); err != nil || v != int64(1) {
		t.Fatalf("WAIT 1 5000 on the master: %v %v", v, err)
	}
	r.close()

	var answers, falseNeg, errs atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 200; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-stop:
					return
				default:
				}
				batch, want := make([][]byte, 8), make([]bool, 8)
				for k := range batch {
					want[k] = rnd.Intn(2) == 0
					if want[k] {
						batch[k] = present[rnd.Intn(len(present))]
					} else {
						batch[k] = absent[rnd.Intn(len(absent))]
					}
				}
				var got []bool
				var err error
				if rnd.Intn(2) == 0 {
					var one bool
					one, err = f.Contains(ctx, batch[0])
					got = []bool{one}
				} else {
					got, err = f.ContainsMany(ctx, batch)
				}
				if err != nil {
					if errs.Add(1) == 1 {
						firstErr.Store(err)
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				for k := range got {
					answers.Add(1)
					if want[k] && !got[k] {
						falseNeg.Add(1)
					}
				}
			}
		}(int64(g))
	}
	time.Sleep(300 * time.Millisecond)
	before := answers.Load()
	sr, err := dialRESP(s.sentinels[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sr.do("SENTINEL", "FAILOVER", "bgmaster"); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	sr.close()
	var newMaster string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if newMaster = s.masterAddr(t); newMaster != oldMaster && roleOf(t, newMaster) == "master" {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no failover within 30 s (master %s)", newMaster)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// the old master is reconfigured as a replica; the queries go on meanwhile
	for deadline := time.Now().Add(30 * time.Second); roleOf(t, oldMaster) != "slave" && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	duringErrs := errs.Load()
	afterFrom := answers.Load()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("failover %s -> %s: %d answers (%d before it, %d in the last 500 ms), %d false negatives, %d errors "+
		"during the switch (first: %v)", oldMaster, newMaster, answers.Load(), before, answers.Load()-afterFrom,
		falseNeg.Load(), duringErrs, firstErr.Load())
	if falseNeg.Load() != 0 {
		t.Errorf("%d false negatives", falseNeg.Load())
	}
	if answers.Load()-afterFrom == 0 {
		t.Errorf("no answers after the failover")
	}
	if errs.Load() != duringErrs {
		t.Errorf("%d errors after the switch had settled", errs.Load()-duringErrs)
	}
	// the same client writes on the new master (an add on the old one, a replica now, is READONLY)
	if _, err := f.Add(ctx, []byte("after-failover")); err != nil {
		t.Errorf("add after the failover: %v", err)
	}
	if got, err := f.Contains(ctx, []byte("after-failover")); err != nil || !got {
		t.Errorf("query after the failover: %v %v", got, err)
	}
	// the control: the roles really changed
	if role := roleOf(t, oldMaster); role != "slave" {
		t.Errorf("the old master %s reports %q", oldMaster, role)
	}
	if role := roleOf(t, newMaster); role != "master" {
		t.Errorf("the new master %s reports %q", newMaster, role)
	}
}
