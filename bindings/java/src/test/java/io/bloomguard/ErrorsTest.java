package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class ErrorsTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient();

    @Test
    void theTableMatchesTheLibrary() {
        NativeLoader.load();
        for (int code = -1; code >= -22; code--) {
            BloomGuardException e = BloomGuardException.create(code, "");
            assertEquals(code, e.code());
            assertEquals(Native.statusName(code), e.statusName(), "code " + code);
            assertEquals(Native.strerror(code), e.getMessage(), "the description is the library's");
            assertNotEquals(BloomGuardException.class, e.getClass(), "code " + code + " has a class of its own");
        }
        assertNull(Native.statusName(-23), "a status this table does not know: errors.h grew, add it here");
        BloomGuardException unknown = BloomGuardException.create(-99, "x");
        assertEquals(BloomGuardException.class, unknown.getClass());
        assertEquals("BG_STATUS(-99)", unknown.statusName());
    }

    @Test
    void badUrl() {
        var e = assertThrows(BloomGuardException.BadUrl.class, () -> Client.open("http://127.0.0.1:1"));
        assertEquals(-3, e.code());
        assertFalse(e.getMessage().isEmpty());
        var p = assertThrows(BloomGuardException.BadUrl.class,
                             () -> Client.open("redis://user:s3cret@127.0.0.1:99999"));
        assertFalse(p.getMessage().contains("s3cret"), p.getMessage());
    }

    @Test
    void unreachableServerAtOpen() throws Exception {
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        var o = Client.Options.builder().connectAtOpen(true).connectTimeout(Duration.ofMillis(500)).build();
        var e = assertThrows(BloomGuardException.ConnectionFailed.class,
                             () -> Client.open("redis://127.0.0.1:" + port, o));
        assertEquals(-7, e.code());
    }

    @Test
    void optionsOutOfRangeNameTheOptionAndTheRange() {
        var o = Client.Options.builder().poolSize(0).build();
        var e = assertThrows(IllegalArgumentException.class, () -> Client.open(env.redis().url(), o));
        assertTrue(e.getMessage().startsWith("poolSize is 0: it must be within 1.."), e.getMessage());
        var r = Client.Options.builder().configRetries(101).build();
        e = assertThrows(IllegalArgumentException.class, () -> Client.open(env.redis().url(), r));
        assertEquals("configRetries is 101: it must be within 0..100", e.getMessage());
        // in range: the client opens and works with it
        try (Client c = Client.open(env.redis().url(), Client.Options.builder().configRetries(20).build())) {
            c.ping();
        }
    }

    @Test
    void notInitialized() {
        try (Filter f = env.client().filter("err:none")) {
            var e = assertThrows(BloomGuardException.NotInitialized.class, () -> f.contains("x"));
            assertEquals(-12, e.code());
            assertEquals("BG_ENOTINIT", e.statusName());
            assertTrue(e.getMessage().contains("err:none"), e.getMessage());
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.add("x"));
            assertThrows(BloomGuardException.NotInitialized.class, () -> f.containsMany(List.of("a", "b")));
            assertThrows(BloomGuardException.NotInitialized.class, f::count);
            assertThrows(BloomGuardException.NotInitialized.class, f::info);
        }
    }

    @Test
    void badParamsAndBadName() {
        try (Filter f = env.client().filter("err:params")) {
            var e = assertThrows(BloomGuardException.BadParams.class, () -> f.init(100, 1.5));
            assertTrue(e.getMessage().contains("greater than 1"), e.getMessage());
            assertThrows(BloomGuardException.BadParams.class, () -> f.init(0, 0.01));
        }
        var e = assertThrows(BloomGuardException.BadName.class, () -> env.client().filter("a{}b"));
        assertEquals(-4, e.code());
        assertThrows(BloomGuardException.InvalidArgument.class, () -> {
            try (Filter f = env.client().filter("err:ttl")) {
                f.init(100, 0.01);
                f.expire(Duration.ZERO);
            }
        });
    }

    @Test
    void nullsAreJavaExceptionsWithAClearMessage() {
        try (Filter f = env.client().filter("err:nulls")) {
            f.init(100, 0.01);
            assertEquals("add: the item is null",
                         assertThrows(NullPointerException.class, () -> f.add((String) null)).getMessage());
            assertThrows(NullPointerException.class, () -> f.add((byte[]) null));
            assertThrows(NullPointerException.class, () -> f.contains((String) null));
            assertThrows(NullPointerException.class, () -> f.contains((byte[]) null));
            assertEquals("addMany: the list of items is null",
                         assertThrows(NullPointerException.class, () -> f.addMany(null)).getMessage());
            assertEquals("containsMany: item 1 of the list is null",
                         assertThrows(NullPointerException.class,
                                      () -> f.containsMany(Arrays.asList("a", null))).getMessage());
            assertThrows(NullPointerException.class, () -> f.addManyBytes(Arrays.asList(new byte[1], null)));
            assertThrows(NullPointerException.class, () -> f.expire(null));
            assertThrows(NullPointerException.class, () -> f.containsAsync((String) null));
            assertThrows(NullPointerException.class, () -> f.rotate(10, 0.01, null, r -> {}));
            assertThrows(NullPointerException.class, () -> f.rotate(10, 0.01, Strategy.SWAP, null));
        }
        assertThrows(NullPointerException.class, () -> Client.open(null));
        assertThrows(NullPointerException.class, () -> Client.open(env.redis().url(), null));
        assertThrows(NullPointerException.class, () -> env.client().filter(null));
        assertThrows(IllegalArgumentException.class, () -> env.client().filter("a\0b"));
    }

    @Test
    void closedHandlesThrowNeverCrash() throws Exception {
        Client c = Client.open(env.redis().url());
        Filter f = c.filter("err:closed");
        f.init(100, 0.01);
        f.close();
        f.close(); // idempotent
        assertTrue(f.isClosed());
        var e = assertThrows(BloomGuardException.Closed.class, () -> f.contains("x"));
        assertEquals(-19, e.code());
        assertTrue(e.getMessage().contains("err:closed"), e.getMessage());
        assertThrows(BloomGuardException.Closed.class, () -> f.addMany(List.of("a")));
        assertThrows(BloomGuardException.Closed.class, f::count);
        assertThrows(BloomGuardException.Closed.class, () -> f.containsAsync("x"));
        assertThrows(BloomGuardException.Closed.class, () -> f.rotate(10, 0.01, Strategy.SWAP, r -> {}));
        c.close();
        c.close();
        assertThrows(BloomGuardException.Closed.class, c::ping);
        assertThrows(BloomGuardException.Closed.class, () -> c.filter("x"));
    }

    @Test
    void closeRacingBlockingCalls() throws Exception {
        // 8 threads call the filter in a loop while it is closed: every call either answers or
        // throws Closed; nothing else, no crash.
        Client c = Client.open(env.redis().url());
        Filter f = c.filter("err:race");
        f.init(1000, 0.01);
        f.add("x");
        AtomicInteger answered = new AtomicInteger(), closed = new AtomicInteger();
        List<Throwable> other = new ArrayList<>();
        CountDownLatch started = new CountDownLatch(8);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            Thread th = new Thread(() -> {
                started.countDown();
                while (true) {
                    try {
                        assertTrue(f.contains("x"));
                        answered.incrementAndGet();
                    } catch (BloomGuardException.Closed e) {
                        closed.incrementAndGet();
                        return;
                    } catch (Throwable e) {
                        synchronized (other) {
                            other.add(e);
                        }
                        return;
                    }
                }
            });
            th.start();
            ts.add(th);
        }
        started.await();
        while (answered.get() < 200)
            Thread.sleep(1);
        f.close();
        c.close();
        for (Thread th : ts)
            th.join();
        assertEquals(List.of(), other);
        assertEquals(8, closed.get());
    }

    @Test
    void closeInsideARotationBodyIsRefused() {
        try (Filter f = env.client().filter("err:rotclose")) {
            f.init(100, 0.01);
            assertThrows(IllegalStateException.class, () -> f.rotate(100, 0.01, Strategy.SWAP, r -> f.close()));
            assertTrue(f.contains("zz") || !f.contains("zz"), "the filter is still usable");
        }
    }

    @Test
    void missingNativeNamesThePlatform() {
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "amd64"));
        assertEquals("linux-aarch64", NativeLoader.platform("Linux", "aarch64"));
        assertEquals("darwin-aarch64", NativeLoader.platform("Mac OS X", "aarch64"));
        var e = NativeLoader.missing("darwin-aarch64", "Mac OS X", "aarch64");
        assertInstanceOf(BloomGuardException.NotSupported.class, e);
        assertEquals(-6, e.code());
        assertTrue(e.getMessage().contains("no native library for darwin-aarch64"), e.getMessage());
        assertTrue(e.getMessage().contains("-Dbloomguard.native.path="), e.getMessage());
        assertNull(NativeLoader.class.getResource(NativeLoader.resource("darwin-aarch64")));
        assertNotNull(NativeLoader.class.getResource(NativeLoader.resource("linux-x86_64")));
    }
}
