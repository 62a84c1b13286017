package io.bloomguard;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * A client's observer: the native side queues events (bgjni_observe.c); this daemon thread drains
 * them in order and hands them to the listener, so the listener may take its time and log, count
 * or call bloomguard without holding up the library.
 */
final class Observer {
    private static final int BATCH = 64, WAIT_MS = 100;

    private final long ring;
    private final Consumer<Event> listener;
    private final AtomicLong dropped = new AtomicLong();
    private final Thread thread;
    private volatile boolean stopped;

    Observer(long ring, Consumer<Event> listener) {
        this.ring = ring;
        this.listener = listener;
        this.thread = new Thread(this::run, "bloomguard-events");
        thread.setDaemon(true);
        thread.start();
    }

    long ring() {
        return ring;
    }

    long dropped() {
        return dropped.get();
    }

    /**
     * Called once the ring is detached from the client: the thread delivers what is queued, then
     * ends; stop waits for that, unless it is called by the listener itself.
     */
    void stop() {
        stopped = true;
        if (Thread.currentThread() != thread) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void run() {
        int[] kinds = new int[BATCH];
        byte[][] names = new byte[BATCH][], msgs = new byte[BATCH][];
        long[] values = new long[BATCH * 8];
        long[] d = new long[1];
        for (boolean last = false; !last; ) {
            last = stopped; // read before the drain: what was queued before stop is delivered
            if (!last)
                Native.observerWait(ring, WAIT_MS);
            int n;
            do {
                n = Native.observerDrain(ring, kinds, names, values, msgs, d);
                dropped.addAndGet(d[0]);
                for (int i = 0; i < n; i++) {
                    Event e = Event.of(kinds[i], new String(names[i], StandardCharsets.UTF_8),
                                       new String(msgs[i], StandardCharsets.UTF_8), values, i * 8);
                    try {
                        listener.accept(e);
                    } catch (Throwable ignored) { // a listener's failure must not stop the events
                    }
                }
            } while (n == BATCH);
        }
    }
}
