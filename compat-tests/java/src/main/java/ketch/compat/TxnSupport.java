package ketch.compat;

import static ketch.compat.TxnScenario.*;
import static ketch.compat.RoundTrip.WAIT;
import static ketch.compat.RoundTrip.adminProps;
import static ketch.compat.RoundTrip.check;
import static ketch.compat.RoundTrip.consumerProps;
import static ketch.compat.RoundTrip.envOr;
import static ketch.compat.RoundTrip.producerProps;
import static ketch.compat.RoundTrip.step;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * What the {@link TxnScenario} scenarios share: producer and consumer configs, topic creation, reading
 * partitions back under an isolation level, value checks, producer metrics and waiting for a stable
 * last stable offset.
 */
final class TxnSupport {

    private TxnSupport() {
    }

    // ------------------------------------------------------------------------------------------
    // configs and helpers
    // ------------------------------------------------------------------------------------------

    static Properties txnProducerProps(String bootstrap, String transactionalId) {
        Properties p = producerProps(bootstrap, "none");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "ketch-compat-txn-" + transactionalId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        return p;
    }

    static Properties isolatedConsumerProps(String bootstrap, String isolation) {
        Properties p = consumerProps(bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "ketch-compat-" + isolation);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return p;
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all()
                        .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                step("created topic %s with %d partitions", topic, partitions);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
                step("topic %s exists", topic);
            }
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                try {
                    int n = admin.describeTopics(List.of(topic)).allTopicNames()
                            .get(WAIT.toSeconds(), TimeUnit.SECONDS).get(topic).partitions().size();
                    if (n == partitions) {
                        break;
                    }
                    check(System.nanoTime() < deadline, "topic %s has %d partitions, expected %d", topic, n,
                            partitions);
                } catch (ExecutionException e) {
                    check(System.nanoTime() < deadline, "topic %s not described within %ds: %s", topic,
                            WAIT.toSeconds(), e.getCause());
                }
                Thread.sleep(100);
            }
        }
    }

    static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A record as read back: partition, offset, key, value. */
    record Rec(int p, long o, String k, String v) {
    }

    static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        List<PartitionInfo> infos = consumer.partitionsFor(topic, WAIT);
        check(infos != null && !infos.isEmpty(), "partitionsFor(%s) returned nothing", topic);
        for (PartitionInfo pi : infos) {
            tps.add(new TopicPartition(topic, pi.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    /**
     * Read the given partitions from the beginning up to their end offsets for the consumer's isolation level
     * (endOffsets: the high watermark for read_uncommitted, the last stable offset for read_committed), then
     * keep polling for {@code extraMs} to catch records beyond that end (there must be none).
     */
    static Map<Integer, List<Rec>> readAll(String bootstrap, String topic, String isolation, long extraMs,
                                           Map<Integer, Long> endOut) throws Exception {
        Map<Integer, List<Rec>> got = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(isolatedConsumerProps(bootstrap, isolation))) {
            List<TopicPartition> tps = partitions(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, WAIT);
            for (TopicPartition tp : tps) {
                got.put(tp.partition(), new ArrayList<>());
                if (endOut != null) {
                    endOut.put(tp.partition(), end.get(tp));
                }
            }
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, WAIT) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    Map<Integer, Long> pos = new TreeMap<>();
                    for (TopicPartition tp : tps) {
                        pos.put(tp.partition(), c.position(tp, WAIT));
                    }
                    check(false, "%s consumer of %s: positions %s did not reach end offsets %s within %ds",
                            isolation, topic, pos, end, WAIT.toSeconds());
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    got.get(r.partition()).add(new Rec(r.partition(), r.offset(), str(r.key()), str(r.value())));
                }
            }
            long until = System.nanoTime() + extraMs * 1_000_000L;
            while (System.nanoTime() < until) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    got.get(r.partition()).add(new Rec(r.partition(), r.offset(), str(r.key()), str(r.value())));
                }
            }
        }
        return got;
    }

    static List<String> values(List<Rec> recs) {
        List<String> out = new ArrayList<>();
        for (Rec r : recs) {
            out.add(r.v());
        }
        return out;
    }

    /** Check the values read from one partition are exactly {@code want}, in order, with increasing offsets. */
    static void expectValues(String what, int partition, List<Rec> have, List<String> want) {
        long last = -1;
        for (Rec r : have) {
            check(r.o() > last, "%s partition %d: offset %d after offset %d (offsets must increase)", what,
                    partition, r.o(), last);
            last = r.o();
        }
        List<String> hv = values(have);
        if (!hv.equals(want)) {
            int i = 0;
            while (i < hv.size() && i < want.size() && hv.get(i).equals(want.get(i))) {
                i++;
            }
            String haveAt = i < have.size() ? "'" + have.get(i).v() + "' at offset " + have.get(i).o() : "nothing";
            String wantAt = i < want.size() ? "'" + want.get(i) + "'" : "nothing more";
            check(false, "%s partition %d: %d records read, expected %d; first difference at record #%d: read %s, "
                    + "expected %s. Read: %s", what, partition, have.size(), want.size(), i, haveAt, wantAt,
                    summarize(have));
        }
    }

    static String summarize(List<Rec> recs) {
        StringBuilder b = new StringBuilder("[");
        int n = 0;
        for (Rec r : recs) {
            if (n++ > 0) {
                b.append(", ");
            }
            if (n > 60) {
                b.append("... ").append(recs.size() - 60).append(" more");
                break;
            }
            b.append(r.o()).append(':').append(r.v());
        }
        return b.append(']').toString();
    }

    static long metric(KafkaProducer<?, ?> producer, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                Object v = e.getValue().metricValue();
                if (v instanceof Number n) {
                    return (long) n.doubleValue();
                }
            }
        }
        return -1;
    }

    static Map<Integer, Long> listOffsets(Admin admin, String topic, int partitions, OffsetSpec spec,
                                          IsolationLevel iso) throws Exception {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            specs.put(new TopicPartition(topic, p), spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
                admin.listOffsets(specs, new ListOffsetsOptions(iso)).all().get(WAIT.toSeconds(), TimeUnit.SECONDS);
        Map<Integer, Long> out = new TreeMap<>();
        res.forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        return out;
    }

    /**
     * Wait until the last stable offset equals the high watermark on every partition (bounded): EndTxn is
     * answered before the markers are written, so right after a commit the LSO may still lag a moment.
     * Returns false (after printing a note) if it does not happen within {@code seconds}.
     */
    static boolean awaitStable(String bootstrap, String topic, int seconds) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            int n = admin.describeTopics(List.of(topic)).allTopicNames().get(WAIT.toSeconds(), TimeUnit.SECONDS)
                    .get(topic).partitions().size();
            long deadline = System.nanoTime() + seconds * 1_000_000_000L;
            while (true) {
                Map<Integer, Long> lso = listOffsets(admin, topic, n, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
                Map<Integer, Long> hw = listOffsets(admin, topic, n, OffsetSpec.latest(),
                        IsolationLevel.READ_UNCOMMITTED);
                if (lso.equals(hw)) {
                    return true;
                }
                if (System.nanoTime() > deadline) {
                    System.err.printf("note: %s: last stable offsets %s still below the high watermarks %s after %ds%n",
                            topic, lso, hw, seconds);
                    return false;
                }
                Thread.sleep(50);
            }
        }
    }
}
