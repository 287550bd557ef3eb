package entitlements.launcher;

import com.amazonaws.services.dynamodbv2.streamsadapter.polling.DynamoDBStreamsPollingConfig;
import java.util.function.Function;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.retrieval.DataFetcherProviderConfig;
import software.amazon.kinesis.retrieval.polling.DataFetcher;
import software.amazon.kinesis.retrieval.polling.SleepTimeController;

/**
 * The adapter's polling config with each shard's GetRecords calls at most {@code maxCallsPerSecond}
 * ({@link CallSpacing}, kept at the call by {@link RateLimitedDataFetchers}) and read back to back within
 * that cap while batches hold records ({@link CatchUpSleepTimeController}).
 *
 * <p>KCL's {@code PollingConfig.sleepTimeController} and {@code dataFetcherProvider} are its settings for
 * these, but the adapter's {@code StreamsSchedulerFactory.createScheduler} sets both to the adapter's own
 * on the config it is given. So the launcher wraps whatever is set when KCL reads them (the adapter's)
 * rather than replacing them: the adapter's fetcher and its wait after an empty batch stay.
 */
final class RateCappedPollingConfig extends DynamoDBStreamsPollingConfig {
    private final int maxCallsPerSecond;
    private SleepTimeController wrappedController;
    private SleepTimeController controller;
    private Function<DataFetcherProviderConfig, DataFetcher> wrappedProvider;
    private Function<DataFetcherProviderConfig, DataFetcher> provider;

    RateCappedPollingConfig(KinesisAsyncClient client, int maxCallsPerSecond) {
        super(client);
        this.maxCallsPerSecond = maxCallsPerSecond;
    }

    @Override
    public synchronized SleepTimeController sleepTimeController() {
        SleepTimeController current = super.sleepTimeController();
        if (controller == null || wrappedController != current) {
            controller = new CatchUpSleepTimeController(current);
            wrappedController = current;
        }
        return controller;
    }

    @Override
    public synchronized Function<DataFetcherProviderConfig, DataFetcher> dataFetcherProvider() {
        Function<DataFetcherProviderConfig, DataFetcher> current = super.dataFetcherProvider();
        if (current == null) {
            return null;  // KCL's own fetcher (no provider set): the adapter always sets one
        }
        if (provider == null || wrappedProvider != current) {
            provider = RateLimitedDataFetchers.wrap(current, maxCallsPerSecond, idleTimeBetweenReadsInMillis());
            wrappedProvider = current;
        }
        return provider;
    }
}
