package entitlements.launcher;

import software.amazon.awssdk.arns.Arn;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClient;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.common.InitialPositionInStream;
import software.amazon.kinesis.common.InitialPositionInStreamExtended;
import software.amazon.kinesis.common.StreamIdentifier;
import software.amazon.kinesis.coordinator.Scheduler;
import software.amazon.kinesis.processor.ShardRecordProcessorFactory;
import software.amazon.kinesis.processor.SingleStreamTracker;

/**
 * KCL's scheduler over a Kinesis data stream (Kinesis Data Streams for DynamoDB: the table streams its
 * changes there), read directly by KCL, with no adapter. The children are the same multilang processors;
 * each record's data is the Kinesis record's own bytes (the JSON envelope DynamoDB wrote), which the
 * Python child decodes as Kinesis's (pipeline/_kinesis_envelope.py) and whose duplicates and per-item
 * order it resolves (pipeline/item_order.py).
 *
 * <p>The lease tables are the application's ({@code applicationName}; the Python side names a Kinesis
 * consumer's application apart from the DynamoDB Streams consumer's, so both can run at once). The stream
 * is named by its ARN, so KCL's calls carry StreamARN and cannot reach a same-named stream elsewhere.
 */
final class KinesisSchedulers {
    private KinesisSchedulers() {}

    static Scheduler create(
            LauncherConfig config,
            Region region,
            AwsCredentialsProvider credentials,
            DynamoDbAsyncClient dynamo,
            CloudWatchAsyncClient cloudWatch,
            ShardRecordProcessorFactory processors) {
        KinesisAsyncClient kinesis = KinesisClients.http1Json(region, credentials, config.kinesisEndpoint);
        SingleStreamTracker tracker = new SingleStreamTracker(
                StreamIdentifier.singleStreamInstance(Arn.fromString(config.kinesisStreamArn.orElseThrow())),
                InitialPositionInStreamExtended.newInitialPosition(
                        InitialPositionInStream.valueOf(config.initialPosition)));
        ConfigsBuilder configs = new ConfigsBuilder(
                tracker, config.applicationName, kinesis, dynamo, cloudWatch, config.workerId, processors);
        return new Scheduler(
                configs.checkpointConfig(),
                // As the adapter does for DynamoDB Streams: leases the launcher wrote before the scheduler
                // (StreamsMultiLangLauncher.createShardLeases) skip the start-up shard sync; the leader's
                // periodic sync still finds new shards (a split or a merge).
                configs.coordinatorConfig()
                        .parentShardPollIntervalMillis(config.parentShardPollIntervalMillis)
                        .skipShardSyncAtWorkerInitializationIfLeasesExist(true),
                SchedulerSettings.leases(configs, config),
                configs.lifecycleConfig(),
                SchedulerSettings.metrics(configs, config),
                // Empty batches let the child commit on its interval while the stream is quiet.
                configs.processorConfig().callProcessRecordsEvenForEmptyRecordList(true),
                configs.retrievalConfig().retrievalSpecificConfig(KinesisPolling.rateCapped(
                        kinesis,
                        config.maxGetRecordsPerSecond,
                        config.idleTimeBetweenReadsMillis,
                        config.maxRecords)));
    }
}
