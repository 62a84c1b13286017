// Command bgbench measures the Go binding's Contains (one item per call, many goroutines on one
// Client) against rueidis with auto-pipelining sending the raw BITFIELD_RO of the same k bits to
// the same server, and against the binding's blocking calls (WithQueues(0)). Sides run in
// interleaved rounds in one process; each side's queries per second, the server's CPU per query
// (INFO cpu) and the client's (getrusage) are printed, and the ratios to rueidis are medians of
// the per-round ratios. See bench/README.md ("Go: Contains on the submission queue").
//
//	go build -o /tmp/bgbench . && taskset -c 1 /tmp/bgbench -url redis://127.0.0.1:6399
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
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bloomguard "github.com/bloomguard/bloomguard/bindings/go"
	"github.com/redis/rueidis"
)

var (
	flagURL     = flag.String("url", "", "an existing server (redis://host:port); default: start redis-server on a free port")
	flagCPU     = flag.String("server-cpu", "", "with no -url: the CPU list the started server is pinned to (taskset -c)")
	flagConc    = flag.String("conc", "64,1024", "goroutines calling at once, one level after the other")
	flagRounds  = flag.Int("rounds", 5, "rounds per level (every side once per round, order rotating)")
	flagSeconds = flag.Float64("seconds", 1, "seconds per side per round")
	flagQueues  = flag.String("queues", "1", "the binding's queue counts to run (WithQueues); each is a side")
	flagBlock   = flag.String("blocking-at", "64", "levels at which the blocking calls (WithQueues(0)) run too")
	flagItems   = flag.Int("items", 10000, "items added (queries ask for these and as many absent ones)")
	flagOnly    = flag.String("only", "", "run this side alone (bg-q1, rueidis, blocking, ...), e.g. to profile it")
	flagProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run (use with -only)")
)

const filterName = "bloomguard-bench:go"

type side struct {
	name  string
	query func(ctx context.Context, i int) (bool, error) // the answer for item i
	close func()
}

type result struct {
	queries, errors, falseNeg int64
	seconds                   float64
	serverCPU, clientCPU      float64 // seconds
	firstErr                  string
}

func main() {
	flag.Parse()
	addr, stop := server()
	defer stop()
	if *flagProfile != "" {
		f, err := os.Create(*flagProfile)
		must(err)
		must(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	setup, err := bloomguard.Open("redis://" + addr)
	must(err)
	f, err := setup.Filter(filterName)
	must(err)
	f.Delete(ctx)
	_, err = f.Init(ctx, 1_000_000, 0.01)
	must(err)
	items := make([][]byte, 2**flagItems) // [0, n) added, [n, 2n) not
	for i := range items {
		items[i] = []byte(fmt.Sprintf("item-%d", i))
	}
	for i := 0; i < *flagItems; i += 1000 {
		_, err := f.AddMany(ctx, items[i:min(i+1000, *flagItems)])
		must(err)
	}
	info, err := f.Info(ctx)
	must(err)
	fmt.Printf("server %s, filter n=1000000 p=0.01: size %d, k %d; %d items present, %d absent; GOMAXPROCS %d; %s\n",
		addr, info.Size, info.HashIterations, *flagItems, *flagItems, runtime.GOMAXPROCS(0), loadavg())

	for _, c := range ints(*flagConc) {
		var sides []*side
		for _, q := range ints(*flagQueues) {
			sides = append(sides, bgSide(addr, q, items))
		}
		if slices.Contains(ints(*flagBlock), c) {
			sides = append(sides, bgSide(addr, 0, items))
		}
		sides = append(sides, rueidisSide(addr, items, info))
		if *flagOnly != "" {
			sides = slices.DeleteFunc(sides, func(s *side) bool { return s.name != *flagOnly })
		}
		runLevel(addr, c, sides, *flagItems)
		for _, s := range sides {
			s.close()
		}
	}
	f.Delete(ctx)
	f.Close()
	setup.Close()
}

func bgSide(addr string, queues int, items [][]byte) *side {
	name := "bg-q" + strconv.Itoa(queues)
	if queues == 0 {
		name = "blocking"
	}
	c, err := bloomguard.Open("redis://"+addr, bloomguard.WithQueues(queues), bloomguard.WithPoolSize(64))
	must(err)
	f, err := c.Filter(filterName)
	must(err)
	return &side{
		name:  name,
		query: func(ctx context.Context, i int) (bool, error) { return f.Contains(ctx, items[i]) },
		close: func() { f.Close(); c.Close() },
	}
}

// rueidisSide sends BITFIELD_RO key GET u1 o1 ... GET u1 ok for the item's k bit indexes (from
// bloomguard.Indexes, computed once per item before the run: the rueidis side pays no hashing).
func rueidisSide(addr string, items [][]byte, info bloomguard.Info) *side {
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	must(err)
	offsets := make([][]int64, len(items))
	for i, it := range items {
		idx, err := bloomguard.Indexes(it, info.Size, info.HashIterations)
		must(err)
		for _, x := range idx {
			offsets[i] = append(offsets[i], int64(x))
		}
	}
	return &side{
		name: "rueidis",
		query: func(ctx context.Context, i int) (bool, error) {
			b := cl.B().BitfieldRo().Key(filterName).Get()
			for _, o := range offsets[i] {
				b = b.Get("u1", o)
			}
			bits, err := cl.Do(ctx, b.Build()).AsIntSlice()
			if err != nil {
				return false, err
			}
			for _, v := range bits {
				if v == 0 {
					return false, nil
				}
			}
			return true, nil
		},
		close: cl.Close,
	}
}

func runLevel(addr string, conc int, sides []*side, present int) {
	fmt.Printf("\n%d goroutines, %d rounds x %.1f s per side\n", conc, *flagRounds, *flagSeconds)
	for _, s := range sides { // warm up: connections made, tracking on
		run(addr, s, conc, 0.2, present)
	}
	results := make(map[string][]result)
	for r := 0; r < *flagRounds; r++ {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			results[s.name] = append(results[s.name], run(addr, s, conc, *flagSeconds, present))
		}
	}
	fmt.Printf("  %-9s %10s %12s %18s %14s %14s %7s %6s\n", "side", "queries/s", "vs rueidis", "(per round)",
		"server µs/q", "client µs/q", "errors", "f.neg")
	for _, s := range sides {
		rs := results[s.name]
		var qps, ratios, srv, cli []float64
		var errs, fneg int64
		first := ""
		for i, x := range rs {
			qps = append(qps, float64(x.queries)/x.seconds)
			srv = append(srv, 1e6*x.serverCPU/float64(x.queries))
			cli = append(cli, 1e6*x.clientCPU/float64(x.queries))
			errs += x.errors
			fneg += x.falseNeg
			if first == "" {
				first = x.firstErr
			}
			if base, ok := results["rueidis"]; ok && i < len(base) {
				ratios = append(ratios, qps[i]/(float64(base[i].queries)/base[i].seconds))
			}
		}
		per := make([]string, len(ratios))
		for i, v := range ratios {
			per[i] = fmt.Sprintf("%.2f", v)
		}
		ratio := "-"
		if len(ratios) > 0 {
			ratio = fmt.Sprintf("%.2fx", median(ratios))
		}
		fmt.Printf("  %-9s %10.0f %12s %18s %14.2f %14.2f %7d %6d\n", s.name, median(qps), ratio,
			strings.Join(per, "/"), median(srv), median(cli), errs, fneg)
		if first != "" {
			fmt.Printf("    first error: %s\n", first)
		}
	}
}

// run has conc goroutines call s.query for seconds; present items are [0, present).
func run(addr string, s *side, conc int, seconds float64, present int) result {
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
			var n, errs, fneg int64
			var first string
			i := (g * 7919) % (2 * present)
			for !stop.Load() {
				ok, err := s.query(ctx, i)
				n++
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
				} else if !ok && i < present {
					fneg++
				}
				if i += 1; i == 2*present {
					i = 0
				}
			}
			mu.Lock()
			res.queries += n
			res.errors += errs
			res.falseNeg += fneg
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	deadline := start.Add(time.Duration(seconds * float64(time.Second)))
	time.Sleep(time.Until(deadline))
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

// server returns the address to use and how to stop what was started.
func server() (string, func()) {
	if *flagURL != "" {
		u, err := url.Parse(*flagURL)
		must(err)
		return u.Host, func() {}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "bgbench-redis-")
	must(err)
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir}
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
		fmt.Fprintln(os.Stderr, "bgbench:", err)
		os.Exit(1)
	}
}
