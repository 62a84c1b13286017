package io.bloomguard.interop;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Where the tests find the server and the CLI.
 *
 * <ul>
 *   <li>Server: system property {@code bloomguard.redis.url}, else env {@code BLOOMGUARD_REDIS_URL};
 *       if neither is set, a redis-server ({@code BG_REDIS_SERVER} or redis-server on PATH) is
 *       started on a free 127.0.0.1 port for the whole run and stopped (by its own process
 *       handle) when the JVM exits.</li>
 *   <li>CLI: system property {@code bloomguard.cli}, else env {@code BLOOMGUARD_CLI}, else
 *       {@code build/bloomguard} at the top of the repository.</li>
 *   <li>Cluster (ClusterInteropTest): system property {@code bloomguard.cluster.seeds}, else env
 *       {@code BLOOMGUARD_CLUSTER_SEEDS}: {@code host:port,host:port,...} of a Redis Cluster's
 *       nodes ({@code redis://} in front is allowed); {@code none} says the caller could not start
 *       one (tests/interop/run.sh does that). If neither is set, {@code scripts/cluster.sh start}
 *       runs once for the whole JVM and {@code scripts/cluster.sh stop} (by pid) at its exit.</li>
 *   <li>TLS (TlsInteropTest): system property {@code bloomguard.tls.url}, else env
 *       {@code BLOOMGUARD_TLS_URL}: a {@code rediss://} URL of a TLS-only server; and
 *       {@code bloomguard.tls.ca} / {@code BLOOMGUARD_TLS_CA}: the PEM CA its certificate is
 *       signed by, in a directory made by scripts/tls-certs.sh (the test also uses its
 *       {@code other-ca.crt}). {@code none} says the caller could not start one; unset means
 *       none was given. Nothing is started here: tests/interop/run.sh starts it.</li>
 * </ul>
 */
final class Env {
  private static String url;
  private static Process ownServer;
  private static Path ownDir;
  private static List<String> clusterSeeds;
  private static String clusterProblem;
  private static Path ownClusterDir;

  private Env() {}

  private static String setting(String property, String env) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank() || v.startsWith("${")) v = System.getenv(env);
    return v == null || v.isBlank() ? null : v.trim();
  }

  static synchronized String redisUrl() {
    if (url == null) {
      url = setting("bloomguard.redis.url", "BLOOMGUARD_REDIS_URL");
      if (url == null) url = startOwnServer();
    }
    return url;
  }

  /**
   * The cluster's node addresses ("127.0.0.1:P"), or null when there is none; then
   * {@link #clusterProblem()} says why.
   */
  static synchronized List<String> clusterSeeds() {
    if (clusterSeeds != null || clusterProblem != null) return clusterSeeds;
    String v = setting("bloomguard.cluster.seeds", "BLOOMGUARD_CLUSTER_SEEDS");
    if (v == null) {
      v = startOwnCluster();
      if (v == null) return null;
    }
    if (v.equals("none")) {
      clusterProblem = "the caller (tests/interop/run.sh) could not start a Redis Cluster: see its output";
      return null;
    }
    if (v.startsWith("redis://")) v = v.substring("redis://".length());
    List<String> l = new java.util.ArrayList<>();
    for (String s : v.split(",")) if (!s.isBlank()) l.add(s.trim());
    if (l.isEmpty()) {
      clusterProblem = "bloomguard.cluster.seeds is empty";
      return null;
    }
    clusterSeeds = List.copyOf(l);
    return clusterSeeds;
  }

  /** The TLS server's rediss:// URL, or null when there is none; then {@link #tlsProblem()} says why. */
  static String tlsUrl() {
    return tlsProblem() == null ? setting("bloomguard.tls.url", "BLOOMGUARD_TLS_URL") : null;
  }

  /** The PEM CA file the TLS server's certificate is signed by (valid when {@link #tlsUrl()} is not null). */
  static Path tlsCa() {
    return Path.of(setting("bloomguard.tls.ca", "BLOOMGUARD_TLS_CA")).toAbsolutePath();
  }

  /** Why there is no TLS server to test against, or null when there is one. */
  static String tlsProblem() {
    String u = setting("bloomguard.tls.url", "BLOOMGUARD_TLS_URL");
    String ca = setting("bloomguard.tls.ca", "BLOOMGUARD_TLS_CA");
    if (u == null) return "no TLS server given (bloomguard.tls.url / BLOOMGUARD_TLS_URL; tests/interop/run.sh starts one)";
    if (u.equals("none")) return "the caller (tests/interop/run.sh) could not start a TLS redis-server: see its output";
    if (!u.startsWith("rediss://")) return "bloomguard.tls.url must be a rediss:// URL, not " + u;
    if (ca == null || ca.equals("none")) return "no test CA given (bloomguard.tls.ca / BLOOMGUARD_TLS_CA)";
    if (!Files.isReadable(Path.of(ca))) return "the test CA " + ca + " cannot be read";
    return null;
  }

  static synchronized String clusterProblem() {
    return clusterProblem;
  }

  /** scripts/cluster.sh start in a temp dir; returns its seeds ("redis://h:p,...") or null. */
  private static String startOwnCluster() {
    Path script = Path.of("").toAbsolutePath().resolve("../../../scripts/cluster.sh").normalize();
    if (!Files.isRegularFile(script)) {
      clusterProblem = "no bloomguard.cluster.seeds given and " + script + " not found";
      return null;
    }
    try {
      Path dir = Files.createTempDirectory("bg-interop-cluster");
      Path log = dir.resolveSibling(dir.getFileName() + ".log");
      Path nodes = dir.resolve("nodes");  // cluster.sh wants a directory that does not exist yet
      Process p = new ProcessBuilder("bash", script.toString(), "start", nodes.toString())
          .redirectErrorStream(true).redirectOutput(log.toFile()).start();
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        clusterProblem = script + " start did not finish in 120 s; its output: " + log;
        return null;
      }
      if (p.exitValue() != 0 || !Files.isRegularFile(nodes.resolve("seeds"))) {
        clusterProblem = script + " start failed (exit " + p.exitValue() + "): "
            + Files.readString(log).trim();
        return null;
      }
      ownClusterDir = nodes;
      Runtime.getRuntime().addShutdownHook(new Thread(() -> stopOwnCluster(script, dir, log)));
      String seeds = Files.readString(nodes.resolve("seeds")).trim();
      System.err.println("[interop] started a Redis Cluster with " + script + ": " + seeds);
      return seeds;
    } catch (IOException e) {
      clusterProblem = "cannot run " + script + ": " + e;
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      clusterProblem = "interrupted while starting the cluster";
      return null;
    }
  }

  private static void stopOwnCluster(Path script, Path dir, Path log) {
    try {
      Process p = new ProcessBuilder("bash", script.toString(), "stop", ownClusterDir.toString())
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
      if (p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0) {
        Files.deleteIfExists(log);
        Files.deleteIfExists(dir);
      }
    } catch (IOException e) {
      // the JVM is exiting: nothing left to report to
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static Path cli() {
    String v = setting("bloomguard.cli", "BLOOMGUARD_CLI");
    Path p;
    if (v != null) {
      p = Path.of(v);
    } else {
      // tests/interop/java -> repository top
      p = Path.of("").toAbsolutePath().resolve("../../../build/bloomguard").normalize();
    }
    if (!Files.isExecutable(p)) {
      throw new IllegalStateException("bloomguard CLI not found or not executable: " + p
          + " (set BLOOMGUARD_CLI or -Dbloomguard.cli)");
    }
    return p.toAbsolutePath();
  }

  private static String startOwnServer() {
    String bin = System.getenv("BG_REDIS_SERVER");
    if (bin == null || bin.isBlank()) bin = "redis-server";
    try {
      ownDir = Files.createTempDirectory("bg-interop-redis");
      for (int attempt = 0; attempt < 5; attempt++) {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
          port = s.getLocalPort();
        }
        ProcessBuilder pb = new ProcessBuilder(List.of(bin, "--port", Integer.toString(port),
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", ownDir.toString(), "--daemonize", "no"));
        pb.redirectErrorStream(true);
        pb.redirectOutput(ownDir.resolve("redis.log").toFile());
        Process p = pb.start();
        if (waitForPort(port, p, Duration.ofSeconds(10))) {
          ownServer = p;
          Runtime.getRuntime().addShutdownHook(new Thread(Env::stopOwnServer));
          System.err.println("[interop] started redis-server pid " + p.pid() + " on port " + port);
          return "redis://127.0.0.1:" + port;
        }
        p.destroy();
        p.waitFor(5, TimeUnit.SECONDS);
      }
    } catch (IOException e) {
      throw new IllegalStateException("cannot start redis-server (" + bin + "): " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    throw new IllegalStateException("cannot start redis-server (" + bin + ") on a free port");
  }

  private static boolean waitForPort(int port, Process p, Duration max) throws InterruptedException {
    long deadline = System.nanoTime() + max.toNanos();
    while (System.nanoTime() < deadline) {
      if (!p.isAlive()) return false;
      try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
        s.getOutputStream().write("PING\r\n".getBytes());
        byte[] buf = new byte[7];
        int n = s.getInputStream().read(buf);
        if (n > 0 && new String(buf, 0, n).startsWith("+PONG")) return true;
      } catch (IOException e) {
        // not up yet
      }
      Thread.sleep(50);
    }
    return false;
  }

  private static void stopOwnServer() {
    Process p = ownServer;
    if (p == null) return;
    p.destroy();
    try {
      if (!p.waitFor(5, TimeUnit.SECONDS)) p.destroyForcibly();
    } catch (InterruptedException e) {
      p.destroyForcibly();
    }
  }
}
