package io.bloomguard;

import java.util.List;

/**
 * A degrade policy's fallback ({@link Policy.Action#CALLBACK}): answers for items the filter could
 * not ask Redis about, typically from the source of truth. Runs on the thread making the query (for
 * an async call, the client's queue thread), with no lock of the binding held; it must not call
 * the same filter. Return one answer per item, in order; return null (or throw) to decline, and
 * the policy's chain moves on to its next action.
 */
@FunctionalInterface
public interface Fallback {
    boolean[] answer(List<byte[]> items) throws Exception;
}
