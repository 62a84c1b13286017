package io.bloomguard;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * What a filter answers when Redis cannot: the C library's degrade policy (docs/policy.md), given
 * to a filter with {@link Filter#setPolicy}. Each failure class maps to a chain of actions tried in
 * order until one answers; a degraded answer is a success, and {@link Filter#query} says where it
 * came from. Unset settings keep the library's defaults (retry briefly, then fail open; a circuit
 * breaker after 5 connection or timeout failures).
 *
 * <pre>{@code
 * Policy policy = Policy.builder()
 *     .chain(Policy.Failure.CONNECTION, Policy.Action.RETRY, Policy.Action.CALLBACK, Policy.Action.ASSUME_PRESENT)
 *     .fallback(items -> database.mightContain(items))
 *     .build();
 * filter.setPolicy(policy);
 * }</pre>
 */
public final class Policy {
    /** Failure classes (BG_FAIL_*). */
    public enum Failure {
        NOT_INITIALIZED(1), CONFIG_CHANGED(2), LOCKED(3), CONNECTION(4), TIMEOUT(5), SERVER(6), CORRUPT(7), OTHER(8);

        final int code;

        Failure(int code) {
            this.code = code;
        }
    }

    /** Actions of a chain (BG_ACT_*). */
    public enum Action {
        RETRY(1), SNAPSHOT(2), CALLBACK(3), ASSUME_PRESENT(4), ASSUME_ABSENT(5), ERROR(6);

        final int code;

        Action(int code) {
            this.code = code;
        }
    }

    // BG_POLICY_* settings (policy.h)
    private static final int RETRY_COUNT = 1, BACKOFF_BASE_MS = 2, BACKOFF_MAX_MS = 3, BREAKER_THRESHOLD = 5,
        BREAKER_COOLDOWN_MS = 6, CALLBACK_RATE = 7, CALLBACK_BURST = 8, SNAPSHOT_INTERVAL_MS = 9,
        SNAPSHOT_MAX_AGE_MS = 10;

    private final Map<Failure, Action[]> chains;
    private final List<long[]> ints;       // {setting, value}
    private final List<String> names;
    private final Fallback fallback;

    private Policy(Builder b) {
        this.chains = new EnumMap<>(b.chains);
        this.ints = new ArrayList<>(b.ints);
        this.names = new ArrayList<>(b.names);
        this.fallback = b.fallback;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Called by the native fallback trampoline (bgjni_policy.c): null declines, whatever went wrong. */
    static boolean[] callFallback(Fallback f, byte[][] items) {
        try {
            return f.answer(Arrays.asList(items));
        } catch (Throwable e) {
            return null;
        }
    }

    /**
     * Builds the C policy and gives the filter a copy. Returns the native fallback handle the
     * filter now uses (0: none), which the caller frees once no call can reach it any more.
     */
    long applyTo(long filter) {
        long p = Native.policyNew(), fb = 0;
        boolean installed = false;
        try {
            for (int i = 0; i < ints.size(); i++)
                Native.policySetInt(p, (int) ints.get(i)[0], ints.get(i)[1], names.get(i));
            for (Map.Entry<Failure, Action[]> e : chains.entrySet())
                Native.policySetChain(p, e.getKey().code, Arrays.stream(e.getValue()).mapToInt(a -> a.code).toArray());
            if (fallback != null) {
                fb = Native.fallbackNew(fallback);
                Native.policySetFallback(p, fb);
            }
            Native.filterSetPolicy(filter, p);
            installed = true;
            return fb;
        } finally {
            Native.policyFree(p);
            if (!installed && fb != 0)
                Native.fallbackFree(fb);
        }
    }

    public static final class Builder {
        private final Map<Failure, Action[]> chains = new EnumMap<>(Failure.class);
        private final List<long[]> ints = new ArrayList<>();
        private final List<String> names = new ArrayList<>();
        private Fallback fallback;

        private Builder set(int setting, long value, String name) {
            ints.add(new long[] {setting, value});
            names.add(name);
            return this;
        }

        private static long ms(Duration d, String what) {
            if (d == null)
                throw new NullPointerException("policy " + what + " is null");
            return d.toMillis();
        }

        /** The actions for a failure class, tried in order (1 to 8). */
        public Builder chain(Failure failure, Action... actions) {
            if (failure == null)
                throw new NullPointerException("policy chain: the failure class is null");
            if (actions == null || actions.length == 0 || actions.length > 8)
                throw new IllegalArgumentException("policy chain for " + failure + ": 1 to 8 actions");
            for (Action a : actions)
                if (a == null)
                    throw new NullPointerException("policy chain for " + failure + ": an action is null");
            chains.put(failure, actions.clone());
            return this;
        }

        /** Attempts of one RETRY action (default 2). */
        public Builder retries(int count) {
            return set(RETRY_COUNT, count, "retries");
        }

        /** The wait before the first retry, doubled for each next, at most {@code max} (default 10 ms, 100 ms). */
        public Builder backoff(Duration base, Duration max) {
            set(BACKOFF_BASE_MS, ms(base, "backoff base"), "backoff base (ms)");
            return set(BACKOFF_MAX_MS, ms(max, "backoff max"), "backoff max (ms)");
        }

        /** Consecutive connection / timeout failures that open the breaker (0: none), and its cooldown. */
        public Builder breaker(int threshold, Duration cooldown) {
            set(BREAKER_THRESHOLD, threshold, "breaker threshold");
            return set(BREAKER_COOLDOWN_MS, ms(cooldown, "breaker cooldown"), "breaker cooldown (ms)");
        }

        /** The fallback's token bucket: calls per second (0: unlimited) and burst (default 100, 100). */
        public Builder callbackRate(int perSecond, int burst) {
            set(CALLBACK_RATE, perSecond, "callback rate");
            return set(CALLBACK_BURST, burst, "callback burst");
        }

        /** A local snapshot refreshed in the background every {@code interval}, used by the SNAPSHOT
         *  action while not older than {@code maxAge} (Duration.ZERO: any age). */
        public Builder snapshot(Duration interval, Duration maxAge) {
            set(SNAPSHOT_INTERVAL_MS, ms(interval, "snapshot interval"), "snapshot interval (ms)");
            return set(SNAPSHOT_MAX_AGE_MS, ms(maxAge, "snapshot max age"), "snapshot max age (ms)");
        }

        /** The CALLBACK action's answers (null removes it). */
        public Builder fallback(Fallback fn) {
            this.fallback = fn;
            return this;
        }

        public Policy build() {
            return new Policy(this);
        }
    }
}
