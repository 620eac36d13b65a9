package ketch.compat;

import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One KafkaConsumer with group.protocol=consumer (KIP-848), run as its own process so a test can
 * SIGKILL it: `Kip848Consumer <bootstrap> <group> <topic> <out file> [assignor]`. With the
 * environment's KETCH_GROUP_PROTOCOL=classic it is a classic consumer instead (the default
 * assignors, range and cooperative-sticky), for groups migrating between the two protocols.
 *
 * It writes to the out file (flushed per line): `ASSIGNED p,p,...` after every assignment change,
 * `R <partition> <offset> <value>` per record, and `COMMITTED` after each synchronous commit of a
 * poll's records (records are written before their commit, so a kill can only duplicate, never
 * lose), and about every second `HEARTBEATS <n>`: the consumer's heartbeat-total metric (how often
 * it heartbeats is the interval the coordinator gave it). It stops cleanly (close: the member
 * leaves the group) once `<out file>.stop` exists.
 */
public final class Kip848Consumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        Path out = Path.of(args[3]);
        Path stop = Path.of(args[3] + ".stop");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        String protocol = System.getenv().getOrDefault("KETCH_GROUP_PROTOCOL", "consumer");
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        if (args.length > 4) props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, out.getFileName().toString());
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (PrintWriter w = new PrintWriter(new FileWriter(out.toFile(), true), true);
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) consumer.commitSync();
                    report();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    report();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    w.println("LOST " + partitions);
                }

                private void report() {
                    TreeSet<Integer> ps = new TreeSet<>();
                    for (TopicPartition tp : consumer.assignment()) ps.add(tp.partition());
                    w.println("ASSIGNED " + String.join(",", ps.stream().map(String::valueOf).toList()));
                }
            });
            long lastReport = 0;
            while (!Files.exists(stop)) {
                if (System.nanoTime() - lastReport > 1_000_000_000L) {
                    lastReport = System.nanoTime();
                    consumer.metrics().forEach((name, metric) -> {
                        if (name.name().equals("heartbeat-total") && name.group().equals("consumer-coordinator-metrics"))
                            w.println("HEARTBEATS " + ((Number) metric.metricValue()).longValue());
                    });
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                for (ConsumerRecord<String, String> r : records) {
                    w.println("R " + r.partition() + " " + r.offset() + " " + r.value());
                }
                consumer.commitSync();
                w.println("COMMITTED");
            }
            w.println("CLOSING");
        }
    }
}
