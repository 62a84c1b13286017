// Command bgnative measures the Go binding's Contains / ContainsMany on a native filter
// (WithNative: RedisBloom's BF.*) against go-redis v9 sending BFExists / BFMExists to the same
// filter itself, on one redis-server with RedisBloom loaded. Many goroutines on one client each;
// sides run in interleaved rounds in one process (the order rotating); each side's items per
// second, the server's CPU per call and per item (INFO cpu) and the client's (getrusage) are
// printed, and the ratios to go-redis are medians of the per-round ratios. See bench/README.md
// ("Native filters: Python and Go peers").
//
//	cd bench/gonative && go build -o /tmp/bgnative . && taskset -c 1 /tmp/bgnative -url redis://127.0.0.1:6399
//
// Without -url it starts redis-server (BG_REDIS_SERVER) with --loadmodule of $BG_REDISBLOOM, else
// of what scripts/redisbloom.sh prints, on a free 127.0.0.1 port (-server-cpu pins it).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	"github.com/redis/go-redis/v9"
)

var (
	flagURL     = flag.String("url", "", "an existing server with RedisBloom (redis://host:port); default: start one on a free port")
	flagCPU     = flag.String("server-cpu", "", "with no -url: the CPU list the started server is pinned to (taskset -c)")
	flagConc    = flag.String("conc", "64", "goroutines calling at once, one level after the other")
	flagBatches = flag.String("batches", "1,100", "items per call: 1 (Contains vs BFExists), 100 (ContainsMany vs BFMExists)")
	flagRounds  = flag.Int("rounds", 5, "rounds per level and batch (every side once per round, order rotating)")
	flagSeconds = flag.Float64("seconds", 1, "seconds per side per round")
	flagItems   = flag.Int("items", 100000, "items added (queries ask for these and as many absent ones); a multiple of 100")
	flagPool    = flag.Int("pool", 64, "connections of each side's client (bloomguard WithPoolSize, go-redis PoolSize)")
	flagBlock   = flag.Bool("blocking", true, "also run the binding's blocking calls (WithQueues(0))")
)

const filterName = "bloomguard-bench:gonative"

type side struct {
	name  string
	query func(ctx context.Context, from, n int) ([]bool, error) // answers for items [from, from+n)
	close func()
}

type result struct {
	calls, items, errors, falseNeg int64
	seconds, serverCPU, clientCPU  float64
	firstErr                       string
}

var items [][]byte // even: added; odd: never added

func main() {
	flag.Parse()
	if *flagItems < 100 || *flagItems%100 != 0 || *flagRounds < 1 || *flagRounds > 21 || *flagSeconds <= 0 || *flagSeconds > 60 {
		must(errors.New("-items: a multiple of 100; -rounds 1..21; -seconds 0..60"))
	}
	addr, stop := server()
	defer stop()
	ctx := context.Background()
	setup, err := bloomguard.Open("redis://" + addr)
	must(err)
	f, err := setup.Filter(filterName, bloomguard.WithNative())
	must(err)
	f.Delete(ctx)
	_, err = f.InitNative(ctx, max(1_000_000, int64(*flagItems)), 0.01, bloomguard.ExpansionDefault)
	must(err)
	items = make([][]byte, 2**flagItems)
	for i := range items {
		tag := "p"
		if i%2 == 1 {
			tag = "a"
		}
		items[i] = []byte(fmt.Sprintf("%s:%08d", tag, i/2))
	}
	for i := 0; i < len(items); i += 2000 {
		var batch [][]byte
		for j := i; j < min(i+2000, len(items)); j += 2 {
			batch = append(batch, items[j])
		}
		_, err := f.AddMany(ctx, batch)
		must(err)
	}
	fmt.Printf("server %s, native filter %s: %d items added, queries alternate present/absent; GOMAXPROCS %d; %s\n",
		addr, filterName, *flagItems, runtime.GOMAXPROCS(0), loadavg())

	for _, conc := range ints(*flagConc) {
		for _, batch := range ints(*flagBatches) {
			if batch != 1 && batch != 100 {
				must(errors.New("-batches: 1 and/or 100"))
			}
			sides := []*side{bgSide(addr, 1, batch)}
			if *flagBlock {
				sides = append(sides, bgSide(addr, 0, batch))
			}
			sides = append(sides, goredisSide(addr, batch))
			runLevel(addr, conc, batch, sides)
			for _, s := range sides {
				s.close()
			}
		}
	}
	f.Delete(ctx)
	f.Close()
	setup.Close()
}

func bgSide(addr string, queues, batch int) *side {
	name := "bg-q" + strconv.Itoa(queues)
	if queues == 0 {
		name = "blocking"
	}
	c, err := bloomguard.Open("redis://"+addr, bloomguard.WithQueues(queues), bloomguard.WithPoolSize(*flagPool))
	must(err)
	f, err := c.Filter(filterName, bloomguard.WithNative())
	must(err)
	q := func(ctx context.Context, from, n int) ([]bool, error) {
		if n == 1 {
			ok, err := f.Contains(ctx, items[from])
			return []bool{ok}, err
		}
		return f.ContainsMany(ctx, items[from:from+n])
	}
	return &side{name: name, query: q, close: func() { f.Close(); c.Close() }}
}

// goredisSide: go-redis v9's own RedisBloom commands, BF.EXISTS / BF.MEXISTS, one per call.
func goredisSide(addr string, batch int) *side {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: *flagPool})
	q := func(ctx context.Context, from, n int) ([]bool, error) {
		if n == 1 {
			ok, err := rdb.BFExists(ctx, filterName, items[from]).Result()
			return []bool{ok}, err
		}
		args := make([]interface{}, n)
		for i := range args {
			args[i] = items[from+i]
		}
		return rdb.BFMExists(ctx, filterName, args...).Result()
	}
	return &side{name: "go-redis", query: q, close: func() { rdb.Close() }}
}

func runLevel(addr string, conc, batch int, sides []*side) {
	fmt.Printf("\n%d goroutines, %d item(s) per call, %d rounds x %.1f s per side\n", conc, batch, *flagRounds, *flagSeconds)
	for _, s := range sides { // warm up: connections made
		run(addr, s, conc, batch, 0.2)
	}
	results := make(map[string][]result)
	for r := 0; r < *flagRounds; r++ {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			results[s.name] = append(results[s.name], run(addr, s, conc, batch, *flagSeconds))
		}
	}
	fmt.Printf("  %-9s %12s %11s %18s %13s %13s %13s %7s %6s\n", "side", "items/s", "vs go-redis", "(per round)",
		"server µs/call", "server µs/it", "client µs/it", "errors", "f.neg")
	for _, s := range sides {
		rs := results[s.name]
		var rate, ratios, srvCall, srvItem, cli []float64
		var errs, fneg int64
		first := ""
		for i, x := range rs {
			rate = append(rate, float64(x.items)/x.seconds)
			srvCall = append(srvCall, 1e6*x.serverCPU/float64(max(x.calls, 1)))
			srvItem = append(srvItem, 1e6*x.serverCPU/float64(max(x.items, 1)))
			cli = append(cli, 1e6*x.clientCPU/float64(max(x.items, 1)))
			errs += x.errors
			fneg += x.falseNeg
			if first == "" {
				first = x.firstErr
			}
			if base := results["go-redis"]; i < len(base) {
				ratios = append(ratios, rate[i]/(float64(base[i].items)/base[i].seconds))
			}
		}
		per := make([]string, len(ratios))
		for i, v := range ratios {
			per[i] = fmt.Sprintf("%.2f", v)
		}
		ratio := "-"
		if len(ratios) > 0 && s.name != "go-redis" {
			ratio = fmt.Sprintf("%.2fx", median(ratios))
		}
		fmt.Printf("  %-9s %12.0f %11s %18s %13.3f %13.4f %13.3f %7d %6d\n", s.name, median(rate), ratio,
			strings.Join(per, "/"), median(srvCall), median(srvItem), median(cli), errs, fneg)
		if first != "" {
			fmt.Printf("    first error: %s\n", first)
		}
	}
}

// run has conc goroutines call s.query for seconds, each walking the items in batches.
func run(addr string, s *side, conc, batch int, seconds float64) result {
	var stop atomic.Bool
	var res result
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	srv0 := serverCPU(addr)
	cpu0 := processCPU()
	start := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var calls, errs, fneg int64
			var first string
			i := (g * 7919 * batch) % len(items)
			for !stop.Load() {
				got, err := s.query(ctx, i, batch)
				calls++
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
				} else {
					for j, ok := range got {
						if !ok && (i+j)%2 == 0 {
							fneg++
						}
					}
				}
				if i += batch; i >= len(items) {
					i = 0
				}
			}
			mu.Lock()
			res.calls += calls
			res.items += calls * int64(batch)
			res.errors += errs
			res.falseNeg += fneg
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(start.Add(time.Duration(seconds * float64(time.Second)))))
	stop.Store(true)
	wg.Wait()
	res.seconds = time.Since(start).Seconds()
	res.clientCPU = processCPU() - cpu0
	res.serverCPU = serverCPU(addr) - srv0
	return res
}

func processCPU() float64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// serverCPU is used_cpu_sys + used_cpu_user of INFO cpu, in seconds.
func serverCPU(addr string) float64 {
	c, err := net.Dial("tcp", addr)
	must(err)
	defer c.Close()
	_, err = c.Write([]byte("INFO cpu\r\n"))
	must(err)
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	must(err)
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	must(err)
	body := make([]byte, n+2)
	_, err = io.ReadFull(r, body)
	must(err)
	total := 0.0
	for _, l := range strings.Split(string(body), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			x, err := strconv.ParseFloat(v, 64)
			must(err)
			total += x
		}
	}
	return total
}

// redisbloom is $BG_REDISBLOOM, else what scripts/redisbloom.sh prints (run from bench/gonative).
func redisbloom() string {
	if p := os.Getenv("BG_REDISBLOOM"); p != "" {
		return p
	}
	out, err := exec.Command("bash", filepath.Join("..", "..", "scripts", "redisbloom.sh")).Output()
	if err != nil {
		must(fmt.Errorf("scripts/redisbloom.sh gave no module (%v): set BG_REDISBLOOM, or run from bench/gonative", err))
	}
	return strings.TrimSpace(string(out))
}

// server returns the address to use and how to stop what was started.
func server() (string, func()) {
	if *flagURL != "" {
		u, err := url.Parse(*flagURL)
		must(err)
		return u.Host, func() {}
	}
	module := redisbloom()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "bgnative-redis-")
	must(err)
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loadmodule", module}
	bin := os.Getenv("BG_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	cmd := exec.Command(bin, args...)
	if *flagCPU != "" {
		cmd = exec.Command("taskset", append([]string{"-c", *flagCPU, bin}, args...)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(cmd.Start())
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i == 200 {
			must(errors.New("redis-server did not start"))
		}
		time.Sleep(25 * time.Millisecond)
	}
	return addr, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(dir)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load ?"
	}
	return "load " + strings.Join(strings.Fields(string(b))[:3], " ")
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			n, err := strconv.Atoi(f)
			must(err)
			out = append(out, n)
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bgnative:", err)
		os.Exit(1)
	}
}
