package io.bloomguard.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * bloomguard's lock (the {@code bloomguard lock} command) against Redisson 3.45.1's RLock on the
 * same key, {@code NAME + ":lock"}: each side excludes the other, and each wakes when the other
 * releases (Redisson's unlock message "0" on {@code redisson_lock__channel:{NAME:lock}}).
 *
 * <p>Redisson's tryLock(wait) that finds the lock held subscribes to that channel and sleeps
 * until a message or until min(the holder's PTTL, the time left) - it does not poll. So a Java
 * waiter that returns soon after bloomguard's release was woken by bloomguard's PUBLISH; the
 * negative control deletes the key without publishing and the same waiter sleeps out its whole
 * wait and fails.
 */
class LockInteropTest {
  private static RedissonClient redisson;
  private static Cli cli;
  private final List<String> names = new ArrayList<>();
  private final List<Process> procs = new ArrayList<>();

  @BeforeAll
  static void connect() {
    String url = Env.redisUrl();
    Config cfg = new Config();
    cfg.useSingleServer().setAddress(url).setConnectionMinimumIdleSize(2).setConnectionPoolSize(8);
    redisson = Redisson.create(cfg);
    cli = new Cli(url);
  }

  @AfterAll
  static void disconnect() {
    if (redisson != null) redisson.shutdown();
  }

  @AfterEach
  void cleanup() {
    for (Process p : procs) p.destroyForcibly();
    procs.clear();
    for (String n : names) {
      String k = n + ":lock";
      redisson.getKeys().delete(k, "{" + k + "}:fence", "{" + k + "}:readers", "{" + k + "}:writers");
    }
    names.clear();
  }

  private String fresh(String what) {
    String n = "interop:lock:" + what + ":" + UUID.randomUUID();
    names.add(n);
    return n;
  }

  private static Map<String, String> hash(String key) {
    return redisson.<String, String>getMap(key, StringCodec.INSTANCE).readAllMap();
  }

  private static long pttl(String key) {
    return redisson.getBucket(key, StringCodec.INSTANCE).remainTimeToLive();
  }

  /** A `bloomguard lock` process holding the lock until its stdin is closed. */
  final class Holder implements AutoCloseable {
    final Process p;
    final BufferedReader out;
    final String acquiredLine;
    final String holder;
    final long token;

    Holder(String name, String... extra) {
      List<String> args = new ArrayList<>(List.of("lock", name));
      args.addAll(List.of(extra));
      p = cli.start(args.toArray(new String[0]));
      procs.add(p);
      out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      acquiredLine = line();
      Matcher m = Pattern.compile("^acquired \\S+ mode=\\S+ token=(\\d+) holder=(\\S+) ").matcher(acquiredLine);
      assertTrue(m.find(), "bloomguard lock did not acquire: " + acquiredLine);
      token = Long.parseLong(m.group(1));
      holder = m.group(2);
    }

    String line() {
      try {
        String l = out.readLine();
        assertNotNull(l, "bloomguard lock ended without output");
        return l;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    /** Closes stdin: the process releases and prints "released ...". */
    void release() {
      try {
        p.getOutputStream().close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public void close() throws InterruptedException {
      release();
      String rest = line();
      assertTrue(rest.startsWith("released "), "after release: " + rest);
      assertTrue(p.waitFor(30, TimeUnit.SECONDS));
      assertEquals(0, p.exitValue());
    }
  }

  @Test
  void javaHoldsBloomguardIsRefusedAndNamesTheHolder() throws Exception {
    String name = fresh("java-holds");
    RLock lock = redisson.getLock(name + ":lock");
    lock.lock(); // watchdog lease: 30 s, renewed every 10 s
    try {
      String javaHolder = redisson.getId() + ":" + Thread.currentThread().getId();
      assertEquals(Map.of(javaHolder, "1"), hash(name + ":lock"), "Redisson's RLock layout");
      for (String mode : List.of("exclusive", "write", "read")) {
        Cli.Result r = cli.run("lock", name, "--mode", mode).expect(2);
        assertTrue(r.err().contains("BG_ELOCKED"), r.toString());
        assertTrue(r.err().contains(javaHolder), "the message names Redisson's holder: " + r);
      }
      long t0 = System.nanoTime();
      Cli.Result r = cli.run("lock", name, "--wait-ms", "700").expect(2);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(r.err().contains("BG_ELOCKED") && r.err().contains("gave up after"), r.toString());
      assertTrue(ms >= 700 && ms < 700 + 5000, "waited " + ms + " ms for --wait-ms 700");
      assertEquals(Map.of(javaHolder, "1"), hash(name + ":lock"), "untouched by bloomguard");
    } finally {
      lock.unlock();
    }
  }

  @Test
  void bloomguardWaiterWakesOnRedissonUnlock() throws Exception {
    String name = fresh("java-unlocks");
    RLock lock = redisson.getLock(name + ":lock");
    lock.lock();
    Process p = cli.start("lock", name, "--wait-ms", "20000", "--hold-ms", "0");
    procs.add(p);
    Thread.sleep(500);
    lock.unlock(); // Redisson publishes 0 on redisson_lock__channel:{NAME:lock}
    BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String acquired = out.readLine();
    assertNotNull(acquired);
    Matcher m = Pattern.compile("waited_ms=(\\d+)").matcher(acquired);
    assertTrue(m.find(), acquired);
    long waited = Long.parseLong(m.group(1));
    // Redisson's lease was 30 s: only the unlock message explains a wake-up this soon
    assertTrue(waited >= 300 && waited < 3000, "bloomguard waited " + waited + " ms; Redisson unlocked at ~500 ms");
    System.err.println("[lock-interop] bloomguard waiter got the lock " + waited + " ms after it started (Redisson"
        + " unlocked at ~500 ms, its lease was 30 s)");
    assertTrue(p.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue());
  }

  @Test
  void bloomguardHoldsJavaTryLockFailsThenWakesOnRelease() throws Exception {
    String name = fresh("bg-holds");
    RLock lock = redisson.getLock(name + ":lock");
    try (Holder h = new Holder(name)) {
      assertEquals(Map.of(h.holder, "1"), hash(name + ":lock"), "bloomguard writes Redisson's layout");
      long ttl = pttl(name + ":lock");
      assertTrue(ttl > 25_000 && ttl <= 30_000, "PTTL " + ttl + ": want the 30 s lease");
      assertTrue(lock.isLocked());
      assertFalse(lock.isHeldByCurrentThread());
      assertFalse(lock.tryLock());
      long t0 = System.nanoTime();
      assertFalse(lock.tryLock(300, TimeUnit.MILLISECONDS));
      assertTrue((System.nanoTime() - t0) / 1_000_000 >= 250);

      // a Java waiter: tryLock(20 s); the key's PTTL is ~30 s, so Redisson's own timer would
      // fire only after 20 s - it must be woken by bloomguard's unlock message
      CompletableFuture<long[]> waiter = CompletableFuture.supplyAsync(() -> {
        RLock l = redisson.getLock(name + ":lock");
        try {
          boolean got = l.tryLock(20, TimeUnit.SECONDS);
          long at = System.nanoTime();
          if (got) l.unlock();
          return new long[] {got ? 1 : 0, at};
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
      });
      Thread.sleep(800);
      assertFalse(waiter.isDone(), "the Java waiter got a lock bloomguard holds");
      long released = System.nanoTime();
      h.release();
      long[] res = waiter.get(30, TimeUnit.SECONDS);
      long wakeMs = (res[1] - released) / 1_000_000;
      assertEquals(1, res[0], "the Java waiter did not get the lock");
      assertTrue(wakeMs < 2000, "the Java waiter woke " + wakeMs + " ms after the release (its timer: 20 s)");
      System.err.println("[lock-interop] Java tryLock(20 s) woke " + wakeMs + " ms after bloomguard's release");
    }
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  /** Negative control: the same waiter when the key vanishes without the unlock message. */
  @Test
  void withoutTheUnlockMessageTheJavaWaiterSleepsOutItsWait() throws Exception {
    String name = fresh("no-message");
    Holder h = new Holder(name, "--hold-ms", "60000");
    CompletableFuture<long[]> waiter = CompletableFuture.supplyAsync(() -> {
      RLock l = redisson.getLock(name + ":lock");
      long t0 = System.nanoTime();
      try {
        boolean got = l.tryLock(4, TimeUnit.SECONDS);
        if (got) l.unlock();
        return new long[] {got ? 1 : 0, (System.nanoTime() - t0) / 1_000_000};
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    Thread.sleep(500);
    h.p.destroyForcibly(); // SIGKILL: no release, no message
    h.p.waitFor(10, TimeUnit.SECONDS);
    assertTrue(redisson.getKeys().delete(name + ":lock") == 1); // the key goes, silently
    long[] res = waiter.get(30, TimeUnit.SECONDS);
    assertEquals(0, res[0], "woken without a message?");
    assertTrue(res[1] >= 3900, "the waiter gave up after " + res[1] + " ms (its wait: 4000)");
    System.err.println("[lock-interop] negative control: with the key deleted silently, tryLock(4 s) failed after "
        + res[1] + " ms");
  }

  @Test
  void bloomguardRenewsItsLeaseWhileJavaWaits() throws Exception {
    String name = fresh("renew");
    RLock lock = redisson.getLock(name + ":lock");
    try (Holder h = new Holder(name, "--lease-ms", "600")) {
      long t0 = System.nanoTime();
      int tries = 0;
      while ((System.nanoTime() - t0) / 1_000_000 < 2500) { // four leases
        assertFalse(lock.tryLock(), "Redisson got the lock bloomguard holds (renewal failed)");
        long ttl = pttl(name + ":lock");
        assertTrue(ttl > 0 && ttl <= 600, "PTTL " + ttl);
        tries++;
        Thread.sleep(100);
      }
      assertTrue(tries > 10);
    }
    assertTrue(lock.tryLock());
    lock.unlock();
  }

  @Test
  void javaHolderThatStopsRenewingLosesTheLockToBloomguard() throws Exception {
    String name = fresh("java-lease");
    RLock lock = redisson.getLock(name + ":lock");
    lock.lock(1, TimeUnit.SECONDS); // an explicit lease: no watchdog, as if the JVM had died
    long t0 = System.nanoTime();
    Cli.Result r = cli.run("lock", name, "--wait-ms", "10000", "--hold-ms", "0").expect(0);
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertTrue(r.out().startsWith("acquired "), r.toString());
    assertTrue(ms >= 500 && ms < 6000, "bloomguard got it after " + ms + " ms; Java's lease was 1000");
    assertFalse(lock.isHeldByCurrentThread());
  }

  @Test
  void bloomguardReadersAndWritersExcludeRedissonLocks() throws Exception {
    String name = fresh("rw");
    RLock lock = redisson.getLock(name + ":lock");
    try (Holder r1 = new Holder(name, "--mode", "read"); Holder r2 = new Holder(name, "--mode", "read")) {
      assertEquals("read", hash(name + ":lock").get("mode"));
      assertFalse(lock.tryLock(), "Redisson got a lock bloomguard readers hold");
      assertTrue(r2.token > r1.token);
    }
    try (Holder w = new Holder(name, "--mode", "write")) {
      // RLock's layout plus the write mark filter queries wait for (Redisson ignores the field)
      assertEquals(Map.of(w.holder, "1", "mode", "write"), hash(name + ":lock"));
      assertFalse(lock.tryLock());
    }
    lock.lock();
    try {
      cli.run("lock", name, "--mode", "read").expect(2);
      cli.run("lock", name, "--mode", "write").expect(2);
    } finally {
      lock.unlock();
    }
    cli.run("lock", name, "--mode", "read", "--hold-ms", "0").expect(0);
  }

  @Test
  void fencingTokensGrowAcrossProcesses() throws Exception {
    String name = fresh("fence");
    long last = 0;
    for (int i = 0; i < 5; i++) {
      try (Holder h = new Holder(name)) {
        assertTrue(h.token > last, "token " + h.token + " after " + last);
        last = h.token;
      }
    }
    assertEquals(Long.toString(last),
        redisson.getBucket("{" + name + ":lock}:fence", StringCodec.INSTANCE).get());
  }
}
