package entitlements.launcher;

import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.retrieval.polling.KinesisDataFetcher;
import software.amazon.kinesis.retrieval.polling.KinesisSleepTimeController;
import software.amazon.kinesis.retrieval.polling.PollingConfig;

/**
 * KCL's own polling config for a Kinesis stream, paced as the DynamoDB Streams path is
 * ({@link RateCappedPollingConfig}): each shard's GetRecords calls start at least {@link CallSpacing}'s
 * interval apart (Kinesis, like DynamoDB Streams, allows 5 calls a second a shard), kept at the call by
 * {@link RateLimitedDataFetchers} around KCL's {@code KinesisDataFetcher}; no sleep after a batch with
 * records and KCL's own wait (the idle time from the last call) after an empty one
 * ({@link CatchUpSleepTimeController} around KCL's {@code KinesisSleepTimeController}).
 *
 * <p>Unlike the adapter's factory, KCL's {@code PollingConfig} keeps what it is given, so both are set
 * through its public setters ({@code dataFetcherProvider}, {@code sleepTimeController}) rather than
 * wrapped at read time. Polling, not enhanced fan-out: moto lacks SubscribeToShard, and polling needs no
 * HTTP/2 ({@link KinesisClients}).
 */
final class KinesisPolling {
    private KinesisPolling() {}

    static PollingConfig rateCapped(
            KinesisAsyncClient client, int maxCallsPerSecond, long idleMillis, int maxRecords) {
        PollingConfig polling = new PollingConfig(client)
                .idleTimeBetweenReadsInMillis(idleMillis)
                .maxRecords(maxRecords);
        return polling
                .sleepTimeController(new CatchUpSleepTimeController(new KinesisSleepTimeController()))
                .dataFetcherProvider(RateLimitedDataFetchers.wrap(
                        fetcherConfig -> new KinesisDataFetcher(client, fetcherConfig),
                        maxCallsPerSecond,
                        polling.idleTimeBetweenReadsInMillis()));
    }
}
