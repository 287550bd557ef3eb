package entitlements.launcher.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import java.util.List;

/**
 * KCL lines known to be benign, each lowered to the level its content deserves. Listed, with the reason
 * each is benign, in docs/operations/logs.md; a line is matched on its logger and the start of its
 * message template (never on values), so a new kind of message from the same logger keeps its level.
 */
public final class KnownBenignLines {
    /** Where a rule applies: everywhere, or only on the local stack (moto), where it was verified. */
    enum Scope { EVERYWHERE, LOCAL_STACK }

    record Rule(String logger, String templatePrefix, Level from, Level to, Scope scope, String name) {
        boolean matches(ILoggingEvent event, boolean localStack) {
            return event.getLevel().equals(from)
                    && event.getLoggerName().equals(logger)
                    && event.getMessage() != null
                    && event.getMessage().startsWith(templatePrefix)
                    && (scope == Scope.EVERYWHERE || localStack);
        }
    }

    static final List<Rule> RULES = List.of(
            // The leader decider answers "is the current leader" each time the scheduler's loop (every
            // second) and the lease-assignment cycle ask: a status, not an event.
            new Rule(
                    "software.amazon.kinesis.leader.DynamoDBLockBasedLeaderDecider",
                    "Worker : {} is the current leader",
                    Level.INFO,
                    Level.DEBUG,
                    Scope.EVERYWHERE,
                    "leader-status"),
            // The periodic shard sync audits the leases' hash-key ranges, a Kinesis notion: the adapter
            // gives every DynamoDB Streams shard the range 0..1, so the audit always finds a "hole" and
            // logs it at ERROR on each sync (every minute with the shipped interval). The adapter itself
            // says it "does not do hole tracking" (its StreamsSchedulerFactory warning at start).
            new Rule(
                    "software.amazon.kinesis.coordinator.PeriodicShardSyncManager",
                    "Incomplete hash range found for",
                    Level.ERROR,
                    Level.INFO,
                    Scope.LOCAL_STACK,
                    "hash-range-audit"));

    private KnownBenignLines() {}

    /** The rule a line matches, or null. */
    static Rule match(ILoggingEvent event, boolean localStack) {
        for (Rule rule : RULES) {
            if (rule.matches(event, localStack)) {
                return rule;
            }
        }
        return null;
    }

    /** The level the line is written at: its own, or the one a known-benign rule lowers it to. */
    public static Level effectiveLevel(ILoggingEvent event, boolean localStack) {
        Rule rule = match(event, localStack);
        return rule == null ? event.getLevel() : rule.to();
    }

    /** True on the local stack, as the launcher's environment says (set by `entitlements consume`). */
    public static boolean localStack() {
        return Boolean.parseBoolean(System.getenv().getOrDefault("KCL_LOCAL_STACK", "false"));
    }
}
