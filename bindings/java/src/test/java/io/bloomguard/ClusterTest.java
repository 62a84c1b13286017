package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A 6-node Redis Cluster (scripts/cluster.sh: 3 masters, 3 replicas, stopped by their pids in
 * teardown): filters on different masters through one client, blocking and async, a rotation,
 * and the name Redisson would split over two slots refused.
 */
class ClusterTest {
    static Path dir;
    static String seeds;
    static Client client;

    static Path script() {
        return Path.of(System.getProperty("bloomguard.repo", "../.."), "scripts", "cluster.sh");
    }

    @BeforeAll
    static void up() throws Exception {
        Path parent = Files.createTempDirectory("bg-java-cluster-");
        dir = parent.resolve("nodes");
        Process p = new ProcessBuilder("bash", script().toString(), "start", dir.toString())
            .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        seeds = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertEquals(0, p.waitFor(), "scripts/cluster.sh start failed");
        assertTrue(seeds.startsWith("redis://"), seeds);
        client = Client.open(seeds, Client.Options.builder().commandTimeout(java.time.Duration.ofSeconds(30))
                                        .build());
    }

    @AfterAll
    static void down() throws Exception {
        if (client != null)
            client.close();
        if (dir != null) {
            Process p = new ProcessBuilder("bash", script().toString(), "stop", dir.toString()).inheritIO().start();
            assertEquals(0, p.waitFor(), "scripts/cluster.sh stop failed");
            Files.deleteIfExists(dir.getParent());
        }
    }

    @Test
    void filtersOnEveryMaster() throws Exception {
        // 12 names spread over the slots, so over the masters (the client routes each to its own)
        for (int i = 0; i < 12; i++) {
            try (Filter f = client.filter("cl:" + i)) {
                f.init(1000, 0.01);
                List<String> items = FilterTest.items("i" + i + "-", 300);
                assertEquals(300, f.addMany(items));
                for (boolean b : f.containsMany(items))
                    assertTrue(b);
                assertTrue(f.containsAsync(items.get(7)).get(30, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void aRotationInTheCluster() {
        try (Filter f = client.filter("cl:rot")) {
            f.init(1000, 0.01);
            f.add("kept");
            f.rotate(5000, 0.001, Strategy.SWAP, r -> r.add("kept"));
            assertTrue(f.contains("kept"));
            assertEquals(5000, f.info().expectedInsertions());
        }
    }

    @Test
    void aNameOnTwoSlotsIsRefused() {
        var e = assertThrows(BloomGuardException.BadName.class, () -> client.filter("a{}b"));
        assertFalse(e.getMessage().isEmpty());
    }
}
