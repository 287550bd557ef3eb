package entitlements.launcher;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.Properties;
import java.util.UUID;

/**
 * The launcher's settings, read from one properties file that {@code entitlements consume} writes from the
 * project's settings. Keys are documented in pipeline/launcher/README.md.
 */
final class LauncherConfig {
    final String executableName;
    final String applicationName;
    final String workerId;
    final String region;
    // "dynamodb-streams" (the table's DynamoDB Stream, through the adapter) or "kinesis" (the Kinesis data
    // stream the table streams to, read by KCL directly).
    final String sourceKind;
    final Optional<String> kinesisStreamArn;
    final Optional<URI> kinesisEndpoint;
    final Optional<String> streamArn;
    final Optional<String> tableName;
    final Optional<URI> dynamoDbEndpoint;
    final Optional<URI> streamsEndpoint;
    final Optional<URI> cloudWatchEndpoint;
    final String initialPosition;
    final long idleTimeBetweenReadsMillis;
    final long failoverTimeMillis;
    final long leaseAssignmentIntervalMillis;
    final long shardSyncIntervalMillis;
    final long parentShardPollIntervalMillis;
    final long workerMetricsCaptureFrequencyMillis;
    final long workerMetricsReporterFreqMillis;
    final String workerMetrics;
    final boolean gracefulLeaseHandoff;
    final int maxRecords;
    final int maxGetRecordsPerSecond;
    final boolean metricsEnabled;
    final Optional<Integer> processingTimeoutSeconds;
    final long shutdownTimeoutMillis;

    private LauncherConfig(Properties p) {
        executableName = required(p, "executableName");
        applicationName = required(p, "applicationName");
        workerId = p.getProperty("workerId", "worker-" + UUID.randomUUID());
        region = required(p, "regionName");
        sourceKind = p.getProperty("sourceKind", "dynamodb-streams").trim();
        kinesisStreamArn = optional(p, "kinesisStreamArn");
        kinesisEndpoint = optional(p, "kinesisEndpoint").map(URI::create);
        streamArn = optional(p, "streamArn");
        tableName = optional(p, "tableName");
        switch (sourceKind) {
            case "kinesis" -> {
                if (kinesisStreamArn.isEmpty()) {
                    throw new IllegalArgumentException("sourceKind kinesis needs kinesisStreamArn");
                }
            }
            case "dynamodb-streams" -> {
                if (streamArn.isEmpty() && tableName.isEmpty()) {
                    throw new IllegalArgumentException("either streamArn or tableName is required");
                }
            }
            default -> throw new IllegalArgumentException("sourceKind must be dynamodb-streams or kinesis");
        }
        dynamoDbEndpoint = optional(p, "dynamoDbEndpoint").map(URI::create);
        streamsEndpoint = optional(p, "streamsEndpoint").map(URI::create);
        cloudWatchEndpoint = optional(p, "cloudWatchEndpoint").map(URI::create);
        initialPosition = p.getProperty("initialPositionInStream", "TRIM_HORIZON");
        idleTimeBetweenReadsMillis = longValue(p, "idleTimeBetweenReadsInMillis", 1000L);
        failoverTimeMillis = longValue(p, "failoverTimeMillis", 10_000L);
        leaseAssignmentIntervalMillis = longValue(p, "leaseAssignmentIntervalMillis", 2 * failoverTimeMillis);
        shardSyncIntervalMillis = longValue(p, "shardSyncIntervalMillis", 60_000L);
        parentShardPollIntervalMillis = longValue(p, "parentShardPollIntervalMillis", 10_000L);
        // KCL starts the worker-metrics reporter after twice the capture period; the leader assigns leases
        // only to workers that have reported within two reporter periods.
        workerMetricsCaptureFrequencyMillis = longValue(p, "inMemoryWorkerMetricsCaptureFrequencyMillis", 250L);
        workerMetricsReporterFreqMillis =
                longValue(p, "workerMetricsReporterFreqInMillis", Math.max(1000L, failoverTimeMillis / 2));
        workerMetrics = p.getProperty("workerMetrics", "cpu").trim();
        gracefulLeaseHandoff = Boolean.parseBoolean(p.getProperty("gracefulLeaseHandoff", "false"));
        maxRecords = (int) longValue(p, "maxRecords", 1000L);
        // DynamoDB Streams' limit, and Kinesis's: 5 GetRecords calls a second a shard.
        maxGetRecordsPerSecond = (int) longValue(p, "maxGetRecordsPerSecond", 5L);
        metricsEnabled = Boolean.parseBoolean(p.getProperty("metricsEnabled", "false"));
        processingTimeoutSeconds = optional(p, "timeoutInSeconds").map(Integer::valueOf);
        shutdownTimeoutMillis = longValue(p, "shutdownTimeoutMillis", 60_000L);
    }

    boolean kinesisSource() {
        return sourceKind.equals("kinesis");
    }

    static LauncherConfig load(Path file) throws IOException {
        Properties properties = new Properties();
        try (InputStream in = Files.newInputStream(file)) {
            properties.load(in);
        }
        return new LauncherConfig(properties);
    }

    private static String required(Properties p, String key) {
        return optional(p, key).orElseThrow(() -> new IllegalArgumentException(key + " is required"));
    }

    private static Optional<String> optional(Properties p, String key) {
        String value = p.getProperty(key);
        return value == null || value.isBlank() ? Optional.empty() : Optional.of(value.trim());
    }

    private static long longValue(Properties p, String key, long fallback) {
        return optional(p, key).map(Long::parseLong).orElse(fallback);
    }
}
