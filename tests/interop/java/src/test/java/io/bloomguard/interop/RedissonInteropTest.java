package io.bloomguard.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.redisson.Redisson;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Redisson's RBloomFilter (StringCodec) and the bloomguard CLI on the same filters: each side
 * reads what the other wrote, bit for bit (every item present, same count, same answers for items
 * never added) and writes the same config hash.
 */
class RedissonInteropTest {
  private static RedissonClient redisson;
  private static Cli cli;
  private final List<String> names = new ArrayList<>();

  @BeforeAll
  static void connect() {
    String url = Env.redisUrl();
    Config cfg = new Config();
    cfg.useSingleServer().setAddress(url).setConnectionMinimumIdleSize(1).setConnectionPoolSize(4);
    redisson = Redisson.create(cfg);
    cli = new Cli(url);
    System.err.println("[interop] server " + url + ", cli " + Env.cli());
  }

  @AfterAll
  static void disconnect() {
    if (redisson != null) redisson.shutdown();
  }

  @AfterEach
  void cleanup() {
    for (String n : names) bloom(n).delete();
    names.clear();
  }

  private String fresh(String what) {
    String n = "interop:" + what + ":" + UUID.randomUUID();
    names.add(n);
    return n;
  }

  private String freshTagged(String what) {
    String n = "interop:" + what + ":" + UUID.randomUUID().toString().substring(0, 8) + "{t"
        + UUID.randomUUID().toString().substring(0, 8) + "}tail";
    names.add(n);
    return n;
  }

  private static RBloomFilter<String> bloom(String name) {
    return redisson.getBloomFilter(name, StringCodec.INSTANCE);
  }

  private static String configKey(String name) {
    return name.contains("{") ? name + ":config" : "{" + name + "}:config";
  }

  private static Map<String, String> config(String name) {
    return new HashMap<>(redisson.<String, String>getMap(configKey(name), StringCodec.INSTANCE)
        .readAllMap());
  }

  private static List<String> items(int n, IntFunction<String> f) {
    List<String> l = new ArrayList<>(n);
    for (int i = 0; i < n; i++) l.add(f.apply(i));
    return l;
  }

  /** bloomguard contains over stdin (batches), --json: asserts every item present. */
  private static void assertAllPresentInBloomguard(String name, List<String> items) {
    Cli.Result r = cli.run(Cli.lines(items), "--json", "contains", name).expect(0);
    JsonNode j = r.json();
    assertEquals(items.size(), j.get("items").asLong(), r.toString());
    assertEquals(items.size(), j.get("present").asLong(), r.toString());
    assertEquals(0, j.get("absent").asLong(), r.toString());
  }

  /** Redisson contains, one by one and as a collection: asserts every item present. */
  private static void assertAllPresentInRedisson(String name, List<String> items) {
    RBloomFilter<String> bf = bloom(name);
    assertEquals(items.size(), bf.contains(items), "Redisson contains(collection)");
    for (int i = 0; i < items.size(); i += Math.max(1, items.size() / 200)) {
      assertTrue(bf.contains(items.get(i)), "Redisson contains " + items.get(i));
    }
  }

  /** Same answer from both sides for items never added (false positives included). */
  private static void assertSameAnswers(String name, List<String> probes) {
    JsonNode res = cli.run(Cli.lines(probes), "--json", "--verbose", "contains", name).json()
        .get("results");
    assertEquals(probes.size(), res.size());
    RBloomFilter<String> bf = bloom(name);
    int falsePositives = 0;
    for (int i = 0; i < probes.size(); i++) {
      JsonNode e = res.get(i);
      assertEquals(probes.get(i), e.get("item").asText());
      boolean r = bf.contains(probes.get(i));
      assertEquals(r, e.get("present").asBoolean(), "answer for " + probes.get(i));
      if (r) falsePositives++;
    }
    System.err.println("[interop] " + name + ": " + falsePositives + " false positives of "
        + probes.size() + " probes, identical on both sides");
  }

  private static long bloomguardCount(String name) {
    return cli.run("--json", "count", name).expect(0).json().get("count").asLong();
  }

  // (a) --------------------------------------------------------------------------------------
  @Test
  void redissonFilterIsReadByBloomguard() {
    String name = fresh("a");
    RBloomFilter<String> bf = bloom(name);
    assertTrue(bf.tryInit(50_000, 0.01));
    List<String> items = items(20_000, i -> "redisson-item-" + i);
    bf.add(items);
    assertAllPresentInBloomguard(name, items);
    long rc = bf.count();
    assertEquals(rc, bloomguardCount(name), "count(): Redisson vs bloomguard");
    assertTrue(Math.abs(rc - 20_000) < 600, "count near 20000: " + rc);
    assertSameAnswers(name, items(2_000, i -> "never-added-" + i));

    JsonNode info = cli.run("--json", "info", name).expect(0).json();
    assertEquals(bf.getSize(), info.get("size").asLong());
    assertEquals(bf.getHashIterations(), info.get("hashIterations").asInt());
    assertEquals(50_000, info.get("expectedInsertions").asLong());
    assertEquals(0.01, info.get("falseProbability").asDouble());
  }

  // (b) --------------------------------------------------------------------------------------
  @Test
  void bloomguardFilterIsReadByRedisson() {
    String name = fresh("b");
    JsonNode init = cli.run("--json", "init", name, "--expected", "50000", "--fpp", "0.01")
        .expect(0).json();
    assertTrue(init.get("created").asBoolean());
    List<String> items = items(20_000, i -> "bloomguard-item-" + i);
    JsonNode add = cli.run(Cli.lines(items), "--json", "add", name).expect(0).json();
    assertEquals(20_000, add.get("items").asLong());

    RBloomFilter<String> bf = bloom(name);
    assertFalse(bf.tryInit(50_000, 0.01), "Redisson sees the config bloomguard wrote");
    assertEquals(50_000, bf.getExpectedInsertions());
    assertEquals(0.01, bf.getFalseProbability());
    assertEquals(init.get("size").asLong(), bf.getSize());
    assertEquals(init.get("hashIterations").asInt(), bf.getHashIterations());
    assertAllPresentInRedisson(name, items);
    assertEquals(bloomguardCount(name), bf.count(), "count(): bloomguard vs Redisson");
    assertSameAnswers(name, items(2_000, i -> "not-in-b-" + i));
  }

  // both at once: items added by each side on one filter are seen by both -------------------
  @Test
  void mixedWritersOnOneFilter() {
    String name = fresh("mixed");
    assertTrue(bloom(name).tryInit(10_000, 0.001));
    List<String> viaRedisson = items(3_000, i -> "r-" + i);
    List<String> viaBloomguard = items(3_000, i -> "g-" + i);
    bloom(name).add(viaRedisson);
    cli.run(Cli.lines(viaBloomguard), "add", name).expect(0);
    List<String> all = new ArrayList<>(viaRedisson);
    all.addAll(viaBloomguard);
    assertAllPresentInBloomguard(name, all);
    assertAllPresentInRedisson(name, all);
    assertEquals(bloom(name).count(), bloomguardCount(name));
  }

  // an overfilled filter answers "present" for many items never added: both sides alike --------
  @Test
  void falsePositivesAgree() {
    String name = fresh("fp");
    assertTrue(bloom(name).tryInit(1_000, 0.1));
    bloom(name).add(items(1_500, i -> "over-" + i));
    List<String> probes = items(3_000, i -> "probe-" + i);
    long fp = bloom(name).contains(probes);
    assertTrue(fp > 300, "the filter is overfilled: " + fp + " false positives");
    assertSameAnswers(name, probes);
    JsonNode j = cli.run(Cli.lines(probes), "--json", "contains", name).expect(1).json();
    assertEquals(fp, j.get("present").asLong());
  }

  // the strongest form: the same items give byte-identical bitmaps -----------------------------
  @Test
  void sameItemsGiveIdenticalBitmaps() {
    String r = fresh("bits-r");
    String g = fresh("bits-g");
    List<String> items = items(5_000, i -> "bit-" + i + (i % 7 == 0 ? " ü" : ""));
    assertTrue(bloom(r).tryInit(8_000, 0.02));
    bloom(r).add(items);
    cli.run("init", g, "--expected", "8000", "--fpp", "0.02").expect(0);
    cli.run(Cli.lines(items), "--batch", "333", "add", g).expect(0);
    byte[] br = redisson.<byte[]>getBucket(r, ByteArrayCodec.INSTANCE).get();
    byte[] bgb = redisson.<byte[]>getBucket(g, ByteArrayCodec.INSTANCE).get();
    assertTrue(br != null && br.length > 0);
    assertTrue(java.util.Arrays.equals(br, bgb), "bitmaps differ: " + br.length + " vs "
        + (bgb == null ? -1 : bgb.length) + " bytes");
  }

  // (c) --------------------------------------------------------------------------------------
  @ParameterizedTest(name = "n={0} p={1}")
  @CsvSource({
      "1000, 0.01",
      "1000, 1.0E-4",
      "20000, 0.001",
      "123457, 0.03",
      "10000000, 0.01",
      "500, 0.5",
      "3, 0.5",
      "1, 1.0E-7"})
  void configHashIsIdentical(long n, String p) {
    double fpp = Double.parseDouble(p);
    String viaRedisson = fresh("c-r");
    String viaBloomguard = fresh("c-g");
    assertTrue(bloom(viaRedisson).tryInit(n, fpp));
    // the CLI gets p as Java prints it (1.0E-4), and as a plain decimal
    cli.run("init", viaBloomguard, "--expected", Long.toString(n), "--fpp", Double.toString(fpp))
        .expect(0);
    Map<String, String> r = config(viaRedisson);
    Map<String, String> g = config(viaBloomguard);
    assertEquals(Double.toString(fpp), r.get("falseProbability"), "Redisson's own form");
    for (String field : List.of("size", "hashIterations", "expectedInsertions",
        "falseProbability")) {
      assertEquals(r.get(field), g.get(field), field + " for n=" + n + " p=" + p + ": " + g);
    }
    Map<String, String> extra = new HashMap<>(g);
    extra.keySet().removeAll(r.keySet());
    if (!extra.isEmpty()) System.err.println("[interop] extra bloomguard config fields: " + extra);
    assertTrue(g.keySet().containsAll(r.keySet()), "bloomguard writes every Redisson field");

    String plain = fresh("c-plain");
    cli.run("init", plain, "--expected", Long.toString(n), "--fpp",
        new java.math.BigDecimal(p).toPlainString()).expect(0);
    assertEquals(r, pick(config(plain), r.keySet()), "p given as a plain decimal");
  }

  private static Map<String, String> pick(Map<String, String> m, java.util.Set<String> keys) {
    Map<String, String> out = new HashMap<>(m);
    out.keySet().retainAll(keys);
    return out;
  }

  @Test
  void rejectedParametersAgree() {
    // Redisson rejects these in tryInit; bloomguard must refuse them too (exit 2)
    String a = fresh("rej");
    for (String[] np : new String[][] {{"0", "0.01"}, {"3", "0.9"}, {"100", "1.0"}, {"100", "1.5"}, {"100", "-0.1"},
        {"1000000000", "1.0E-300"}}) {
      boolean redissonRejects;
      try {
        bloom(a).tryInit(Long.parseLong(np[0]), Double.parseDouble(np[1]));
        redissonRejects = false;
        bloom(a).delete();
      } catch (IllegalArgumentException e) {
        redissonRejects = true;
      }
      assertTrue(redissonRejects, "Redisson rejects n=" + np[0] + " p=" + np[1]);
      cli.run("init", a, "--expected", np[0], "--fpp", np[1]).expect(2);
    }
  }

  /**
   * n <= 0 is where bloomguard does not copy Redisson: Redisson 3.45.1 checks no n, so n = 0
   * fails later with "calculated size is 0" and n < 0 is accepted, writing a negative size into
   * the config hash; bloomguard refuses both, in its own words (the library: BG_EBADPARAMS,
   * "expected insertions must be positive"; the CLI refuses a negative --expected as usage).
   */
  @Test
  void expectedInsertionsBelowOneAreRefusedInBloomguardsOwnWords() {
    String a = fresh("n0");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> bloom(a).tryInit(0, 0.01));
    assertTrue(String.valueOf(e.getMessage()).contains("calculated size is 0"), e.toString());
    Cli.Result r = cli.run("init", a, "--expected", "0", "--fpp", "0.01").expect(2);
    assertTrue(r.err().contains("BG_EBADPARAMS") && r.err().contains("expected insertions must be positive"),
        r.toString());

    String b = fresh("nneg");
    assertTrue(bloom(b).tryInit(-5, 0.01), "Redisson 3.45.1 accepts n < 0");
    String size = redisson.<String, String>getMap("{" + b + "}:config", StringCodec.INSTANCE).get("size");
    System.err.println("[interop] Redisson tryInit(-5, 0.01) wrote size=" + size);
    assertTrue(size != null && size.startsWith("-"), "a negative size: " + size);
    bloom(b).delete();
    r = cli.run("init", b, "--expected", "-5", "--fpp", "0.01").expect(64);
    assertTrue(r.err().contains("--expected"), r.toString());
    assertEquals(0, redisson.getKeys().countExists("{" + b + "}:config"), "bloomguard wrote nothing");
  }

  // (d) --------------------------------------------------------------------------------------
  @Test
  void hashTagNamesBothWays() {
    String r = freshTagged("d-r");
    String g = freshTagged("d-g");
    List<String> items = items(2_000, i -> "tagged-" + i);

    assertTrue(bloom(r).tryInit(5_000, 0.01));
    bloom(r).add(items);
    assertTrue(redisson.getKeys().countExists(r + ":config") == 1, "Redisson's key NAME:config");
    assertAllPresentInBloomguard(r, items);
    assertEquals(bloom(r).count(), bloomguardCount(r));

    cli.run("init", g, "--expected", "5000", "--fpp", "0.01").expect(0);
    cli.run(Cli.lines(items), "add", g).expect(0);
    assertEquals(1, redisson.getKeys().countExists(g + ":config"), "bloomguard's key NAME:config");
    assertEquals(0, redisson.getKeys().countExists("{" + g + "}:config"));
    assertAllPresentInRedisson(g, items);
    assertEquals(bloomguardCount(g), bloom(g).count());
    assertEquals(config(r), pick(config(g), config(r).keySet()));
  }

  // (e) --------------------------------------------------------------------------------------
  private static final String[] UTF8 = {
      "héllo wörld", "日本語のテキスト", "emoji \uD83D\uDE00\uD83D\uDC4D", "Ελληνικά", "ñandú",
      "e\u0301 combining", "\u00A0nbsp", "Ω≈ç√∫", "中文 spaces inside", "𝄞 music"};

  private static List<String> utf8Items() {
    return items(3_000, i -> UTF8[i % UTF8.length] + " #" + i);
  }

  @Test
  void utf8ItemsFromRedissonReadByBloomguard() {
    String name = fresh("e-r");
    List<String> items = utf8Items();
    assertTrue(bloom(name).tryInit(10_000, 0.001));
    bloom(name).add(items);
    assertAllPresentInBloomguard(name, items);
    // as arguments too, and the JSON gives the items back unchanged
    Cli.Result r = cli.run("--json", "contains", name, items.get(0), items.get(1), items.get(2))
        .expect(0);
    JsonNode res = r.json().get("results");
    for (int i = 0; i < 3; i++) assertEquals(items.get(i), res.get(i).get("item").asText());
    assertEquals(bloom(name).count(), bloomguardCount(name));
    assertSameAnswers(name, items(500, i -> "ü-absent-" + i));
  }

  @Test
  void utf8ItemsFromBloomguardReadByRedisson() {
    String name = fresh("e-g");
    List<String> items = utf8Items();
    cli.run("init", name, "--expected", "10000", "--fpp", "0.001").expect(0);
    cli.run(Cli.lines(items.subList(0, 2_990)), "add", name).expect(0);
    String[] args = new String[2 + 10];
    args[0] = "add";
    args[1] = name;
    for (int i = 0; i < 10; i++) args[2 + i] = items.get(2_990 + i);
    cli.run(args).expect(0);
    assertAllPresentInRedisson(name, items);
    assertEquals(bloomguardCount(name), bloom(name).count());
  }

  @Test
  void emptyAndOddItems() {
    String name = fresh("odd");
    List<String> items = List.of("", " ", "  lead", "trail  ", "tab\tin", "back\\slash",
        "quote\"d", "semi;colon", "x".repeat(100_000));
    assertTrue(bloom(name).tryInit(1_000, 0.01));
    bloom(name).add(items);
    assertAllPresentInBloomguard(name, items);
    String g = fresh("odd-g");
    cli.run("init", g, "--expected", "1000", "--fpp", "0.01").expect(0);
    cli.run(Cli.lines(items), "add", g).expect(0);
    assertAllPresentInRedisson(g, items);
  }

  // Redisson before 3.30 wrote falseProbability as BigDecimal.toPlainString ("0.00010") ----------
  @Test
  void plainDecimalFalseProbabilityIsRead() {
    String name = fresh("plain");
    List<String> items = items(1_000, i -> "old-" + i);
    assertTrue(bloom(name).tryInit(1_000, 1.0E-4));
    bloom(name).add(items);
    redisson.<String, String>getMap(configKey(name), StringCodec.INSTANCE)
        .put("falseProbability", "0.00010");
    JsonNode info = cli.run("--json", "info", name).expect(0).json();
    assertEquals(1.0E-4, info.get("falseProbability").asDouble());
    assertEquals(bloom(name).getSize(), info.get("size").asLong());
    assertAllPresentInBloomguard(name, items);
    cli.run(Cli.lines(List.of("new-1", "new-2")), "add", name).expect(0);
    assertAllPresentInRedisson(name, List.of("old-0", "old-999", "new-1", "new-2"));
  }

  // ByteArrayCodec: raw bytes (not UTF-8, NUL, '\r' inside) as stdin lines ---------------------
  @Test
  void binaryItemsWithByteArrayCodec() {
    String name = fresh("bin");
    RBloomFilter<byte[]> bf = redisson.getBloomFilter(name, ByteArrayCodec.INSTANCE);
    assertTrue(bf.tryInit(5_000, 0.001));
    List<byte[]> items = new ArrayList<>();
    java.io.ByteArrayOutputStream stdin = new java.io.ByteArrayOutputStream();
    java.util.Random rnd = new java.util.Random(42);
    for (int i = 0; i < 1_000; i++) {
      byte[] b = new byte[1 + rnd.nextInt(40)];
      rnd.nextBytes(b);
      for (int j = 0; j < b.length; j++) if (b[j] == '\n') b[j] = (byte) 0xff;
      if (b[b.length - 1] == '\r') b[b.length - 1] = 0;  // "\r\n" would be one line ending
      items.add(b);
      stdin.write(b, 0, b.length);
      stdin.write('\n');
    }
    bf.add(items);
    byte[] in = stdin.toByteArray();
    Cli.Result r = cli.run(in, "--json", "--verbose", "contains", name).expect(0);
    JsonNode res = r.json().get("results");
    assertEquals(items.size(), res.size());
    for (int i = 0; i < items.size(); i++) {
      JsonNode e = res.get(i);
      assertTrue(e.get("present").asBoolean());
      String hex = java.util.HexFormat.of().formatHex(items.get(i));
      if (e.has("item_hex")) {
        assertEquals(hex, e.get("item_hex").asText());
      } else {
        assertEquals(new String(items.get(i), java.nio.charset.StandardCharsets.UTF_8),
            e.get("item").asText());
      }
    }
    String g = fresh("bin-g");
    cli.run("init", g, "--expected", "5000", "--fpp", "0.001").expect(0);
    cli.run(in, "add", g).expect(0);
    RBloomFilter<byte[]> bg = redisson.getBloomFilter(g, ByteArrayCodec.INSTANCE);
    assertEquals(items.size(), bg.contains(items));
    assertEquals(bf.count(), bg.count());
  }

  @Test
  void bloomguardErrorsOnMissingFilter() {
    String name = fresh("missing");
    Cli.Result r = cli.run("count", name).expect(2);
    assertTrue(r.err().contains("BG_ENOTINIT"), r.toString());
    assertFalse(bloom(name).isExists());
  }

  @Test
  void deleteAndExpireSeenByRedisson() {
    String name = fresh("life");
    assertTrue(bloom(name).tryInit(1_000, 0.01));
    bloom(name).add("x");
    cli.run("expire", name, "--ttl-ms", "600000").expect(0);
    long ttl = bloom(name).remainTimeToLive();
    assertTrue(ttl > 0 && ttl <= 600_000, "Redisson sees the TTL: " + ttl);
    cli.run("persist", name).expect(0);
    assertEquals(-1, bloom(name).remainTimeToLive());
    cli.run("delete", name).expect(0);
    assertFalse(bloom(name).isExists());
    assertEquals(0, redisson.getKeys().countExists(configKey(name)));
  }
}
