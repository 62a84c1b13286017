package bloomguard

// TestClusterFixture: the cluster fixture's own test (cluster_helpers_test.go), raw RESP only:
// topology, one slot migrated step by step (ASK, TRYAGAIN, MOVED), reshard, failover, kill -9 +
// takeover + restart, and a stop that leaves nothing. Negative controls: waitOK reports a cluster
// whose master just died; migrateBegin refuses the slot's own owner; failover refuses a master.
// Skipped with -short. Run alone: go test -run TestClusterFixture

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClusterFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	c := startCluster(t)
	const a, b = "{bgt-go}a", "{bgt-go}b"
	slot := clusterSlot(a)
	redirect := func(kind string, to int) string {
		return fmt.Sprintf("%s %d 127.0.0.1:%d", kind, slot, c.nodes[to].port)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(node int, want string, args ...string) {
		t.Helper()
		if got := c.reply(node, args...); got != want {
			t.Errorf("node %d %v: %q, want %q", node, args, got, want)
		}
	}

	// seed writes what a subtest reads; WAIT so that a kill -9 right after cannot lose it.
	seed := func() {
		t.Helper()
		r, err := dialRESP(fmt.Sprintf("127.0.0.1:%d", c.nodes[c.owner(slot)].port))
		must(err)
		defer r.close()
		for _, cmd := range [][]string{{"SET", a, "va"}, {"SET", b, "vb"}, {"WAIT", "1", "5000"}} {
			if v, err := r.do(cmd...); err != nil || (v != "OK" && v != int64(1)) {
				t.Fatalf("%v: %v %v", cmd, v, err)
			}
		}
	}

	// first on purpose: a master that does not know its replica yet ignores CLUSTER FAILOVER
	t.Run("failover-right-after-start", func(t *testing.T) {
		m := c.otherMaster(-1)
		must(c.failover(c.replicaOf(m)))
		if c.nodes[m].isMaster {
			t.Errorf("node %d is still a master", m)
		}
	})

	t.Run("topology", func(t *testing.T) {
		masters := 0
		for i, n := range c.nodes {
			if len(n.id) != 40 || c.pid(i) == 0 || !strings.Contains(c.seeds, fmt.Sprintf("127.0.0.1:%d", n.port)) {
				t.Errorf("node %d: %+v", i, n)
			}
			if n.isMaster {
				masters++
				if n.master != -1 || c.replicaOf(i) < 0 {
					t.Errorf("master %d: master %d, replica %d", i, n.master, c.replicaOf(i))
				}
			} else if want := fmt.Sprintf("[slave 127.0.0.1 %d connected ", c.nodes[n.master].port); !strings.HasPrefix(c.reply(i, "ROLE"), want) {
				t.Errorf("replica %d: ROLE %s, want %s...", i, c.reply(i, "ROLE"), want)
			}
		}
		if masters != 3 || c.url != fmt.Sprintf("redis://127.0.0.1:%d", c.nodes[0].port) {
			t.Errorf("%d masters, url %s", masters, c.url)
		}
		if clusterSlot("123456789") != 0x31C3 {
			t.Errorf("CRC16 vector: %d", clusterSlot("123456789"))
		}
		for _, k := range []string{"", "foo", "{bf}:config", "foo{}{bar}", "foo{{bar}}zap", "a{b", "{}", "\xff{\x00}", a} {
			expect(0, fmt.Sprint(clusterSlot(k)), "CLUSTER", "KEYSLOT", k)
		}
	})

	t.Run("migrate", func(t *testing.T) {
		src := c.owner(slot)
		dst := c.otherMaster(src)
		seed()
		if err := c.migrateBegin(slot, src); err == nil {
			t.Error("migrateBegin to the owner itself succeeded")
		}
		must(c.migrateBegin(slot, dst))
		expect(src, "va", "GET", a)
		expect(src, redirect("ASK", dst), "GET", "{bgt-go}missing")
		expect(dst, redirect("MOVED", src), "GET", a)
		must(c.migrateKey(slot, dst, a))
		expect(src, redirect("ASK", dst), "GET", a)
		if r := c.reply(src, "MGET", a, b); !strings.HasPrefix(r, "TRYAGAIN") {
			t.Errorf("MGET across a split slot: %s", r)
		}
		r, err := dialRESP(fmt.Sprintf("127.0.0.1:%d", c.nodes[dst].port))
		must(err)
		if v, err := r.do("ASKING"); v != "OK" || err != nil {
			t.Errorf("ASKING: %v %v", v, err)
		}
		if v, err := r.do("GET", a); v != "va" || err != nil {
			t.Errorf("ASKING; GET on the target: %v %v", v, err)
		}
		if _, err := r.do("GET", a); err == nil || !strings.HasPrefix(err.Error(), "MOVED") { // one-shot
			t.Errorf("GET after the ASKING was used: %v", err)
		}
		r.close()
		must(c.migrateAllKeys(slot, dst))
		expect(src, redirect("ASK", dst), "GET", b)
		must(c.migrateEnd(slot, dst))
		for i := range c.nodes {
			if i != dst {
				expect(i, redirect("MOVED", dst), "GET", b)
			}
		}
		expect(dst, "vb", "GET", b)
		must(c.moveSlot(slot, src))
		if c.owner(slot) != src {
			t.Errorf("moveSlot back: owner %d, want %d", c.owner(slot), src)
		}
		expect(src, "va", "GET", a)
	})

	t.Run("reshard-failover", func(t *testing.T) {
		seed()
		m := c.owner(slot)
		to := c.otherMaster(m)
		must(c.reshard(m, to, 50))
		must(c.reshard(to, m, 50))
		owner := c.owner(slot)
		expect(owner, "va", "GET", a)
		if err := c.failover(owner); err == nil {
			t.Error("failover of a master succeeded")
		}
		r := c.replicaOf(owner)
		must(c.failover(r))
		if !c.nodes[r].isMaster || c.nodes[owner].master != r || c.owner(slot) != r {
			t.Errorf("after failover: %+v %+v owner %d", c.nodes[r], c.nodes[owner], c.owner(slot))
		}
		expect(owner, redirect("MOVED", r), "GET", a)
		expect(r, "va", "GET", a)
	})

	t.Run("kill-restart", func(t *testing.T) {
		seed()
		m := c.owner(slot)
		r := c.replicaOf(m)
		c.kill(m)
		if c.pid(m) != 0 {
			t.Fatal("killed node still alive")
		}
		if err := c.waitOK(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "dead") {
			t.Errorf("waitOK right after kill -9 of a master: %v", err) // negative control
		}
		must(c.waitOK(20 * time.Second))
		must(c.refresh())
		if !c.nodes[r].isMaster || c.owner(slot) != r {
			t.Errorf("replica %d did not take over: %+v owner %d", r, c.nodes[r], c.owner(slot))
		}
		expect(r, "va", "GET", a)
		must(c.restart(m))
		if c.nodes[m].isMaster || c.nodes[m].master != r {
			t.Errorf("restarted node: %+v", c.nodes[m])
		}
		expect(m, redirect("MOVED", r), "GET", a)
	})

	t.Run("stop", func(t *testing.T) {
		var pids []int
		for i := range c.nodes {
			pids = append(pids, c.pid(i))
		}
		dir := c.dir
		c.stop()
		c.stop() // idempotent (and t.Cleanup calls it again)
		for i, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("node %d pid %d: kill 0: %v", i, pid, err)
			}
			if _, err := c.cmd(i, "PING"); err == nil {
				t.Errorf("node %d still answers", i)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", dir, err)
		}
	})
}
