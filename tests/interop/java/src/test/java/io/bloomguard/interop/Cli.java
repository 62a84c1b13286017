package io.bloomguard.interop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs the bloomguard command against the test server. */
final class Cli {
  static final ObjectMapper JSON = new ObjectMapper();

  /** Exit status, standard output and standard error of one run. */
  record Result(int rc, String out, String err, List<String> args) {
    JsonNode json() {
      try {
        return JSON.readTree(out);
      } catch (IOException e) {
        throw new AssertionError("not JSON: " + this, e);
      }
    }

    Result expect(int want) {
      if (rc != want) throw new AssertionError("expected exit " + want + ": " + this);
      return this;
    }

    @Override
    public String toString() {
      String o = out.length() > 400 ? out.substring(0, 400) + "..." : out;
      return "bloomguard " + args + " -> exit " + rc + ", stdout: " + o + ", stderr: " + err;
    }
  }

  private final String url;
  private final String bin;

  Cli(String url) {
    this.url = url;
    this.bin = Env.cli().toString();
  }

  Result run(byte[] stdin, String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(bin);
    cmd.add("--url");
    cmd.add(url);
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().remove("BLOOMGUARD_URL");
    pb.environment().remove("BLOOMGUARD_PASSWORD");
    try {
      Process p = pb.start();
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      Thread to = pump(p.getInputStream(), out);
      Thread te = pump(p.getErrorStream(), err);
      try (OutputStream in = p.getOutputStream()) {
        if (stdin != null) in.write(stdin);
      } catch (IOException e) {
        // the command may exit before reading everything (usage errors); its status tells
      }
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new AssertionError("bloomguard " + List.of(args) + " did not finish in 120 s");
      }
      to.join(10_000);
      te.join(10_000);
      return new Result(p.exitValue(), out.toString(StandardCharsets.UTF_8),
          err.toString(StandardCharsets.UTF_8), List.of(args));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  Result run(String... args) {
    return run(null, args);
  }

  /**
   * Starts the command and returns at once: the caller writes its stdin (and closes it) and
   * reads its output; stderr goes to stdout's stream.
   */
  Process start(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(bin);
    cmd.add("--url");
    cmd.add(url);
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().remove("BLOOMGUARD_URL");
    pb.environment().remove("BLOOMGUARD_PASSWORD");
    try {
      return pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** One item per line, UTF-8, each line ended by '\n'. */
  static byte[] lines(Collection<String> items) {
    StringBuilder sb = new StringBuilder();
    for (String s : items) sb.append(s).append('\n');
    return sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static Thread pump(InputStream in, ByteArrayOutputStream to) {
    Thread t = new Thread(() -> {
      try (in) {
        in.transferTo(to);
      } catch (IOException e) {
        // process went away
      }
    });
    t.setDaemon(true);
    t.start();
    return t;
  }
}
