package io.bloomguard;

/**
 * A query's answer and its provenance ({@link Filter#query}): {@code present}, where it came from,
 * and for an answer of the degrade policy the status ({@link BloomGuardException#code()}) and the
 * message of the failure it stands for (0 and "" for an answer from Redis).
 */
public record Answer(boolean present, Source source, int degradedCode, String degradedMessage) {
    /** true when the degrade policy answered instead of Redis. */
    public boolean degraded() {
        return source != Source.REDIS && source != Source.NONE;
    }
}
