package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import io.bloomguard.Policy.Action;
import io.bloomguard.Policy.Failure;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class PolicyTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient();

    static Fallback knows(Set<String> truth, AtomicInteger calls) {
        return items -> {
            calls.incrementAndGet();
            boolean[] out = new boolean[items.size()];
            for (int i = 0; i < out.length; i++)
                out[i] = truth.contains(new String(items.get(i), StandardCharsets.UTF_8));
            return out;
        };
    }

    @Test
    void redisAnswersCarryTheirSource() {
        try (Filter f = env.client().filter("pol:redis")) {
            f.init(100, 0.01);
            f.add("x");
            Answer a = f.query("x");
            assertEquals(new Answer(true, Source.REDIS, 0, ""), a);
            assertFalse(a.degraded());
            assertFalse(f.query("y".getBytes(StandardCharsets.UTF_8)).present());
        }
    }

    /** Every counter of stats.h is in Stat: the next number past each range is not a counter. */
    @Test
    void theStatTableIsComplete() {
        try (Filter f = env.client().filter("pol:stats")) {
            f.stats(); // every value of the table is known to the library
            long fp = f.guardForTests();
            for (int past : new int[] {29, 109}) {
                assertThrows(BloomGuardException.class, () -> Native.filterStats(fp, new int[] {past}, new long[1]),
                             "stats.h grew a counter " + past + ": add it to Stat");
            }
        }
    }

    @Test
    void assumePresentWhenNotInitialized() {
        try (Filter f = env.client().filter("pol:assume")) {
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.contains("x"), "no policy: the failure");
            f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.ASSUME_PRESENT).build());
            assertTrue(f.contains("x"));
            Answer a = f.query("x");
            assertTrue(a.present());
            assertEquals(Source.ASSUMED_PRESENT, a.source());
            assertTrue(a.degraded());
            assertEquals(-12, a.degradedCode());
            assertTrue(a.degradedMessage().contains("pol:assume"), a.degradedMessage());
            assertArrayEquals(new boolean[] {true, true}, f.containsMany(List.of("a", "b")));
            f.setPolicy(null);
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.contains("x"), "policy removed");
        }
    }

    @Test
    void theJavaFallbackAnswersBlockingAndAsync() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        try (Filter f = env.client().filter("pol:fallback")) {
            f.setPolicy(Policy.builder()
                            .chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ERROR)
                            .fallback(knows(Set.of("known"), calls))
                            .build());
            assertTrue(f.contains("known"));
            assertFalse(f.contains("other"));
            assertEquals(Source.CALLBACK, f.query("known").source());
            assertArrayEquals(new boolean[] {false, true, false}, f.containsMany(List.of("a", "known", "b")));
            assertTrue(f.containsAsync("known").get(10, TimeUnit.SECONDS), "asked from the queue's thread");
            assertArrayEquals(new boolean[] {true, false},
                              f.containsManyAsync(List.of("known", "x")).get(10, TimeUnit.SECONDS));
            assertEquals(6, calls.get());
            var st = f.stats();
            assertEquals(6L, st.get(Stat.CALLBACK_CALLS));
            assertEquals(6L, st.get(Stat.ANSWERS_CALLBACK));
            assertEquals(6L, st.get(Stat.QUERIES));
            assertEquals(0L, st.get(Stat.ANSWERS_REDIS));
            assertEquals(6L, st.get(Stat.FAIL_NOT_INITIALIZED));
            assertEquals(Stat.values().length, st.size());
        }
    }

    /** A fallback run by the queue's thread that makes an async call is refused (it declines). */
    @Test
    void anAsyncCallFromAFallbackOnTheQueueThreadIsRefused() throws Exception {
        AtomicInteger refused = new AtomicInteger();
        try (Filter f = env.client().filter("pol:reenter"); Filter other = env.client().filter("pol:other")) {
            other.init(100, 0.01);
            f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ASSUME_ABSENT)
                            .fallback(items -> {
                                try {
                                    other.containsAsync("x");
                                } catch (IllegalStateException e) {
                                    refused.incrementAndGet();
                                    throw e;
                                }
                                return new boolean[items.size()];
                            }).build());
            assertFalse(f.containsAsync("x").get(10, TimeUnit.SECONDS), "declined: assumed absent");
            assertEquals(1, refused.get());
            assertEquals(Source.REDIS, other.query("x").source(), "the queue and the other filter still work");
        }
    }

    @Test
    void aFallbackThatThrowsOrAnswersBadlyDeclines() throws Exception {
        try (Filter f = env.client().filter("pol:declines")) {
            f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ASSUME_ABSENT)
                            .fallback(items -> { throw new IllegalStateException("database down"); }).build());
            Answer a = f.query("x");
            assertEquals(Source.ASSUMED_ABSENT, a.source(), "the chain moved on");
            f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ERROR)
                            .fallback(items -> new boolean[items.size() + 1]).build());
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.contains("x"));
            f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ERROR)
                            .fallback(items -> null).build());
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.contains("x"));
            var e = assertThrows(java.util.concurrent.ExecutionException.class,
                                 () -> f.containsAsync("x").get(10, TimeUnit.SECONDS));
            assertInstanceOf(BloomGuardException.NotInitialized.class, e.getCause());
        }
    }

    @Test
    void connectionFailuresDegradeAndTheBreakerOpens() throws Exception {
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        try (Client down = Client.open("redis://127.0.0.1:" + port); Filter f = down.filter("pol:down")) {
            assertThrows(BloomGuardException.ConnectionFailed.class, () -> f.contains("x"));
            f.setPolicy(Policy.builder()
                            .chain(Failure.CONNECTION, Action.RETRY, Action.ASSUME_ABSENT)
                            .retries(1)
                            .backoff(Duration.ofMillis(1), Duration.ofMillis(5))
                            .breaker(2, Duration.ofSeconds(60))
                            .build());
            for (int i = 0; i < 5; i++) {
                Answer a = f.query("x");
                assertEquals(Source.ASSUMED_ABSENT, a.source());
                assertEquals(-7, a.degradedCode());
            }
            assertThrows(BloomGuardException.ConnectionFailed.class, () -> f.add("x"),
                         "an add is never assumed: with the breaker open it fails at once");
        }
    }

    @Test
    void settingsOutOfRangeNameTheSettingAndTheRange() {
        try (Filter f = env.client().filter("pol:bad")) {
            var e = assertThrows(IllegalArgumentException.class,
                                 () -> f.setPolicy(Policy.builder().retries(-1).build()));
            assertTrue(e.getMessage().startsWith("policy retries is -1: it must be within 0..100"), e.getMessage());
            assertThrows(NullPointerException.class, () -> Policy.builder().chain(null, Action.ERROR));
            assertThrows(IllegalArgumentException.class, () -> Policy.builder().chain(Failure.OTHER));
        }
    }

    @Test
    void fallbacksOutliveTheirFilterWhileItsOperationsAreInFlight() throws Exception {
        // Async queries answered by the fallback, the filter closed while they are in flight:
        // they complete (the queue keeps the filter, and the fallback stays until the queue closes).
        AtomicInteger calls = new AtomicInteger();
        Client c = Client.open(env.redis().url());
        Filter f = c.filter("pol:outlive");
        f.setPolicy(Policy.builder().chain(Failure.NOT_INITIALIZED, Action.CALLBACK, Action.ERROR)
                        .callbackRate(0, 1).fallback(knows(Set.of("k"), calls)).build());
        List<CompletableFuture<Boolean>> fs = new ArrayList<>();
        for (int i = 0; i < 300; i++)
            fs.add(f.containsAsync("k"));
        f.close();
        for (CompletableFuture<Boolean> x : fs)
            assertTrue(x.get(10, TimeUnit.SECONDS));
        assertEquals(300, calls.get());
        c.close();
    }
}
