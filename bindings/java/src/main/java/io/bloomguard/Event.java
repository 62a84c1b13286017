package io.bloomguard;

/**
 * What operators see (observe.h): an event of a client, its filters, locks and rotations, handed
 * to the listener of {@link Client#setObserver}. {@code name} is the filter's or lock's name ("" for
 * the client's own events); {@code message} is for a human and never holds a password. The values
 * a kind does not use are 0.
 */
public record Event(Kind kind, String name, String message, long status, long source, long count, long strategy,
                    long items, long bytes, long durationMicros) {
    /** BG_EVENT_* (observe.h). */
    public enum Kind {
        BREAKER_OPEN(1), BREAKER_HALF_OPEN(2), BREAKER_CLOSED(3), DEGRADED(4), ROTATION_BEGIN(5),
        ROTATION_COMMIT(6), ROTATION_ABORT(7), FAILOVER(8), CLUSTER_MAP(9), CONNECTION_LOST(10), LOCK_LOST(11),
        /** A kind this binding does not know yet (a newer library). */
        UNKNOWN(0);

        final int code;

        Kind(int code) {
            this.code = code;
        }

        static Kind of(int code) {
            for (Kind k : values())
                if (k.code == code)
                    return k;
            return UNKNOWN;
        }
    }

    // BG_EV_* positions: status, source, count, strategy, items, bytes, duration_us, first
    static Event of(int kind, String name, String message, long[] v, int at) {
        return new Event(Kind.of(kind), name, message, v[at], v[at + 1], v[at + 2], v[at + 3], v[at + 4], v[at + 5],
                         v[at + 6]);
    }
}
