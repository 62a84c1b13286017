package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The Redisson compatibility vectors (tests/vectors, computed by Redisson's own code) through the
 * Java binding: indexes set per item, sizing and refusals, and a bitmap and config byte for byte.
 * The JSON is read with patterns over its one-row-per-line layout (no JSON library at test time).
 */
class VectorsTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient();
    static final HexFormat HEX = HexFormat.of();

    static String vectors(String file) throws Exception {
        Path p = Path.of(System.getProperty("bloomguard.repo", "../.."), "tests", "vectors", file);
        return Files.readString(p, StandardCharsets.UTF_8);
    }

    @Test
    void hashIndexes() throws Exception {
        String json = vectors("redisson_hash_vectors.json");
        Matcher m = Pattern.compile("\"text\": (null|\"(?:[^\"\\\\]|\\\\.)*\").*?\"item_hex\": \"([0-9a-f]*)\".*?"
                                    + "\"n=1000000,p=0.01\": \\[([0-9, ]*)\\]", Pattern.DOTALL).matcher(json);
        int cases = 0;
        while (m.find()) {
            byte[] item = HEX.parseHex(m.group(2));
            TreeSet<Long> idx = new TreeSet<>();
            for (String s : m.group(3).split(",\\s*"))
                idx.add(Long.parseLong(s.trim()));
            String name = "vec:" + cases;
            try (Filter f = env.client().filter(name)) {
                f.init(1_000_000, 0.01);
                assertEquals(new Info(9585058, 7, 1_000_000, 0.01), f.info());
                f.add(item);
                for (long i : idx)
                    assertEquals(1L, env.redis().call("GETBIT", name, i), "case " + cases + " index " + i);
                assertEquals((long) idx.size(), env.redis().call("BITCOUNT", name), "case " + cases);
                assertTrue(f.contains(item));
                if (!m.group(1).equals("null")) {
                    // the same item given as a String: UTF-8, the same bits
                    String text = new String(item, StandardCharsets.UTF_8);
                    try (Filter g = env.client().filter(name + ":s")) {
                        g.init(1_000_000, 0.01);
                        g.add(text);
                        assertArrayEquals((byte[]) env.redis().call("GET", name), (byte[]) env.redis().call("GET", name + ":s"),
                                          "case " + cases);
                        g.delete();
                    }
                }
                f.delete();
            }
            cases++;
        }
        assertEquals(43, cases, "every case of the file was read");
    }

    @Test
    void sizingAndRefusals() throws Exception {
        String json = vectors("redisson_params.json");
        Matcher m = Pattern.compile("\\{\"n\": (\\d+), \"p\": \"([^\"]+)\".*?\"size\": (\\d+), \"k\": (\\d+).*?"
                                    + "\"tryInit\": \"([^\"]+)\"").matcher(json);
        int rows = 0, refused = 0;
        while (m.find()) {
            long n = Long.parseLong(m.group(1));
            double p = Double.parseDouble(m.group(2));
            try (Filter f = env.client().filter("params:" + rows)) {
                if (m.group(5).equals("ok")) {
                    assertTrue(f.init(n, p));
                    Info i = f.info();
                    assertEquals(Long.parseLong(m.group(3)), i.size(), "n=" + n + " p=" + p);
                    assertEquals(Integer.parseInt(m.group(4)), i.hashIterations(), "n=" + n + " p=" + p);
                } else {
                    assertThrows(BloomGuardException.BadParams.class, () -> f.init(n, p), "n=" + n + " p=" + p);
                    assertThrows(BloomGuardException.NotInitialized.class, f::info, "nothing was written");
                    refused++;
                }
            }
            rows++;
        }
        assertEquals(46, rows);
        assertEquals(7, refused);
    }

    @Test
    void bitmapAndConfigByteForByte() throws Exception {
        String json = vectors("redisson_bitmap_example.json");
        List<String> texts = new ArrayList<>();
        Matcher t = Pattern.compile("\\{\"text\": \"([^\"]*)\"").matcher(json);
        while (t.find())
            texts.add(t.group(1));
        assertEquals(5, texts.size(), texts.toString());
        Matcher hex = Pattern.compile("\"bitmap_redis_hex\": \"([0-9a-f]+)\"").matcher(json);
        assertTrue(hex.find());
        try (Filter f = env.client().filter("myfilter")) {
            f.init(100, 0.01);
            for (String s : texts)
                f.add(s);
            assertEquals(hex.group(1), HEX.formatHex((byte[]) env.redis().call("GET", "myfilter")));
        }
        @SuppressWarnings("unchecked")
        List<Object> h = (List<Object>) env.redis().call("HGETALL", "{myfilter}:config");
        java.util.Map<String, String> cfg = new java.util.HashMap<>();
        for (int i = 0; i < h.size(); i += 2)
            cfg.put(new String((byte[]) h.get(i), StandardCharsets.UTF_8), new String((byte[]) h.get(i + 1),
                                                                                   StandardCharsets.UTF_8));
        assertEquals(java.util.Map.of("size", "958", "hashIterations", "7", "expectedInsertions", "100",
                                      "falseProbability", "0.01"), cfg);
    }
}
