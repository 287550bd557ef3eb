package entitlements.launcher;

import com.amazonaws.services.dynamodbv2.streamsadapter.model.DynamoDBStreamsProcessRecordsInput;
import com.amazonaws.services.dynamodbv2.streamsadapter.processor.DynamoDBStreamsShardRecordProcessor;
import java.util.ArrayList;
import software.amazon.kinesis.lifecycle.events.InitializationInput;
import software.amazon.kinesis.lifecycle.events.LeaseLostInput;
import software.amazon.kinesis.lifecycle.events.ProcessRecordsInput;
import software.amazon.kinesis.lifecycle.events.ShardEndedInput;
import software.amazon.kinesis.lifecycle.events.ShutdownRequestedInput;
import software.amazon.kinesis.processor.ShardRecordProcessor;
import software.amazon.kinesis.retrieval.KinesisClientRecord;

/**
 * Presents a multilang (child process) record processor as the DynamoDB Streams processor type the adapter's
 * scheduler requires. Every call passes straight through: the adapter's records are KinesisClientRecords
 * whose data is the JSON of the whole stream record, which is what the Python child decodes.
 */
final class MultiLangStreamsProcessor implements DynamoDBStreamsShardRecordProcessor {
    private final ShardRecordProcessor delegate;

    MultiLangStreamsProcessor(ShardRecordProcessor delegate) {
        this.delegate = delegate;
    }

    @Override
    public void initialize(InitializationInput input) {
        delegate.initialize(input);
    }

    @Override
    public void processRecords(ProcessRecordsInput input) {
        delegate.processRecords(input);
    }

    @Override
    public void processRecords(DynamoDBStreamsProcessRecordsInput input) {
        delegate.processRecords(ProcessRecordsInput.builder()
                .records(new ArrayList<KinesisClientRecord>(input.records()))
                .checkpointer(input.checkpointer())
                .cacheEntryTime(input.cacheEntryTime())
                .cacheExitTime(input.cacheExitTime())
                .millisBehindLatest(input.millisBehindLatest())
                .childShards(input.childShards())
                .isAtShardEnd(input.isAtShardEnd())
                .build());
    }

    @Override
    public void leaseLost(LeaseLostInput input) {
        delegate.leaseLost(input);
    }

    @Override
    public void shardEnded(ShardEndedInput input) {
        delegate.shardEnded(input);
    }

    @Override
    public void shutdownRequested(ShutdownRequestedInput input) {
        delegate.shutdownRequested(input);
    }
}
