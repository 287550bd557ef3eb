package entitlements.launcher.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import net.logstash.logback.composite.AbstractFieldJsonProvider;

/**
 * The "level" field, under the names the Python side writes (WARN as WARNING), lowered for a known-benign
 * line; such a line also carries "kcl_level" (the level KCL gave it) and "benign" (the rule's name).
 */
public final class LoweredLevelJsonProvider extends AbstractFieldJsonProvider<ILoggingEvent> {
    private final boolean localStack = KnownBenignLines.localStack();

    public LoweredLevelJsonProvider() {
        setFieldName("level");
    }

    @Override
    public void writeTo(JsonGenerator generator, ILoggingEvent event) throws IOException {
        KnownBenignLines.Rule rule = KnownBenignLines.match(event, localStack);
        if (rule == null) {
            generator.writeStringField(getFieldName(), name(event.getLevel()));
            return;
        }
        generator.writeStringField(getFieldName(), name(rule.to()));
        generator.writeStringField("kcl_level", name(event.getLevel()));
        generator.writeStringField("benign", rule.name());
    }

    static String name(Level level) {
        return level.equals(Level.WARN) ? "WARNING" : level.toString();
    }
}
