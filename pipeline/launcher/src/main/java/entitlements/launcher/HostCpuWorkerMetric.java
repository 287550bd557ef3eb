package entitlements.launcher;

import java.lang.management.ManagementFactory;
import software.amazon.kinesis.worker.metric.OperatingRange;
import software.amazon.kinesis.worker.metric.WorkerMetric;
import software.amazon.kinesis.worker.metric.WorkerMetricType;

/**
 * The CPU utilisation KCL 3's lease balancing reads for this worker: the whole host's (or container's) recent
 * CPU load as the JVM sees it ({@code com.sun.management.OperatingSystemMXBean#getCpuLoad}, container-aware
 * since Java 14), in percent.
 *
 * <p>KCL's own choice of metric first asks where it runs: it probes the ECS and EKS metadata and then the
 * EC2 instance metadata address (169.254.169.254, with a 5 s timeout), a connection off the host that no
 * local run may make, and off EC2 it finds no CPU metric at all. Handing KCL this metric through its
 * public {@code workerMetricList} setting skips that probe and works on any host.
 */
final class HostCpuWorkerMetric implements WorkerMetric {

    // KCL's own CPU metrics declare the whole range usable: a worker is full at 100 %.
    private static final OperatingRange FULL_RANGE = OperatingRange.builder().maxUtilization(100).build();

    private final com.sun.management.OperatingSystemMXBean os;

    HostCpuWorkerMetric() {
        this.os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    }

    @Override
    public String getShortName() {
        return WorkerMetricType.CPU.getShortName();
    }

    @Override
    public WorkerMetricValue capture() {
        double load = os.getCpuLoad();
        // A negative load means "not available yet" (the first call): report an idle worker, not an error.
        return WorkerMetricValue.builder().value(load < 0 ? 0.0 : load * 100.0).build();
    }

    @Override
    public OperatingRange getOperatingRange() {
        return FULL_RANGE;
    }

    @Override
    public WorkerMetricType getWorkerMetricType() {
        return WorkerMetricType.CPU;
    }
}
