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
 * </ul>
 */
final class Env {
  private static String url;
  private static Process ownServer;
  private static Path ownDir;

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
