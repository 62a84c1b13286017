package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import io.bloomguard.Lock.Mode;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

class LockTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient();
    static RedissonClient redisson;

    @BeforeAll
    static void up() throws Exception {
        Config cfg = new Config();
        cfg.useSingleServer().setAddress(env.redis().url()).setConnectionMinimumIdleSize(1).setConnectionPoolSize(2);
        redisson = Redisson.create(cfg);
    }

    // before the extension closes the client and the server
    @AfterAll
    static void down() throws Exception {
        if (redisson != null)
            redisson.shutdown();
    }

    @Test
    void exclusiveReentrantWithIncreasingTokens() {
        try (Lock l = env.client().lock("lk:basic")) {
            assertEquals("lk:basic:lock", l.key());
            long t1 = l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
            assertEquals(t1, l.acquire(Mode.EXCLUSIVE, Duration.ZERO), "re-entering keeps the hold's token");
            assertEquals(new Lock.Hold(Mode.EXCLUSIVE, 2, t1, false), l.held());
            l.release();
            l.release();
            assertNull(l.held().mode());
            long t2 = l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
            assertTrue(t2 > t1, t2 + " > " + t1);
            l.release();
            var e = assertThrows(BloomGuardException.InvalidArgument.class, l::release, "nothing held");
            assertEquals(-1, e.code());
        }
    }

    @Test
    void twoHandlesExcludeEachOther() throws Exception {
        try (Lock a = env.client().lock("lk:two"); Lock b = env.client().lock("lk:two")) {
            a.acquire(Mode.EXCLUSIVE, Duration.ZERO);
            var e = assertThrows(BloomGuardException.Locked.class, () -> b.acquire(Mode.EXCLUSIVE, Duration.ZERO));
            assertEquals(-16, e.code());
            a.release();
            b.acquire(Mode.EXCLUSIVE, Duration.ZERO);
            b.release();
            try (Lock r1 = env.client().lock("lk:two"); Lock r2 = env.client().lock("lk:two")) {
                r1.acquire(Mode.READ, Duration.ZERO);
                r2.acquire(Mode.READ, Duration.ZERO); // readers share
                assertThrows(BloomGuardException.Locked.class, () -> a.acquire(Mode.WRITE, Duration.ZERO));
                r1.release();
                r2.release();
            }
        }
    }

    @Test
    void aRedissonRLockAndABloomguardLockExcludeEachOther() throws Exception {
        RLock r = redisson.getLock("lk:interop:lock");
        try (Lock l = env.client().lock("lk:interop")) {
            r.lock();
            try {
                var e = assertThrows(BloomGuardException.Locked.class,
                                     () -> l.acquire(Mode.EXCLUSIVE, Duration.ofMillis(100)));
                assertTrue(e.getMessage().contains("lk:interop:lock"), e.getMessage());
            } finally {
                r.unlock();
            }
            l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
            // Redisson's tryLock from another thread fails while bloomguard holds it
            AtomicReference<Boolean> got = new AtomicReference<>();
            Thread t = new Thread(() -> got.set(r.tryLock()));
            t.start();
            t.join();
            assertFalse(got.get());
            // a Redisson waiter is woken by bloomguard's release (its unlock message)
            CountDownLatch waiting = new CountDownLatch(1);
            AtomicReference<Boolean> woke = new AtomicReference<>();
            Thread w = new Thread(() -> {
                waiting.countDown();
                try {
                    woke.set(r.tryLock(60, TimeUnit.SECONDS));
                    r.unlock();
                } catch (InterruptedException e) {
                    woke.set(false);
                }
            });
            w.start();
            waiting.await();
            l.release();
            w.join(120_000); // a hang guard only
            assertEquals(Boolean.TRUE, woke.get());
        }
    }

    @Test
    void aFilterWriteLockMakesItsQueriesWait() {
        try (Filter f = env.client().filter("lk:filter"); Lock w = f.lock()) {
            f.init(100, 0.01);
            f.add("x");
            assertEquals("{lk:filter}:lock", w.key());
            w.acquire(Mode.WRITE, Duration.ZERO);
            try {
                assertThrows(BloomGuardException.Locked.class, () -> f.contains("x"), "queries wait, then Locked");
                f.setPolicy(Policy.builder().chain(Policy.Failure.LOCKED, Policy.Action.ASSUME_PRESENT).build());
                assertEquals(Source.ASSUMED_PRESENT, f.query("x").source());
            } finally {
                w.release();
            }
            assertEquals(Source.REDIS, f.query("x").source());
            f.rotate(100, 0.01, Strategy.LOCKED, r -> r.add("x")); // takes the same lock, now free
            assertTrue(f.contains("x"));
        }
    }

    /** A lock handle dropped without close() is closed by the Cleaner: its hold is released. */
    @Test
    void anUnreachableHandleIsClosedByTheCleaner() throws Exception {
        holdAndDrop("lk:dropped");
        try (Lock l = env.client().lock("lk:dropped")) {
            boolean got = false;
            for (int i = 0; i < 3000 && !got; i++) { // a hang guard: the collector finds it within a few gc()
                System.gc();
                try {
                    l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
                    got = true;
                } catch (BloomGuardException.Locked e) {
                    Thread.sleep(10);
                }
            }
            assertTrue(got, "the dropped handle's hold was never released");
            l.release();
        }
    }

    /** Control: a handle still reachable keeps its hold through the same gc() calls. */
    @Test
    void aReachableHandleKeepsItsHold() throws Exception {
        Lock kept = env.client().lock("lk:kept");
        kept.acquire(Mode.EXCLUSIVE, Duration.ZERO);
        try (Lock l = env.client().lock("lk:kept")) {
            for (int i = 0; i < 20; i++) {
                System.gc();
                assertThrows(BloomGuardException.Locked.class, () -> l.acquire(Mode.EXCLUSIVE, Duration.ZERO));
                Thread.sleep(10);
            }
        }
        kept.release();
        kept.close();
    }

    private static void holdAndDrop(String name) {
        Lock l = env.client().lock(name);
        l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
        // l becomes unreachable on return, still holding the lock (its lease renewed meanwhile)
    }

    @Test
    void closedAndNulls() {
        Lock l = env.client().lock("lk:closed");
        l.acquire(Mode.EXCLUSIVE, Duration.ZERO);
        l.close(); // releases the hold
        assertThrows(BloomGuardException.Closed.class, () -> l.acquire(Mode.EXCLUSIVE, Duration.ZERO));
        try (Lock m = env.client().lock("lk:closed")) {
            m.acquire(Mode.EXCLUSIVE, Duration.ZERO); // free again
            m.release();
            assertTrue(m.retire());
            assertThrows(NullPointerException.class, () -> m.acquire(null, Duration.ZERO));
            assertThrows(NullPointerException.class, () -> m.acquire(Mode.READ, null));
        }
        assertThrows(NullPointerException.class, () -> env.client().lock(null));
    }
}
