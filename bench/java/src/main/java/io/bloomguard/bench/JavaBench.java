package io.bloomguard.bench;

import io.bloomguard.Client;
import io.bloomguard.Filter;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.redisson.Redisson;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RFuture;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * The Java binding against Redisson 3.45.1 on one filter of Redisson's layout (made by Redisson's
 * tryInit, filled by the binding's addMany) on the same redis-server. Cases: single-item contains
 * on T threads, batches of B items on T threads, F futures in flight. Each case runs its sides in
 * interleaved rounds (order rotating) in this one process; the ratio to the case's Redisson
 * baseline is the median of per-round ratios. Every answer is checked: a present item answered
 * absent, or any error, ends the run with exit status 1. Exit 3 when a target is missed.
 * See bench/README.md, "bench/java: Java against Redisson 3.45.1".
 *
 *   bash bench/java/run.sh --url redis://127.0.0.1:6399 [--rounds R (5)] [--seconds S (1)]
 *     [--warmup S (= --seconds)] [--threads 1,16] [--inflight 1000] [--batch 100] [--items 10000]
 *     [--pool N (0: each library's default)] [--cases single,batch,async] [--only SIDE] [--control]
 */
public final class JavaBench {
    static final double TARGET_SINGLE = 1.5, TARGET_MANY = 2.5, TARGET_ASYNC = 5.0;
    static final int MANY_THREADS = 16; // from here on a single-item case has the 2.5x target

    // options
    static String url;
    static int rounds = 5, batch = 100, items = 10_000, pool = 0; // pool 0: each library's default
    static double seconds = 1, warmup = -1;
    static int[] threads = {1, 16}, inflight = {1000};
    static List<String> cases = List.of("single", "batch", "async");
    static boolean control;
    static String only;             // --only: the sides whose name contains this, alone

    static String[] item;          // [0, items) added, [items, 2 items) never added
    static boolean[] present;       // what each index must answer (true: must answer true)
    static List<List<String>> batches; // item[j*batch .. (j+1)*batch), cycling
    static int[] batchPresent;      // how many of each batch must answer true
    static String hostPort;

    /** One side of a case: answers `calls` calls of its kind, checking each answer. */
    interface Side {
        String name();
    }

    /** A blocking side: worker t's next call; returns the items it answered. */
    interface Blocking extends Side {
        int call(int t, int cursor) throws Exception;
    }

    /** An async side: starts the call for cursor and reports its items to done (or a failure). */
    interface Async extends Side {
        CompletionStage<?> start(int cursor);
    }

    record Run(long items, long calls, double seconds, double clientCpu, double serverCpu) {}

    static final class Abort extends RuntimeException {
        Abort(String m) {
            super(m);
        }
    }

    public static void main(String[] args) throws Exception {
        try {
            System.exit(run(args));
        } catch (Abort a) {
            System.out.flush();
            System.err.println("java bench: " + a.getMessage());
            System.exit(1);
        }
    }

    static int run(String[] args) throws Exception {
        parse(args);
        if (warmup < 0)
            warmup = seconds;
        URI u = URI.create(url);
        hostPort = u.getHost() + ":" + u.getPort();
        String name = "bloomguard-bench:java:" + ProcessHandle.current().pid();

        item = new String[2 * items];
        present = new boolean[2 * items];
        for (int i = 0; i < 2 * items; i++) {
            item[i] = "item-" + i;
            present[i] = i < items;
        }

        Config cfg = new Config();
        var single = cfg.useSingleServer().setAddress(url);
        Client.Options.Builder opts = Client.Options.builder();
        if (pool > 0) {
            single.setConnectionPoolSize(pool).setConnectionMinimumIdleSize(Math.min(pool, 24));
            opts.poolSize(pool);
        }
        String pools = String.format("connections: Redisson %d (%d idle at least), bloomguard %s",
                                     single.getConnectionPoolSize(), single.getConnectionMinimumIdleSize(),
                                     pool > 0 ? Integer.toString(pool) : "its default (4)");
        RedissonClient redisson = Redisson.create(cfg);
        Client client = Client.open(url, opts.build());
        Filter bg = client.filter(name);
        RBloomFilter<String> rb = redisson.getBloomFilter(name, StringCodec.INSTANCE);
        int status = 0;
        try {
            rb.delete();
            if (!rb.tryInit(1_000_000, 0.01))
                throw new Abort("tryInit found a filter " + name + " already there");
            for (int i = 0; i < items; i += 1000)
                bg.addMany(Arrays.asList(item).subList(i, Math.min(i + 1000, items)));
            if (control)
                plantControl(bg, rb);
            batches = new ArrayList<>();
            int nb = 2 * items / batch;
            batchPresent = new int[nb];
            for (int j = 0; j < nb; j++) {
                batches.add(List.copyOf(Arrays.asList(item).subList(j * batch, (j + 1) * batch)));
                for (int i = j * batch; i < (j + 1) * batch; i++)
                    batchPresent[j] += present[i] ? 1 : 0;
            }
            System.out.printf("server %s (%s), filter n=1000000 p=0.01 (Redisson's tryInit): size %d, k %d; "
                              + "%d items present, %d absent; bloomguard %s, Redisson 3.45.1, %s; "
                              + "Java %s, %d CPUs; %s%n", hostPort, serverVersion(), rb.getSize(),
                              rb.getHashIterations(), items, items, Client.version(), pools,
                              System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
                              loadavg());
            System.out.printf("%d rounds x %.2f s per side (warm-up %.2f s per side)%n", rounds, seconds, warmup);

            List<String> missed = new ArrayList<>();
            List<String> met = new ArrayList<>();
            if (cases.contains("single")) {
                for (int t : threads) {
                    double target = t >= MANY_THREADS ? TARGET_MANY : TARGET_SINGLE;
                    Blocking b = blocking("bloomguard contains", (w, c) -> check(bg.contains(item[c]), c, "bloomguard"));
                    Blocking r = blocking("redisson contains", (w, c) -> check(rb.contains(item[c]), c, "redisson"));
                    caseBlocking("single item, " + t + " thread(s)", t, 1, List.of(b, r), r, b, target, met, missed);
                }
            }
            if (cases.contains("batch")) {
                for (int t : threads) {
                    Blocking b = blocking("bloomguard containsMany", (w, c) -> {
                        int j = c / batch;
                        boolean[] a = bg.containsMany(batches.get(j));
                        for (int k = 0; k < a.length; k++)
                            check(a[k], j * batch + k, "bloomguard containsMany");
                        if (a.length != batch)
                            throw new Abort("bloomguard containsMany answered " + a.length + " of " + batch);
                        return batch;
                    });
                    Blocking r = blocking("redisson contains(Collection)", (w, c) -> {
                        int j = c / batch;
                        long n = rb.contains(batches.get(j));
                        // a count, not answers: fewer than the batch's present items is a false negative
                        // (one hidden by a false positive of the same batch cannot be seen here)
                        if (n < batchPresent[j])
                            throw new Abort("redisson contains(Collection) counted " + n + " of batch " + j
                                            + " whose " + batchPresent[j] + " added items must all count");
                        return batch;
                    });
                    Blocking ra = blocking("redisson 100 x containsAsync", (w, c) -> {
                        int j = c / batch;
                        List<String> l = batches.get(j);
                        @SuppressWarnings("unchecked")
                        RFuture<Boolean>[] fs = new RFuture[l.size()];
                        for (int k = 0; k < fs.length; k++)
                            fs[k] = rb.containsAsync(l.get(k));
                        for (int k = 0; k < fs.length; k++)
                            check(fs[k].toCompletableFuture().get(), j * batch + k, "redisson containsAsync batch");
                        return batch;
                    });
                    caseBlocking("batch of " + batch + ", " + t + " thread(s)", t, batch, List.of(b, r, ra), r, b,
                                 TARGET_MANY, met, missed);
                }
            }
            if (cases.contains("async")) {
                for (int f : inflight) {
                    Async b = async("bloomguard containsAsync", c -> bg.containsAsync(item[c])
                                        .thenAccept(a -> check(a, c, "bloomguard containsAsync")));
                    Async r = async("redisson containsAsync", c -> rb.containsAsync(item[c])
                                        .thenAccept(a -> check(a, c, "redisson containsAsync")));
                    caseAsync(f + " futures in flight", f, List.of(b, r), r, b, TARGET_ASYNC, met, missed);
                }
            }
            System.out.println();
            for (String m : met)
                System.out.println("target met:    " + m);
            for (String m : missed)
                System.out.println("target MISSED: " + m);
            if (only != null)
                System.out.println("--only " + only + ": a target is judged only where its Redisson base ran too");
            status = missed.isEmpty() ? 0 : 3;
        } finally {
            try {
                rb.delete();
            } catch (RuntimeException e) {
                System.err.println("java bench: could not delete " + name + ": " + e.getMessage());
            }
            bg.close();
            client.close();
            redisson.shutdown();
        }
        return status;
    }

    /**
     * --control: item 0, which every side asks first (worker 0 and the async driver start at cursor 0),
     * becomes an item never added that the filter answers absent - still expected present. The run
     * must then end with exit 1 at the first side that asks it.
     */
    static void plantControl(Filter bg, RBloomFilter<String> rb) {
        for (int i = 0; i < 1000; i++) {
            String s = "never-added-" + i;
            if (!bg.contains(s) && !rb.contains(s)) {
                item[0] = s;
                System.out.println("--control: item 0 is \"" + s + "\", never added, yet expected present: "
                                   + "the run must end with exit 1");
                return;
            }
        }
        throw new Abort("--control: no never-added item answered absent");
    }

    interface Call {
        int call(int worker, int cursor) throws Exception;
    }

    static Blocking blocking(String name, Call c) {
        return new Blocking() {
            public String name() {
                return name;
            }

            public int call(int t, int cursor) throws Exception {
                return c.call(t, cursor);
            }
        };
    }

    interface Starter {
        CompletionStage<?> start(int cursor);
    }

    static Async async(String name, Starter s) {
        return new Async() {
            public String name() {
                return name;
            }

            public CompletionStage<?> start(int cursor) {
                return s.start(cursor);
            }
        };
    }

    /** Checks one answer: a present item answered absent ends the run. Returns 1 (one item). */
    static int check(boolean answer, int idx, String who) {
        if (!answer && present[idx])
            throw new Abort("!! " + who + ": item \"" + item[idx] + "\" (added) answered absent: a false negative");
        return 1;
    }

    static void caseBlocking(String title, int nthreads, int per, List<Blocking> sides, Side base, Side ours,
                             double target, List<String> met, List<String> missed) throws Exception {
        System.out.printf("%n%s%n", title);
        sides = pick(sides);
        for (Blocking s : sides)
            runBlocking(s, nthreads, per, warmup);
        Map<String, List<Run>> res = new TreeMap<>();
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < sides.size(); k++) {
                Blocking s = sides.get((r + k) % sides.size());
                res.computeIfAbsent(s.name(), x -> new ArrayList<>()).add(runBlocking(s, nthreads, per, seconds));
            }
        report(title, sides, res, base, ours, target, met, missed);
    }

    static void caseAsync(String title, int f, List<Async> sides, Side base, Side ours, double target,
                          List<String> met, List<String> missed) throws Exception {
        System.out.printf("%n%s%n", title);
        sides = pick(sides);
        for (Async s : sides)
            runAsync(s, f, warmup);
        Map<String, List<Run>> res = new TreeMap<>();
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < sides.size(); k++) {
                Async s = sides.get((r + k) % sides.size());
                res.computeIfAbsent(s.name(), x -> new ArrayList<>()).add(runAsync(s, f, seconds));
            }
        report(title, sides, res, base, ours, target, met, missed);
    }

    /** --only: the sides named so (the ratios and the target then need the base among them). */
    static <S extends Side> List<S> pick(List<S> sides) {
        if (only == null)
            return sides;
        return sides.stream().filter(s -> s.name().contains(only)).toList();
    }

    /** nthreads workers call the side until the time is up; worker t starts at its own cursor. */
    static Run runBlocking(Blocking s, int nthreads, int per, double secs) throws Exception {
        AtomicLong done = new AtomicLong(), calls = new AtomicLong();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        long deadline = System.nanoTime() + (long) (secs * 1e9);
        Thread[] ws = new Thread[nthreads];
        double srv0 = serverCpu(), cpu0 = processCpu();
        long t0 = System.nanoTime();
        for (int t = 0; t < nthreads; t++) {
            final int w = t;
            ws[t] = new Thread(() -> {
                // per-item calls walk every index; batch calls start at batch boundaries
                int n = 2 * items, cursor = (int) ((long) w * 7919 % n) / per * per;
                long d = 0, c = 0;
                try {
                    while (System.nanoTime() < deadline && failed.get() == null) {
                        d += s.call(w, cursor);
                        c++;
                        cursor += per;
                        if (cursor + per > n)
                            cursor = 0;
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
                done.addAndGet(d);
                calls.addAndGet(c);
            }, "bench-" + t);
            ws[t].start();
        }
        // bounded: a call hanging beyond the clients' timeouts (1 s / 3 s) plus a margin ends the run
        long grace = TimeUnit.SECONDS.toMillis(30);
        for (Thread w : ws) {
            w.join(Math.max(1, grace - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - deadline)));
            if (w.isAlive())
                throw new Abort(s.name() + ": a call still running 30 s after the side's time ended");
        }
        double el = (System.nanoTime() - t0) / 1e9;
        double cpu = processCpu() - cpu0, srv = serverCpu() - srv0;
        fail(s, failed.get());
        return new Run(done.get(), calls.get(), el, cpu, srv);
    }

    /** One driver thread keeps f calls in flight until the time is up, then waits for them all. */
    static Run runAsync(Async s, int f, double secs) throws Exception {
        Semaphore slots = new Semaphore(f);
        AtomicLong done = new AtomicLong();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        int n = 2 * items, cursor = 0;
        long calls = 0;
        double srv0 = serverCpu(), cpu0 = processCpu();
        long t0 = System.nanoTime(), deadline = t0 + (long) (secs * 1e9);
        while (System.nanoTime() < deadline && failed.get() == null) {
            if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS))
                continue;
            s.start(cursor).whenComplete((v, e) -> {
                if (e != null)
                    failed.compareAndSet(null, e);
                else
                    done.incrementAndGet();
                slots.release();
            });
            calls++;
            if (++cursor == n)
                cursor = 0;
        }
        if (!slots.tryAcquire(f, 30, TimeUnit.SECONDS))
            throw new Abort(s.name() + ": futures still in flight 30 s after the side's time ended");
        double el = (System.nanoTime() - t0) / 1e9;
        double cpu = processCpu() - cpu0, srv = serverCpu() - srv0;
        fail(s, failed.get());
        return new Run(done.get(), calls, el, cpu, srv);
    }

    static void fail(Side s, Throwable e) {
        if (e == null)
            return;
        while ((e instanceof java.util.concurrent.CompletionException
                || e instanceof java.util.concurrent.ExecutionException) && e.getCause() != null)
            e = e.getCause();
        if (e instanceof Abort)
            throw (Abort) e;
        throw new Abort(s.name() + ": " + e);
    }

    static void report(String title, List<? extends Side> sides, Map<String, List<Run>> res, Side base, Side ours,
                       double target, List<String> met, List<String> missed) {
        System.out.printf("  %-30s %12s %10s %-28s %12s %12s %12s%n", "side", "items/s", "vs base",
                          "(per round)", "cli us/item", "srv us/item", "srv us/call");
        List<Run> b = res.get(base.name());
        for (Side s : sides) {
            List<Run> rs = res.get(s.name());
            if (rs == null)
                continue; // left out by --only
            double[] ips = new double[rs.size()], ratio = new double[rs.size()], cli = new double[rs.size()],
                srvI = new double[rs.size()], srvC = new double[rs.size()];
            StringBuilder per = new StringBuilder();
            for (int i = 0; i < rs.size(); i++) {
                Run x = rs.get(i);
                ips[i] = x.items() / x.seconds();
                ratio[i] = b == null ? Double.NaN : ips[i] / (b.get(i).items() / b.get(i).seconds());
                cli[i] = 1e6 * x.clientCpu() / x.items();
                srvI[i] = 1e6 * x.serverCpu() / x.items();
                srvC[i] = 1e6 * x.serverCpu() / x.calls();
                per.append(i == 0 ? "" : "/").append(String.format("%.2f", ratio[i]));
            }
            String r = s == base ? "1 (base)" : b == null ? "-" : String.format("%.2fx", median(ratio));
            System.out.printf("  %-30s %12.0f %10s %-28s %12.2f %12.2f %12.2f%n", s.name(), median(ips), r,
                              s == base || b == null ? "" : per.toString(), median(cli), median(srvI), median(srvC));
            if (s == ours && b != null) {
                double m = median(ratio);
                String line = String.format("%s: %s %.2fx %s %s (target >= %.1fx)", title, ours.name(), m,
                                            "vs", base.name(), target);
                (m >= target ? met : missed).add(line);
            }
        }
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n == 0 ? 0 : n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** This process' CPU (all its threads: the JVM's own too), seconds. */
    static double processCpu() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                   .getProcessCpuTime() / 1e9;
    }

    /** used_cpu_sys + used_cpu_user of INFO cpu, seconds (a connection of its own, plain RESP). */
    static double serverCpu() throws IOException {
        double total = 0;
        for (String l : info("cpu").split("\r\n")) {
            int c = l.indexOf(':');
            if (c > 0 && (l.startsWith("used_cpu_sys:") || l.startsWith("used_cpu_user:")))
                total += Double.parseDouble(l.substring(c + 1));
        }
        return total;
    }

    static String serverVersion() throws IOException {
        for (String l : info("server").split("\r\n"))
            if (l.startsWith("redis_version:"))
                return "redis " + l.substring(14);
        return "redis ?";
    }

    static String info(String section) throws IOException {
        URI u = URI.create(url);
        try (Socket so = new Socket(u.getHost(), u.getPort())) {
            so.setSoTimeout(5000);
            OutputStream out = so.getOutputStream();
            out.write(("INFO " + section + "\r\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = new BufferedInputStream(so.getInputStream());
            StringBuilder head = new StringBuilder();
            for (int ch; (ch = in.read()) != '\n';) {
                if (ch < 0)
                    throw new IOException("INFO: the server closed the connection");
                head.append((char) ch);
            }
            if (head.charAt(0) != '$')
                throw new IOException("INFO " + section + ": " + head.toString().trim());
            int n = Integer.parseInt(head.substring(1).trim());
            return new String(in.readNBytes(n), StandardCharsets.UTF_8);
        }
    }

    static String loadavg() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return "load " + f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "load ?";
        }
    }

    static int[] ints(String s, String what, int lo, int hi) {
        int[] v = {};
        try {
            v = Arrays.stream(s.split(",")).map(String::trim).filter(x -> !x.isEmpty())
                    .mapToInt(Integer::parseInt).toArray();
        } catch (NumberFormatException e) {
            usage(what + " " + s + ": not a list of integers");
        }
        if (v.length == 0)
            usage(what + " is empty");
        for (int x : v)
            if (x < lo || x > hi)
                usage(what + " " + x + " is out of " + lo + ".." + hi);
        return v;
    }

    static void parse(String[] a) {
        for (int i = 0; i < a.length; i++) {
            String k = a[i];
            if (k.equals("--control")) {
                control = true;
                continue;
            }
            if (!List.of("--url", "--rounds", "--seconds", "--warmup", "--threads", "--inflight", "--batch",
                         "--items", "--pool", "--cases", "--only").contains(k))
                usage("unknown option " + k);
            if (i + 1 == a.length)
                usage(k + " needs a value");
            String v = a[++i];
            switch (k) {
            case "--url" -> url = v;
            case "--rounds" -> rounds = ints(v, "--rounds", 1, 51)[0];
            case "--seconds" -> seconds = dbl(v, "--seconds", 0.05, 30);
            case "--warmup" -> warmup = dbl(v, "--warmup", 0, 30);
            case "--threads" -> threads = ints(v, "--threads", 1, 256);
            case "--inflight" -> inflight = ints(v, "--inflight", 1, 100_000);
            case "--batch" -> batch = ints(v, "--batch", 1, 10_000)[0];
            case "--items" -> items = ints(v, "--items", 1000, 1_000_000)[0];
            case "--pool" -> pool = ints(v, "--pool", 0, 1024)[0];
            case "--only" -> only = v;
            case "--cases" -> {
                cases = List.of(v.split(","));
                for (String c : cases)
                    if (!List.of("single", "batch", "async").contains(c))
                        usage("--cases: " + c + " is not single, batch or async");
            }
            default -> usage("unknown option " + k);
            }
        }
        if (url == null || !url.startsWith("redis://"))
            usage("--url redis://host:port is required (the benchmark starts no server)");
        if (2 * items < batch)
            usage("--items must be at least half of --batch");
    }

    static double dbl(String v, String what, double lo, double hi) {
        double d = Double.NaN;
        try {
            d = Double.parseDouble(v);
        } catch (NumberFormatException e) {
            usage(what + " " + v + ": not a number");
        }
        if (!(d >= lo && d <= hi))
            usage(what + " " + v + " is out of " + lo + ".." + hi);
        return d;
    }

    static void usage(String why) {
        System.err.println("java bench: " + why);
        System.err.println("usage: run.sh --url redis://host:port [--rounds R (1..51, 5)] [--seconds S (1)] "
                           + "[--warmup S (= --seconds)] [--threads 1,16] [--inflight 1000] [--batch 100] "
                           + "[--items 10000] [--pool N (0: each library's default)] [--cases single,batch,async] [--only SIDE] [--control]");
        System.exit(2);
    }
}
