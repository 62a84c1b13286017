package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/** Redisson's RBloomFilter and the binding on the same filters, in one JVM, both ways. */
class RedissonInteropTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient();
    static RedissonClient redisson;

    @BeforeAll
    static void up() throws Exception {
        Config cfg = new Config();
        cfg.useSingleServer().setAddress(env.redis().url()).setConnectionMinimumIdleSize(1).setConnectionPoolSize(4);
        redisson = Redisson.create(cfg);
    }

    // before the extension closes the client and the server
    @AfterAll
    static void down() throws Exception {
        if (redisson != null)
            redisson.shutdown();
    }

    @Test
    void redissonWritesTheBindingReads() {
        RBloomFilter<String> rb = redisson.getBloomFilter("interop:r2j", StringCodec.INSTANCE);
        assertTrue(rb.tryInit(10_000, 0.01));
        List<String> present = FilterTest.items("item-", 10_000), absent = FilterTest.items("none-", 10_000);
        rb.add(present);
        try (Filter f = env.client().filter("interop:r2j")) {
            boolean[] got = f.containsMany(present);
            for (int i = 0; i < got.length; i++)
                assertTrue(got[i], present.get(i));
            boolean[] no = f.containsMany(absent);
            int disagree = 0;
            for (int i = 0; i < no.length; i += 10) // Redisson asks one by one: every 10th
                if (no[i] != rb.contains(absent.get(i)))
                    disagree++;
            assertEquals(0, disagree);
            assertEquals(rb.count(), f.count());
        }
    }

    @Test
    void theBindingWritesRedissonReadsAndTheBitmapsAreTheSame() throws Exception {
        List<String> items = FilterTest.items("x-", 5_000);
        try (Filter f = env.client().filter("interop:j2r")) {
            f.init(5_000, 0.001);
            f.addMany(items);
        }
        RBloomFilter<String> rb = redisson.getBloomFilter("interop:j2r", StringCodec.INSTANCE);
        assertEquals(5_000, rb.getExpectedInsertions());
        assertEquals(0.001, rb.getFalseProbability());
        for (int i = 0; i < items.size(); i += 5)
            assertTrue(rb.contains(items.get(i)), items.get(i));
        RBloomFilter<String> twin = redisson.getBloomFilter("interop:j2r-twin", StringCodec.INSTANCE);
        twin.tryInit(5_000, 0.001);
        twin.add(items);
        assertArrayEquals((byte[]) env.redis().call("GET", "interop:j2r"), (byte[]) env.redis().call("GET", "interop:j2r-twin"));
    }

    @Test
    void rawBytesLikeByteArrayCodec() {
        RBloomFilter<byte[]> rb = redisson.getBloomFilter("interop:bytes", ByteArrayCodec.INSTANCE);
        rb.tryInit(1000, 0.01);
        byte[] a = {0, (byte) 0xff, 0x10}, b = "\u00e9".getBytes(StandardCharsets.UTF_8);
        rb.add(a);
        try (Filter f = env.client().filter("interop:bytes")) {
            assertTrue(f.contains(a));
            assertTrue(f.add(b));
            assertTrue(f.contains("\u00e9"));
        }
        assertTrue(rb.contains(b));
    }

    /**
     * Rotations that change (n, p): the binding's reader answers right throughout; a long-lived
     * Redisson object (the documented contrast, and this check's own negative control) does not.
     */
    @Test
    void throughRotationsTheBindingReaderStaysRightAndALongLivedRedissonObjectDoesNot() throws Exception {
        String name = "interop:rot";
        List<String> present = FilterTest.items("p-", 2_000);
        List<String> batch = present.subList(0, 100);
        try (Filter f = env.client().filter(name)) {
            f.init(10_000, 0.01);
            f.addMany(present);
            RBloomFilter<String> rb = redisson.getBloomFilter(name, StringCodec.INSTANCE);
            assertTrue(rb.contains(batch.get(0)), "the Redisson object read the first config");
            long bgFalse = 0, bgChecks = 0, rFalse = 0, rChecks = 0;
            for (int i = 0; i < 4; i++) {
                long n = RotationTest.N[i];
                f.rotate(n, RotationTest.P[i], Strategy.SWAP, r -> r.addMany(present));
                for (boolean b : f.containsMany(batch)) {
                    bgChecks++;
                    bgFalse += b ? 0 : 1;
                }
                for (String s : batch) {
                    rChecks++;
                    rFalse += rb.contains(s) ? 0 : 1;
                }
            }
            System.out.println("[interop] after (n, p)-changing rotations: binding " + bgFalse + " false of "
                               + bgChecks + ", long-lived Redisson object " + rFalse + " false of " + rChecks);
            assertEquals(0, bgFalse);
            assertTrue(rFalse > 0, "the long-lived Redisson object answered right: the check caught nothing");
        }
    }
}
