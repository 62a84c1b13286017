package io.bloomguard;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A Bloom filter stored in Redis exactly as Redisson's {@code RBloomFilter} stores it (the C
 * library's {@code bg_filter}). Every add or query is one atomic server-side step that checks the
 * config and touches the bits together, retried when another client rebuilt the filter with other
 * parameters: a reader never answers a silent false through a rotation.
 *
 * <p>Strings are items as their UTF-8 bytes (Redisson's StringCodec); {@code byte[]} items are
 * taken as they are (ByteArrayCodec). Thread-safe. The async calls go through the client's
 * submission queue and complete on its poller thread: a dependent stage that blocks should run
 * elsewhere ({@code thenApplyAsync}). After {@link #close()} every call throws
 * {@link BloomGuardException.Closed}.
 */
public final class Filter implements AutoCloseable {
    private final Client client;
    private final String name;
    private final Guard guard;
    private final List<Long> fallbacks = new ArrayList<>(); // guarded by itself: freed after close
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    Filter(Client client, String name, long ptr) {
        this.client = client;
        this.name = name;
        this.guard = new Guard(ptr, "the filter \"" + name + "\" is closed: open it again with client.filter(name)");
        this.cleanable = Guard.CLEANER.register(this, new Closer(client, guard, fallbacks));
    }

    /** What close() does; also the Cleaner's action, so it holds nothing of the Filter object. */
    private static final class Closer implements Runnable {
        private final Client client;
        private final Guard guard;
        private final List<Long> fallbacks;

        Closer(Client client, Guard guard, List<Long> fallbacks) {
            this.client = client;
            this.guard = guard;
            this.fallbacks = fallbacks;
        }

        @Override
        public void run() {
            long f = guard.close();
            if (f == 0)
                return;
            Native.filterClose(f);
            List<Long> fbs;
            synchronized (fallbacks) {
                fbs = new ArrayList<>(fallbacks);
                fallbacks.clear();
            }
            client.freeFallbacks(fbs);
        }
    }

    public String name() {
        return name;
    }

    /** Redisson's tryInit: true if this call wrote the config, false if one was there (it is kept). */
    public boolean init(long expectedInsertions, double falseProbability) {
        long f = guard.enter();
        try {
            return Native.filterInit(f, expectedInsertions, falseProbability);
        } finally {
            guard.exit();
        }
    }

    /** true if at least one of the item's bits was newly set. */
    public boolean add(byte[] item) {
        Items.item(item, "add");
        long f = guard.enter();
        try {
            return Native.filterAdd(f, item);
        } finally {
            guard.exit();
        }
    }

    public boolean add(String item) {
        return add(Items.item(item, "add"));
    }

    /** Adds the items in one round trip; returns how many set a new bit. */
    public long addMany(List<String> items) {
        return addMany(Items.strings(items, "addMany"));
    }

    public long addManyBytes(List<byte[]> items) {
        return addMany(Items.bytes(items, "addManyBytes"));
    }

    private long addMany(byte[][] items) {
        long f = guard.enter();
        try {
            return Native.filterAddMany(f, items);
        } finally {
            guard.exit();
        }
    }

    /**
     * Gives the filter a degrade policy ({@link Policy}; null: none, plain failures again). Calls
     * already running keep the policy they started with.
     */
    public void setPolicy(Policy policy) {
        long f = guard.enter();
        try {
            if (policy == null) {
                Native.filterSetPolicy(f, 0);
                return;
            }
            long fb = policy.applyTo(f);
            if (fb != 0) {
                synchronized (fallbacks) {
                    fallbacks.add(fb); // a replaced fallback may still serve calls under way: kept until close
                }
            }
        } finally {
            guard.exit();
        }
    }

    /** contains, with where the answer came from: Redis, or the degrade policy (and why). */
    public Answer query(byte[] item) {
        Items.item(item, "query");
        int[] out = new int[3];
        byte[] msg;
        long f = guard.enter();
        try {
            msg = Native.filterQuery(f, item, out);
        } finally {
            guard.exit();
        }
        return new Answer(out[0] != 0, Source.of(out[1]), out[2],
                          msg == null ? "" : new String(msg, java.nio.charset.StandardCharsets.UTF_8));
    }

    public Answer query(String item) {
        return query(Items.item(item, "query"));
    }

    /**
     * The filter's own lock ("{NAME}:lock"): while a thread holds it in {@link Lock.Mode#WRITE}
     * mode, the filter's queries (any process) wait for it, then fail with
     * {@link BloomGuardException.Locked} (the policy's LOCKED class); how a LOCKED rotation
     * rebuilds in place, and how a caller makes writes of its own in place.
     */
    public Lock lock() {
        long f = guard.enter();
        try {
            return new Lock(Native.lockOpenFilter(f));
        } finally {
            guard.exit();
        }
    }

    /** The handle's counters (in memory, no round trip): every {@link Stat}. */
    public java.util.Map<Stat, Long> stats() {
        Stat[] all = Stat.values();
        int[] ids = new int[all.length];
        for (int i = 0; i < all.length; i++)
            ids[i] = all[i].code;
        long[] v = new long[all.length];
        long f = guard.enter();
        try {
            Native.filterStats(f, ids, v);
        } finally {
            guard.exit();
        }
        java.util.Map<Stat, Long> out = new java.util.EnumMap<>(Stat.class);
        for (int i = 0; i < all.length; i++)
            out.put(all[i], v[i]);
        return out;
    }

    /**
     * The handle's latency histograms (in memory), one per operation and outcome that recorded
     * any: the time from a call's (or submit's) start to its answer.
     */
    public List<Histogram> histograms() {
        int cap = 256; // room beyond BG_OP_MAX x (BG_OUTCOME_MAX + 1) = 121: the C side stops at the array's size
        String[] ops = new String[cap], outcomes = new String[cap];
        long[][] counts = new long[cap][];
        double[] sums = new double[cap], bounds = new double[28];
        int n;
        long f = guard.enter();
        try {
            n = Native.filterHistograms(f, ops, outcomes, counts, sums, bounds);
        } finally {
            guard.exit();
        }
        List<Histogram> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++)
            out.add(new Histogram(ops[i], outcomes[i], bounds.clone(), counts[i], sums[i]));
        return out;
    }

    /** false: certainly not added; true: added, or a false positive. */
    public boolean contains(byte[] item) {
        Items.item(item, "contains");
        long f = guard.enter();
        try {
            return Native.filterContains(f, item);
        } finally {
            guard.exit();
        }
    }

    public boolean contains(String item) {
        return contains(Items.item(item, "contains"));
    }

    /** One answer per item, in order, in one round trip. */
    public boolean[] containsMany(List<String> items) {
        return containsMany(Items.strings(items, "containsMany"));
    }

    public boolean[] containsManyBytes(List<byte[]> items) {
        return containsMany(Items.bytes(items, "containsManyBytes"));
    }

    private boolean[] containsMany(byte[][] items) {
        long f = guard.enter();
        try {
            return Native.filterContainsMany(f, items);
        } finally {
            guard.exit();
        }
    }

    /** Redisson's count(): an estimate of the items added. */
    public long count() {
        long f = guard.enter();
        try {
            return Native.filterCount(f);
        } finally {
            guard.exit();
        }
    }

    /** The config hash (one round trip). */
    public Info info() {
        long[] v = new long[4];
        long f = guard.enter();
        try {
            Native.filterInfo(f, v);
        } finally {
            guard.exit();
        }
        return Info.of(v);
    }

    /** Deletes the bitmap and the config; true if either existed. */
    public boolean delete() {
        long f = guard.enter();
        try {
            return Native.filterDelete(f);
        } finally {
            guard.exit();
        }
    }

    /** Sets a time to live on both keys (whole milliseconds, at least 1); true if any key changed. */
    public boolean expire(Duration ttl) {
        long ms = ttlMillis(ttl);
        long f = guard.enter();
        try {
            return Native.filterExpire(f, ms);
        } finally {
            guard.exit();
        }
    }

    /** Removes the time to live; true if any key had one. */
    public boolean persist() {
        long f = guard.enter();
        try {
            return Native.filterPersist(f);
        } finally {
            guard.exit();
        }
    }

    private static long ttlMillis(Duration ttl) {
        if (ttl == null)
            throw new NullPointerException("expire: the ttl is null (persist() removes a ttl)");
        return ttl.toMillis();
    }

    /**
     * Rebuilds the filter to (expectedInsertions, falseProbability) while readers and writers keep
     * running: begins the rotation (taking its lease), runs {@code body} with the next generation,
     * commits when the body returns normally and aborts when it throws (the exception is then
     * rethrown, the live filter untouched). {@link BloomGuardException.RotationInProgress} when
     * another rotation of the filter runs.
     */
    public void rotate(long expectedInsertions, double falseProbability, Strategy strategy, Consumer<Rotation> body) {
        rotate(expectedInsertions, falseProbability, strategy, null, body);
    }

    /** The same, waiting up to {@code wait} (0 .. 1 h) for another rotation of the filter to end. */
    public void rotate(long expectedInsertions, double falseProbability, Strategy strategy, Duration wait,
                       Consumer<Rotation> body) {
        if (strategy == null)
            throw new NullPointerException("rotate: the strategy is null (Strategy.SWAP or Strategy.LOCKED)");
        if (body == null)
            throw new NullPointerException("rotate: the body is null");
        long waitMs = wait == null ? -1 : wait.toMillis();
        long f = guard.enter();
        try {
            Rotation r = new Rotation(Native.rotationBegin(f, expectedInsertions, falseProbability, strategy.code,
                                                           waitMs), name);
            try {
                body.accept(r);
                r.commit();
            } finally {
                r.end();
            }
        } finally {
            guard.exit();
        }
    }

    // ---- async twins: the client's submission queue -------------------------------------------

    public CompletableFuture<Boolean> containsAsync(String item) {
        return submit(AsyncQueue.OP_CONTAINS, Items.item(item, "containsAsync"), null, 0, 0);
    }

    public CompletableFuture<Boolean> containsAsync(byte[] item) {
        return submit(AsyncQueue.OP_CONTAINS, Items.item(item, "containsAsync"), null, 0, 0);
    }

    public CompletableFuture<boolean[]> containsManyAsync(List<String> items) {
        return submit(AsyncQueue.OP_CONTAINS_MANY, null, Items.strings(items, "containsManyAsync"), 0, 0);
    }

    public CompletableFuture<boolean[]> containsManyBytesAsync(List<byte[]> items) {
        return submit(AsyncQueue.OP_CONTAINS_MANY, null, Items.bytes(items, "containsManyBytesAsync"), 0, 0);
    }

    public CompletableFuture<Boolean> addAsync(String item) {
        return submit(AsyncQueue.OP_ADD, Items.item(item, "addAsync"), null, 0, 0);
    }

    public CompletableFuture<Boolean> addAsync(byte[] item) {
        return submit(AsyncQueue.OP_ADD, Items.item(item, "addAsync"), null, 0, 0);
    }

    public CompletableFuture<Long> addManyAsync(List<String> items) {
        return submit(AsyncQueue.OP_ADD_MANY, null, Items.strings(items, "addManyAsync"), 0, 0);
    }

    public CompletableFuture<Long> addManyBytesAsync(List<byte[]> items) {
        return submit(AsyncQueue.OP_ADD_MANY, null, Items.bytes(items, "addManyBytesAsync"), 0, 0);
    }

    public CompletableFuture<Long> countAsync() {
        return submit(AsyncQueue.OP_COUNT, null, null, 0, 0);
    }

    public CompletableFuture<Info> infoAsync() {
        return submit(AsyncQueue.OP_INFO, null, null, 0, 0);
    }

    public CompletableFuture<Boolean> initAsync(long expectedInsertions, double falseProbability) {
        return submit(AsyncQueue.OP_INIT, null, null, expectedInsertions, falseProbability);
    }

    public CompletableFuture<Boolean> deleteAsync() {
        return submit(AsyncQueue.OP_DELETE, null, null, 0, 0);
    }

    public CompletableFuture<Boolean> expireAsync(Duration ttl) {
        return submit(AsyncQueue.OP_EXPIRE, null, null, ttlMillis(ttl), 0);
    }

    public CompletableFuture<Boolean> persistAsync() {
        return submit(AsyncQueue.OP_PERSIST, null, null, 0, 0);
    }

    private <T> CompletableFuture<T> submit(int op, byte[] item, byte[][] items, long a, double b) {
        AsyncQueue q;
        try {
            q = client.queue();
        } catch (BloomGuardException.Closed e) {
            throw new BloomGuardException.Closed(-19, "the client of filter \"" + name + "\" is closed: its "
                                                     + "async calls go through the client's queue");
        }
        long f = guard.enter();
        try {
            return q.submit(f, op, item, items, a, b);
        } finally {
            guard.exit();
        }
    }

    public boolean isClosed() {
        return guard.isClosed();
    }

    /** The raw handle, for the tests of this package only (they call Native with it directly). */
    long guardForTests() {
        long f = guard.enter();
        guard.exit();
        return f;
    }

    /** Idempotent; waits for the blocking calls running on the filter. Async operations in flight
     *  complete as they would have (the C library keeps the filter until they do). */
    @Override
    public void close() {
        guard.checkClosable();
        cleanable.clean();
    }

    @Override
    public String toString() {
        return "Filter(" + name + (isClosed() ? ", closed)" : ")");
    }
}
