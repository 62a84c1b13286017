package io.bloomguard;

/** How {@link Filter#rotate} rebuilds a live filter (docs/rotation.md). */
public enum Strategy {
    /** Builds the next generation aside and swaps bitmap and config in one atomic step (the default). */
    SWAP(1),
    /** Rewrites the live bitmap in place under the filter's write lock; bloomguard readers wait for it. */
    LOCKED(3);

    final int code; // BG_ROTATE_* (rotation.h)

    Strategy(int code) {
        this.code = code;
    }
}
