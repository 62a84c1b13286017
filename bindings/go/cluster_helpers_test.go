package bloomguard

// Test fixture: a real 6-node Redis Cluster (3 masters + 3 replicas) and its topology changes,
// the Go twin of tests/c/cluster_fixture.h. startCluster(t) starts six redis-server processes
// ($BG_REDIS_SERVER) on random free loopback ports P, with P and the bus port P+10000 both
// bind-tested free, in 20000..22767 so that the bus stays below the kernel's ephemeral range
// (where other tests' free ports come from); redis-cli --cluster create ($BG_REDIS_CLI) joins
// them; t.Cleanup stops every node by its pid and removes the directory. Standard library only,
// RESP through respConn (redis_test.go). Replica assignment is shuffled by --cluster create: read
// nodes[i].isMaster / .master (refreshed after every topology change), never assume.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	clusterNodes   = 6
	clusterSlots   = 16384
	clusterBus     = 10000
	clusterPortLo  = 20000
	clusterPortMax = 29999
)

type clusterNode struct {
	port     int
	id       string
	isMaster bool
	master   int // index of its master, -1 for a master
	cmd      *exec.Cmd
	exited   chan error // receives cmd.Wait's result once the process is gone
}

type testCluster struct {
	nodes  []*clusterNode
	dir    string
	url    string // redis://127.0.0.1:P of node 0
	seeds  string // redis://127.0.0.1:P0,127.0.0.1:P1,...
	server string
	cli    string
}

// clusterSlot is the key's hash slot: CRC16 (XMODEM) of its first non-empty {tag}, or of the key.
func clusterSlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	crc := uint16(0)
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// startCluster starts the cluster and waits until it is ok and agreed; the test stops it.
func startCluster(t testing.TB) *testCluster {
	t.Helper()
	server, err := exec.LookPath(envOr("BG_REDIS_SERVER", "redis-server"))
	if err != nil {
		t.Fatalf("redis-server not found (Debian: apt-get install redis-server, or set BG_REDIS_SERVER): %v", err)
	}
	cli, err := exec.LookPath(envOr("BG_REDIS_CLI", "redis-cli"))
	if err != nil {
		t.Fatalf("redis-cli not found (Debian: apt-get install redis-tools, or set BG_REDIS_CLI): %v", err)
	}
	dir, err := os.MkdirTemp("", "bloomguard-go-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{dir: dir, server: server, cli: cli}
	t.Cleanup(c.stop)
	for attempt := 0; attempt < 5; attempt++ { // a port taken before the server binds it: new ports
		if err = c.tryStart(); err == nil {
			return c
		}
		c.stopNodes()
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	t.Fatalf("could not start a 6-node cluster: %v", err)
	return nil
}

func bindFree(port int) bool {
	// net.Listen sets SO_REUSEADDR, as redis-server does
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func clusterPortHi() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo-1-clusterBus >= clusterPortLo+100 && lo-1-clusterBus < clusterPortMax {
				return lo - 1 - clusterBus
			}
		}
	}
	return clusterPortMax
}

func (c *testCluster) tryStart() error {
	hi := clusterPortHi()
	c.nodes = nil
	used := map[int]bool{}
	for tries := 0; len(c.nodes) < clusterNodes; tries++ {
		if tries > 1000*clusterNodes {
			return fmt.Errorf("no free port pairs P, P+%d in %d..%d", clusterBus, clusterPortLo, hi)
		}
		p := clusterPortLo + rand.Intn(hi-clusterPortLo+1)
		if !used[p] && bindFree(p) && bindFree(p+clusterBus) {
			used[p] = true
			c.nodes = append(c.nodes, &clusterNode{port: p, master: -1})
		}
	}
	for i := range c.nodes {
		if err := c.spawn(i); err != nil {
			return err
		}
	}
	for i := range c.nodes {
		if err := c.waitPing(i, 10*time.Second); err != nil {
			return err
		}
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, fmt.Sprintf("127.0.0.1:%d", n.port))
	}
	if err := c.runCLI(30*time.Second, append(args, "--cluster-replicas", "1", "--cluster-yes")...); err != nil {
		return err
	}
	if err := c.waitOK(20 * time.Second); err != nil {
		return err
	}
	parts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		parts[i] = fmt.Sprintf("127.0.0.1:%d", n.port)
	}
	c.url = "redis://" + parts[0]
	c.seeds = "redis://" + strings.Join(parts, ",")
	return c.refresh()
}

func (c *testCluster) spawn(i int) error {
	n := c.nodes[i]
	d := filepath.Join(c.dir, strconv.Itoa(n.port))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	n.cmd = exec.Command(c.server, "--port", strconv.Itoa(n.port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(d, "nodes.conf"),
		"--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0", "--save", "",
		"--appendonly", "no", "--dir", d, "--logfile", filepath.Join(d, "log"), "--daemonize", "no")
	// the node must not outlive the test binary if it dies without running the cleanup
	n.cmd.SysProcAttr = diesWithTest()
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return err
	}
	n.exited = make(chan error, 1)
	cmd, ch := n.cmd, n.exited
	go func() { ch <- cmd.Wait() }()
	return nil
}

// alive reports whether node i is a running process of ours.
func (c *testCluster) alive(i int) bool {
	if i < 0 || i >= len(c.nodes) || c.nodes[i].cmd == nil {
		return false
	}
	select {
	case err := <-c.nodes[i].exited:
		c.nodes[i].exited <- err
		return false
	default:
		return true
	}
}

func (c *testCluster) waitPing(i int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && c.alive(i) {
		if _, err := c.cmd(i, "PING"); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, strconv.Itoa(c.nodes[i].port), "log"))
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return fmt.Errorf("node on port %d did not start (port taken?); log: %s", c.nodes[i].port, b)
}

func (c *testCluster) runCLI(limit time.Duration, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cli, args...)
	cmd.SysProcAttr = diesWithTest()
	out, err := cmd.CombinedOutput() // stdin is /dev/null
	if err != nil {
		if len(out) > 1500 {
			out = out[len(out)-1500:]
		}
		return fmt.Errorf("redis-cli %s %s: %v: %s", args[0], args[1], err, out)
	}
	return nil
}

// stopNode signals node i's process (SIGTERM, SIGKILL after 5s) and waits for it.
func (c *testCluster) stopNode(i int, sig syscall.Signal) {
	n := c.nodes[i]
	if n.cmd == nil {
		return
	}
	if c.alive(i) {
		_ = n.cmd.Process.Signal(sig)
		select {
		case err := <-n.exited:
			n.exited <- err
		case <-time.After(5 * time.Second):
			_ = n.cmd.Process.Kill()
			err := <-n.exited
			n.exited <- err
		}
	}
	n.cmd = nil
}

func (c *testCluster) stopNodes() {
	for i := range c.nodes {
		if c.alive(i) {
			_ = c.nodes[i].cmd.Process.Signal(syscall.SIGTERM) // all at once: one wait, not six
		}
	}
	for i := range c.nodes {
		c.stopNode(i, syscall.SIGTERM)
	}
}

// stop stops every node by its pid and removes the directory. Idempotent.
func (c *testCluster) stop() {
	c.stopNodes()
	if c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir = ""
	}
}

// pid of node i, 0 while it is killed or stopped.
func (c *testCluster) pid(i int) int {
	if !c.alive(i) {
		return 0
	}
	return c.nodes[i].cmd.Process.Pid
}

// cmd runs one command on a fresh connection to node i; an error reply is a respError.
func (c *testCluster) cmd(i int, args ...string) (any, error) {
	r, err := dialRESP(fmt.Sprintf("127.0.0.1:%d", c.nodes[i].port))
	if err != nil {
		return nil, err
	}
	defer r.close()
	return r.do(args...)
}

// reply is cmd's answer as text: the value, or the error reply ("MOVED 866 127.0.0.1:20001").
func (c *testCluster) reply(i int, args ...string) string {
	v, err := c.cmd(i, args...)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(v)
}

func (c *testCluster) index(port int64) int {
	for i, n := range c.nodes {
		if int64(n.port) == port {
			return i
		}
	}
	return -1
}

type slotRange struct {
	start, end int64
	ports      []int64 // master first, then replicas
}

func parseSlots(v any) ([]slotRange, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("CLUSTER SLOTS answered %v", v)
	}
	var out []slotRange
	for _, e := range arr {
		r, ok := e.([]any)
		if !ok || len(r) < 3 {
			continue
		}
		sr := slotRange{start: r[0].(int64), end: r[1].(int64)}
		for _, n := range r[2:] {
			if nn, ok := n.([]any); ok && len(nn) >= 2 {
				sr.ports = append(sr.ports, nn[1].(int64))
			}
		}
		out = append(out, sr)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].start < out[b].start })
	return out, nil
}

func (c *testCluster) slots() ([]slotRange, error) {
	for i := range c.nodes {
		if c.alive(i) {
			if v, err := c.cmd(i, "CLUSTER", "SLOTS"); err == nil {
				return parseSlots(v)
			}
		}
	}
	return nil, errors.New("no live node answered CLUSTER SLOTS")
}

// owner is the index of the node that owns slot, by CLUSTER SLOTS of a live node; -1 if none.
func (c *testCluster) owner(slot int) int {
	rs, err := c.slots()
	if err != nil {
		return -1
	}
	for _, r := range rs {
		if int64(slot) >= r.start && int64(slot) <= r.end && len(r.ports) > 0 {
			return c.index(r.ports[0])
		}
	}
	return -1
}

func (c *testCluster) otherMaster(i int) int {
	for j, n := range c.nodes {
		if j != i && c.alive(j) && n.isMaster {
			return j
		}
	}
	return -1
}

func (c *testCluster) replicaOf(m int) int {
	for j, n := range c.nodes {
		if c.alive(j) && !n.isMaster && n.master == m {
			return j
		}
	}
	return -1
}

// refresh re-reads ids, roles and masters: one live node's CLUSTER NODES for everyone (the dead
// nodes), then each live node's own "myself" line (another node's view may lag by gossip).
func (c *testCluster) refresh() error {
	masters := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		if n.master >= 0 {
			masters[i] = c.nodes[n.master].id
		}
	}
	haveView := false
	for _, onlyMyself := range []bool{false, true} {
		for i := range c.nodes {
			if !c.alive(i) || (!onlyMyself && haveView) {
				continue
			}
			v, err := c.cmd(i, "CLUSTER", "NODES")
			text, ok := v.(string)
			if err != nil || !ok {
				continue
			}
			haveView = true
			for _, line := range strings.Split(text, "\n") {
				f := strings.Fields(line)
				if len(f) < 8 || (onlyMyself && !strings.Contains(f[2], "myself")) {
					continue
				}
				addr := strings.SplitN(f[1], "@", 2)[0]
				port, _ := strconv.ParseInt(addr[strings.LastIndexByte(addr, ':')+1:], 10, 64)
				j := c.index(port)
				if j < 0 {
					continue
				}
				c.nodes[j].id = f[0]
				c.nodes[j].isMaster = strings.Contains(","+f[2]+",", ",master,")
				masters[j] = ""
				if !c.nodes[j].isMaster {
					masters[j] = f[3]
				}
			}
		}
	}
	if !haveView {
		return errors.New("refresh: no live node answered CLUSTER NODES")
	}
	for i, n := range c.nodes {
		n.master = -1
		for j, m := range c.nodes {
			if !n.isMaster && masters[i] == m.id {
				n.master = j
			}
		}
	}
	return nil
}

// roleOK: node i is a master, or a replica whose link to its master is up.
func (c *testCluster) roleOK(i int) bool {
	v, err := c.cmd(i, "ROLE")
	r, ok := v.([]any)
	if err != nil || !ok || len(r) < 1 {
		return false
	}
	return r[0] == "master" || (r[0] == "slave" && len(r) >= 4 && r[3] == "connected")
}

// rolesView is node i's view of the live nodes' roles ("index=M;" or "index=S<master>;"), or an
// error if a live node is missing or flagged fail. Nodes learn a replica's role by gossip, ~1s
// after --cluster create; until then a master ignores its replica's CLUSTER FAILOVER.
func (c *testCluster) rolesView(i int) (string, error) {
	v, err := c.cmd(i, "CLUSTER", "NODES")
	text, ok := v.(string)
	if err != nil || !ok {
		return "", fmt.Errorf("node %d: CLUSTER NODES: %v %v", i, v, err)
	}
	ids := map[string]int{}
	masters := map[int]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr := strings.SplitN(f[1], "@", 2)[0]
		port, _ := strconv.ParseInt(addr[strings.LastIndexByte(addr, ':')+1:], 10, 64)
		j := c.index(port)
		ids[f[0]] = j
		if !c.alive(j) {
			continue
		}
		if strings.Contains(f[2], "fail") {
			return "", fmt.Errorf("node %d flags live node %d %s", i, j, f[2])
		}
		masters[j] = "-"
		if strings.Contains(","+f[2]+",", ",slave,") {
			masters[j] = f[3]
		}
	}
	var b strings.Builder
	for j := range c.nodes {
		if !c.alive(j) {
			continue
		}
		m, ok := masters[j]
		switch {
		case !ok:
			return "", fmt.Errorf("node %d does not list live node %d", i, j)
		case m == "-":
			fmt.Fprintf(&b, "%d=M;", j)
		default:
			k, known := ids[m]
			if !known {
				k = -2
			}
			fmt.Fprintf(&b, "%d=S%d;", j, k)
		}
	}
	return b.String(), nil
}

// agreed returns nil if every live node is ok and they agree on the roles and one slot -> master
// map. The replica lists in CLUSTER SLOTS are not compared: a replica is left out while its
// gossiped replication offset is 0, up to 10s on an idle new cluster.
func (c *testCluster) agreed() error {
	var first []byte
	firstRoles := ""
	seen := false
	for i, n := range c.nodes {
		if !c.alive(i) {
			continue
		}
		if info := c.reply(i, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("node %d (port %d) is not cluster_state:ok", i, n.port)
		}
		roles, err := c.rolesView(i)
		if err != nil {
			return err
		}
		if !seen {
			firstRoles = roles
		} else if roles != firstRoles {
			return fmt.Errorf("nodes disagree on roles: %s vs node %d %s", firstRoles, i, roles)
		}
		seen = true
		v, err := c.cmd(i, "CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Errorf("node %d: CLUSTER SLOTS: %v", i, err)
		}
		rs, err := parseSlots(v)
		if err != nil {
			return err
		}
		var canon bytes.Buffer
		covered := int64(0)
		for _, r := range rs {
			for _, p := range r.ports {
				if !c.alive(c.index(p)) {
					return fmt.Errorf("node %d lists a dead node (port %d) for slots %d-%d", i, p, r.start, r.end)
				}
			}
			covered += r.end - r.start + 1
			fmt.Fprintf(&canon, "%d-%d %d;", r.start, r.end, r.ports[0])
		}
		if covered != clusterSlots {
			return fmt.Errorf("node %d: CLUSTER SLOTS covers %d of %d slots", i, covered, clusterSlots)
		}
		if first == nil {
			first = canon.Bytes()
		} else if !bytes.Equal(first, canon.Bytes()) {
			return fmt.Errorf("nodes disagree on CLUSTER SLOTS: %s vs node %d %s", first, i, canon.String())
		}
	}
	if !seen {
		return errors.New("no live node")
	}
	for i, n := range c.nodes {
		if c.alive(i) && !c.roleOK(i) {
			return fmt.Errorf("node %d (port %d): ROLE is neither master nor a connected replica", i, n.port)
		}
	}
	return nil
}

// waitOK waits until every live node says cluster_state:ok, all agree on who is a replica of
// whom (CLUSTER NODES, no live node flagged fail) and give the same slot -> master map covering
// all slots with live masters and listing no dead node, and every live replica's link is up.
func (c *testCluster) waitOK(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := c.agreed()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("cluster not ok after %v: %w", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *testCluster) ok(i int, args ...string) error {
	if r := c.reply(i, args...); r != "OK" {
		return fmt.Errorf("%s on node %d (port %d): %s", strings.Join(args, " "), i, c.nodes[i].port, r)
	}
	return nil
}

func (c *testCluster) needLive(i int, what string) error {
	if !c.alive(i) {
		return fmt.Errorf("%s: node %d is not a live node", what, i)
	}
	return nil
}

// migrateBegin: IMPORTING on to, then MIGRATING on the slot's owner.
func (c *testCluster) migrateBegin(slot, to int) error {
	src := c.owner(slot)
	if err := errors.Join(c.needLive(to, "migrateBegin"), c.needLive(src, "migrateBegin (owner)")); err != nil {
		return err
	}
	if src == to {
		return fmt.Errorf("migrateBegin: node %d already owns slot %d", to, slot)
	}
	s := strconv.Itoa(slot)
	if err := c.ok(to, "CLUSTER", "SETSLOT", s, "IMPORTING", c.nodes[src].id); err != nil {
		return err
	}
	return c.ok(src, "CLUSTER", "SETSLOT", s, "MIGRATING", c.nodes[to].id)
}

func (c *testCluster) migrate(src, to int, keys []string) error {
	args := append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(c.nodes[to].port), "", "0", "5000", "KEYS"}, keys...)
	if r := c.reply(src, args...); r != "OK" && r != "NOKEY" {
		return fmt.Errorf("MIGRATE from node %d to node %d: %s", src, to, r)
	}
	return nil
}

// migrateKey MIGRATEs one key (binary-safe; NOKEY is fine) from the slot's owner to node to.
func (c *testCluster) migrateKey(slot, to int, key string) error {
	src := c.owner(slot)
	if err := c.needLive(src, "migrateKey (owner)"); err != nil {
		return err
	}
	return c.migrate(src, to, []string{key})
}

// migrateAllKeys: GETKEYSINSLOT + MIGRATE until the source holds none of the slot's keys.
func (c *testCluster) migrateAllKeys(slot, to int) error {
	src := c.owner(slot)
	if err := c.needLive(src, "migrateAllKeys (owner)"); err != nil {
		return err
	}
	for round := 0; round < 100000; round++ { // 100 keys a round
		v, err := c.cmd(src, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "100")
		arr, ok := v.([]any)
		if err != nil || !ok {
			return fmt.Errorf("GETKEYSINSLOT %d on node %d: %v %v", slot, src, v, err)
		}
		if len(arr) == 0 {
			return nil
		}
		keys := make([]string, len(arr))
		for i, k := range arr {
			keys[i] = k.(string)
		}
		if err := c.migrate(src, to, keys); err != nil {
			return err
		}
	}
	return fmt.Errorf("slot %d never emptied", slot)
}

// migrateEnd: SETSLOT NODE on to, then the source, then the other masters; waits for one map.
func (c *testCluster) migrateEnd(slot, to int) error {
	src := c.owner(slot)
	if err := c.needLive(to, "migrateEnd"); err != nil {
		return err
	}
	s, id := strconv.Itoa(slot), c.nodes[to].id
	if err := c.ok(to, "CLUSTER", "SETSLOT", s, "NODE", id); err != nil {
		return err
	}
	if src != to && c.alive(src) {
		if err := c.ok(src, "CLUSTER", "SETSLOT", s, "NODE", id); err != nil {
			return err
		}
	}
	for i, n := range c.nodes { // replicas refuse SETSLOT and follow their masters
		if i != to && i != src && c.alive(i) && n.isMaster {
			if err := c.ok(i, "CLUSTER", "SETSLOT", s, "NODE", id); err != nil {
				return err
			}
		}
	}
	return c.waitOK(10 * time.Second)
}

func (c *testCluster) moveSlot(slot, to int) error {
	if err := c.migrateBegin(slot, to); err != nil {
		return err
	}
	if err := c.migrateAllKeys(slot, to); err != nil {
		return err
	}
	return c.migrateEnd(slot, to)
}

// reshard runs redis-cli --cluster reshard ... --cluster-yes, waits for one map and refreshes.
func (c *testCluster) reshard(from, to, nslots int) error {
	if err := errors.Join(c.needLive(from, "reshard"), c.needLive(to, "reshard")); err != nil {
		return err
	}
	if err := c.runCLI(60*time.Second, "--cluster", "reshard", fmt.Sprintf("127.0.0.1:%d", c.nodes[from].port),
		"--cluster-from", c.nodes[from].id, "--cluster-to", c.nodes[to].id,
		"--cluster-slots", strconv.Itoa(nslots), "--cluster-yes"); err != nil {
		return err
	}
	if err := c.waitOK(10 * time.Second); err != nil {
		return err
	}
	return c.refresh()
}

// failover runs CLUSTER FAILOVER on the replica; waits until it is master and the map agrees.
func (c *testCluster) failover(replica int) error {
	if err := c.needLive(replica, "failover"); err != nil {
		return err
	}
	if r := c.reply(replica, "ROLE"); !strings.HasPrefix(r, "[slave ") || !c.roleOK(replica) {
		return fmt.Errorf("failover: node %d is not a connected replica", replica)
	}
	if err := c.ok(replica, "CLUSTER", "FAILOVER"); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for !strings.HasPrefix(c.reply(replica, "ROLE"), "[master ") {
		if time.Now().After(deadline) {
			return fmt.Errorf("failover: node %d did not become master within 15s", replica)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.waitOK(20 * time.Second); err != nil {
		return err
	}
	return c.refresh()
}

// kill sends SIGKILL to node i and reaps it; it keeps its port and directory for restart.
func (c *testCluster) kill(i int) { c.stopNode(i, syscall.SIGKILL) }

// restart starts node i again on its port with its nodes.conf and waits until the cluster is ok
// with it back (a replica with its link up); refreshes.
func (c *testCluster) restart(i int) error {
	if c.alive(i) {
		return fmt.Errorf("restart: node %d is running", i)
	}
	for attempt := 0; ; attempt++ { // the port may be held for a moment after kill -9
		if err := c.spawn(i); err != nil {
			return err
		}
		err := c.waitPing(i, 10*time.Second)
		if err == nil {
			break
		}
		c.kill(i)
		if attempt == 4 {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.waitOK(20 * time.Second); err != nil {
		return err
	}
	return c.refresh()
}
