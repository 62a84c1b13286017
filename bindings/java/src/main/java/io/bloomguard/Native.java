package io.bloomguard;

/**
 * The JNI entry points (src/main/c/bgjni_*.c). Handles are C pointers as longs: only the guarded
 * classes (Client, Filter, Rotation, AsyncQueue) call these, never with a closed handle. Every
 * caller makes sure {@link NativeLoader#load()} ran first.
 */
final class Native {
    private Native() {}

    /** Polled by the calls' waits (bgj_call's interrupt callback): an interrupted thread stops waiting. */
    static boolean interrupted() {
        return Thread.currentThread().isInterrupted();
    }

    // bgjni_client.c
    static native long clientOpen(byte[] url, int[] optionKeys, long[] optionValues, int[] stringKeys,
                                  byte[][] stringValues);
    static native void clientClose(long client);
    static native void clientPing(long client);
    static native int optionBounds(int option, long[] out);
    static native String version();
    static native String statusName(int status);
    static native String strerror(int status);

    // bgjni_filter.c
    static native long filterOpen(long client, byte[] name);
    static native void filterClose(long filter);
    static native boolean filterInit(long filter, long expectedInsertions, double falseProbability);
    static native boolean filterAdd(long filter, byte[] item);
    static native long filterAddMany(long filter, byte[][] items);
    static native boolean filterContains(long filter, byte[] item);
    static native boolean[] filterContainsMany(long filter, byte[][] items);
    static native long filterCount(long filter);
    static native void filterInfo(long filter, long[] out);
    static native boolean filterDelete(long filter);
    static native boolean filterExpire(long filter, long ttlMs);
    static native boolean filterPersist(long filter);

    // bgjni_rotation.c
    static native long rotationBegin(long filter, long expectedInsertions, double falseProbability, int strategy,
                                     long waitMs);
    static native void rotationAdd(long rotation, byte[] item);
    static native void rotationAddMany(long rotation, byte[][] items);
    static native void rotationCommit(long rotation);
    static native void rotationFree(long rotation);

    // bgjni_policy.c
    static native long fallbackNew(Fallback fn);
    static native void fallbackFree(long fallback);
    static native long policyNew();
    static native void policyFree(long policy);
    static native void policySetInt(long policy, int setting, long value, String name);
    static native void policySetChain(long policy, int failClass, int[] actions);
    static native void policySetFallback(long policy, long fallback);
    static native void filterSetPolicy(long filter, long policy);
    static native byte[] filterQuery(long filter, byte[] item, int[] out);
    static native void filterStats(long filter, int[] ids, long[] out);

    // bgjni_lock.c
    static native long lockOpen(long client, byte[] name);
    static native long lockOpenFilter(long filter);
    static native void lockClose(long lock);
    static native long lockAcquire(long lock, int mode, long waitMs);
    static native void lockRelease(long lock);
    static native boolean lockRetire(long lock);
    static native boolean lockHeld(long lock, long[] out);
    static native byte[] lockKey(long lock);

    // bgjni_observe.c
    static native long observerNew();
    static native void observerSet(long client, long observer);
    static native int observerWait(long observer, int timeoutMs);
    static native int observerDrain(long observer, int[] kinds, byte[][] names, long[] values, byte[][] messages,
                                    long[] dropped);

    static native int filterHistograms(long filter, String[] ops, String[] outcomes, long[][] counts, double[] sums,
                                       double[] bounds);

    // bgjni_queue.c
    static native long queueOpen(long client);
    static native void queueClose(long queue);
    static native int queueFd(long queue);
    static native int queueWait(int fd, int timeoutMs);
    static native void queueCancel(long queue, long tag);
    static native void queueSubmit(long queue, long filter, int op, long tag, byte[] item, byte[][] items, long a,
                                   double b);
    static native int queuePoll(long queue, long[] tags, int[] statuses, long[] values, Object[] extras);
}
