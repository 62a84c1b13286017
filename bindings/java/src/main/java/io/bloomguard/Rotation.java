package io.bloomguard;

import java.util.List;

/**
 * The next generation of a filter being rotated, given to the body of {@link Filter#rotate}: feed
 * it every item of the source of truth (read it inside the body: items added to the live filter
 * through bloomguard after the rotation began are carried over on their own). Valid only while the
 * body runs; afterwards every method throws {@link BloomGuardException.Closed}. One thread at a
 * time (calls from several threads are serialized).
 */
public final class Rotation {
    private final String filterName;
    private long ptr; // guarded by this

    Rotation(long ptr, String filterName) {
        this.ptr = ptr;
        this.filterName = filterName;
    }

    private long live() {
        if (ptr == 0)
            throw new BloomGuardException.Closed(-19, "the rotation of \"" + filterName + "\" is over: a Rotation "
                                                     + "is only valid inside the body given to rotate()");
        return ptr;
    }

    public synchronized void add(String item) {
        byte[] b = Items.item(item, "add");
        Native.rotationAdd(live(), b);
    }

    public synchronized void add(byte[] item) {
        Items.item(item, "add");
        Native.rotationAdd(live(), item);
    }

    /** Adds UTF-8 strings (Redisson's StringCodec) to the next generation. */
    public synchronized void addMany(List<String> items) {
        byte[][] b = Items.strings(items, "addMany");
        Native.rotationAddMany(live(), b);
    }

    /** Adds raw items (Redisson's ByteArrayCodec) to the next generation. */
    public synchronized void addManyBytes(List<byte[]> items) {
        byte[][] b = Items.bytes(items, "addManyBytes");
        Native.rotationAddMany(live(), b);
    }

    synchronized void commit() {
        Native.rotationCommit(live());
    }

    /** Aborts what was not committed, frees, and makes every later call fail. */
    synchronized void end() {
        long p = ptr;
        ptr = 0;
        if (p != 0)
            Native.rotationFree(p);
    }
}
