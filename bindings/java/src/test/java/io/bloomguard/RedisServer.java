package io.bloomguard;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real redis-server for the tests ($BG_REDIS_SERVER or the one on PATH) on a free 127.0.0.1
 * port, no persistence, stopped by its pid in {@link #close()}; and a tiny RESP2 client to look
 * at what the binding wrote.
 */
final class RedisServer implements AutoCloseable {
    final int port;
    private final Process proc;
    private final Path dir;
    private String password; // sent with AUTH before each command of call()

    private RedisServer(int port, Process proc, Path dir) {
        this.port = port;
        this.proc = proc;
        this.dir = dir;
    }

    String url() {
        return "redis://127.0.0.1:" + port;
    }

    /** A server requiring this password (requirepass) of the default user. */
    static RedisServer startWithPassword(String password) throws Exception {
        RedisServer r = start("--requirepass", password);
        r.password = password;
        return r;
    }

    /**
     * A TLS-only server (plain port off) with the certificates of scripts/tls-certs.sh in certDir
     * (server.crt for localhost and 127.0.0.1, signed by ca.crt; no client certificate required).
     * call() does not speak TLS: it cannot be used on this one.
     */
    static RedisServer startTls(Path certDir) throws Exception {
        return start(port -> List.of("--port", "0", "--tls-port", Integer.toString(port),
                                     "--tls-cert-file", certDir.resolve("server.crt").toString(),
                                     "--tls-key-file", certDir.resolve("server.key").toString(),
                                     "--tls-ca-cert-file", certDir.resolve("ca.crt").toString(),
                                     "--tls-auth-clients", "no"), true);
    }

    static RedisServer start(String... extra) throws Exception {
        return start(port -> List.of(extra), false);
    }

    private static RedisServer start(java.util.function.IntFunction<List<String>> extra, boolean tls)
        throws Exception {
        String bin = System.getenv().getOrDefault("BG_REDIS_SERVER", "redis-server");
        Exception last = null;
        for (int attempt = 0; attempt < 5; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", 0));
                port = s.getLocalPort();
            }
            Path dir = Files.createTempDirectory("bg-java-redis-");
            List<String> cmd = new ArrayList<>(List.of(bin, "--port", Integer.toString(port), "--bind", "127.0.0.1",
                                                       "--save", "", "--appendonly", "no", "--dir", dir.toString()));
            cmd.addAll(extra.apply(port));
            Process p = new ProcessBuilder(cmd)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("redis.log").toFile())
                .start();
            RedisServer r = new RedisServer(port, p, dir);
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (System.nanoTime() < end && p.isAlive()) {
                if (tls) { // listening is all a plain socket can tell
                    try (Socket probe = new Socket("127.0.0.1", port)) {
                        return r;
                    } catch (IOException e) {
                        last = e;
                    }
                    Thread.sleep(20);
                    continue;
                }
                try {
                    if ("PONG".equals(r.call("PING")))
                        return r;
                } catch (IOException e) {
                    if (e.getMessage() != null && e.getMessage().contains("NOAUTH"))
                        return r; // up, and asking for the password
                    last = e;
                }
                Thread.sleep(20);
            }
            r.close(); // the port was taken between the probe and the start: try another
        }
        throw new IllegalStateException("redis-server did not start", last);
    }

    /** Stops the server by its pid (SIGTERM, then SIGKILL) and removes its folder. */
    @Override
    public void close() throws Exception {
        proc.destroy();
        if (!proc.waitFor(10, TimeUnit.SECONDS)) {
            proc.destroyForcibly();
            proc.waitFor();
        }
        try (var s = Files.walk(dir)) {
            s.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
        }
    }

    /**
     * CLIENT PAUSE ms ALL on a connection of its own; close() sends CLIENT UNPAUSE on the same one
     * (a fresh connection's command would wait out the pause).
     */
    AutoCloseable pause(long ms) throws IOException {
        Socket s = new Socket("127.0.0.1", port);
        s.setSoTimeout(10_000);
        OutputStream out = s.getOutputStream();
        InputStream in = s.getInputStream();
        if (password != null) {
            out.write(encode("AUTH", password));
            read(in);
        }
        out.write(encode("CLIENT", "PAUSE", Long.toString(ms), "ALL"));
        out.flush();
        read(in);
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        return () -> {
            if (done.getAndSet(true))
                return; // idempotent
            try (s) {
                out.write(encode("CLIENT", "UNPAUSE"));
                out.flush();
                read(in);
            }
        };
    }

    /** One command on a fresh connection: a String, Long, byte[] (bulk), List or null. */
    Object call(Object... args) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(10_000);
            OutputStream out = s.getOutputStream();
            if (password != null) {
                out.write(encode("AUTH", password));
                out.flush();
                read(s.getInputStream());
            }
            out.write(encode(args));
            out.flush();
            return read(s.getInputStream());
        }
    }

    private static byte[] encode(Object... args) throws IOException {
        {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            b.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            for (Object a : args) {
                byte[] v = a instanceof byte[] ? (byte[]) a : a.toString().getBytes(StandardCharsets.UTF_8);
                b.write(("$" + v.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
                b.write(v);
                b.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            return b.toByteArray();
        }
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != '\n') {
            if (c < 0)
                throw new IOException("connection closed by the server");
            if (c != '\r')
                b.write(c);
        }
        return b.toString(StandardCharsets.UTF_8);
    }

    private static Object read(InputStream in) throws IOException {
        String l = line(in);
        char kind = l.charAt(0);
        String body = l.substring(1);
        switch (kind) {
            case '+': return body;
            case '-': throw new IOException("server error: " + body);
            case ':': return Long.parseLong(body);
            case '$': {
                int n = Integer.parseInt(body);
                if (n < 0)
                    return null;
                byte[] v = in.readNBytes(n);
                in.readNBytes(2);
                return v;
            }
            case '*': {
                int n = Integer.parseInt(body);
                if (n < 0)
                    return null;
                List<Object> out = new ArrayList<>();
                for (int i = 0; i < n; i++)
                    out.add(read(in));
                return out;
            }
            default: throw new IOException("unexpected reply: " + l);
        }
    }
}
