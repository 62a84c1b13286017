package io.bloomguard.race;

import io.bloomguard.BloomGuardException;
import io.bloomguard.Client;
import io.bloomguard.Filter;
import io.bloomguard.Stat;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java worker of the cross-language race suite through the bloomguard binding (language
 * {@code jbg}; tests/race/README.md): a reader as a Java service using bindings/java would run it.
 *
 * <p>Only the {@code query} role. Two threads query blocking, one {@code contains(String)} then
 * one {@code containsMany} of 64, in a loop; a third keeps the client's submission queue busy:
 * {@value #ASYNC_INFLIGHT} {@code containsAsync} futures and one {@code containsManyAsync} of 64
 * in flight at once, then waits for all of them. Items are base items and items whose add already
 * returned OK (the added file, re-read every 20 ms). One {@link Filter} for the whole run, shared
 * by the three threads. The binding reads neither native nor partitioned filters:
 * {@code --kind native} and {@code --partitions} are refused (exit 2), and the suite leaves
 * this reader out of those scenarios (scenario.race_languages).
 *
 * <p>Prints one JSON line of counts, the same keys as the other workers plus
 * {@code async_queries}; exits 2 only on a harness failure.
 */
public final class RaceWorkerBg {
  private static final int BATCH = 64;
  private static final int THREADS = 2;
  private static final int ASYNC_INFLIGHT = 16;

  private final AtomicLong queries = new AtomicLong(), checked = new AtomicLong(),
      errors = new AtomicLong(), locked = new AtomicLong(), falseNegatives = new AtomicLong(),
      asyncQueries = new AtomicLong();
  private final AtomicReference<String> firstError = new AtomicReference<>("");
  private final Map<String, String> a;
  private final List<String> base;
  private final AtomicReference<List<String>> added = new AtomicReference<>(List.of());
  private final long deadline;
  private final Path stop;
  private final long pauseUs;

  private RaceWorkerBg(Map<String, String> a) throws IOException {
    this.a = a;
    base = readLines(a.get("items"), new long[] {0});
    if (base.isEmpty()) throw new IOException("no base items in " + a.get("items"));
    deadline = System.nanoTime() + (long) (Double.parseDouble(a.getOrDefault("duration", "60")) * 1e9);
    stop = a.containsKey("stop") ? Path.of(a.get("stop")) : null;
    pauseUs = Long.parseLong(a.getOrDefault("pause-us", "0"));
  }

  private void note(String what) {
    firstError.compareAndSet("", what);
  }

  private boolean stopped() {
    return System.nanoTime() >= deadline || (stop != null && Files.exists(stop));
  }

  /** Complete lines of path from offset[0] on; moves offset[0] past them. */
  static List<String> readLines(String path, long[] offset) throws IOException {
    List<String> out = new ArrayList<>();
    try (RandomAccessFile f = new RandomAccessFile(path, "r")) {
      long len = f.length();
      if (len <= offset[0]) return out;
      byte[] data = new byte[(int) (len - offset[0])];
      f.seek(offset[0]);
      f.readFully(data);
      int start = 0;
      for (int i = 0; i < data.length; i++) {
        if (data[i] == '\n') {
          out.add(new String(data, start, i - start, StandardCharsets.UTF_8));
          start = i + 1;
        }
      }
      offset[0] += start; // a line still being written waits for the next call
    }
    return out;
  }

  /** The refresher: items whose add returned OK, checked from now on (every 20 ms). */
  private void refresh(long[] off, long[] at) throws IOException {
    if (System.nanoTime() - at[0] <= 20_000_000L) return;
    List<String> more = readLines(a.get("added"), off);
    at[0] = System.nanoTime();
    if (more.isEmpty()) return;
    List<String> next = new ArrayList<>(added.get());
    next.addAll(more);
    added.set(List.copyOf(next));
  }

  private String pick(List<String> add) {
    int i = ThreadLocalRandom.current().nextInt(base.size() + add.size());
    return i < base.size() ? base.get(i) : add.get(i - base.size());
  }

  private List<String> pickBatch(List<String> add) {
    List<String> b = new ArrayList<>(BATCH);
    for (int j = 0; j < BATCH; j++) b.add(pick(add));
    return b;
  }

  private void failed(String what, Throwable e) {
    if (e instanceof CompletionException || e instanceof ExecutionException) e = e.getCause();
    if (!(e instanceof BloomGuardException)) throw new IllegalStateException(what + ": not a library error", e);
    errors.incrementAndGet();
    if (e instanceof BloomGuardException.Locked) locked.incrementAndGet();
    note(what + ": " + e);
  }

  private void checkBatch(List<String> batch, boolean[] present) {
    for (int j = 0; j < batch.size(); j++) {
      if (!present[j]) {
        falseNegatives.incrementAndGet();
        note("false negative: " + batch.get(j));
      }
    }
  }

  private boolean pause() {
    if (pauseUs <= 0) return true;
    try {
      Thread.sleep(pauseUs / 1000, (int) (pauseUs % 1000) * 1000);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** A blocking reader: contains, then containsMany(64), in a loop. */
  private void blocking(Filter f, Path ready) throws IOException {
    long[] off = {0}, at = {System.nanoTime() - 1_000_000_000L};
    for (boolean first = true; !stopped(); first = false) {
      refresh(off, at);
      List<String> add = added.get();
      String item = pick(add);
      queries.incrementAndGet();
      checked.incrementAndGet();
      try {
        if (!f.contains(item)) {
          falseNegatives.incrementAndGet();
          note("false negative: " + item);
        }
      } catch (BloomGuardException e) {
        failed("contains", e);
      }
      List<String> batch = pickBatch(add);
      queries.incrementAndGet();
      checked.addAndGet(BATCH);
      try {
        checkBatch(batch, f.containsMany(batch));
      } catch (BloomGuardException e) {
        failed("containsMany", e);
      }
      if (first && ready != null) Files.write(ready, new byte[0]);
      if (!pause()) break;
    }
  }

  /** The async reader: ASYNC_INFLIGHT containsAsync and one containsManyAsync(64) at once. */
  private void async(Filter f) throws IOException {
    long[] off = {0}, at = {System.nanoTime() - 1_000_000_000L};
    while (!stopped()) {
      refresh(off, at);
      List<String> add = added.get();
      List<String> items = new ArrayList<>(ASYNC_INFLIGHT);
      List<CompletableFuture<Boolean>> singles = new ArrayList<>(ASYNC_INFLIGHT);
      for (int j = 0; j < ASYNC_INFLIGHT; j++) {
        items.add(pick(add));
        singles.add(f.containsAsync(items.get(j)));
      }
      List<String> batch = pickBatch(add);
      CompletableFuture<boolean[]> many = f.containsManyAsync(batch);
      for (int j = 0; j < ASYNC_INFLIGHT; j++) {
        queries.incrementAndGet();
        asyncQueries.incrementAndGet();
        checked.incrementAndGet();
        try {
          if (!singles.get(j).join()) {
            falseNegatives.incrementAndGet();
            note("false negative (async): " + items.get(j));
          }
        } catch (CompletionException e) {
          failed("containsAsync", e);
        }
      }
      queries.incrementAndGet();
      asyncQueries.incrementAndGet();
      checked.addAndGet(BATCH);
      try {
        checkBatch(batch, many.join());
      } catch (CompletionException e) {
        failed("containsManyAsync", e);
      }
      if (!pause()) break;
    }
  }

  private static String json(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '"' || ch == '\\') b.append('\\').append(ch);
      else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
      else b.append(ch);
    }
    return b.append('"').toString();
  }

  private String countsJson(Map<Stat, Long> st) {
    return "{\"lang\":\"jbg\",\"role\":" + json(a.get("role")) + ",\"strategy\":" + json(a.get("strategy"))
        + ",\"queries\":" + queries.get() + ",\"checked\":" + checked.get() + ",\"errors\":" + errors.get()
        + ",\"locked\":" + locked.get() + ",\"false_negatives\":" + falseNegatives.get()
        + ",\"async_queries\":" + asyncQueries.get()
        + ",\"adds\":0,\"add_errors\":0,\"rotations\":0,\"rotation_errors\":0,\"last_expected\":0"
        + ",\"tracked\":" + st.get(Stat.TRACKED_READS) + ",\"cluster_moved\":" + st.get(Stat.CLUSTER_MOVED)
        + ",\"cluster_ask\":" + st.get(Stat.CLUSTER_ASK) + ",\"cluster_busy\":" + st.get(Stat.CLUSTER_BUSY_RETRIES)
        + ",\"cluster_reloads\":" + st.get(Stat.CLUSTER_MAP_RELOADS)
        + ",\"first_error\":" + json(firstError.get()) + "}";
  }

  private static Map<String, String> parse(String[] argv) {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) throw new IllegalArgumentException("unexpected " + argv[i]);
      a.put(argv[i].substring(2), argv[i + 1]);
    }
    if (argv.length % 2 != 0) throw new IllegalArgumentException("every option takes a value");
    for (String k : List.of("url", "filter", "role", "strategy", "items", "added")) {
      if (!a.containsKey(k)) throw new IllegalArgumentException("--" + k + " is required");
    }
    if (!a.get("role").equals("query")) {
      throw new IllegalArgumentException("the jbg worker only queries (role " + a.get("role") + ")");
    }
    if (!a.getOrDefault("kind", "redisson").equals("redisson")) {
      throw new IllegalArgumentException("--kind " + a.get("kind") + ": the Java binding reads Redisson-layout filters only");
    }
    if (Long.parseLong(a.getOrDefault("partitions", "0")) != 0) {
      throw new IllegalArgumentException("--partitions: the Java binding has no partitioned filters");
    }
    return a;
  }

  public static void main(String[] argv) {
    try {
      Map<String, String> a = parse(argv);
      RaceWorkerBg w = new RaceWorkerBg(a);
      // generous timeouts, as the other workers: the suite judges correctness, not latency; a
      // query waits out a LOCKED rewrite for up to 10 s; 20 config retries (README, "Config retries")
      Client.Options opts = Client.Options.builder().commandTimeout(Duration.ofSeconds(10))
          .connectTimeout(Duration.ofSeconds(10)).writeLockWait(Duration.ofSeconds(10)).configRetries(20)
          .poolSize(THREADS + 2).build();
      Map<Stat, Long> st;
      try (Client client = Client.open(a.get("url"), opts); Filter f = client.filter(a.get("filter"))) {
        Path ready = a.containsKey("ready") ? Path.of(a.get("ready")) : null;
        List<Thread> threads = new ArrayList<>();
        AtomicReference<Exception> failed = new AtomicReference<>();
        for (int t = 0; t <= THREADS; t++) {
          boolean isAsync = t == THREADS;
          Thread th = new Thread(() -> {
            try {
              if (isAsync) w.async(f);
              else w.blocking(f, ready);
            } catch (IOException | RuntimeException e) {
              failed.compareAndSet(null, e);
            }
          }, isAsync ? "async-reader" : "reader-" + t);
          th.start();
          threads.add(th);
        }
        for (Thread th : threads) th.join();
        if (failed.get() != null) throw new IOException("a reader thread failed", failed.get());
        st = f.stats();
      }
      System.out.println(w.countsJson(st));
      System.out.flush();
    } catch (IOException | InterruptedException | RuntimeException e) {
      System.err.println("race worker (jbg): " + e);
      if (e.getCause() != null) System.err.println("  cause: " + e.getCause());
      System.exit(2);
    }
    System.exit(0);
  }
}
