package io.bloomguard.interop;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A bare RESP2 connection to one node, for what neither Redisson nor the CLI shows: which node
 * owns a slot (CLUSTER SLOTS / KEYSLOT), who is subscribed where (PUBSUB SHARDNUMSUB / NUMSUB),
 * and raw SUBSCRIBE / SSUBSCRIBE observers. An independent witness: it goes through no client
 * library under test. Replies: String (simple and bulk), Long, List, null, or {@link Err}.
 */
final class Resp implements AutoCloseable {
  /** An error reply. */
  record Err(String message) {}

  final String host;
  final int port;
  private final Socket sock;
  private final InputStream in;
  private final OutputStream out;

  Resp(String hostPort) {
    int colon = hostPort.lastIndexOf(':');
    this.host = hostPort.substring(0, colon);
    this.port = Integer.parseInt(hostPort.substring(colon + 1));
    try {
      sock = new Socket();
      sock.connect(new InetSocketAddress(host, port), 5000);
      sock.setSoTimeout(10_000);
      sock.setTcpNoDelay(true);
      in = new BufferedInputStream(sock.getInputStream());
      out = sock.getOutputStream();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot connect to " + hostPort, e);
    }
  }

  String addr() {
    return host + ":" + port;
  }

  /** Sends one command and returns its reply; an error reply fails the test. */
  Object call(String... args) {
    send(args);
    Object r = read();
    if (r instanceof Err e) throw new AssertionError(addr() + " " + List.of(args) + " -> " + e.message());
    return r;
  }

  /** Sends one command and returns its reply, an {@link Err} included. */
  Object callRaw(String... args) {
    send(args);
    return read();
  }

  long callLong(String... args) {
    return (Long) call(args);
  }

  void send(String... args) {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
    for (String a : args) {
      byte[] v = a.getBytes(StandardCharsets.UTF_8);
      b.writeBytes(("$" + v.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
      b.writeBytes(v);
      b.writeBytes("\r\n".getBytes(StandardCharsets.US_ASCII));
    }
    try {
      out.write(b.toByteArray());
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(addr(), e);
    }
  }

  /** Reads one reply (blocking up to the socket timeout). */
  Object read() {
    try {
      return parse();
    } catch (IOException e) {
      throw new UncheckedIOException(addr(), e);
    }
  }

  /** Reads one reply within ms, or returns null if none came (for subscribers). */
  Object poll(int ms) {
    try {
      sock.setSoTimeout(Math.max(1, ms));
      try {
        return parse();
      } catch (SocketTimeoutException e) {
        return null;
      } finally {
        sock.setSoTimeout(10_000);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(addr(), e);
    }
  }

  private String line() throws IOException {
    StringBuilder sb = new StringBuilder();
    for (;;) {
      int c = in.read();
      if (c < 0) throw new IOException("connection closed");
      if (c == '\r') {
        if (in.read() != '\n') throw new IOException("bad line end");
        return sb.toString();
      }
      sb.append((char) c);
    }
  }

  private Object parse() throws IOException {
    int t = in.read();
    if (t < 0) throw new IOException("connection closed");
    String l = line();
    switch (t) {
      case '+':
        return l;
      case '-':
        return new Err(l);
      case ':':
        return Long.parseLong(l);
      case '$': {
        int n = Integer.parseInt(l);
        if (n < 0) return null;
        byte[] v = in.readNBytes(n);
        if (v.length != n) throw new IOException("short bulk");
        line();
        return new String(v, StandardCharsets.UTF_8);
      }
      case '*': {
        int n = Integer.parseInt(l);
        if (n < 0) return null;
        List<Object> a = new ArrayList<>(n);
        for (int i = 0; i < n; i++) a.add(parse());
        return a;
      }
      default:
        throw new IOException("unexpected RESP type " + (char) t);
    }
  }

  @Override
  public void close() {
    try {
      sock.close();
    } catch (IOException e) {
      // going away anyway
    }
  }
}
