package io.bloomguard;

/**
 * A filter's config hash, as Redisson writes it: the bitmap's size in bits, the number of hash
 * functions, and the (expectedInsertions, falseProbability) it was made for (0 when the hash lacks
 * those fields).
 */
public record Info(long size, int hashIterations, long expectedInsertions, double falseProbability) {
    static Info of(long[] v) {
        return new Info(v[0], (int) v[1], v[2], Double.longBitsToDouble(v[3]));
    }
}
