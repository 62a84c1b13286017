package io.bloomguard;

/** Where an answer came from (BG_SOURCE_* of bloomguard/call.h). */
public enum Source {
    /** No answer (the call failed). */
    NONE,
    /** The server answered. */
    REDIS,
    /** The policy's local snapshot of the bitmap. */
    SNAPSHOT,
    /** The policy's {@link Fallback}. */
    CALLBACK,
    /** The policy's fail-open default. */
    ASSUMED_PRESENT,
    /** The policy's fail-closed default. */
    ASSUMED_ABSENT;

    static Source of(int code) {
        Source[] all = values();
        return code >= 0 && code < all.length ? all[code] : NONE; // the ordinals are the pinned values
    }
}
