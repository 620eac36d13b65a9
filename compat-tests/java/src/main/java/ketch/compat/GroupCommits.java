package ketch.compat;

import static ketch.compat.GroupScenario.*;
import static ketch.compat.GroupSupport.*;
import static ketch.compat.RoundTrip.WAIT;
import static ketch.compat.RoundTrip.adminProps;
import static ketch.compat.RoundTrip.check;
import static ketch.compat.RoundTrip.consumerProps;
import static ketch.compat.RoundTrip.envOr;
import static ketch.compat.RoundTrip.producerProps;
import static ketch.compat.RoundTrip.step;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * The commit-meta and check-committed scenarios of {@link GroupScenario}: offsets committed with
 * metadata and leader epochs by a group member and by a standalone consumer, read back (also after a
 * broker restart) through the admin client and KafkaConsumer.committed.
 */
final class GroupCommits {

    private GroupCommits() {
    }

    // ------------------------------------------------------------------------------------------
    // commit-meta / check-committed: offsets and metadata across a broker restart
    // ------------------------------------------------------------------------------------------

    static final int META_PARTITIONS = 3;
    static final int META_PER_PARTITION = 30;

    static long group1Offset(int p) {
        return 10 + 5L * p;
    }

    static String group1Meta(int p) {
        return switch (p) {
            case 0 -> "meta-0 \u2713 \u00fcn\u00efc\u00f6d\u00e9";
            case 1 -> "";
            default -> "long-" + "x".repeat(1000) + "-" + p;
        };
    }

    static long group2Offset(int p) {
        return new long[] {META_PER_PARTITION, 1, 0}[p];
    }

    static String group2Meta(int p) {
        return "standalone-" + p;
    }

    static void commitMeta(String bootstrap, String topic, String group1, String group2) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap));
             Producer producer = new Producer(bootstrap, topic, META_PARTITIONS)) {
            createTopic(admin, topic, META_PARTITIONS);
            producer.produceSync(META_PARTITIONS * META_PER_PARTITION);
        }
        Map<TopicPartition, OffsetAndMetadata> commits = new TreeMap<>(TP_ORDER);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupProps(bootstrap, group1, "ketch-compat-meta",
                "range"))) {
            c.subscribe(List.of(topic));
            Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new TreeMap<>();
            int n = 0;
            long deadline = System.nanoTime() + STEP_WAIT.toNanos();
            while (n < META_PARTITIONS * META_PER_PARTITION) {
                check(System.nanoTime() < deadline, "consumed %d records within %ds", n, STEP_WAIT.toSeconds());
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
                    n++;
                }
            }
            for (int p = 0; p < META_PARTITIONS; p++) {
                long off = group1Offset(p);
                commits.put(new TopicPartition(topic, p), new OffsetAndMetadata(off,
                        got.get(p).get((int) off - 1).leaderEpoch(), group1Meta(p)));
            }
            c.commitSync(commits, Duration.ofSeconds(30));
            step("%s: member %s generation %d committed %s", group1, c.groupMetadata().memberId(),
                    c.groupMetadata().generationId(), fmt(commits));
        }
        // group2: no subscription, no membership: OffsetCommit with generation -1 and an empty member id
        Map<TopicPartition, OffsetAndMetadata> commits2 = new TreeMap<>(TP_ORDER);
        Properties p2 = groupProps(bootstrap, group2, "ketch-compat-standalone", "range");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p2)) {
            for (int p = 0; p < META_PARTITIONS; p++) {
                commits2.put(new TopicPartition(topic, p), new OffsetAndMetadata(group2Offset(p), group2Meta(p)));
            }
            c.assign(commits2.keySet());
            c.commitSync(commits2, Duration.ofSeconds(30));
            step("%s (standalone, assign): committed %s", group2, fmt(commits2));
        }
        System.out.println("commit-meta ok");
    }

    static void checkCommitted(String bootstrap, String topic, String group1, String group2) throws Exception {
        // leader epochs: the one stored in the batch of the record at offset-1
        Map<TopicPartition, Optional<Integer>> epochs = new HashMap<>();
        Properties plain = consumerProps(bootstrap);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(plain)) {
            for (int p = 0; p < META_PARTITIONS; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                c.assign(List.of(tp));
                c.seek(tp, group1Offset(p) - 1);
                long deadline = System.nanoTime() + STEP_WAIT.toNanos();
                while (!epochs.containsKey(tp)) {
                    check(System.nanoTime() < deadline, "cannot read %s at %d", tp, group1Offset(p) - 1);
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        check(r.offset() == group1Offset(p) - 1, "seek %s to %d returned offset %d", tp,
                                group1Offset(p) - 1, r.offset());
                        epochs.put(tp, r.leaderEpoch());
                        break;
                    }
                }
            }
        }
        Map<String, Map<TopicPartition, OffsetAndMetadata>> want = new TreeMap<>();
        want.put(group1, new TreeMap<>(TP_ORDER));
        want.put(group2, new TreeMap<>(TP_ORDER));
        for (int p = 0; p < META_PARTITIONS; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            want.get(group1).put(tp, new OffsetAndMetadata(group1Offset(p), epochs.get(tp), group1Meta(p)));
            want.get(group2).put(tp, new OffsetAndMetadata(group2Offset(p), group2Meta(p)));
        }
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            // both groups in one call: the admin client batches them (FindCoordinator v4+ with several
            // keys, OffsetFetch v8+ with several groups)
            Map<String, ListConsumerGroupOffsetsSpec> specs = new LinkedHashMap<>();
            specs.put(group1, new ListConsumerGroupOffsetsSpec());
            specs.put(group2, new ListConsumerGroupOffsetsSpec());
            Map<String, Map<TopicPartition, OffsetAndMetadata>> got = admin.listConsumerGroupOffsets(specs).all()
                    .get(WAIT.toSeconds(), TimeUnit.SECONDS);
            for (String g : want.keySet()) {
                Map<TopicPartition, OffsetAndMetadata> have = new TreeMap<>(TP_ORDER);
                have.putAll(got.getOrDefault(g, Map.of()));
                step("listConsumerGroupOffsets %s: %s", g, fmt(have));
                check(have.equals(want.get(g)), "listConsumerGroupOffsets(%s):%n  got  %s%n  want %s", g, fmt(have),
                        fmt(want.get(g)));
            }
            // only some partitions, one group: OffsetFetch with explicit topics/partitions
            TopicPartition tp1 = new TopicPartition(topic, 1);
            TopicPartition tp9 = new TopicPartition(topic, 9); // does not exist: no offset
            Map<TopicPartition, OffsetAndMetadata> some = admin.listConsumerGroupOffsets(Map.of(group1,
                    new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(tp1, tp9)))).partitionsToOffsetAndMetadata(group1)
                    .get(WAIT.toSeconds(), TimeUnit.SECONDS);
            check(Objects.equals(some.get(tp1), want.get(group1).get(tp1)) && some.get(tp9) == null,
                    "listConsumerGroupOffsets(%s, [%s, %s]) = %s", group1, tp1, tp9, fmt(some));
            for (String g : want.keySet()) {
                ConsumerGroupDescription d = describe(admin, g);
                step("describe: %s", show(d).trim());
                check(d.groupState() == GroupState.EMPTY && d.members().isEmpty(),
                        "group %s: state %s with %d members, expected Empty with none", g, d.groupState(),
                        d.members().size());
                // group2 only ever saw OffsetCommits: DescribeGroups reports protocol_type "" (a "simple"
                // group); group1 had a member: protocol_type "consumer"
                check(d.isSimpleConsumerGroup() == g.equals(group2), "group %s: isSimpleConsumerGroup=%s (it is "
                        + "true exactly when DescribeGroups returns an empty protocol_type)", g,
                        d.isSimpleConsumerGroup());
            }
        }
        // KafkaConsumer.committed (OffsetFetch with require_stable) for group1
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupProps(bootstrap, group1, "ketch-compat-check",
                "range"))) {
            Map<TopicPartition, OffsetAndMetadata> back = c.committed(want.get(group1).keySet(), Duration.ofSeconds(30));
            Map<TopicPartition, OffsetAndMetadata> have = new TreeMap<>(TP_ORDER);
            have.putAll(back);
            check(have.equals(want.get(group1)), "consumer.committed(%s):%n  got  %s%n  want %s", group1, fmt(have),
                    fmt(want.get(group1)));
            step("consumer.committed %s ok", group1);
            // resume from there (subscribe): first offsets = committed, no commit
            c.subscribe(List.of(topic));
            Map<Integer, List<Long>> got = new TreeMap<>();
            int total = 0;
            for (int p = 0; p < META_PARTITIONS; p++) {
                total += META_PER_PARTITION - (int) group1Offset(p);
            }
            int n = 0;
            long deadline = System.nanoTime() + STEP_WAIT.toNanos();
            while (n < total) {
                check(System.nanoTime() < deadline, "%s resume: %d of %d records: %s", group1, n, total, got);
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
                    n++;
                }
            }
            for (int p = 0; p < META_PARTITIONS; p++) {
                List<Long> offs = got.get(p);
                check(offs != null && offs.get(0) == group1Offset(p) && offs.size() == META_PER_PARTITION - group1Offset(p),
                        "%s resume: partition %d read %s, expected offsets %d..%d", group1, p, offs, group1Offset(p),
                        META_PER_PARTITION - 1);
            }
            step("%s resumed at the committed offsets", group1);
        }
        // group2 (assign + committed position)
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupProps(bootstrap, group2,
                "ketch-compat-check2", "range"))) {
            List<TopicPartition> parts = new ArrayList<>(want.get(group2).keySet());
            c.assign(parts);
            for (TopicPartition tp : parts) {
                long pos = c.position(tp, Duration.ofSeconds(30));
                check(pos == group2Offset(tp.partition()), "%s: position(%s) = %d, expected the committed %d", group2,
                        tp, pos, group2Offset(tp.partition()));
            }
            step("%s positions = committed offsets", group2);
        }
        System.out.println("check-committed ok");
    }
}
