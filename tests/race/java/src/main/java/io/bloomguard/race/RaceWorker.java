package io.bloomguard.race;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.redisson.Redisson;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;

/**
 * The Java worker of the cross-language race suite (tests/race/README.md): a Redisson
 * {@code RBloomFilter} reader, as a Java service beside bloomguard would run one.
 *
 * <p>Only the {@code query} role: two threads query base items and items whose add already
 * returned OK (read from the added file before they are queried), one at a time
 * ({@code contains(Object)}) then 64 base items and 64 added items at a time
 * ({@code contains(Collection)}, which answers how many are present: the missing ones are
 * counted, not named). False negatives among base items (in every generation) are also counted
 * apart: under a LOCKED rotation to unchanged (n, p), rotation.h says Redisson sees those. One {@code RBloomFilter} object
 * for the whole run, shared by both threads, so the size and hashIterations Redisson cached at
 * its first call are the ones it keeps using (as a service holding one object would).
 *
 * <p>The URL is one server's, or a Redis Cluster's: one node with {@code --cluster on}, or a
 * seed list {@code redis://h1:p1,h2:p2,...} (bloomguard's form; {@code --cluster auto}, the
 * default, takes several hosts for a cluster), then {@code useClusterServers()} with every seed.
 * {@code --retry-attempts N --retry-interval-ms MS} (cluster only) set Redisson's retries.
 *
 * <p>Prints one JSON line of counts; exits 2 only on a harness failure.
 */
public final class RaceWorker {
  private static final int BATCH = 64;
  private static final int THREADS = 2;

  private final AtomicLong queries = new AtomicLong(), checked = new AtomicLong(),
      errors = new AtomicLong(), falseNegatives = new AtomicLong(),
      falseNegativesBase = new AtomicLong(); // of the false negatives: base items
  private final AtomicReference<String> firstError = new AtomicReference<>("");

  private void note(String what) {
    firstError.compareAndSet("", what);
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

  private void query(Map<String, String> a, RBloomFilter<String> bf) throws IOException {
    List<String> pool = readLines(a.get("items"), new long[] {0});
    if (pool.isEmpty()) throw new IOException("no base items in " + a.get("items"));
    int base = pool.size(); // pool[0, base): base items, in every generation; then added items
    long[] addedOff = {0};
    long refreshed = System.nanoTime() - 1_000_000_000L;
    long deadline = System.nanoTime() + (long) (Double.parseDouble(a.getOrDefault("duration", "60")) * 1e9);
    Path stop = a.containsKey("stop") ? Path.of(a.get("stop")) : null;
    long pauseUs = Long.parseLong(a.getOrDefault("pause-us", "0"));
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    for (boolean first = true; ; first = false) {
      if (System.nanoTime() >= deadline || (stop != null && Files.exists(stop))) break;
      if (System.nanoTime() - refreshed > 20_000_000L) { // items added meanwhile: checked from now on
        pool.addAll(readLines(a.get("added"), addedOff));
        refreshed = System.nanoTime();
      }
      int i = rnd.nextInt(pool.size());
      queries.incrementAndGet();
      checked.incrementAndGet();
      try {
        if (!bf.contains(pool.get(i))) {
          falseNegatives.incrementAndGet();
          if (i < base) falseNegativesBase.incrementAndGet();
          note("false negative: " + pool.get(i));
        }
      } catch (RuntimeException e) {
        errors.incrementAndGet();
        note("contains: " + e);
      }
      // one batch of base items, one of added items: contains(Collection) answers a count only
      batch(bf, pool, 0, base, true);
      if (pool.size() > base) batch(bf, pool, base, pool.size(), false);
      if (first && a.containsKey("ready")) Files.write(Path.of(a.get("ready")), new byte[0]);
      if (pauseUs > 0) {
        try {
          Thread.sleep(pauseUs / 1000, (int) (pauseUs % 1000) * 1000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
  }

  private void batch(RBloomFilter<String> bf, List<String> pool, int from, int to, boolean isBase) {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    List<String> batch = new ArrayList<>(BATCH);
    for (int j = 0; j < BATCH; j++) batch.add(pool.get(from + rnd.nextInt(to - from)));
    queries.incrementAndGet();
    checked.addAndGet(BATCH);
    try {
      long present = bf.contains(batch);
      if (present != BATCH) {
        falseNegatives.addAndGet(BATCH - present);
        if (isBase) falseNegativesBase.addAndGet(BATCH - present);
        note((BATCH - present) + " of " + BATCH + (isBase ? " base" : " added") + " items absent in a batch");
      }
    } catch (RuntimeException e) {
      errors.incrementAndGet();
      note("contains(batch): " + e);
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

  private String countsJson(Map<String, String> a) {
    return "{\"lang\":\"java\",\"role\":" + json(a.get("role")) + ",\"strategy\":" + json(a.get("strategy"))
        + ",\"queries\":" + queries.get() + ",\"checked\":" + checked.get() + ",\"errors\":" + errors.get()
        + ",\"false_negatives\":" + falseNegatives.get() + ",\"false_negatives_base\":" + falseNegativesBase.get()
        + ",\"adds\":0,\"add_errors\":0,\"rotations\":0,\"rotation_errors\":0,\"locked\":0,\"last_expected\":0,\"first_error\":" + json(firstError.get()) + "}";
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
      throw new IllegalArgumentException("the Redisson worker only queries (role " + a.get("role") + ")");
    }
    return a;
  }

  /**
   * The node addresses of a URL {@code redis://[userinfo@]h1:p1[,h2:p2...]} (the seed-list form
   * bloomguard takes), each as {@code redis://[userinfo@]h:p} for Redisson.
   */
  static List<String> addresses(String url) {
    int scheme = url.indexOf("://");
    if (scheme < 0) throw new IllegalArgumentException("--url: no scheme (redis://host:port)");
    String prefix = url.substring(0, scheme + 3), rest = url.substring(scheme + 3);
    int at = rest.lastIndexOf('@');
    if (at >= 0) {
      prefix += rest.substring(0, at + 1);
      rest = rest.substring(at + 1);
    }
    int slash = rest.indexOf('/');
    if (slash >= 0) rest = rest.substring(0, slash); // a db: one server only (a cluster has db 0)
    List<String> out = new ArrayList<>();
    for (String hp : rest.split(",", -1)) {
      if (hp.isEmpty()) throw new IllegalArgumentException("--url: an empty host in the seed list");
      out.add(prefix + hp);
    }
    return out;
  }

  /**
   * Redisson's config: {@code useClusterServers()} for a cluster ({@code --cluster on}, or
   * {@code auto} (the default) with several hosts in the URL), else {@code useSingleServer()}.
   * Generous timeouts: the suite judges correctness, not latency on a loaded machine.
   */
  static Config config(Map<String, String> a) {
    List<String> nodes = addresses(a.get("url"));
    String mode = a.getOrDefault("cluster", "auto");
    boolean cluster;
    switch (mode) {
      case "on": cluster = true; break;
      case "off": cluster = false; break;
      case "auto": cluster = nodes.size() > 1; break;
      default: throw new IllegalArgumentException("--cluster: on, off or auto, not " + mode);
    }
    Config cfg = new Config();
    if (!cluster) {
      if (nodes.size() > 1) throw new IllegalArgumentException("--url: several hosts need --cluster on or auto");
      cfg.useSingleServer().setAddress(a.get("url")).setConnectionMinimumIdleSize(1)
          .setConnectionPoolSize(THREADS + 1).setTimeout(10_000).setConnectTimeout(10_000).setRetryAttempts(0);
      return cfg;
    }
    // Masters only, as bloomguard reads (a replica can miss a just-acknowledged add). Redisson
    // follows MOVED and ASK itself; TRYAGAIN (its contains() is one EVAL on the config and the
    // bitmap: two keys, refused while the slot is half moved) it retries every retryInterval,
    // retryAttempts times. Measured here (tests/race/README.md): with no retries about half of
    // its calls fail with TRYAGAIN during migrations; with its defaults (3 x 1.5 s) it answers
    // right but makes ~40 calls a scenario, too few to judge; 100 x 20 ms waits as long as
    // bloomguard's backoff does (a 1 ms .. 100 ms doubling, inside the call's deadline).
    cfg.useClusterServers().addNodeAddress(nodes.toArray(new String[0])).setReadMode(ReadMode.MASTER)
        .setMasterConnectionMinimumIdleSize(1).setMasterConnectionPoolSize(THREADS + 1)
        .setSlaveConnectionMinimumIdleSize(1).setSlaveConnectionPoolSize(2)
        .setTimeout(10_000).setConnectTimeout(10_000)
        .setRetryAttempts(Integer.parseInt(a.getOrDefault("retry-attempts", "100")))
        .setRetryInterval(Integer.parseInt(a.getOrDefault("retry-interval-ms", "20")));
    return cfg;
  }

  public static void main(String[] argv) {
    RedissonClient redisson = null;
    try {
      Map<String, String> a = parse(argv);
      redisson = Redisson.create(config(a));
      RBloomFilter<String> bf = redisson.getBloomFilter(a.get("filter"), StringCodec.INSTANCE);
      RaceWorker w = new RaceWorker();
      List<Thread> threads = new ArrayList<>();
      AtomicReference<Exception> failed = new AtomicReference<>();
      for (int t = 0; t < THREADS; t++) {
        Thread th = new Thread(() -> {
          try {
            w.query(a, bf);
          } catch (IOException | RuntimeException e) {
            failed.compareAndSet(null, e);
          }
        }, "reader-" + t);
        th.start();
        threads.add(th);
      }
      for (Thread th : threads) th.join();
      if (failed.get() != null) throw new IOException("a reader thread failed", failed.get());
      System.out.println(w.countsJson(a));
      System.out.flush();
    } catch (IOException | InterruptedException | RuntimeException e) {
      System.err.println("race worker (java): " + e);
      System.exit(2);
    } finally {
      if (redisson != null) redisson.shutdown();
    }
    System.exit(0);
  }
}
