package entitlements.launcher;

import software.amazon.kinesis.retrieval.polling.SleepTimeController;
import software.amazon.kinesis.retrieval.polling.SleepTimeControllerConfig;

/**
 * The wait KCL sleeps before each GetRecords call of a shard: none after a batch with records (a backlog
 * or traffic: the shard reads on at once, catching up), the adapter's own ({@code delegate},
 * {@code DynamoDBStreamsSleepTimeController}: twice the idle time from the end of the call) after an
 * empty batch and before the first call. The calls' rate stays capped at the call itself
 * ({@link CallSpacing}).
 *
 * <p>Why: the adapter waits the idle time from the end of every non-empty call, so a backlog drains at
 * maxRecords / (idle + call) (on moto, whose 1,000-record pages take about 1 s, about 0.83 of what moto
 * serves), and at the settings' floor of 100 ms idle a shard with traffic saw up to about 6.7 calls a
 * second, above DynamoDB Streams' 5. The adapter's own catch-up mode came in 2.1.0, which the Maven mirror
 * here does not serve.
 */
public final class CatchUpSleepTimeController implements SleepTimeController {
    private final SleepTimeController delegate;

    public CatchUpSleepTimeController(SleepTimeController delegate) {
        this.delegate = delegate;
    }

    @Override
    public long getSleepTimeMillis(SleepTimeControllerConfig config) {
        Integer records = config.lastRecordsCount();
        if (config.lastSuccessfulCall() != null && records != null && records > 0) {
            return 0L;
        }
        return Math.max(0L, delegate.getSleepTimeMillis(config));
    }
}
