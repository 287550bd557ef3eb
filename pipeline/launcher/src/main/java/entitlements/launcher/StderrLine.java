package entitlements.launcher;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One JSON line on the JVM's stderr, in the children's field names, for the few launcher events an
 * operator must see in the log stream (a bad command line, the launcher stopping). The exception is
 * named by its class only: messages and traces can carry data.
 */
final class StderrLine {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final DateTimeFormatter TS = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSxxx");

    private StderrLine() {}

    static void write(String level, String message, Throwable failure) {
        Map<String, String> entry = new LinkedHashMap<>();
        entry.put("ts", OffsetDateTime.now(ZoneOffset.UTC).format(TS));
        entry.put("level", level);
        entry.put("logger", "entitlements.launcher");
        entry.put("msg", message);
        if (failure != null) {
            entry.put("exception", failure.getClass().getName());
        }
        try {
            System.err.println(JSON.writeValueAsString(entry));
        } catch (Exception unwritable) {
            System.err.println("{\"level\": \"ERROR\", \"logger\": \"entitlements.launcher\", \"msg\": \"unloggable\"}");
        }
    }
}
