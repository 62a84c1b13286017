package io.bloomguard;

import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The client's events reach a Java listener, from the calling thread's events and others'. */
class ObserveTest {
    @RegisterExtension
    static final RedisExtension env = RedisExtension.server();

    /** The next event of that kind (others skipped), or null after a hang guard. */
    static Event next(LinkedBlockingQueue<Event> q, Event.Kind kind) throws InterruptedException {
        for (;;) {
            Event e = q.poll(30, TimeUnit.SECONDS);
            if (e == null || e.kind() == kind)
                return e;
        }
    }

    @Test
    void rotationsAndDegradedAnswers() throws Exception {
        LinkedBlockingQueue<Event> events = new LinkedBlockingQueue<>();
        try (Client c = Client.open(env.redis().url()); Filter f = c.filter("obs:rot")) {
            c.setObserver(events::add);
            f.init(1000, 0.01);
            f.rotate(2000, 0.01, Strategy.SWAP, r -> r.add("x"));
            Event begin = next(events, Event.Kind.ROTATION_BEGIN);
            assertNotNull(begin);
            assertEquals("obs:rot", begin.name());
            assertEquals(1, begin.strategy(), "BG_ROTATE_SWAP");
            Event commit = next(events, Event.Kind.ROTATION_COMMIT);
            assertNotNull(commit);
            assertEquals(1, commit.items());
            assertFalse(commit.message().isEmpty());

            try (Filter none = c.filter("obs:none")) {
                none.setPolicy(Policy.builder().chain(Policy.Failure.NOT_INITIALIZED, Policy.Action.ASSUME_PRESENT)
                                   .build());
                assertTrue(none.contains("x"));
                Event d = next(events, Event.Kind.DEGRADED);
                assertNotNull(d);
                assertEquals("obs:none", d.name());
                assertEquals(-12, d.status());
                assertEquals(4, d.source(), "BG_SOURCE_ASSUMED_PRESENT");
            }
            assertEquals(0, c.droppedEvents());
        }
    }

    /**
     * Control: a removed listener hears nothing of a rotation made after its removal, while the
     * listener set next hears the next rotation (by then the first one's events, had they been
     * delivered, would have been).
     */
    @Test
    void aRemovedObserverHearsNothing() throws Exception {
        LinkedBlockingQueue<Event> removed = new LinkedBlockingQueue<>(), current = new LinkedBlockingQueue<>();
        try (Client c = Client.open(env.redis().url()); Filter a = c.filter("obs:a"); Filter b = c.filter("obs:b")) {
            c.setObserver(removed::add);
            c.setObserver(null);
            a.init(1000, 0.01);
            a.rotate(1000, 0.01, Strategy.SWAP, r -> r.add("x"));
            c.setObserver(current::add);
            b.init(1000, 0.01);
            b.rotate(1000, 0.01, Strategy.SWAP, r -> r.add("x"));
            Event commit = next(current, Event.Kind.ROTATION_COMMIT);
            assertNotNull(commit);
            assertEquals("obs:b", commit.name());
            for (Event e : removed)
                assertNotEquals("obs:a", e.name(), "the removed listener heard " + e);
            for (Event e : current)
                assertNotEquals("obs:a", e.name(), "the new listener heard an event from before it was set: " + e);
        }
    }

    @Test
    void theBreakerOpensOnAServerThatIsDown() throws Exception {
        int port;
        try (var s = new java.net.ServerSocket(0)) {
            port = s.getLocalPort();
        }
        LinkedBlockingQueue<Event> events = new LinkedBlockingQueue<>();
        try (Client c = Client.open("redis://127.0.0.1:" + port); Filter f = c.filter("obs:down")) {
            c.setObserver(events::add);
            f.setPolicy(Policy.builder().chain(Policy.Failure.CONNECTION, Policy.Action.ASSUME_ABSENT)
                            .breaker(2, Duration.ofSeconds(60)).build());
            for (int i = 0; i < 3; i++)
                assertFalse(f.contains("x"));
            Event open = next(events, Event.Kind.BREAKER_OPEN);
            assertNotNull(open);
            assertEquals("obs:down", open.name());
            assertEquals(-7, open.status());
        }
    }

    @Test
    void histogramsCountEachOperationAndOutcome() throws Exception {
        try (Client c = Client.open(env.redis().url()); Filter f = c.filter("obs:hist"); Filter none = c.filter("obs:nohist")) {
            assertEquals(java.util.List.of(), f.histograms(), "nothing recorded yet");
            f.init(1000, 0.01);
            for (int i = 0; i < 5; i++)
                f.contains("x" + i);
            f.add("y");
            assertThrows(BloomGuardException.NotInitialized.class, () -> none.contains("x"));
            java.util.Map<String, Histogram> h = new java.util.HashMap<>();
            for (Histogram x : f.histograms())
                h.put(x.operation() + "/" + x.outcome(), x);
            assertEquals(5, h.get("contains/ok").count());
            assertEquals(1, h.get("add/ok").count());
            Histogram x = h.get("contains/ok");
            assertEquals(29, x.counts().length);
            assertEquals(28, x.upperBounds().length);
            assertEquals(1e-6, x.upperBounds()[0], 1e-12);
            assertTrue(x.sumSeconds() > 0);
            assertEquals(1, none.histograms().stream().filter(y -> y.outcome().equals("not_initialized"))
                                .mapToLong(Histogram::count).sum());
        }
    }

    @Test
    void aThrowingListenerMissesNothingElse() throws Exception {
        LinkedBlockingQueue<Event> events = new LinkedBlockingQueue<>();
        try (Client c = Client.open(env.redis().url()); Filter f = c.filter("obs:throws")) {
            c.setObserver(e -> {
                events.add(e);
                throw new IllegalStateException("a listener's bug");
            });
            f.init(1000, 0.01);
            f.rotate(1000, 0.01, Strategy.SWAP, r -> r.add("x"));
            assertNotNull(next(events, Event.Kind.ROTATION_BEGIN));
            assertNotNull(next(events, Event.Kind.ROTATION_COMMIT));
        }
    }
}
