package io.bloomguard;

import java.util.Arrays;

/**
 * One latency histogram of a filter handle ({@link Filter#histograms()}, observe.h): the operation
 * ("contains", "add", ..., "rotate_swap") and outcome ("ok", "not_initialized", "timeout", ...)
 * it is for; {@code counts[i]} counts durations d with {@code upperBounds[i-1] < d <= upperBounds[i]}
 * (seconds; bound i is 2^i microseconds), the last count is open-ended; {@code sumSeconds} their
 * total.
 */
public record Histogram(String operation, String outcome, double[] upperBounds, long[] counts, double sumSeconds) {
    /** The operations recorded (the sum of the counts). */
    public long count() {
        return Arrays.stream(counts).sum();
    }
}
