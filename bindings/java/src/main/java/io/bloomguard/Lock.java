package io.bloomguard;

import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * A distributed lock in Redis (docs/locks.md): {@link Mode#EXCLUSIVE} is wire-compatible with
 * Redisson's {@code RLock} on the same key ({@code redisson.getLock(name + ":lock")}: each excludes
 * the other, and each wakes when the other releases); {@link Mode#READ} / {@link Mode#WRITE} are
 * bloomguard's reader/writer modes. Each hold has a fencing token, strictly increasing across the
 * holds of the lock, and a lease renewed in the background while it is held.
 *
 * <p>A hold belongs to the thread that acquired it (as an RLock's does): the same thread releases
 * it, and may acquire again what it holds (a count). Use platform threads: a virtual thread may
 * run on another carrier thread after a wait. Thread-safe; {@link #close()} releases what is still
 * held through the handle. Opened with {@link Client#lock} or {@link Filter#lock}.
 */
public final class Lock implements AutoCloseable {
    /** Lock modes (BG_LOCK_*). */
    public enum Mode {
        EXCLUSIVE(1), READ(2), WRITE(3);

        final int code;

        Mode(int code) {
            this.code = code;
        }

        static Mode of(long code) {
            for (Mode m : values())
                if (m.code == code)
                    return m;
            return null;
        }
    }

    /** What the calling thread holds through this handle: mode (null: nothing), count, token, lost. */
    public record Hold(Mode mode, long count, long fencingToken, boolean lost) {}

    private final Guard guard;
    private final String key;

    private final java.lang.ref.Cleaner.Cleanable cleanable;

    Lock(long ptr) {
        this.key = new String(Native.lockKey(ptr), StandardCharsets.UTF_8);
        this.guard = new Guard(ptr, "the lock " + key + " is closed");
        Guard g = guard; // the Cleaner's action holds the guard, never the Lock
        this.cleanable = Guard.CLEANER.register(this, () -> {
            long l = g.close();
            if (l != 0)
                Native.lockClose(l);
        });
    }

    /** The lock's Redis key: NAME + ":lock". */
    public String key() {
        return key;
    }

    /**
     * Acquires the lock for the calling thread, waiting up to {@code wait} (Duration.ZERO: one try;
     * at most 1 h). Returns the hold's fencing token. {@link BloomGuardException.Locked} when still
     * taken after the wait (the message names the holder); an interrupt ends the wait
     * ({@link BloomGuardException.Canceled}).
     */
    public long acquire(Mode mode, Duration wait) {
        if (mode == null)
            throw new NullPointerException("acquire: the mode is null");
        if (wait == null)
            throw new NullPointerException("acquire: the wait is null (Duration.ZERO: one try)");
        long l = guard.enter();
        try {
            return Native.lockAcquire(l, mode.code, wait.toMillis());
        } finally {
            guard.exit();
        }
    }

    /** Releases one acquire of the calling thread; the last one ends the hold. */
    public void release() {
        long l = guard.enter();
        try {
            Native.lockRelease(l);
        } finally {
            guard.exit();
        }
    }

    /** The calling thread's hold, without a round trip. */
    public Hold held() {
        long[] v = new long[3];
        boolean ok;
        long l = guard.enter();
        try {
            ok = Native.lockHeld(l, v);
        } finally {
            guard.exit();
        }
        return new Hold(Mode.of(v[0]), v[1], v[2], !ok);
    }

    /** Deletes the fence counter of a name that will not be locked again (only when nobody holds it);
     *  true if it existed. */
    public boolean retire() {
        long l = guard.enter();
        try {
            return Native.lockRetire(l);
        } finally {
            guard.exit();
        }
    }

    public boolean isClosed() {
        return guard.isClosed();
    }

    /** Releases every hold still held through this handle (any thread's) and frees it; idempotent. */
    @Override
    public void close() {
        guard.checkClosable();
        cleanable.clean();
    }
}
