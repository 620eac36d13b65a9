package ketch.compat;

import static ketch.compat.GroupScenario.*;
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
 * What the {@link GroupScenario} scenarios share: topic creation, the background producer, the group
 * members (one KafkaConsumer thread each, recording what they consume and what is revoked), and the
 * waits and checks on members, offsets and group descriptions.
 */
final class GroupSupport {

    private GroupSupport() {
    }

    static String assignorClass(String name) {
        return switch (name) {
            case "range" -> RangeAssignor.class.getName();
            case "roundrobin" -> RoundRobinAssignor.class.getName();
            case "sticky" -> StickyAssignor.class.getName();
            case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
            default -> throw new IllegalArgumentException("unknown assignor " + name);
        };
    }

    static double secs() {
        return (System.nanoTime() - RoundTrip.T_START) / 1e9;
    }

    static Properties groupProps(String bootstrap, String group, String clientId, String assignor) {
        Properties p = consumerProps(bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "60000");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        return p;
    }

    static void createTopic(Admin admin, String topic, int partitions) throws Exception {
        try {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all()
                    .get(WAIT.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
        RoundTrip.waitForTopic(admin, topic, partitions);
        step("topic %s ready with %d partitions", topic, partitions);
    }

    static Set<TopicPartition> tps(String topic, int... parts) {
        Set<TopicPartition> s = new TreeSet<>(TP_ORDER);
        for (int p : parts) {
            s.add(new TopicPartition(topic, p));
        }
        return s;
    }

    static final java.util.Comparator<TopicPartition> TP_ORDER =
            java.util.Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    static Set<TopicPartition> sorted(Collection<TopicPartition> c) {
        Set<TopicPartition> s = new TreeSet<>(TP_ORDER);
        s.addAll(c);
        return s;
    }

    static String partsOf(Collection<TopicPartition> c) {
        return sorted(c).stream().map(tp -> Integer.toString(tp.partition())).collect(Collectors.joining(",", "[", "]"));
    }

    static void waitFor(String what, Duration timeout, BooleanSupplier cond, java.util.function.Supplier<String> diag)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new RoundTrip.Mismatch("timed out after " + timeout.toSeconds() + "s waiting for: " + what
                        + "\n" + diag.get());
            }
            Thread.sleep(50);
        }
    }

    /** Index carried in each record value ("<index>|..."). */
    static int indexOf(byte[] value) {
        String s = new String(value, StandardCharsets.UTF_8);
        int bar = s.indexOf('|');
        return Integer.parseInt(bar < 0 ? s : s.substring(0, bar));
    }

    static byte[] valueFor(int index) {
        return (index + "|value-" + index).getBytes(StandardCharsets.UTF_8);
    }

    /** Produces records with explicit partitions, tracking what was acked. */
    static final class Producer implements AutoCloseable {
        final KafkaProducer<byte[], byte[]> producer;
        final String topic;
        final int partitions;
        final AtomicInteger next = new AtomicInteger();
        final Map<Integer, RecordMetadata> acked = new ConcurrentHashMap<>();
        final List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        volatile Thread background;
        final AtomicBoolean stopBackground = new AtomicBoolean();

        Producer(String bootstrap, String topic, int partitions) {
            Properties p = producerProps(bootstrap, "lz4");
            p.put("linger.ms", "5");
            this.producer = new KafkaProducer<>(p);
            this.topic = topic;
            this.partitions = partitions;
        }

        /** Sends `count` records, `count / partitions` to each partition, and waits for every ack. */
        List<Integer> produceSync(int count) throws Exception {
            List<Integer> idx = new ArrayList<>();
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int k = 0; k < count; k++) {
                int i = next.getAndIncrement();
                idx.add(i);
                fs.add(send(i));
            }
            producer.flush();
            for (Future<RecordMetadata> f : fs) {
                f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            }
            check(errors.isEmpty(), "produce errors: %s", errors);
            return idx;
        }

        Future<RecordMetadata> send(int i) {
            return producer.send(new ProducerRecord<>(topic, i % partitions, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    valueFor(i)), (md, e) -> {
                        if (e != null) {
                            errors.add(e);
                        } else {
                            acked.put(i, md);
                        }
                    });
        }

        /** A record per partition every `intervalMs` until stopBackground(). */
        void startBackground(long intervalMs) {
            background = new Thread(() -> {
                while (!stopBackground.get()) {
                    for (int p = 0; p < partitions; p++) {
                        send(next.getAndIncrement());
                    }
                    try {
                        Thread.sleep(intervalMs);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "background-producer");
            background.setDaemon(true);
            background.start();
        }

        int stopBackground() throws Exception {
            stopBackground.set(true);
            background.join(10_000);
            producer.flush();
            int sent = next.get();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (acked.size() + errors.size() < sent && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            check(errors.isEmpty(), "background produce errors: %s", errors.subList(0, Math.min(5, errors.size())));
            check(acked.size() == sent, "only %d of %d background records acked", acked.size(), sent);
            return sent;
        }

        @Override
        public void close() {
            producer.close(Duration.ofSeconds(10));
        }
    }

    record Consumed(String member, int partition, long offset, int index, long nanos) {
    }

    record Revocation(String phase, Set<TopicPartition> parts, long nanos) {
    }

    /** One group member: a thread that owns a KafkaConsumer, commits synchronously after each poll. */
    static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final Properties props;
        final String topic;
        final Thread thread;
        final AtomicBoolean stop = new AtomicBoolean();
        final List<String> events = Collections.synchronizedList(new ArrayList<>());
        final List<Consumed> consumed = Collections.synchronizedList(new ArrayList<>());
        final List<Revocation> revocations = Collections.synchronizedList(new ArrayList<>());
        final List<Revocation> assignments = Collections.synchronizedList(new ArrayList<>());
        final List<Revocation> losses = Collections.synchronizedList(new ArrayList<>());
        /** (nanos, assignment after a poll), appended when it changes. */
        final List<Map.Entry<Long, Set<TopicPartition>>> history = Collections.synchronizedList(new ArrayList<>());
        volatile Set<TopicPartition> assignment = Set.of();
        volatile int generation = -1;
        volatile String memberId = "";
        volatile String instanceId;
        volatile Throwable error;
        volatile boolean closed;
        volatile String phase = "start";
        volatile int polls;
        /** When set, the first member to revoke a non-empty set sleeps `slowRevokeMs` (see members()). */
        volatile AtomicBoolean slowRevokeToken;
        volatile long slowRevokeMs;
        volatile long slowStart;
        volatile long slowEnd;
        final AtomicInteger commitOk = new AtomicInteger();
        final AtomicInteger commitRetriable = new AtomicInteger();
        final AtomicInteger commitFailed = new AtomicInteger();
        private final Map<TopicPartition, OffsetAndMetadata> uncommitted = new HashMap<>();
        private KafkaConsumer<byte[], byte[]> consumer;

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.props = props;
            this.topic = topic;
            this.instanceId = props.getProperty(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
            this.thread = new Thread(this, "member-" + name);
            this.thread.setDaemon(true);
        }

        Member start() {
            thread.start();
            return this;
        }

        void event(String fmt, Object... args) {
            events.add(String.format("%8.3fs [%s] %s", secs(), phase, String.format(fmt, args)));
        }

        @Override
        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                consumer = c;
                c.subscribe(List.of(topic), this);
                event("subscribed");
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                    long now = System.nanoTime();
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        consumed.add(new Consumed(name, r.partition(), r.offset(), indexOf(r.value()), now));
                        uncommitted.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), ""));
                    }
                    commitPending(c, null, "after poll");
                    publish(c);
                    polls++;
                }
                commitPending(c, null, "before close");
                event("closing (consumer.close)");
            } catch (Throwable t) {
                error = t;
                event("member thread ended with %s", t);
            } finally {
                closed = true;
            }
        }

        private void publish(KafkaConsumer<byte[], byte[]> c) {
            Set<TopicPartition> now = sorted(c.assignment());
            if (!now.equals(assignment)) {
                history.add(Map.entry(System.nanoTime(), now));
                event("assignment now %s", partsOf(now));
            }
            assignment = now;
            generation = c.groupMetadata().generationId();
            memberId = c.groupMetadata().memberId();
        }

        private void commitPending(KafkaConsumer<byte[], byte[]> c, Collection<TopicPartition> only, String why) {
            Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
            uncommitted.forEach((tp, om) -> {
                if (only == null || only.contains(tp)) {
                    m.put(tp, om);
                }
            });
            if (m.isEmpty()) {
                return;
            }
            try {
                c.commitSync(m, Duration.ofSeconds(30));
                commitOk.incrementAndGet();
                m.keySet().forEach(uncommitted::remove);
            } catch (RebalanceInProgressException e) {
                // retried after the next poll or in onPartitionsRevoked
                commitRetriable.incrementAndGet();
                event("commit %s: %s (will retry)", why, e.getClass().getSimpleName());
            } catch (CommitFailedException e) {
                commitFailed.incrementAndGet();
                event("commit %s FAILED: %s", why, e.getMessage());
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            if (parts.isEmpty()) {
                return;
            }
            Set<TopicPartition> s = sorted(parts);
            revocations.add(new Revocation(phase, s, System.nanoTime()));
            event("onPartitionsRevoked %s (generation %d)", partsOf(s), consumer.groupMetadata().generationId());
            commitPending(consumer, s, "in onPartitionsRevoked");
            AtomicBoolean token = slowRevokeToken;
            if (token != null && token.compareAndSet(false, true)) {
                slowStart = System.nanoTime();
                event("slow revocation: sleeping %d ms inside onPartitionsRevoked", slowRevokeMs);
                try {
                    Thread.sleep(slowRevokeMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                slowEnd = System.nanoTime();
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            Set<TopicPartition> s = sorted(parts);
            assignments.add(new Revocation(phase, s, System.nanoTime()));
            event("onPartitionsAssigned %s (generation %d, member %s)", partsOf(s),
                    consumer.groupMetadata().generationId(), consumer.groupMetadata().memberId());
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            Set<TopicPartition> s = sorted(parts);
            losses.add(new Revocation(phase, s, System.nanoTime()));
            event("onPartitionsLost %s", partsOf(s));
            s.forEach(uncommitted::remove);
        }

        void stopAndJoin() throws InterruptedException {
            stop.set(true);
            thread.join(40_000);
            check(!thread.isAlive(), "member %s did not close within 40s; events:\n%s", name, lastEvents(30));
        }

        List<Revocation> revokedIn(String ph) {
            synchronized (revocations) {
                return revocations.stream().filter(r -> r.phase().equals(ph)).toList();
            }
        }

        List<Revocation> assignedIn(String ph) {
            synchronized (assignments) {
                return assignments.stream().filter(r -> r.phase().equals(ph)).toList();
            }
        }

        String lastEvents(int n) {
            synchronized (events) {
                List<String> l = events.subList(Math.max(0, events.size() - n), events.size());
                return "      " + String.join("\n      ", l);
            }
        }

        String state() {
            return String.format("  %s: assignment=%s generation=%d member=%s instance=%s polls=%d consumed=%d "
                            + "commits ok=%d retriable=%d failed=%d closed=%s error=%s%n%s",
                    name, partsOf(assignment), generation, memberId, instanceId, polls, consumed.size(),
                    commitOk.get(), commitRetriable.get(), commitFailed.get(), closed, error, lastEvents(12));
        }
    }

    static String states(Collection<Member> ms) {
        return ms.stream().map(Member::state).collect(Collectors.joining("\n"));
    }

    static void checkAlive(Collection<Member> ms) {
        for (Member m : ms) {
            if (m.error != null) {
                m.error.printStackTrace();
                throw new RoundTrip.Mismatch("member " + m.name + " failed: " + m.error + "\n" + states(ms));
            }
        }
    }

    /**
     * True when the members' assignments are disjoint, cover all partitions, are balanced (sizes differ by at
     * most one, none empty when members <= partitions) and every member reports the same generation.
     */
    static boolean balanced(List<Member> ms, String topic, int partitions) {
        checkAlive(ms);
        Set<TopicPartition> union = new HashSet<>();
        int total = 0;
        int min = Integer.MAX_VALUE;
        int max = 0;
        Set<Integer> gens = new HashSet<>();
        for (Member m : ms) {
            Set<TopicPartition> a = m.assignment;
            union.addAll(a);
            total += a.size();
            min = Math.min(min, a.size());
            max = Math.max(max, a.size());
            gens.add(m.generation);
        }
        return total == partitions && union.size() == partitions && max - min <= 1 && min > 0 && gens.size() == 1
                && !gens.contains(-1);
    }

    static void waitBalanced(String what, List<Member> ms, String topic, int partitions) throws InterruptedException {
        long t0 = System.nanoTime();
        waitFor(what + ": " + ms.size() + " members own " + partitions + " partitions, disjoint and balanced",
                STEP_WAIT, () -> balanced(ms, topic, partitions), () -> states(ms));
        // still true a moment later (no rebalance still going on)
        Thread.sleep(300);
        check(balanced(ms, topic, partitions), "%s: assignment changed right after it looked stable:%n%s", what,
                states(ms));
        step("%s: stable after %.2fs, generation %d: %s", what, (System.nanoTime() - t0) / 1e9, ms.get(0).generation,
                ms.stream().map(m -> m.name + "=" + partsOf(m.assignment)).collect(Collectors.joining(" ")));
    }

    static Set<Integer> consumedIndexes(Collection<Member> ms) {
        Set<Integer> s = new HashSet<>();
        for (Member m : ms) {
            synchronized (m.consumed) {
                for (Consumed c : m.consumed) {
                    s.add(c.index());
                }
            }
        }
        return s;
    }

    static void waitConsumed(String what, Collection<Member> all, Collection<Integer> want) throws InterruptedException {
        waitFor(what + ": " + want.size() + " records consumed by the group", STEP_WAIT,
                () -> {
                    checkAlive(List.copyOf(all));
                    return consumedIndexes(all).containsAll(want);
                },
                () -> {
                    Set<Integer> got = consumedIndexes(all);
                    List<Integer> missing = want.stream().filter(i -> !got.contains(i)).sorted().toList();
                    return "missing " + missing.size() + " records, first: " + missing.subList(0,
                            Math.min(20, missing.size())) + "\n" + states(all);
                });
    }

    static Map<TopicPartition, Long> endOffsets(Admin admin, String topic, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            specs.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        Map<TopicPartition, Long> out = new TreeMap<>(TP_ORDER);
        admin.listOffsets(specs).all().get(WAIT.toSeconds(), TimeUnit.SECONDS)
                .forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    static Map<TopicPartition, OffsetAndMetadata> committed(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(WAIT.toSeconds(), TimeUnit.SECONDS);
        Map<TopicPartition, OffsetAndMetadata> out = new TreeMap<>(TP_ORDER);
        m.forEach((tp, om) -> {
            if (om != null) {
                out.put(tp, om);
            }
        });
        return out;
    }

    static String fmt(Map<TopicPartition, OffsetAndMetadata> m) {
        return m.entrySet().stream().map(e -> {
            OffsetAndMetadata om = e.getValue();
            String meta = om == null ? "null" : om.metadata();
            if (meta != null && meta.length() > 40) {
                meta = meta.substring(0, 30) + "...(" + meta.length() + " chars)";
            }
            return e.getKey().partition() + "=" + (om == null ? "null"
                    : om.offset() + "/epoch " + om.leaderEpoch().map(String::valueOf).orElse("none") + "/'" + meta + "'");
        }).collect(Collectors.joining(", ", "{", "}"));
    }

    static Map<TopicPartition, Long> offsetsOnly(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<TopicPartition, Long> out = new TreeMap<>(TP_ORDER);
        m.forEach((tp, om) -> out.put(tp, om.offset()));
        return out;
    }

    static ConsumerGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    static String show(ConsumerGroupDescription d) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format("group %s type=%s state=%s assignor='%s' coordinator=%s members=%d simple=%s%n",
                d.groupId(), d.type(), d.groupState(), d.partitionAssignor(), d.coordinator(), d.members().size(),
                d.isSimpleConsumerGroup()));
        for (MemberDescription m : d.members()) {
            sb.append(String.format("    member %s instance=%s client=%s host=%s assignment=%s%n", m.consumerId(),
                    m.groupInstanceId().orElse("-"), m.clientId(), m.host(),
                    partsOf(m.assignment().topicPartitions())));
        }
        return sb.toString();
    }

}
