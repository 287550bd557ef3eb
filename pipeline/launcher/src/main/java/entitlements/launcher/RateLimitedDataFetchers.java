package entitlements.launcher;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.function.Function;
import software.amazon.kinesis.retrieval.DataFetcherProviderConfig;
import software.amazon.kinesis.retrieval.polling.DataFetcher;

/**
 * Wraps KCL's data-fetcher provider (the adapter's) so that each shard's fetcher waits, before each
 * GetRecords, as its {@link CallSpacing} says. Every other method passes through unchanged.
 *
 * <p>A dynamic proxy of KCL's public {@code DataFetcher} interface rather than a subclass of the adapter's
 * fetcher: the launcher depends on the interface only, and the adapter's class stays whole.
 */
final class RateLimitedDataFetchers {
    private RateLimitedDataFetchers() {}

    static Function<DataFetcherProviderConfig, DataFetcher> wrap(
            Function<DataFetcherProviderConfig, DataFetcher> provider, int maxCallsPerSecond, long idleMillis) {
        return config -> limited(provider.apply(config), new CallSpacing(maxCallsPerSecond, idleMillis));
    }

    private static DataFetcher limited(DataFetcher fetcher, CallSpacing spacing) {
        InvocationHandler handler = (proxy, method, args) -> {
            if (isGetRecords(method)) {
                long wait = spacing.waitBeforeCall(System.currentTimeMillis());
                if (wait > 0) {
                    Thread.sleep(wait);
                }
            }
            try {
                return method.invoke(fetcher, args);
            } catch (InvocationTargetException failure) {
                throw failure.getCause();  // the fetcher's own exception, as KCL expects it
            }
        };
        return (DataFetcher) Proxy.newProxyInstance(
                DataFetcher.class.getClassLoader(), new Class<?>[] {DataFetcher.class}, handler);
    }

    // The calls that make a GetRecords request: getRecords() (what KCL's retrieval strategy calls),
    // getRecords(iterator) and getGetRecordsResponse(request).
    private static boolean isGetRecords(Method method) {
        return method.getName().equals("getRecords") || method.getName().equals("getGetRecordsResponse");
    }
}
