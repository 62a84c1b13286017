package io.bloomguard;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Connection pools to one Redis server (or the masters of a Redis Cluster): the C library's
 * {@code bg_client}. Thread-safe; open one per process and share it.
 *
 * <pre>{@code
 * try (Client client = Client.open("redis://127.0.0.1:6379");
 *      Filter filter = client.filter("users")) {
 *     filter.init(1_000_000, 0.01);
 *     filter.add("alice");
 *     boolean maybe = filter.contains("alice");
 * }
 * }</pre>
 *
 * Opening checks the URL and the options and connects nothing: the first call that needs a
 * connection makes it ({@link Options.Builder#connectAtOpen} to reach the server at once).
 * Closing the client stops its async queue (futures still in flight fail with
 * {@link BloomGuardException.Closed}); filters opened from it keep working for blocking calls until
 * they are closed themselves, as in the C library, where a filter holds its client.
 */
public final class Client implements AutoCloseable {
    private final Guard guard;
    private final State state;
    private final java.lang.ref.Cleaner.Cleanable cleanable;

    /** What close() frees; also the Cleaner's action, so it holds nothing of the Client object. */
    private static final class State implements Runnable {
        final Guard guard;
        AsyncQueue queue;     // guarded by this
        AsyncQueue everQueue; // guarded by this: the queue, also after close (fallbacks' lifetime)
        Observer observer;    // guarded by this

        State(Guard guard) {
            this.guard = guard;
        }

        @Override
        public void run() {
            long c = guard.close();
            if (c == 0)
                return;
            AsyncQueue q;
            Observer o;
            synchronized (this) {
                q = queue;
                queue = null;
                o = observer;
                observer = null;
            }
            if (q != null)
                q.close();
            if (o != null) {
                Native.observerSet(c, 0); // its ring stays allocated: bgjni_observe.c says why
                o.stop();
            }
            Native.clientClose(c);
        }
    }

    private Client(long ptr) {
        this.guard = new Guard(ptr, "the client is closed: open another with Client.open");
        this.state = new State(guard);
        this.cleanable = Guard.CLEANER.register(this, state);
    }

    /** A client with default options. @throws BloomGuardException.BadUrl for a malformed URL */
    public static Client open(String url) {
        return open(url, Options.DEFAULTS);
    }

    /** A client with options. @throws BloomGuardException.BadUrl for a malformed URL */
    public static Client open(String url, Options options) {
        byte[] u = Items.cstring(url, "url");
        if (options == null)
            throw new NullPointerException("options is null (use Client.open(url) for the defaults)");
        NativeLoader.load();
        options.check();
        return new Client(Native.clientOpen(u, options.keys(), options.values(), options.stringKeys(),
                                            options.stringValues()));
    }

    /** The C library's version ("0.2.0"). */
    public static String version() {
        NativeLoader.load();
        return Native.version();
    }

    /** A handle on the filter {@code name} (no I/O). @throws BloomGuardException.BadName when its keys
     *  would land on two cluster slots (e.g. "a{}b") */
    public Filter filter(String name) {
        byte[] n = Items.cstring(name, "filter name");
        long c = guard.enter();
        try {
            return new Filter(this, name, Native.filterOpen(c, n));
        } finally {
            guard.exit();
        }
    }

    /** A lock on key {@code name + ":lock"} (no I/O): Redisson's {@code getLock(name + ":lock")}. */
    public Lock lock(String name) {
        byte[] n = Items.cstring(name, "lock name");
        long c = guard.enter();
        try {
            return new Lock(Native.lockOpen(c, n));
        } finally {
            guard.exit();
        }
    }

    /**
     * Sets (null: removes) the listener of the client's events: breaker changes, degraded answers
     * (sampled), rotations, connections lost, locks lost, cluster map changes and failovers. It
     * runs on a daemon thread of its own, in order; a listener that throws misses nothing else.
     */
    public void setObserver(java.util.function.Consumer<Event> listener) {
        Observer old;
        long c = guard.enter();
        try {
            synchronized (state) {
                old = state.observer;
                if (listener == null) {
                    Native.observerSet(c, 0);
                    state.observer = null;
                } else {
                    // a new ring per listener: the old one may still get an event being delivered now
                    Observer o = new Observer(Native.observerNew(), listener);
                    Native.observerSet(c, o.ring());
                    state.observer = o;
                }
            }
        } finally {
            guard.exit();
        }
        if (old != null)
            old.stop(); // outside the locks: it waits for the old listener's last events
    }

    /** Events dropped since the observer was set because 256 were already waiting for its listener. */
    public long droppedEvents() {
        synchronized (state) {
            return state.observer == null ? 0 : state.observer.dropped();
        }
    }

    /** One round trip (PING). */
    public void ping() {
        long c = guard.enter();
        try {
            Native.clientPing(c);
        } finally {
            guard.exit();
        }
    }

    public boolean isClosed() {
        return guard.isClosed();
    }

    /** Idempotent; waits for blocking calls running on the client itself (open, ping). */
    @Override
    public void close() {
        guard.checkClosable();
        cleanable.clean();
    }

    /** Frees a closed filter's policy fallbacks once no call can reach them (AsyncQueue.freeFallbacks). */
    void freeFallbacks(List<Long> fbs) {
        if (fbs.isEmpty())
            return;
        AsyncQueue q;
        synchronized (state) {
            q = state.everQueue;
        }
        if (q != null) {
            q.freeFallbacks(fbs);
        } else {
            for (long fb : fbs)
                Native.fallbackFree(fb);
        }
    }

    /** The client's submission queue, opened on first use. */
    AsyncQueue queue() {
        synchronized (state) {
            if (state.queue != null)
                return state.queue;
            long c = guard.enter();
            try {
                state.queue = new AsyncQueue(Native.queueOpen(c));
                state.everQueue = state.queue;
                return state.queue;
            } finally {
                guard.exit();
            }
        }
    }

    /** Client settings (integer options of bloomguard/options.h). */
    public static final class Options {
        static final Options DEFAULTS = builder().build();

        // BG_OPT_* values (options.h)
        private static final int CONNECT_TIMEOUT_MS = 1, COMMAND_TIMEOUT_MS = 2, POOL_SIZE = 3,
            CONFIG_RETRIES = 5, WRITE_LOCK_WAIT_MS = 6, TLS_VERIFY = 11, CONNECT_AT_OPEN = 15, USERNAME = 101, PASSWORD = 102, CLIENT_NAME = 103,
            TLS_CA_FILE = 106, TLS_CERT_FILE = 108, TLS_KEY_FILE = 109, TLS_SERVER_NAME = 110;

        private final List<Integer> keys = new ArrayList<>();
        private final List<Long> values = new ArrayList<>();
        private final List<String> names = new ArrayList<>();
        private final List<Integer> stringKeys = new ArrayList<>();
        private final List<byte[]> stringValues = new ArrayList<>();

        private Options() {}

        int[] stringKeys() {
            return stringKeys.stream().mapToInt(Integer::intValue).toArray();
        }

        byte[][] stringValues() {
            return stringValues.toArray(new byte[0][]);
        }

        public static Builder builder() {
            return new Builder();
        }

        int[] keys() {
            return keys.stream().mapToInt(Integer::intValue).toArray();
        }

        long[] values() {
            return values.stream().mapToLong(Long::longValue).toArray();
        }

        /* The ranges are the library's (bg_options_bounds): one home for them. */
        void check() {
            long[] b = new long[2];
            for (int i = 0; i < keys.size(); i++) {
                int st = Native.optionBounds(keys.get(i), b);
                if (st != 0)
                    throw BloomGuardException.create(st, names.get(i) + ": not an option of this library");
                long v = values.get(i);
                if (v < b[0] || v > b[1])
                    throw new IllegalArgumentException(names.get(i) + " is " + v + ": it must be within "
                                                       + b[0] + ".." + b[1]);
            }
        }

        public static final class Builder {
            private final Options o = new Options();

            private Builder set(int key, long value, String name) {
                o.keys.add(key);
                o.values.add(value);
                o.names.add(name);
                return this;
            }

            /** Connections kept by the client (default 4). */
            public Builder poolSize(int connections) {
                return set(POOL_SIZE, connections, "poolSize");
            }

            /** A connection's connect (and handshakes) deadline (default 2 s). */
            public Builder connectTimeout(Duration d) {
                return set(CONNECT_TIMEOUT_MS, millis(d, "connectTimeout"), "connectTimeout (ms)");
            }

            /** Each reply's deadline (default 1 s). */
            public Builder commandTimeout(Duration d) {
                return set(COMMAND_TIMEOUT_MS, millis(d, "commandTimeout"), "commandTimeout (ms)");
            }

            private Builder setString(int key, String value, String name) {
                o.stringKeys.add(key);
                o.stringValues.add(Items.cstring(value, name));
                return this;
            }

            /** The ACL user (overrides the URL's). */
            public Builder username(String user) {
                return setString(USERNAME, user, "username");
            }

            /** The password (overrides the URL's; never echoed in messages). */
            public Builder password(String password) {
                return setString(PASSWORD, password, "password");
            }

            /** CLIENT SETNAME on every connection (default "bloomguard"). */
            public Builder clientName(String name) {
                return setString(CLIENT_NAME, name, "clientName");
            }

            /** TLS: a PEM file of the CAs to trust (default: the system's trust store); turns TLS on. */
            public Builder tlsCaFile(String path) {
                return setString(TLS_CA_FILE, path, "tlsCaFile");
            }

            /** TLS: a PEM client certificate (chain) and its unencrypted PEM key; turn TLS on. */
            public Builder tlsClientCertificate(String certFile, String keyFile) {
                setString(TLS_CERT_FILE, certFile, "tlsClientCertificate: certFile");
                return setString(TLS_KEY_FILE, keyFile, "tlsClientCertificate: keyFile");
            }

            /** TLS: the SNI and the name the certificate must be for (default: the host connected to). */
            public Builder tlsServerName(String name) {
                return setString(TLS_SERVER_NAME, name, "tlsServerName");
            }

            /** TLS: false checks neither the certificate nor the name (testing only). */
            public Builder tlsVerify(boolean yes) {
                return set(TLS_VERIFY, yes ? 1 : 0, "tlsVerify");
            }

            /** How long a query waits while its filter is write-locked (a LOCKED rotation's rewrite)
             *  before failing with {@link BloomGuardException.Locked} (default 100 ms). */
            public Builder writeLockWait(Duration d) {
                return set(WRITE_LOCK_WAIT_MS, millis(d, "writeLockWait"), "writeLockWait (ms)");
            }

            /** How often a call whose filter's config changed under it (a rotation to other (n, p)
             *  committed meanwhile) is sent again with the new config before it fails with
             *  {@link BloomGuardException.ConfigChanged} (default 5). */
            public Builder configRetries(int retries) {
                return set(CONFIG_RETRIES, retries, "configRetries");
            }

            /** true: {@link Client#open} reaches the server, so a wrong address or password fails there. */
            public Builder connectAtOpen(boolean yes) {
                return set(CONNECT_AT_OPEN, yes ? 1 : 0, "connectAtOpen");
            }

            /** A copy: the builder may go on without changing it. */
            public Options build() {
                Options c = new Options();
                c.keys.addAll(o.keys);
                c.values.addAll(o.values);
                c.names.addAll(o.names);
                c.stringKeys.addAll(o.stringKeys);
                c.stringValues.addAll(o.stringValues);
                return c;
            }

            private static long millis(Duration d, String what) {
                if (d == null)
                    throw new NullPointerException(what + " is null");
                return d.toMillis();
            }
        }
    }
}
