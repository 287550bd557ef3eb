package entitlements.launcher;

import com.amazonaws.services.dynamodbv2.streamsadapter.AmazonDynamoDBStreamsAdapterClient;
import com.amazonaws.services.dynamodbv2.streamsadapter.StreamsSchedulerFactory;
import com.amazonaws.services.dynamodbv2.streamsadapter.polling.DynamoDBStreamsPollingConfig;
import java.nio.file.Path;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.commons.beanutils.BeanUtilsBean;
import org.apache.commons.beanutils.ConvertUtilsBean;
import org.slf4j.Logger;
import sun.misc.Signal;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClient;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClientBuilder;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClientBuilder;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbClientBuilder;
import software.amazon.awssdk.services.dynamodb.model.DescribeTableRequest;
import software.amazon.awssdk.services.dynamodb.streams.DynamoDbStreamsClient;
import software.amazon.awssdk.services.dynamodb.streams.DynamoDbStreamsClientBuilder;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.common.InitialPositionInStream;
import software.amazon.kinesis.common.InitialPositionInStreamExtended;
import software.amazon.kinesis.common.StreamConfig;
import software.amazon.kinesis.coordinator.Scheduler;
import software.amazon.kinesis.leases.LeaseRefresher;
import software.amazon.kinesis.metrics.NullMetricsScope;
import software.amazon.kinesis.multilang.MultiLangRecordProcessorFactory;
import software.amazon.kinesis.multilang.config.MultiLangDaemonConfiguration;
import software.amazon.kinesis.processor.ShardRecordProcessorFactory;
import software.amazon.kinesis.processor.StreamTracker;
import software.amazon.kinesis.retrieval.RetrievalConfig;

/**
 * Runs amazon-kclpy record processors (child processes speaking the multilang protocol) over a DynamoDB
 * Stream (KCL 3's scheduler, fed by the DynamoDB Streams Kinesis Adapter) or, with {@code sourceKind =
 * kinesis}, over the Kinesis data stream the table streams its changes to (KCL's own Kinesis scheduler,
 * {@link KinesisSchedulers}).
 *
 * <p>Usage: {@code java -jar entitlements-kcl-launcher.jar launcher.properties}
 */
public final class StreamsMultiLangLauncher {
    private static final Logger LOG = LoggerFactory.getLogger(StreamsMultiLangLauncher.class);

    private StreamsMultiLangLauncher() {}

    public static void main(String[] args) {
        if (args.length != 1) {
            StderrLine.write("ERROR", "usage: entitlements-kcl-launcher <launcher.properties>", null);
            System.exit(2);
        }
        Thread.setDefaultUncaughtExceptionHandler((thread, failure) ->
                LOG.error("Uncaught exception in thread {}", thread.getName(), failure));
        try {
            run(args[0]);
        } catch (Throwable failure) {
            // In the KCL log and, as one JSON line, on stderr (the operator's stream): never a raw trace.
            LOG.error("The launcher stopped", failure);
            StderrLine.write("ERROR", "the KCL launcher stopped; see its log (KCL_LOG_FILE)", failure);
            System.exit(1);
        }
    }

    private static void run(String propertiesPath) throws Exception {
        LauncherConfig config = LauncherConfig.load(Path.of(propertiesPath));
        Region region = Region.of(config.region);
        DefaultCredentialsProvider credentials = DefaultCredentialsProvider.builder().build();

        DynamoDbAsyncClientBuilder dynamoBuilder =
                DynamoDbAsyncClient.builder().region(region).credentialsProvider(credentials);
        config.dynamoDbEndpoint.ifPresent(dynamoBuilder::endpointOverride);
        CloudWatchAsyncClientBuilder cloudWatchBuilder =
                CloudWatchAsyncClient.builder().region(region).credentialsProvider(credentials);
        config.cloudWatchEndpoint.ifPresent(cloudWatchBuilder::endpointOverride);

        ExecutorService childIo = Executors.newCachedThreadPool();
        ShardRecordProcessorFactory children = multiLangProcessors(config, childIo);
        Scheduler scheduler = config.kinesisSource()
                ? KinesisSchedulers.create(
                        config, region, credentials, dynamoBuilder.build(), cloudWatchBuilder.build(), children)
                : streamsScheduler(
                        config, region, credentials, dynamoBuilder.build(), cloudWatchBuilder.build(), children);

        createShardLeases(scheduler);

        Thread runner = new Thread(scheduler, "kcl-scheduler");
        // SIGTERM and SIGINT get a graceful shutdown through signal handlers rather than a shutdown hook:
        // when a child crashes the multilang processor calls System.exit, and a hook would then wait on
        // a graceful shutdown that the dead child can never complete. A crash must exit at once, with no
        // checkpoint, so the restarted daemon resumes from the last one.
        for (String name : new String[] {"TERM", "INT"}) {
            Signal.handle(new Signal(name), signal -> new Thread(() -> {
                shutDown(scheduler, runner, config);
                System.exit(0);
            }, "kcl-graceful-shutdown").start());
        }
        LOG.info("Starting worker {} of application {}", config.workerId, config.applicationName);
        runner.start();
        runner.join();
        childIo.shutdownNow();
    }

    /** KCL's scheduler over a DynamoDB Stream, fed by the DynamoDB Streams Kinesis Adapter. */
    private static Scheduler streamsScheduler(
            LauncherConfig config,
            Region region,
            DefaultCredentialsProvider credentials,
            DynamoDbAsyncClient dynamo,
            CloudWatchAsyncClient cloudWatch,
            ShardRecordProcessorFactory children) {
        DynamoDbStreamsClientBuilder streamsBuilder =
                DynamoDbStreamsClient.builder().region(region).credentialsProvider(credentials);
        config.streamsEndpoint.ifPresent(streamsBuilder::endpointOverride);

        String streamArn = config.streamArn.orElseGet(() -> latestStreamArn(config, region, credentials));
        AmazonDynamoDBStreamsAdapterClient adapterClient =
                new AmazonDynamoDBStreamsAdapterClient(streamsBuilder.build(), region);

        // The adapter's scheduler requires its own processor type: each child passed through.
        ShardRecordProcessorFactory processors = () -> new MultiLangStreamsProcessor(children.shardRecordProcessor());
        StreamTracker tracker = StreamsSchedulerFactory.createSingleStreamTracker(
                streamArn,
                InitialPositionInStreamExtended.newInitialPosition(
                        InitialPositionInStream.valueOf(config.initialPosition)));

        ConfigsBuilder configs = new ConfigsBuilder(
                tracker,
                config.applicationName,
                adapterClient,
                dynamo,
                cloudWatch,
                config.workerId,
                processors);

        // Every shard's GetRecords calls capped at maxGetRecordsPerSecond (DynamoDB Streams allows 5 a
        // shard), reading on at once within the cap while batches hold records (RateCappedPollingConfig).
        DynamoDBStreamsPollingConfig polling = new RateCappedPollingConfig(adapterClient, config.maxGetRecordsPerSecond)
                .idleTimeBetweenReadsInMillis(config.idleTimeBetweenReadsMillis);
        polling.maxRecords(config.maxRecords);
        RetrievalConfig retrieval = configs.retrievalConfig().retrievalSpecificConfig(polling);

        return StreamsSchedulerFactory.createScheduler(
                configs.checkpointConfig(),
                configs.coordinatorConfig().parentShardPollIntervalMillis(config.parentShardPollIntervalMillis),
                SchedulerSettings.leases(configs, config),
                configs.lifecycleConfig(),
                SchedulerSettings.metrics(configs, config),
                // Empty batches let the child commit on its interval while the stream is quiet.
                configs.processorConfig().callProcessRecordsEvenForEmptyRecordList(true),
                retrieval,
                adapterClient);
    }

    /**
     * Creates the lease table and, while it is empty, one lease per shard, before the scheduler runs. The
     * scheduler then finds leases and skips its own start-up shard sync: the random 1 to 30 s wait that KCL
     * 3.1 spends while the lease table is empty, and the sync task's sleep after it. Uses the scheduler's
     * own lease refresher, shard detector and the adapter's shard syncer (what its sync would run), so the
     * leases are exactly those the scheduler would write; two workers starting together race on
     * conditional creates, as they would inside KCL.
     */
    private static void createShardLeases(Scheduler scheduler) throws Exception {
        LeaseRefresher leaseRefresher = scheduler.leaseRefresher();
        leaseRefresher.createLeaseTableIfNotExists();
        if (!leaseRefresher.waitUntilLeaseTableExists(1L, 600L)) {
            throw new IllegalStateException("the lease table did not become active");
        }
        if (!leaseRefresher.isLeaseTableEmpty()) {
            LOG.info("Shard leases exist before the scheduler starts");
            return;
        }
        for (StreamConfig stream : scheduler.currentStreamConfigMap().values()) {
            scheduler.hierarchicalShardSyncerProvider().apply(stream).checkAndCreateLeaseForNewShards(
                    scheduler.shardDetectorProvider().apply(stream),
                    leaseRefresher,
                    stream.initialPositionInStreamExtended(),
                    new NullMetricsScope(),
                    scheduler.leaseManagementConfig().ignoreUnexpectedChildShards(),
                    true);
        }
        LOG.info("Created {} shard leases before the scheduler starts", leaseRefresher.listLeases().size());
    }

    /** Graceful shutdown: every processor gets shutdownRequested and may checkpoint what it flushed. */
    private static void shutDown(Scheduler scheduler, Thread runner, LauncherConfig config) {
        LOG.info("Shutdown requested: checkpointing and releasing leases");
        try {
            boolean done = scheduler.startGracefulShutdown()
                    .get(config.shutdownTimeoutMillis, TimeUnit.MILLISECONDS);
            LOG.info("Graceful shutdown {}", done ? "completed" : "did not complete");
        } catch (Exception e) {
            LOG.error("Graceful shutdown failed", e);
        }
        try {
            runner.join(config.shutdownTimeoutMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The multilang children: one Python process per shard, speaking the protocol on its stdin and stdout. */
    private static ShardRecordProcessorFactory multiLangProcessors(LauncherConfig config, ExecutorService io) {
        ConvertUtilsBean converters = new ConvertUtilsBean();
        MultiLangDaemonConfiguration multiLang =
                new MultiLangDaemonConfiguration(new BeanUtilsBean(converters), converters);
        config.processingTimeoutSeconds.ifPresent(multiLang::setTimeoutInSeconds);
        MultiLangRecordProcessorFactory children =
                new MultiLangRecordProcessorFactory(config.executableName, io, multiLang);
        return children;
    }

    private static String latestStreamArn(
            LauncherConfig config, Region region, DefaultCredentialsProvider credentials) {
        DynamoDbClientBuilder builder = DynamoDbClient.builder().region(region).credentialsProvider(credentials);
        config.dynamoDbEndpoint.ifPresent(builder::endpointOverride);
        try (DynamoDbClient dynamo = builder.build()) {
            String table = config.tableName.orElseThrow();
            String arn = dynamo.describeTable(DescribeTableRequest.builder().tableName(table).build())
                    .table().latestStreamArn();
            if (arn == null) {
                throw new IllegalStateException("table has no stream enabled");
            }
            return arn;
        }
    }
}
