package entitlements.launcher.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.filter.Filter;
import ch.qos.logback.core.spi.FilterReply;

/** Drops a known-benign line whose lowered level is below the log's threshold (KCL_LOG_LEVEL). */
public final class KnownBenignFilter extends Filter<ILoggingEvent> {
    private final boolean localStack = KnownBenignLines.localStack();
    private Level threshold = Level.INFO;

    public void setThreshold(String level) {
        threshold = Level.toLevel(level, Level.INFO);
    }

    @Override
    public FilterReply decide(ILoggingEvent event) {
        Level level = KnownBenignLines.effectiveLevel(event, localStack);
        return level.isGreaterOrEqual(threshold) ? FilterReply.NEUTRAL : FilterReply.DENY;
    }
}
