package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class AsyncTest {
    // a deadline far beyond the load of a shared CI machine: these tests are not about timeouts
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient(
        url -> Client.open(url, Client.Options.builder().commandTimeout(Duration.ofSeconds(60)).build()));

    @Test
    void everyOperation() throws Exception {
        try (Filter f = env.client().filter("async:ops")) {
            assertTrue(f.initAsync(10_000, 0.01).get(10, TimeUnit.SECONDS));
            assertTrue(f.addAsync("a").get(10, TimeUnit.SECONDS));
            assertFalse(f.addAsync("a".getBytes()).get(10, TimeUnit.SECONDS));
            assertEquals(2L, f.addManyAsync(List.of("b", "c", "a")).get(10, TimeUnit.SECONDS));
            assertEquals(1L, f.addManyBytesAsync(List.of(new byte[] {9})).get(10, TimeUnit.SECONDS));
            assertTrue(f.containsAsync("b").get(10, TimeUnit.SECONDS));
            assertTrue(f.containsAsync(new byte[] {9}).get(10, TimeUnit.SECONDS));
            assertFalse(f.containsAsync("zz").get(10, TimeUnit.SECONDS));
            assertArrayEquals(new boolean[] {true, false, true},
                              f.containsManyAsync(List.of("a", "nope", "c")).get(10, TimeUnit.SECONDS));
            assertArrayEquals(new boolean[] {true}, f.containsManyBytesAsync(List.of(new byte[] {9}))
                .get(10, TimeUnit.SECONDS));
            assertEquals(4L, f.countAsync().get(10, TimeUnit.SECONDS));
            Info i = f.infoAsync().get(10, TimeUnit.SECONDS);
            assertEquals(f.info(), i);
            assertTrue(f.expireAsync(Duration.ofSeconds(50)).get(10, TimeUnit.SECONDS));
            assertTrue(f.persistAsync().get(10, TimeUnit.SECONDS));
            assertTrue(f.deleteAsync().get(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void failuresCompleteExceptionallyWithTheirClass() throws Exception {
        try (Filter f = env.client().filter("async:none")) {
            var e = assertThrows(ExecutionException.class, () -> f.containsAsync("x").get(10, TimeUnit.SECONDS));
            assertInstanceOf(BloomGuardException.NotInitialized.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains("async:none"), e.getCause().getMessage());
            var p = assertThrows(ExecutionException.class, () -> f.initAsync(10, 2.0).get(10, TimeUnit.SECONDS));
            assertInstanceOf(BloomGuardException.BadParams.class, p.getCause());
        }
    }

    @Test
    void thousandInFlight() throws Exception {
        try (Filter f = env.client().filter("async:1000")) {
            f.init(100_000, 0.01);
            List<String> present = FilterTest.items("p-", 1000);
            f.addMany(present);
            for (int wave = 0; wave < 5; wave++) {
                List<CompletableFuture<Boolean>> fs = new ArrayList<>();
                for (String s : present)
                    fs.add(f.containsAsync(s));
                CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])).get(60, TimeUnit.SECONDS);
                for (int i = 0; i < fs.size(); i++)
                    assertTrue(fs.get(i).join(), present.get(i));
            }
        }
    }

    /**
     * cancel() on a future cancels the queued operation: with the server paused (a server of this
     * test's own, paused for longer than the test, then stopped), the cancelled operations
     * complete in C (the queue drains to the one left), while the control submitted with them,
     * not cancelled, is still waiting; closing the client then fails it with Closed.
     */
    @Test
    void cancelReachesTheQueue() throws Exception {
        var o = Client.Options.builder().commandTimeout(java.time.Duration.ofSeconds(600)).build();
        try (RedisServer paused = RedisServer.start()) {
            Client c = Client.open(paused.url(), o);
            Filter f = c.filter("async:cancel");
            f.init(1000, 0.01);
            f.add("x");
            assertTrue(f.containsAsync("x").get(10, TimeUnit.SECONDS), "the queue is connected");
            paused.pause(600_000);
            CompletableFuture<Boolean> control = f.containsAsync("x");
            List<CompletableFuture<Boolean>> fs = new ArrayList<>();
            for (int i = 0; i < 100; i++)
                fs.add(f.containsAsync("x"));
            for (CompletableFuture<Boolean> x : fs)
                assertTrue(x.cancel(true));
            for (CompletableFuture<Boolean> x : fs)
                assertTrue(x.isCancelled());
            AsyncQueue q = c.queue();
            for (int i = 0; i < 60_000 && q.inFlight() > 1; i++) // a hang guard only
                Thread.sleep(1);
            assertEquals(1, q.inFlight(), "the cancelled operations completed in C");
            assertFalse(control.isDone(), "the server is still paused: the drain was the cancel's");
            c.close();
            var e = assertThrows(java.util.concurrent.ExecutionException.class,
                                 () -> control.get(10, TimeUnit.SECONDS));
            assertInstanceOf(BloomGuardException.Closed.class, e.getCause());
            f.close(); // waits for no call: none runs
        }
    }

    @Test
    void dependentStagesArePlainFutures() throws Exception {
        try (Filter f = env.client().filter("async:stages")) {
            f.init(1000, 0.01);
            CompletableFuture<Boolean> dep = f.containsAsync("x").thenApply(b -> !b);
            assertEquals(CompletableFuture.class, dep.getClass());
            assertTrue(dep.get(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void stagesMaySubmitAgainFromThePollerThread() throws Exception {
        try (Filter f = env.client().filter("async:chain")) {
            f.init(1000, 0.01);
            boolean got = f.addAsync("x").thenCompose(added -> f.containsAsync("x")).get(10, TimeUnit.SECONDS);
            assertTrue(got);
        }
    }

    @Test
    void closingTheClientFailsWhatIsInFlight() throws Exception {
        // Enough work in flight that some of it is still pending at close: every future ends,
        // either with its answer or with Closed; none is left hanging, nothing else is thrown.
        Client c = Client.open(env.redis().url(), Client.Options.builder().commandTimeout(Duration.ofSeconds(60)).build());
        Filter f = c.filter("async:close");
        f.init(100_000, 0.01);
        List<String> items = FilterTest.items("c-", 200);
        List<CompletableFuture<boolean[]>> fs = new ArrayList<>();
        for (int i = 0; i < 2000; i++)
            fs.add(f.containsManyAsync(items));
        c.close();
        int answered = 0, closed = 0;
        for (CompletableFuture<boolean[]> x : fs) {
            try {
                x.get(10, TimeUnit.SECONDS);
                answered++;
            } catch (ExecutionException e) {
                assertInstanceOf(BloomGuardException.Closed.class, e.getCause());
                closed++;
            }
        }
        assertEquals(2000, answered + closed);
        assertTrue(closed > 0, "the close came after every answer: the test did not race anything");
        var e = assertThrows(BloomGuardException.Closed.class, () -> f.containsAsync("x"));
        assertTrue(e.getMessage().contains("client"), e.getMessage());
        assertTrue(f.contains("c-1") || !f.contains("c-1"), "blocking calls still work");
        f.close();
    }

    @Test
    void closingTheFilterWithOperationsInFlightLetsThemComplete() throws Exception {
        Filter f = env.client().filter("async:fclose");
        f.init(1000, 0.01);
        f.add("y");
        List<CompletableFuture<Boolean>> fs = new ArrayList<>();
        for (int i = 0; i < 500; i++)
            fs.add(f.containsAsync("y"));
        f.close();
        for (CompletableFuture<Boolean> x : fs)
            assertTrue(x.get(10, TimeUnit.SECONDS));
    }
}
