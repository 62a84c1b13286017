package io.bloomguard.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.SslVerificationMode;

/**
 * Redisson 3.45.1 and the bloomguard CLI both over TLS ({@code rediss://}) to a TLS-only
 * redis-server whose certificate (scripts/tls-certs.sh: CN=localhost, SAN DNS:localhost and
 * IP:127.0.0.1) is signed by a test CA.
 *
 * <p>Redisson trusts only that CA: a PKCS12 KeyStore built here from its PEM (no keytool) feeds a
 * TrustManagerFactory ({@code setSslTrustManagerFactory}). Its verification mode is STRICT (the
 * 3.45.1 default, set explicitly too): the chain AND the host, which the IP SAN 127.0.0.1
 * satisfies. The CLI trusts the same CA with {@code --tls-ca-file}.
 *
 * <ul>
 *   <li>A filter written by either side over TLS is read by the other.</li>
 *   <li>A lock held by the CLI over TLS wakes a Redisson tryLock over TLS on release.</li>
 *   <li>Negative controls: the CLI with the wrong CA or the wrong server name fails with
 *       BG_ETLS; Redisson with the JDK's default trust (not the test CA) cannot connect.</li>
 * </ul>
 *
 * Without a TLS server (see {@link Env#tlsProblem()}) the class fails on CI (CI=true) and is
 * skipped elsewhere.
 */
class TlsInteropTest {
  private static String url;
  private static Path ca;
  private static RedissonClient redisson;
  private static Cli cli;
  private final List<String> names = new ArrayList<>();
  private final List<Process> procs = new ArrayList<>();

  @BeforeAll
  static void connect() throws Exception {
    url = Env.tlsUrl();
    if (url == null) {
      String why = "no TLS server for TlsInteropTest: " + Env.tlsProblem();
      fail(why + " (a skipped TLS test would hide a regression: tests/interop/run.sh starts one)");
    }
    ca = Env.tlsCa();
    Config cfg = new Config();
    cfg.useSingleServer().setAddress(url).setConnectionMinimumIdleSize(2).setConnectionPoolSize(8)
        .setSslTrustManagerFactory(trustOnly(ca));
    assertEquals(SslVerificationMode.STRICT, cfg.useSingleServer().getSslVerificationMode(),
        "Redisson 3.45.1's default verification: chain and host");
    cfg.useSingleServer().setSslVerificationMode(SslVerificationMode.STRICT);
    long t0 = System.nanoTime();
    redisson = Redisson.create(cfg);
    System.err.println("[tls-interop] Redisson over TLS to " + url + " (trusting only " + ca
        + ", STRICT: chain + host 127.0.0.1 against the IP SAN) up in " + ms(System.nanoTime() - t0) + " ms");
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
      bloom(n).delete();
      String k = n + ":lock";
      redisson.getKeys().delete(k, "{" + k + "}:fence", "{" + k + "}:readers", "{" + k + "}:writers");
    }
    names.clear();
  }

  /** A TrustManagerFactory trusting exactly the certificates in the PEM file (a PKCS12 KeyStore in memory). */
  static TrustManagerFactory trustOnly(Path pem) throws IOException, GeneralSecurityException {
    KeyStore ks = KeyStore.getInstance("PKCS12");
    ks.load(null, null);
    int i = 0;
    try (InputStream in = Files.newInputStream(pem)) {
      for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        ks.setCertificateEntry("ca" + i++, c);
      }
    }
    assertTrue(i > 0, "no certificate in " + pem);
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ks);
    return tmf;
  }

  private static long ms(long nanos) {
    return nanos / 1_000_000;
  }

  private String fresh(String what) {
    String n = "interop:tls:" + what + ":" + UUID.randomUUID();
    names.add(n);
    return n;
  }

  private static RBloomFilter<String> bloom(String name) {
    return redisson.getBloomFilter(name, StringCodec.INSTANCE);
  }

  /** The CLI over TLS trusting the test CA. */
  private static Cli.Result tlsCli(byte[] stdin, String... args) {
    List<String> a = new ArrayList<>(List.of("--tls-ca-file", ca.toString()));
    a.addAll(List.of(args));
    return cli.run(stdin, a.toArray(new String[0]));
  }

  private static List<String> items(String prefix, int n) {
    List<String> l = new ArrayList<>();
    for (int i = 0; i < n; i++) l.add(prefix + i);
    return l;
  }

  @Test
  void bloomguardWritesRedissonReadsOverTls() {
    String name = fresh("bg-writes");
    List<String> items = items("bg-tls-", 2_000);
    JsonNode init = tlsCli(null, "--json", "init", name, "--expected", "20000", "--fpp", "0.01").expect(0).json();
    tlsCli(Cli.lines(items), "add", name).expect(0);
    RBloomFilter<String> bf = bloom(name);
    assertEquals(init.get("size").asLong(), bf.getSize());
    assertEquals(init.get("hashIterations").asInt(), bf.getHashIterations());
    assertEquals(20000, bf.getExpectedInsertions());
    for (String s : items) assertTrue(bf.contains(s), "Redisson over TLS misses " + s);
  }

  @Test
  void redissonWritesBloomguardReadsOverTls() {
    String name = fresh("java-writes");
    List<String> items = items("java-tls-", 2_000);
    RBloomFilter<String> bf = bloom(name);
    assertTrue(bf.tryInit(20_000, 0.01));
    for (String s : items) bf.add(s);
    Cli.Result r = tlsCli(Cli.lines(items), "--json", "contains", name).expect(0);
    assertEquals(items.size(), r.json().get("present").asInt(), r.toString());
    JsonNode info = tlsCli(null, "--json", "info", name).expect(0).json();
    assertEquals(bf.getSize(), info.get("size").asLong());
    assertEquals(bf.getHashIterations(), info.get("hashIterations").asInt());
    // an item Redisson never added: absent for the CLI too (exit 1), so exit 0 above was not vacuous
    tlsCli(null, "contains", name, "never-added-over-tls").expect(1);
  }

  @Test
  void bloomguardLockOverTlsWakesRedissonTryLock() throws Exception {
    String name = fresh("lock");
    Process p = cli.start("--tls-ca-file", ca.toString(), "lock", name, "--hold-ms", "1500");
    procs.add(p);
    BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String acquired = out.readLine();
    long acquiredAt = System.nanoTime();
    assertNotNull(acquired, "bloomguard lock over TLS printed nothing");
    assertTrue(acquired.startsWith("acquired "), "bloomguard lock over TLS: " + acquired);
    RLock lock = redisson.getLock(name + ":lock");
    assertTrue(lock.isLocked());
    assertFalse(lock.tryLock(), "Redisson got a lock bloomguard holds");
    // tryLock(20 s) with bloomguard's 30 s lease: Redisson's own timer would fire after 20 s,
    // so getting it soon after the release means bloomguard's unlock message woke it
    CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> {
      RLock l = redisson.getLock(name + ":lock");
      try {
        boolean got = l.tryLock(20, TimeUnit.SECONDS);
        long at = System.nanoTime();
        if (got) l.unlock();
        return got ? at : -1L;
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    long gotAt = waiter.get(30, TimeUnit.SECONDS);
    assertTrue(gotAt > 0, "Redisson's tryLock(20 s) over TLS did not get the lock");
    String released = out.readLine();
    assertNotNull(released);
    Matcher m = Pattern.compile("^released \\S+ held_ms=(\\d+)").matcher(released);
    assertTrue(m.find(), "bloomguard lock: " + released);
    long heldMs = Long.parseLong(m.group(1));
    assertTrue(p.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue());
    long afterAcquiredLine = ms(gotAt - acquiredAt);
    // the release happened ~held_ms after bloomguard printed "acquired" (the line reached us a
    // little later, so this latency is an upper bound minus that delivery delay)
    long wake = afterAcquiredLine - heldMs;
    assertTrue(afterAcquiredLine >= heldMs - 200, "Redisson got the lock " + afterAcquiredLine
        + " ms after bloomguard acquired it, before its release at held_ms=" + heldMs);
    assertTrue(wake < 3000, "Redisson woke " + wake + " ms after bloomguard's release (its lease: 30 s, its wait: 20 s)");
    System.err.println("[tls-interop] Redisson tryLock(20 s) over TLS woke ~" + wake
        + " ms after bloomguard's release (held " + heldMs + " ms; lease 30 s)");
  }

  @Test
  void bloomguardWithTheWrongCaFailsWithEtls() {
    Path other = ca.resolveSibling("other-ca.crt");
    assertTrue(Files.isReadable(other), other + " (scripts/tls-certs.sh makes it next to ca.crt)");
    Cli.Result r = cli.run("--tls-ca-file", other.toString(), "info", "interop:tls:any").expect(2);
    assertTrue(r.err().contains("BG_ETLS"), r.toString());
    // and the right CA with a name the certificate is not for: the host is checked too
    r = tlsCli(null, "--tls-server-name", "other.example", "info", "interop:tls:any").expect(2);
    assertTrue(r.err().contains("BG_ETLS"), r.toString());
    // positive twin: the same command with the right CA gets past TLS (BG_ENOTINIT: no such filter)
    r = tlsCli(null, "info", "interop:tls:any").expect(2);
    assertFalse(r.err().contains("BG_ETLS"), r.toString());
  }

  @Test
  void redissonWithoutTheTestCaCannotConnect() {
    Config cfg = new Config();
    // the JDK's default trust store does not hold the test CA
    cfg.useSingleServer().setAddress(url).setConnectionMinimumIdleSize(1).setConnectionPoolSize(1)
        .setConnectTimeout(3000).setRetryAttempts(0);
    long t0 = System.nanoTime();
    Exception e = assertThrows(Exception.class, () -> Redisson.create(cfg).shutdown());
    long took = ms(System.nanoTime() - t0);
    // the refusal must be the certificate check, not e.g. a connection refused
    StringBuilder chain = new StringBuilder();
    boolean pkix = false;
    for (Throwable t = e; t != null; t = t.getCause()) {
      chain.append(" <- ").append(t);
      if (t instanceof javax.net.ssl.SSLException || String.valueOf(t.getMessage()).contains("PKIX")) pkix = true;
    }
    System.err.println("[tls-interop] Redisson without the test CA refused in " + took + " ms:" + chain);
    assertTrue(pkix, "not refused by the TLS certificate check:" + chain);
  }
}
