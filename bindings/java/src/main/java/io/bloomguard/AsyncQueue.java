package io.bloomguard;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A client's submission queue (bg_queue) and the daemon thread that drives it. queue.h allows one
 * driving thread at a time, so every submit and poll runs under {@link #lock}; the poller waits for
 * the queue's fd outside it (poll(2), in C), polls under it, and completes the futures after
 * releasing it, so a stage that runs on completion can submit again.
 */
final class AsyncQueue {
    // operation codes: bgjni_queue.c's OP_*
    static final int OP_CONTAINS = 1, OP_CONTAINS_MANY = 2, OP_ADD = 3, OP_ADD_MANY = 4, OP_COUNT = 5,
        OP_INFO = 6, OP_INIT = 7, OP_DELETE = 8, OP_EXPIRE = 9, OP_PERSIST = 10;

    private static final int BATCH = 256;     // completions copied out per poll (bgjni_queue.c's cap)
    private static final int WAIT_MS = 100;   // longest wait for the fd before the closed flag is looked at

    private final ReentrantLock lock = new ReentrantLock();
    private final int fd;
    private long q;                            // guarded by lock; 0 once closed
    private long nextTag = 1;                  // guarded by lock
    private final Map<Long, Pending> pending = new HashMap<>(); // guarded by lock
    private Thread poller;                     // guarded by lock
    private final List<Long> fallbacks = new ArrayList<>(); // guarded by lock: freed at close
    private volatile boolean closed;

    private static final class Pending {
        final int op;
        final QueueFuture future;

        Pending(AsyncQueue q, int op) {
            this.op = op;
            this.future = new QueueFuture(q);
        }
    }

    /**
     * A future whose cancel() also cancels the queued operation (bg_queue_cancel): a wait of it
     * (the write lock, a backoff, a connection) ends at once and nothing more is sent for it.
     * Dependent stages are plain CompletableFutures.
     */
    static final class QueueFuture extends CompletableFuture<Object> {
        private final AsyncQueue queue;
        volatile long tag;

        QueueFuture(AsyncQueue queue) {
            this.queue = queue;
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            boolean done = super.cancel(mayInterruptIfRunning);
            if (done && tag != 0)
                queue.cancel(tag);
            return done;
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            return new CompletableFuture<>();
        }
    }

    private void cancel(long tag) {
        lock.lock();
        try {
            if (q != 0)
                Native.queueCancel(q, tag); // its completion (BG_ECANCELED) finds the future already done
        } finally {
            lock.unlock();
        }
    }

    /** Operations submitted and not yet completed (for tests). */
    int inFlight() {
        lock.lock();
        try {
            return pending.size();
        } finally {
            lock.unlock();
        }
    }

    AsyncQueue(long q) {
        this.q = q;
        this.fd = Native.queueFd(q);
    }

    @SuppressWarnings("unchecked")
    <T> CompletableFuture<T> submit(long filter, int op, byte[] item, byte[][] items, long a, double b) {
        if (lock.isHeldByCurrentThread())
            throw new IllegalStateException("an async call from inside a policy fallback that the client's queue "
                                            + "is running: the queue cannot take a submission in the middle of a "
                                            + "poll; answer from your own data, or use a blocking call");
        Pending p = new Pending(this, op);
        lock.lock();
        try {
            if (q == 0)
                throw new BloomGuardException.Closed(-19, "the client is closed: its async queue with it");
            long tag = nextTag++;
            p.future.tag = tag;
            pending.put(tag, p);
            try {
                Native.queueSubmit(q, filter, op, tag, item, items, a, b);
            } catch (RuntimeException e) { // refused (bad input): no completion will follow
                pending.remove(tag);
                p.future.completeExceptionally(e);
            } catch (Error e) { // out of memory copying the items: nothing was submitted
                pending.remove(tag);
                throw e;
            }
            if (poller == null) {
                poller = new Thread(this::run, "bloomguard-queue-poller");
                poller.setDaemon(true);
                poller.start();
            }
        } finally {
            lock.unlock();
        }
        return (CompletableFuture<T>) (CompletableFuture<?>) p.future;
    }

    private void run() {
        long[] tags = new long[BATCH];
        int[] statuses = new int[BATCH];
        long[] values = new long[BATCH];
        Object[] extras = new Object[BATCH];
        List<Pending> done = new ArrayList<>();
        List<Object> results = new ArrayList<>();
        while (!closed) {
            Native.queueWait(fd, WAIT_MS);
            int n;
            lock.lock();
            try {
                if (q == 0)
                    return;
                n = Native.queuePoll(q, tags, statuses, values, extras);
                for (int i = 0; i < n; i++) {
                    Pending p = pending.remove(tags[i]);
                    if (p == null)
                        continue;
                    done.add(p);
                    results.add(result(p.op, statuses[i], values[i], extras[i]));
                    extras[i] = null;
                }
            } catch (RuntimeException e) { // out of memory copying answers: nothing sensible to retry
                n = 0;
            } finally {
                lock.unlock();
            }
            for (int i = 0; i < done.size(); i++) {
                Object r = results.get(i);
                if (r instanceof BloomGuardException)
                    done.get(i).future.completeExceptionally((BloomGuardException) r);
                else
                    done.get(i).future.complete(r);
            }
            done.clear();
            results.clear();
        }
    }

    private static Object result(int op, int status, long value, Object extra) {
        if (status != 0)
            return BloomGuardException.create(status, extra instanceof byte[]
                ? new String((byte[]) extra, StandardCharsets.UTF_8) : "");
        switch (op) {
            case OP_CONTAINS_MANY:
                return extra instanceof boolean[] ? extra : new boolean[0];
            case OP_INFO:
                return Info.of((long[]) extra);
            case OP_ADD_MANY: case OP_COUNT:
                return value;
            default: // contains, add, init, delete, expire, persist: 0/1
                return value != 0;
        }
    }

    /**
     * Frees a closed filter's fallbacks once the queue can no longer call them: now if the queue
     * is closed, else at its close (operations in flight outlive their filter's close, and a
     * degraded answer may ask its fallback from inside a poll).
     */
    void freeFallbacks(List<Long> fbs) {
        lock.lock();
        try {
            if (q != 0) {
                fallbacks.addAll(fbs);
                return;
            }
        } finally {
            lock.unlock();
        }
        for (long fb : fbs)
            Native.fallbackFree(fb);
    }

    /** Drops what is in flight: those futures fail with {@link BloomGuardException.Closed}. */
    void close() {
        List<Pending> dropped;
        lock.lock();
        try {
            if (q == 0)
                return;
            closed = true;
            Native.queueClose(q);
            q = 0;
            // no poll runs any more: no queued operation can reach these fallbacks
            for (long fb : fallbacks)
                Native.fallbackFree(fb);
            fallbacks.clear();
            dropped = new ArrayList<>(pending.values());
            pending.clear();
        } finally {
            lock.unlock();
        }
        for (Pending p : dropped)
            p.future.completeExceptionally(new BloomGuardException.Closed(-19,
                "the client was closed while this operation was in flight"));
    }
}
