package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class FilterTest {
    @RegisterExtension
    static final RedisExtension env =
        RedisExtension.withClient(url -> Client.open(url, Client.Options.builder().poolSize(4).build()));

    static List<String> items(String prefix, int n) {
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
            out.add(prefix + i);
        return out;
    }

    @Test
    void version() {
        assertTrue(Client.version().matches("\\d+\\.\\d+\\.\\d+.*"), Client.version());
        env.client().ping();
    }

    @Test
    void initAddContainsCountInfo() {
        try (Filter f = env.client().filter("api:basic")) {
            assertEquals("api:basic", f.name());
            assertTrue(f.init(10_000, 0.01));
            assertFalse(f.init(5, 0.5), "tryInit keeps the config already there");
            assertTrue(f.add("alice"));
            assertFalse(f.add("alice"));
            assertTrue(f.contains("alice"));
            assertFalse(f.contains("bob"));
            assertTrue(f.add(new byte[] {0, 1, 2, (byte) 0xff}));
            assertTrue(f.contains(new byte[] {0, 1, 2, (byte) 0xff}));
            assertTrue(f.add(""), "the empty item is an item");
            assertTrue(f.contains(""));
            Info i = f.info();
            assertEquals(95850, i.size());
            assertEquals(7, i.hashIterations());
            assertEquals(10_000, i.expectedInsertions());
            assertEquals(0.01, i.falseProbability());
            assertEquals(3, f.count());
        }
    }

    @Test
    void batches() {
        try (Filter f = env.client().filter("api:batch")) {
            f.init(100_000, 0.001);
            List<String> in = items("in-", 5000);
            assertEquals(5000, f.addMany(in));
            boolean[] got = f.containsMany(in);
            assertEquals(5000, got.length);
            for (int i = 0; i < got.length; i++)
                assertTrue(got[i], in.get(i));
            boolean[] out = f.containsMany(items("out-", 5000));
            int fp = 0;
            for (boolean b : out)
                fp += b ? 1 : 0;
            assertTrue(fp < 50, "false positives " + fp);
            List<byte[]> raw = List.of("x".getBytes(StandardCharsets.UTF_8), new byte[0], new byte[300]);
            assertEquals(3, f.addManyBytes(raw));
            assertArrayEquals(new boolean[] {true, true, true}, f.containsManyBytes(raw));
            assertEquals(0, f.containsMany(List.of()).length);
            assertEquals(0, f.addMany(List.of()));
        }
    }

    @Test
    void stringsAreUtf8LikeRedissonStringCodec() throws Exception {
        try (Filter f = env.client().filter("api:utf8")) {
            f.init(100, 0.01);
            f.add("h\u00e9llo \ud83d\ude00");
            assertTrue(f.contains("h\u00e9llo \ud83d\ude00".getBytes(StandardCharsets.UTF_8)));
        }
    }

    @Test
    void deleteExpirePersist() throws Exception {
        try (Filter f = env.client().filter("api:ttl")) {
            f.init(100, 0.01);
            f.add("a");
            assertTrue(f.expire(Duration.ofSeconds(100)));
            long pttl = (Long) env.redis().call("PTTL", "api:ttl");
            assertTrue(pttl > 90_000 && pttl <= 100_000, "pttl " + pttl);
            assertTrue(f.persist());
            assertEquals(-1L, env.redis().call("PTTL", "api:ttl"));
            assertTrue(f.delete());
            assertFalse(f.delete());
            assertEquals(0L, env.redis().call("EXISTS", "api:ttl", "{api:ttl}:config"));
        }
    }

    @Test
    void hashTagName() throws Exception {
        try (Filter f = env.client().filter("a{tag}b")) {
            f.init(100, 0.01);
            assertEquals(1L, env.redis().call("EXISTS", "a{tag}b:config"));
        }
    }

    @Test
    void filtersKeepWorkingAfterTheirClientIsClosed() {
        Client c = Client.open(env.redis().url());
        Filter f = c.filter("api:outlives");
        c.close();
        assertTrue(c.isClosed());
        f.init(100, 0.01);
        f.add("x");
        assertTrue(f.contains("x"));
        f.close();
    }
}
