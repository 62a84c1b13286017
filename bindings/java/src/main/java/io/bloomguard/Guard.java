package io.bloomguard;

import java.lang.ref.Cleaner;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A native handle shared between threads, closed at most once. Calls hold the read lock for their
 * whole native call; close takes the write lock, so it waits for the calls running on the handle
 * and every later call gets {@link BloomGuardException.Closed} instead of a freed pointer.
 */
final class Guard {
    /**
     * Closes handles that became unreachable without close() (their native memory, a lock's
     * holds, a client's connections): a safety net, not a substitute for close() - nothing says
     * when the garbage collector finds them. The actions hold the guard, never the handle object.
     */
    static final Cleaner CLEANER = Cleaner.create();

    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final String closedMessage;
    private long ptr;

    Guard(long ptr, String closedMessage) {
        this.ptr = ptr;
        this.closedMessage = closedMessage;
    }

    /** The pointer, with the read lock held: pair with {@link #exit()} in a finally. */
    long enter() {
        lock.readLock().lock();
        if (ptr == 0) {
            lock.readLock().unlock();
            throw closed();
        }
        return ptr;
    }

    void exit() {
        lock.readLock().unlock();
    }

    BloomGuardException closed() {
        return new BloomGuardException.Closed(-19, closedMessage);
    }

    boolean isClosed() {
        lock.readLock().lock();
        try {
            return ptr == 0;
        } finally {
            lock.readLock().unlock();
        }
    }

    /** Refuses a close from inside a call on the same handle (it would wait for itself). */
    void checkClosable() {
        if (lock.getReadHoldCount() > 0)
            throw new IllegalStateException("close() called from inside a call on the same handle "
                                            + "(e.g. a rotation body): close it after the call returns");
    }

    /** Waits for running calls, then hands the pointer over to be freed (0 when already closed). */
    long close() {
        checkClosable();
        lock.writeLock().lock();
        try {
            long p = ptr;
            ptr = 0;
            return p;
        } finally {
            lock.writeLock().unlock();
        }
    }
}
