package io.bloomguard;

/**
 * A filter handle's counters (BG_STAT_* of bloomguard/stats.h), counted with or without a policy
 * since the handle was opened, in this process: {@link Filter#stats()}.
 */
public enum Stat {
    QUERIES(1), ANSWERS_REDIS(2), ANSWERS_SNAPSHOT(3), ANSWERS_CALLBACK(4), ANSWERS_ASSUMED_PRESENT(5),
    ANSWERS_ASSUMED_ABSENT(6), QUERY_ERRORS(7), ADDS(8), ADD_ERRORS(9), RETRIES(10),
    /** 0 closed, 1 open, 2 half-open (one probe in flight). */
    BREAKER_STATE(11),
    BREAKER_TRIPS(12), BREAKER_REJECTED(13), BREAKER_PROBES(14), CALLBACK_CALLS(15), CALLBACK_REFUSED(16),
    CALLBACK_DECLINED(17), ROTATIONS(18), SNAPSHOT_REFRESHES(19), SNAPSHOT_FAILURES(20),
    /** The snapshot's age; -1 when there is none. */
    SNAPSHOT_AGE_MS(21),
    SNAPSHOT_BYTES(22), TRACKED_READS(23), TRACKED_STALE(24), CLUSTER_MOVED(25), CLUSTER_ASK(26),
    CLUSTER_BUSY_RETRIES(27), CLUSTER_MAP_RELOADS(28),
    /** Failures by class (the policy's {@link Policy.Failure}), degraded or not. */
    FAIL_NOT_INITIALIZED(101), FAIL_CONFIG_CHANGED(102), FAIL_LOCKED(103), FAIL_CONNECTION(104),
    FAIL_TIMEOUT(105), FAIL_SERVER(106), FAIL_CORRUPT(107), FAIL_OTHER(108);

    final int code;

    Stat(int code) {
        this.code = code;
    }
}
