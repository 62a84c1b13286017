package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class RotationTest {
    // a deadline far beyond the load of a shared CI machine: a reader's error must mean the rebuild
    @RegisterExtension
    static final RedisExtension env = RedisExtension.withClient(
        url -> Client.open(url, Client.Options.builder().poolSize(8)
                                    .commandTimeout(java.time.Duration.ofSeconds(60))
                                    .writeLockWait(java.time.Duration.ofSeconds(30)).build()));

    // (n, p) pairs the rotations cycle through: each changes size and k
    static final long[] N = {20_000, 5_000, 40_000, 10_000};
    static final double[] P = {0.001, 0.05, 0.0001, 0.01};

    /**
     * Reader threads (blocking containsMany, and async containsManyAsync) asking for items that
     * are present in every generation, counting false answers and errors, and the rounds done.
     */
    static final class Readers implements AutoCloseable {
        final AtomicLong checks = new AtomicLong(), falses = new AtomicLong(), errors = new AtomicLong(),
            rounds = new AtomicLong();
        final AtomicReference<Throwable> firstError = new AtomicReference<>();
        final AtomicBoolean stop = new AtomicBoolean();
        final List<Thread> threads = new ArrayList<>();

        Readers(Filter f, List<String> present, int blocking, int async) {
            List<String> batch = present.subList(0, 100);
            for (int t = 0; t < blocking + async; t++) {
                boolean isAsync = t >= blocking;
                Thread th = new Thread(() -> {
                    while (!stop.get()) {
                        try {
                            boolean[] got = isAsync ? f.containsManyAsync(batch).join() : f.containsMany(batch);
                            checks.addAndGet(got.length);
                            for (boolean b : got)
                                if (!b)
                                    falses.incrementAndGet();
                        } catch (Throwable e) {
                            errors.incrementAndGet();
                            firstError.compareAndSet(null, e);
                        }
                        rounds.incrementAndGet();
                    }
                });
                th.start();
                threads.add(th);
            }
        }

        /** Returns once every reader thread can have made k more rounds (no clock involved). */
        void await(int k) throws InterruptedException {
            long target = rounds.get() + (long) k * threads.size();
            while (rounds.get() < target && !stop.get())
                Thread.sleep(1);
        }

        @Override
        public void close() throws InterruptedException {
            stop.set(true);
            for (Thread t : threads)
                t.join();
        }

        String summary() {
            return checks + " checks, " + falses + " false, " + errors + " errors (first: " + firstError.get() + ")";
        }
    }

    /** Rotations of `name`, each by `rebuild`, with readers running throughout. */
    static Readers run(String name, int rotations, RebuildStep rebuild) throws Exception {
        try (Filter f = env.client().filter(name)) {
            List<String> present = FilterTest.items("r-", 5_000);
            f.init(10_000, 0.01);
            f.addMany(present);
            Readers readers = new Readers(f, present, 2, 1);
            try (readers) {
                readers.await(2);
                for (int i = 0; i < rotations; i++)
                    rebuild.run(f, N[i % N.length], P[i % P.length], present, readers);
                readers.await(2);
            }
            System.out.println("[rotation] " + name + ", " + rotations + " rebuilds: " + readers.summary());
            return readers;
        }
    }

    interface RebuildStep {
        void run(Filter f, long n, double p, List<String> present, Readers readers) throws Exception;
    }

    static RebuildStep rotation(Strategy s) {
        return (f, n, p, present, readers) -> f.rotate(n, p, s, r -> {
            r.addMany(present);
            try {
                readers.await(1); // readers run while the rotation is under way
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        });
    }

    @Test
    void swapReadersSeeNoFalseNegative() throws Exception {
        Readers r = run("rot:swap", 8, rotation(Strategy.SWAP));
        assertTrue(r.checks.get() > 0);
        assertEquals(0, r.falses.get(), r.summary());
        assertEquals(0, r.errors.get(), r.summary());
        try (Filter f = env.client().filter("rot:swap")) {
            assertEquals(N[7 % N.length], f.info().expectedInsertions());
        }
    }

    @Test
    void lockedReadersSeeNoFalseNegative() throws Exception {
        Readers r = run("rot:locked", 4, rotation(Strategy.LOCKED));
        assertEquals(0, r.falses.get(), r.summary());
        assertEquals(0, r.errors.get(), r.summary());
    }

    /** Negative control: the naive rebuild (delete, init, add) under the same readers is caught. */
    @Test
    void naiveRebuildIsCaughtByTheSameCheck() throws Exception {
        Readers r = run("rot:naive", 4, (f, n, p, present, readers) -> {
            f.delete();
            readers.await(1); // a reader round between delete and init: NotInitialized
            f.init(n, p);
            readers.await(1); // and one between init and the adds: false answers
            f.addMany(present);
        });
        assertTrue(r.falses.get() > 0, r.summary());
        assertTrue(r.errors.get() > 0, r.summary());
        assertInstanceOf(BloomGuardException.NotInitialized.class, r.firstError.get().getCause() != null
            && r.firstError.get().getCause() instanceof BloomGuardException ? r.firstError.get().getCause()
            : r.firstError.get());
    }

    @Test
    void addsDuringTheRotationAreCarriedOver() {
        try (Filter f = env.client().filter("rot:late")) {
            f.init(1000, 0.01);
            f.add("old");
            f.rotate(2000, 0.001, Strategy.SWAP, r -> {
                r.add("old");
                f.add("late");
            });
            assertTrue(f.contains("late"));
            assertTrue(f.contains("old"));
            assertEquals(2000, f.info().expectedInsertions());
        }
    }

    @Test
    void aThrowingBodyAbortsAndTheLiveFilterStays() {
        try (Filter f = env.client().filter("rot:abort")) {
            f.init(1000, 0.01);
            f.add("kept");
            AtomicReference<Rotation> leaked = new AtomicReference<>();
            var e = assertThrows(IllegalStateException.class, () -> f.rotate(5000, 0.001, Strategy.SWAP, r -> {
                leaked.set(r);
                r.add("x");
                throw new IllegalStateException("source of truth unavailable");
            }));
            assertEquals("source of truth unavailable", e.getMessage());
            assertEquals(1000, f.info().expectedInsertions());
            assertTrue(f.contains("kept"));
            assertThrows(BloomGuardException.Closed.class, () -> leaked.get().add("y"),
                         "a Rotation used after its body");
            // the lease was given back: the next rotation begins at once
            f.rotate(3000, 0.01, Strategy.SWAP, r -> r.add("kept"));
            assertEquals(3000, f.info().expectedInsertions());
        }
    }

    @Test
    void aSecondRotationGetsRotationInProgress() {
        try (Filter f = env.client().filter("rot:busy"); Filter g = env.client().filter("rot:busy")) {
            f.init(1000, 0.01);
            f.rotate(1000, 0.01, Strategy.SWAP, r -> {
                var e = assertThrows(BloomGuardException.RotationInProgress.class,
                                     () -> g.rotate(1000, 0.01, Strategy.SWAP, x -> {}));
                assertEquals(-17, e.code());
            });
        }
    }

    /**
     * A thread waiting for another rotation (rotate with a wait) stops when interrupted: Canceled,
     * its interrupt flag kept. Control: the same wait without the interrupt ends in
     * RotationInProgress, so the interrupted one was really waiting on the other's lease.
     */
    @Test
    void anInterruptEndsTheWaitForAnotherRotation() throws Exception {
        try (Filter f = env.client().filter("rot:interrupt"); Filter g = env.client().filter("rot:interrupt")) {
            f.init(1000, 0.01);
            java.util.concurrent.CountDownLatch holding = new java.util.concurrent.CountDownLatch(1),
                release = new java.util.concurrent.CountDownLatch(1);
            Thread holder = new Thread(() -> f.rotate(1000, 0.01, Strategy.SWAP, r -> {
                holding.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }));
            holder.start();
            holding.await();
            try {
                assertThrows(BloomGuardException.RotationInProgress.class,
                             () -> g.rotate(1000, 0.01, Strategy.SWAP, java.time.Duration.ofMillis(200), r -> {}),
                             "control: the wait runs out while the other rotation holds the lease");
                AtomicReference<Throwable> got = new AtomicReference<>();
                AtomicBoolean stillInterrupted = new AtomicBoolean();
                Thread waiter = new Thread(() -> {
                    try {
                        g.rotate(1000, 0.01, Strategy.SWAP, java.time.Duration.ofMinutes(10), r -> {});
                    } catch (Throwable e) {
                        got.set(e);
                        stillInterrupted.set(Thread.currentThread().isInterrupted());
                    }
                });
                waiter.start();
                waiter.interrupt(); // before or during its wait: either way the wait ends
                waiter.join(120_000); // a hang guard only: the interrupt ends the wait within a slice
                assertFalse(waiter.isAlive(), "the interrupt did not end the wait");
                assertInstanceOf(BloomGuardException.Canceled.class, got.get());
                assertEquals(-20, ((BloomGuardException) got.get()).code());
                assertTrue(stillInterrupted.get(), "the interrupt flag is kept");
            } finally {
                release.countDown();
                holder.join();
            }
            g.rotate(1000, 0.01, Strategy.SWAP, r -> r.add("after"));
            assertTrue(g.contains("after"), "the canceled waiter took no lease");
        }
    }

    @Test
    void rotationNullItems() {
        try (Filter f = env.client().filter("rot:nulls")) {
            f.init(1000, 0.01);
            Consumer<Rotation> body = r -> r.addMany(java.util.Arrays.asList("a", null));
            assertThrows(NullPointerException.class, () -> f.rotate(1000, 0.01, Strategy.SWAP, body));
        }
    }
}
