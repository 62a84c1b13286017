package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * TLS through the jar's native (OpenSSL linked in): a TLS-only redis-server with the test CA of
 * scripts/tls-certs.sh; the right CA works, the system's trust store and another CA are refused.
 */
class TlsTest {
    static Path certs;

    @RegisterExtension
    static final RedisExtension env = RedisExtension.server(TlsTest::start);

    static RedisServer start() throws Exception {
        certs = Files.createTempDirectory("bg-java-tls-");
        Path script = Path.of(System.getProperty("bloomguard.repo", "../.."), "scripts", "tls-certs.sh");
        Process p = new ProcessBuilder("bash", script.toString(), certs.toString()).inheritIO().start();
        assertEquals(0, p.waitFor(), "scripts/tls-certs.sh failed");
        return RedisServer.startTls(certs);
    }

    // (the extension stops the server after this: it has read its certificates at start)
    @AfterAll
    static void down() throws Exception {
        if (certs != null) {
            try (var s = Files.walk(certs)) {
                s.sorted((a, b) -> b.compareTo(a)).forEach(f -> f.toFile().delete());
            }
        }
    }

    String url() {
        return "rediss://127.0.0.1:" + env.redis().port;
    }

    @Test
    void theTestCa() {
        var o = Client.Options.builder().tlsCaFile(certs.resolve("ca.crt").toString()).build();
        try (Client c = Client.open(url(), o); Filter f = c.filter("tls:ok")) {
            f.init(100, 0.01);
            assertTrue(f.add("x"));
            assertTrue(f.contains("x"));
            assertTrue(f.containsAsync("x").join(), "the queue's connections are TLS too");
        }
    }

    @Test
    void aServerNameTheCertificateIsFor() {
        var o = Client.Options.builder().tlsCaFile(certs.resolve("ca.crt").toString()).tlsServerName("localhost")
            .connectAtOpen(true).build();
        try (Client c = Client.open(url(), o)) {
            c.ping();
        }
    }

    @Test
    void anUnknownCaIsRefused() {
        var system = Client.Options.builder().connectAtOpen(true).build();
        var e = assertThrows(BloomGuardException.TlsFailed.class, () -> Client.open(url(), system),
                             "the system's trust store does not hold the test CA");
        assertEquals(-21, e.code());
        var other = Client.Options.builder().tlsCaFile(certs.resolve("other-ca.crt").toString()).connectAtOpen(true)
            .build();
        assertThrows(BloomGuardException.TlsFailed.class, () -> Client.open(url(), other));
        var missing = Client.Options.builder().tlsCaFile(certs.resolve("missing.crt").toString()).build();
        var m = assertThrows(BloomGuardException.class, () -> Client.open(url(), missing));
        assertTrue(m.getMessage().contains("missing.crt"), m.getMessage());
    }

    @Test
    void verifyOffAcceptsAnyCertificate() {
        var o = Client.Options.builder().tlsVerify(false).connectAtOpen(true).build();
        try (Client c = Client.open(url(), o)) {
            c.ping();
        }
    }
}
