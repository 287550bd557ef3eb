package entitlements.launcher;

import java.net.URI;
import java.util.Optional;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.core.SdkSystemSetting;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClientBuilder;

/**
 * The Kinesis client the launcher reads a Kinesis data stream with: HTTP/1.1 and JSON, not the HTTP/2 and
 * CBOR that KCL's own {@code KinesisClientUtil} and the SDK's defaults give.
 *
 * <p>Why: moto (the local stack) speaks neither HTTP/2 nor CBOR for Kinesis, and both work against AWS
 * too (Kinesis serves HTTP/1.1 and JSON on the same endpoint); HTTP/2 is needed only for enhanced fan-out
 * (SubscribeToShard), which the launcher does not use (polling; moto lacks SubscribeToShard). CBOR is a
 * process-wide SDK setting ({@code aws.cborEnabled}), read when a request is marshalled, so it is set here,
 * before the first client exists; nothing else in the launcher uses CBOR (DynamoDB and CloudWatch clients
 * speak JSON and query).
 */
final class KinesisClients {
    private KinesisClients() {}

    static KinesisAsyncClient http1Json(
            Region region, AwsCredentialsProvider credentials, Optional<URI> endpoint) {
        System.setProperty(SdkSystemSetting.CBOR_ENABLED.property(), "false");
        KinesisAsyncClientBuilder builder = KinesisAsyncClient.builder()
                .region(region)
                .credentialsProvider(credentials)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(Protocol.HTTP1_1));
        endpoint.ifPresent(builder::endpointOverride);
        return builder.build();
    }
}
