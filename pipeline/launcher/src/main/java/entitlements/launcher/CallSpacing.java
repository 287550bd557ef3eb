package entitlements.launcher;

/**
 * The least time between the starts of two GetRecords calls of one shard: the idle setting or
 * {@code 1250 / maxCallsPerSecond} ms (250 ms at 5 a second: 4 calls a second), whichever is longer, so
 * a shard never makes more than {@code maxCallsPerSecond} calls a second as the service counts them, and
 * a longer idle setting spaces them further.
 *
 * <p>Kept at the call itself ({@link RateLimitedDataFetchers}): the time is taken right before the request
 * is made, after any sleep KCL did, so a sleep that overran (a loaded host) cannot bring two calls
 * closer. A quarter over 1 s / max because the service counts calls by their arrival, which the network,
 * the client's event loop and the service's queue move: on a loaded 2-core host (load average 30) calls
 * 210 ms apart at the JVM arrived at moto as little as 177 ms apart, six in one second.
 * One instance per shard (its fetcher); not thread-safe, as a shard's calls are made one at a time.
 */
public final class CallSpacing {
    private final long intervalMillis;
    private long lastStart = Long.MIN_VALUE;

    public CallSpacing(int maxCallsPerSecond, long idleMillis) {
        if (maxCallsPerSecond < 1) {
            throw new IllegalArgumentException("maxCallsPerSecond must be at least 1");
        }
        this.intervalMillis = Math.max((1250L + maxCallsPerSecond - 1) / maxCallsPerSecond, idleMillis);
    }

    /** The wait before a call that would start at {@code nowMillis}; the call is taken to start after it. */
    public long waitBeforeCall(long nowMillis) {
        long wait = lastStart == Long.MIN_VALUE ? 0L : Math.max(0L, lastStart + intervalMillis - nowMillis);
        lastStart = nowMillis + wait;
        return wait;
    }
}
