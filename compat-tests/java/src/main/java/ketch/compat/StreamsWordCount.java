package ketch.compat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count (kafka-streams, unchanged), for test_frameworks.py.
 *
 * <pre>
 * StreamsWordCount &lt;bootstrap&gt; &lt;application.id&gt; &lt;input&gt; &lt;output&gt; &lt;state.dir&gt; [max-seconds=300]
 * </pre>
 *
 * Topology: input (String key, String line) -&gt; flatMapValues(words) -&gt; groupBy(word) (a
 * repartition topic, {@code <app>-words-repartition}) -&gt; count() in the state store
 * "word-counts" (changelog {@code <app>-word-counts-changelog}) -&gt; output (String word, Long count).
 * processing.guarantee=exactly_once_v2, 2 stream threads, record cache off (every count update is
 * emitted, so a read_committed reader must see exactly 1, 2, ..., N for each word: a replayed
 * update after a crash would show as a repeated count). The group protocol is left at Streams'
 * default (classic). Runs until killed; prints "STATE &lt;new&gt;" on each state change, the topology
 * and the effective group protocol; exits 2 on a stream thread error, 3 after max-seconds.
 */
public final class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: StreamsWordCount <bootstrap> <application.id> <input> <output> <state.dir> [max-seconds]");
            System.exit(64);
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", RoundTrip.envOr("KETCH_COMPAT_JAVA_LOG", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3];
        Path stateDir = Path.of(args[4]);
        long maxSeconds = args.length > 5 ? Long.parseLong(args[5]) : 300;

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // a SIGKILLed member must leave the (classic) group in seconds, not Streams' default 45 s
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((k, w) -> !w.isEmpty())
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        Topology topology = b.build(p);
        System.out.println(topology.describe().toString().trim().replace("\n", "\n# "));
        StreamsConfig cfg = new StreamsConfig(p);
        System.out.println("group.protocol " + cfg.getString("group.protocol"));

        KafkaStreams streams = new KafkaStreams(topology, p);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR: stream thread: " + e);
            e.printStackTrace();
            failed.countDown();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        boolean error = failed.await(maxSeconds, TimeUnit.SECONDS);
        if (!error) {
            System.out.println("TIMEOUT: still running after " + maxSeconds + " s");
        }
        streams.close(Duration.ofSeconds(10));
        System.out.flush();
        Runtime.getRuntime().halt(error ? 2 : 3);
    }
}
