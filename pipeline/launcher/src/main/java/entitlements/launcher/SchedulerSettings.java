package entitlements.launcher;

import java.util.List;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.leases.LeaseManagementConfig;
import software.amazon.kinesis.metrics.MetricsConfig;
import software.amazon.kinesis.metrics.NullMetricsFactory;

/**
 * The lease and metrics settings both sources' schedulers take from the properties (the DynamoDB Streams
 * path and the Kinesis path), in one place so that the two cannot drift apart.
 */
final class SchedulerSettings {
    private SchedulerSettings() {}

    static LeaseManagementConfig leases(ConfigsBuilder configs, LauncherConfig config) {
        LeaseManagementConfig leases = configs.leaseManagementConfig()
                .failoverTimeMillis(config.failoverTimeMillis)
                .leaseAssignmentIntervalMillis(config.leaseAssignmentIntervalMillis)
                .shardSyncIntervalMillis(config.shardSyncIntervalMillis);
        // Off by default: in KCL 3.1.3 a handoff asked of a shard consumer that has not initialised yet (a
        // lease the leader moves again within seconds of assigning it, as balancing does) is never finished
        // nor timed out; the old owner keeps renewing a lease it no longer processes and the shard is silent
        // until that worker restarts (awslabs/amazon-kinesis-client#1729, fixed after 3.1.3; seen here with
        // 3 workers over 8 shards). Without the handoff a moved lease is simply taken: the old owner's next
        // checkpoint is refused, and the new owner replays from the last checkpoint, which the lake drops.
        leases.gracefulLeaseHandoffConfig(LeaseManagementConfig.GracefulLeaseHandoffConfig.builder()
                .isGracefulLeaseHandoffEnabled(config.gracefulLeaseHandoff)
                .build());
        // Worker metrics feed KCL 3's utilisation-aware lease balancing. The reporter writes this worker's
        // WorkerMetricStats row (the leader assigns a worker leases only once it has one): the first report
        // after twice the capture period, then every period. "cpu" (the default) hands KCL our own CPU metric,
        // which needs no platform probe (HostCpuWorkerMetric); "platform" lets KCL pick its metric by probing
        // the ECS, EKS and EC2 metadata addresses; "off" reports empty rows (no balancing by load).
        LeaseManagementConfig.WorkerUtilizationAwareAssignmentConfig balancing =
                leases.workerUtilizationAwareAssignmentConfig()
                        .inMemoryWorkerMetricsCaptureFrequencyMillis(config.workerMetricsCaptureFrequencyMillis)
                        .workerMetricsReporterFreqInMillis(config.workerMetricsReporterFreqMillis);
        switch (config.workerMetrics) {
            case "cpu" -> balancing.workerMetricList(List.of(new HostCpuWorkerMetric()));
            case "platform" -> { }
            case "off" -> balancing.disableWorkerMetrics(true);
            default -> throw new IllegalArgumentException("workerMetrics must be cpu, platform or off");
        }
        return leases;
    }

    static MetricsConfig metrics(ConfigsBuilder configs, LauncherConfig config) {
        MetricsConfig metrics = configs.metricsConfig();
        if (!config.metricsEnabled) {
            metrics.metricsFactory(new NullMetricsFactory());
        }
        return metrics;
    }
}
