package ketch.compat;

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
 * Consumer group scenarios with the Java client (kafka-clients, classic group protocol).
 *
 * <pre>
 * GroupScenario &lt;bootstrap&gt; members &lt;assignor&gt;
 *     assignor: range | roundrobin | sticky | cooperative-sticky. Six partitions, three members (threads,
 *     one KafkaConsumer each) in one group; checks every partition is owned by exactly one member, one
 *     member leaves (close: LeaveGroup) and its partitions move to the others, a new member joins,
 *     with cooperative-sticky the partitions that stay are never revoked and keep being consumed during
 *     the rebalance; a producer runs throughout and no acked record is lost (nor consumed twice);
 *     committed offsets = end offsets; describeConsumerGroups agrees with the members; a member
 *     started afterwards resumes exactly after the commits.
 * GroupScenario &lt;bootstrap&gt; resume
 *     produce, consume everything, commit chosen offsets (with metadata) in the middle of each
 *     partition, close; a new consumer in the same group starts exactly at those offsets.
 * GroupScenario &lt;bootstrap&gt; commit-meta &lt;topic&gt; &lt;group1&gt; &lt;group2&gt;
 *     group1: a subscribed member commits offsets with metadata and leader epochs; group2: a
 *     standalone (assign) consumer commits offsets (generation -1, no member id).
 * GroupScenario &lt;bootstrap&gt; check-committed &lt;topic&gt; &lt;group1&gt; &lt;group2&gt;
 *     the commits above read back (admin listConsumerGroupOffsets of both groups in one call, and
 *     KafkaConsumer.committed), consumers resume there; run it again after a broker restart.
 * GroupScenario &lt;bootstrap&gt; static
 *     static membership (group.instance.id): a member restarted within the session timeout gets its
 *     partitions back without a rebalance (generation unchanged, the other member sees nothing);
 *     same for the leader (JoinGroup skip_assignment); a second consumer with the same instance id
 *     takes the partitions over and the old one is fenced (FencedInstanceIdException).
 * </pre>
 *
 * Exit codes as RoundTrip: 0 ok, 1 MISMATCH, 2 ERROR, 3 TIMEOUT (watchdog), 64 usage.
 */
public final class GroupScenario {

    static final Duration STEP_WAIT = Duration.ofSeconds(Long.parseLong(envOr("KETCH_COMPAT_GROUP_WAIT", "45")));

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", envOr("KETCH_COMPAT_JAVA_LOG", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        System.setProperty("org.slf4j.simpleLogger.showThreadName", "true");
        RoundTrip.startWatchdog(Long.parseLong(envOr("KETCH_COMPAT_JAVA_TIMEOUT", "170")));
        int rc;
        try {
            if (args.length < 2) {
                usage();
                System.exit(64);
            }
            String bootstrap = args[0];
            switch (args[1]) {
                case "members" -> {
                    if (args.length < 3) {
                        usage();
                        System.exit(64);
                    }
                    members(bootstrap, args[2]);
                }
                case "resume" -> resume(bootstrap);
                case "commit-meta" -> {
                    if (args.length < 5) {
                        usage();
                        System.exit(64);
                    }
                    commitMeta(bootstrap, args[2], args[3], args[4]);
                }
                case "check-committed" -> {
                    if (args.length < 5) {
                        usage();
                        System.exit(64);
                    }
                    checkCommitted(bootstrap, args[2], args[3], args[4]);
                }
                case "static" -> staticMembership(bootstrap);
                default -> {
                    usage();
                    System.exit(64);
                }
            }
            rc = 0;
        } catch (RoundTrip.Mismatch m) {
            System.out.flush();
            System.err.println("MISMATCH: " + m.getMessage());
            rc = 1;
        } catch (Throwable t) {
            System.out.flush();
            Throwable cause = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            System.err.println("ERROR: " + cause);
            t.printStackTrace();
            rc = 2;
        }
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(rc); // member threads may still be closing: do not wait for them
    }

    static void usage() {
        System.err.println("usage: GroupScenario <bootstrap> members <range|roundrobin|sticky|cooperative-sticky>\n"
                + "       GroupScenario <bootstrap> resume\n"
                + "       GroupScenario <bootstrap> commit-meta <topic> <group1> <group2>\n"
                + "       GroupScenario <bootstrap> check-committed <topic> <group1> <group2>\n"
                + "       GroupScenario <bootstrap> static");
    }

    // ------------------------------------------------------------------------------------------
    // helpers
    // ------------------------------------------------------------------------------------------

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

    // ------------------------------------------------------------------------------------------
    // members: three members, leave, join, no loss, commits
    // ------------------------------------------------------------------------------------------

    static void members(String bootstrap, String assignor) throws Exception {
        final int partitions = 6;
        final boolean cooperative = assignor.equals("cooperative-sticky");
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        String topic = "grp-java-" + assignor + "-" + suffix;
        String group = "group-java-" + assignor + "-" + suffix;
        step("members scenario: assignor %s, topic %s, group %s", assignor, topic, group);

        try (Admin admin = Admin.create(adminProps(bootstrap));
             Producer producer = new Producer(bootstrap, topic, partitions)) {
            createTopic(admin, topic, partitions);

            List<Member> all = new ArrayList<>();
            java.util.function.Function<String, Member> newMember = name -> {
                Member m = new Member(name, groupProps(bootstrap, group, "ketch-compat-" + name, assignor), topic);
                all.add(m);
                return m;
            };
            Member m1 = newMember.apply("m1");
            Member m2 = newMember.apply("m2");
            Member m3 = newMember.apply("m3");
            for (Member m : List.of(m1, m2, m3)) {
                m.phase = "initial";
                m.start();
            }
            waitBalanced("three members", List.of(m1, m2, m3), topic, partitions);
            // produced once all three are in: each consumes and commits its own partitions
            List<Integer> phaseA = producer.produceSync(600);
            step("produced %d records (100 per partition)", phaseA.size());
            waitConsumed("initial records", all, phaseA);
            for (Member m : List.of(m1, m2, m3)) {
                Set<Integer> from;
                synchronized (m.consumed) {
                    from = m.consumed.stream().map(Consumed::partition).collect(Collectors.toCollection(TreeSet::new));
                }
                Set<Integer> owned = m.assignment.stream().map(TopicPartition::partition).collect(Collectors.toSet());
                check(owned.equals(from), "%s owns %s but consumed from partitions %s", m.name, partsOf(m.assignment),
                        from);
            }
            step("the first %d records consumed, each member from its own partitions", phaseA.size());

            // ---- describeConsumerGroups agrees with the members
            final ConsumerGroupDescription d0 = describe(admin, group);
            ConsumerGroupDescription d = d0;
            step("describeConsumerGroups:%n%s", show(d));
            check(d.groupState() == GroupState.STABLE, "group state %s, expected Stable%n%s", d.groupState(), show(d));
            check(d.partitionAssignor().equals(assignor), "describe: assignor '%s', expected '%s'",
                    d.partitionAssignor(), assignor);
            check(d.members().size() == 3, "describe: %d members, expected 3%n%s", d.members().size(), show(d));
            for (Member m : List.of(m1, m2, m3)) {
                MemberDescription md = d.members().stream().filter(x -> x.consumerId().equals(m.memberId)).findFirst()
                        .orElseThrow(() -> new RoundTrip.Mismatch("describe: no member with id " + m.memberId
                                + " (member " + m.name + ")\n" + show(d0)));
                check(md.clientId().equals("ketch-compat-" + m.name), "describe: member %s client id '%s'", m.name,
                        md.clientId());
                check(sorted(md.assignment().topicPartitions()).equals(m.assignment),
                        "describe: member %s assignment %s, but the consumer has %s", m.name,
                        partsOf(md.assignment().topicPartitions()), partsOf(m.assignment));
                check(md.host() != null && !md.host().isEmpty(), "describe: member %s has no host", m.name);
            }

            // ---- a background producer runs from here on
            producer.startBackground(40);
            Thread.sleep(300);

            // ---- m3 leaves
            Map<String, Set<TopicPartition>> before = new HashMap<>();
            for (Member m : List.of(m1, m2, m3)) {
                before.put(m.name, m.assignment);
                m.phase = "leave";
            }
            int genBefore = m1.generation;
            step("m3 leaves (close) owning %s", partsOf(m3.assignment));
            m3.stopAndJoin();
            check(m3.error == null, "m3 failed while closing: %s", m3.error);
            waitBalanced("after m3 left", List.of(m1, m2), topic, partitions);
            check(m1.generation > genBefore, "generation %d after the leave, was %d", m1.generation, genBefore);
            for (Member m : List.of(m1, m2)) {
                Set<TopicPartition> gained = new TreeSet<>(TP_ORDER);
                gained.addAll(m.assignment);
                gained.removeAll(before.get(m.name));
                step("  %s: had %s, now %s, revoked during the leave: %s", m.name, partsOf(before.get(m.name)),
                        partsOf(m.assignment), m.revokedIn("leave").stream().map(r -> partsOf(r.parts())).toList());
                check(before.get(m3.name).containsAll(gained) || !cooperative,
                        "%s gained %s which m3 did not own (%s)", m.name, partsOf(gained), partsOf(before.get(m3.name)));
                if (cooperative) {
                    check(m.revokedIn("leave").isEmpty(), "cooperative: %s had partitions revoked when m3 left: %s%n%s",
                            m.name, m.revokedIn("leave"), m.state());
                    check(m.assignment.containsAll(before.get(m.name)),
                            "cooperative-sticky: %s lost partitions when m3 left: had %s, now %s", m.name,
                            partsOf(before.get(m.name)), partsOf(m.assignment));
                    check(m.losses.isEmpty(), "%s: partitions lost: %s", m.name, m.losses);
                }
            }

            // ---- m4 joins
            before.clear();
            for (Member m : List.of(m1, m2)) {
                before.put(m.name, m.assignment);
                m.phase = "join";
            }
            AtomicBoolean slowToken = new AtomicBoolean();
            if (cooperative) {
                // the first member that gives up a partition stalls in onPartitionsRevoked: the rebalance
                // cannot finish meanwhile, and the other member must keep consuming what it keeps
                for (Member m : List.of(m1, m2)) {
                    m.slowRevokeMs = 3000;
                    m.slowRevokeToken = slowToken;
                }
            }
            Member m4 = newMember.apply("m4");
            m4.phase = "join";
            step("m4 joins");
            long joinStart = System.nanoTime();
            m4.start();
            waitBalanced("after m4 joined", List.of(m1, m2, m4), topic, partitions);
            for (Member m : List.of(m1, m2)) {
                m.slowRevokeToken = null;
            }
            for (Member m : List.of(m1, m2)) {
                Set<TopicPartition> kept = new TreeSet<>(TP_ORDER);
                kept.addAll(before.get(m.name));
                kept.retainAll(m.assignment);
                Set<TopicPartition> moved = new TreeSet<>(TP_ORDER);
                moved.addAll(before.get(m.name));
                moved.removeAll(m.assignment);
                Set<TopicPartition> revoked = new TreeSet<>(TP_ORDER);
                m.revokedIn("join").forEach(r -> revoked.addAll(r.parts()));
                step("  %s: had %s, kept %s, gave up %s, revoked in callbacks %s", m.name, partsOf(before.get(m.name)),
                        partsOf(kept), partsOf(moved), partsOf(revoked));
                if (cooperative) {
                    check(revoked.equals(moved), "cooperative: %s revoked %s but only %s moved away (kept %s must "
                            + "never be revoked)%n%s", m.name, partsOf(revoked), partsOf(moved), partsOf(kept), m.state());
                    check(kept.size() == 2, "cooperative-sticky: %s kept %s of %s", m.name, partsOf(kept),
                            partsOf(before.get(m.name)));
                    // no assignment seen after any poll of this phase lacked a kept partition
                    synchronized (m.history) {
                        for (Map.Entry<Long, Set<TopicPartition>> h : m.history) {
                            if (h.getKey() >= joinStart) {
                                check(h.getValue().containsAll(kept), "cooperative: %s's assignment %s lacked the "
                                        + "kept partitions %s during the rebalance", m.name, partsOf(h.getValue()),
                                        partsOf(kept));
                            }
                        }
                    }
                }
            }
            check(m4.revocations.isEmpty(), "m4 had partitions revoked: %s", m4.revocations);
            if (cooperative) {
                check(slowToken.get(), "cooperative: nobody revoked anything when m4 joined%n%s", states(all));
                Member slow = m1.slowStart != 0 ? m1 : m2;
                Member other = slow == m1 ? m2 : m1;
                Set<TopicPartition> keptOther = new TreeSet<>(TP_ORDER);
                keptOther.addAll(before.get(other.name));
                keptOther.retainAll(other.assignment);
                Set<Integer> keptParts = keptOther.stream().map(TopicPartition::partition).collect(Collectors.toSet());
                long during;
                synchronized (other.consumed) {
                    during = other.consumed.stream().filter(c -> c.nanos() > slow.slowStart && c.nanos() < slow.slowEnd
                            && keptParts.contains(c.partition())).count();
                }
                // the other member's assignment snapshots while the rebalance was blocked
                List<String> snaps = new ArrayList<>();
                synchronized (other.history) {
                    for (Map.Entry<Long, Set<TopicPartition>> h : other.history) {
                        if (h.getKey() > slow.slowStart && h.getKey() < slow.slowEnd) {
                            snaps.add(partsOf(h.getValue()));
                            check(h.getValue().containsAll(keptOther),
                                    "cooperative: %s's assignment %s lacked kept partitions %s during the rebalance",
                                    other.name, partsOf(h.getValue()), partsOf(keptOther));
                        }
                    }
                }
                step("  while %s stalled %.1fs in onPartitionsRevoked, %s consumed %d records from the partitions it "
                        + "keeps %s (assignment changes meanwhile: %s)", slow.name,
                        (slow.slowEnd - slow.slowStart) / 1e9, other.name, during, partsOf(keptOther), snaps);
                check(during > 0, "cooperative: %s consumed nothing from its kept partitions %s during the rebalance "
                        + "(while %s was in onPartitionsRevoked)%n%s", other.name, partsOf(keptOther), slow.name,
                        states(all));
            }

            // ---- stop producing; every acked record consumed, none twice
            int sent = producer.stopBackground();
            step("background producer stopped: %d records acked in total", sent);
            List<Member> active = List.of(m1, m2, m4);
            waitConsumed("all records", all, new ArrayList<>(producer.acked.keySet()));
            Thread.sleep(500); // the last poll's commits
            Map<Integer, List<Consumed>> byIndex = new TreeMap<>();
            for (Member m : all) {
                synchronized (m.consumed) {
                    for (Consumed c : m.consumed) {
                        byIndex.computeIfAbsent(c.index(), k -> new ArrayList<>()).add(c);
                    }
                }
            }
            List<String> dups = new ArrayList<>();
            byIndex.forEach((i, l) -> {
                if (l.size() > 1) {
                    dups.add(i + "@p" + l.get(0).partition() + "/" + l.get(0).offset() + " by "
                            + l.stream().map(Consumed::member).toList());
                }
            });
            for (Map.Entry<Integer, List<Consumed>> e : byIndex.entrySet()) {
                RecordMetadata md = producer.acked.get(e.getKey());
                check(md != null, "consumed record %d that was never acked", e.getKey());
                Consumed c = e.getValue().get(0);
                check(md.partition() == c.partition() && md.offset() == c.offset(),
                        "record %d acked at p%d/%d but consumed at p%d/%d", e.getKey(), md.partition(), md.offset(),
                        c.partition(), c.offset());
            }
            step("no record lost: %d acked, %d distinct consumed, %d consumed more than once%s", sent, byIndex.size(),
                    dups.size(), dups.isEmpty() ? "" : " " + dups.subList(0, Math.min(10, dups.size())));
            check(dups.isEmpty(), "%d records consumed twice (commits not honoured across a rebalance?): %s%n%s",
                    dups.size(), dups.subList(0, Math.min(20, dups.size())), states(all));

            // ---- committed offsets = end offsets
            Map<TopicPartition, Long> end = endOffsets(admin, topic, partitions);
            long endSum = end.values().stream().mapToLong(Long::longValue).sum();
            check(endSum == sent, "end offsets %s add up to %d, but %d records were acked", end, endSum, sent);
            Map<TopicPartition, Long>[] last = new Map[1];
            waitFor("committed offsets == end offsets", STEP_WAIT, () -> {
                try {
                    last[0] = offsetsOnly(committed(admin, group));
                    return last[0].equals(end);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, () -> "committed " + last[0] + "\nend       " + end + "\n" + states(active));
            step("committed offsets = end offsets %s", end.values());

            d = describe(admin, group);
            check(d.groupState() == GroupState.STABLE && d.members().size() == 3, "describe after m4 joined: %s",
                    show(d));
            for (Member m : active) {
                MemberDescription md = d.members().stream().filter(x -> x.consumerId().equals(m.memberId)).findFirst()
                        .orElseThrow(() -> new RoundTrip.Mismatch("describe: no member " + m.memberId + "\n"));
                check(sorted(md.assignment().topicPartitions()).equals(m.assignment),
                        "describe: member %s assignment %s, consumer has %s", m.name,
                        partsOf(md.assignment().topicPartitions()), partsOf(m.assignment));
            }

            // ---- everybody leaves; the group is Empty, the commits stay
            for (Member m : active) {
                m.phase = "close";
            }
            for (Member m : active) {
                m.stopAndJoin();
                check(m.error == null, "%s failed while closing: %s", m.name, m.error);
            }
            ConsumerGroupDescription[] dd = new ConsumerGroupDescription[1];
            waitFor("group Empty after every member closed", Duration.ofSeconds(20), () -> {
                try {
                    dd[0] = describe(admin, group);
                    return dd[0].groupState() == GroupState.EMPTY && dd[0].members().isEmpty();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, () -> show(dd[0]));
            step("all members closed: group %s", dd[0].groupState());
            check(offsetsOnly(committed(admin, group)).equals(end), "commits changed after the members left: %s",
                    committed(admin, group));

            // ---- a new member resumes right after the commits
            int firstNew = producer.next.get();
            List<Integer> phaseC = producer.produceSync(60);
            Member m5 = newMember.apply("m5");
            m5.phase = "resume";
            m5.start();
            waitConsumed("resume", List.of(m5), phaseC);
            Thread.sleep(700);
            m5.stopAndJoin();
            Map<Integer, Long> firstOffset = new TreeMap<>();
            synchronized (m5.consumed) {
                for (Consumed c : m5.consumed) {
                    check(c.index() >= firstNew, "resumed member re-read record %d at p%d/%d (committed offset was "
                            + "%d): commits not honoured", c.index(), c.partition(), c.offset(),
                            end.get(new TopicPartition(topic, c.partition())));
                    firstOffset.merge(c.partition(), c.offset(), Math::min);
                }
                check(m5.consumed.size() == phaseC.size(), "resumed member consumed %d records, expected %d",
                        m5.consumed.size(), phaseC.size());
            }
            for (int p = 0; p < partitions; p++) {
                long want = end.get(new TopicPartition(topic, p));
                check(Objects.equals(firstOffset.get(p), want), "resumed member: first offset on partition %d is %s, "
                        + "expected the committed %d", p, firstOffset.get(p), want);
            }
            step("a new member resumed exactly at the committed offsets %s", firstOffset.values());
        }
        System.out.println("members ok: assignor " + assignor);
    }

    // ------------------------------------------------------------------------------------------
    // resume: commit in the middle, restart, start from the commit
    // ------------------------------------------------------------------------------------------

    static void resume(String bootstrap) throws Exception {
        final int partitions = 3;
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        String topic = "grp-resume-" + suffix;
        String group = "group-resume-" + suffix;
        try (Admin admin = Admin.create(adminProps(bootstrap));
             Producer producer = new Producer(bootstrap, topic, partitions)) {
            createTopic(admin, topic, partitions);
            producer.produceSync(300);
            step("produced 300 records (100 per partition)");
            Map<TopicPartition, OffsetAndMetadata> commits = new TreeMap<>(TP_ORDER);
            Properties p = groupProps(bootstrap, group, "ketch-compat-resume-1", "range");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> got = new HashMap<>();
                int n = 0;
                long deadline = System.nanoTime() + STEP_WAIT.toNanos();
                while (n < 300) {
                    check(System.nanoTime() < deadline, "first consumer: %d of 300 records within %ds (assignment %s)",
                            n, STEP_WAIT.toSeconds(), c.assignment());
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        got.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new ArrayList<>()).add(r);
                        n++;
                    }
                }
                check(sorted(c.assignment()).equals(tps(topic, 0, 1, 2)), "single member assignment %s", c.assignment());
                for (int q = 0; q < partitions; q++) {
                    TopicPartition tp = new TopicPartition(topic, q);
                    long off = 17 + 23L * q; // processed up to off-1
                    ConsumerRecord<byte[], byte[]> r = got.get(tp).get((int) off - 1);
                    commits.put(tp, new OffsetAndMetadata(off, r.leaderEpoch(), "resume-meta-" + q));
                }
                c.commitSync(commits, Duration.ofSeconds(30));
                step("consumed 300, committed %s", fmt(commits));
                Map<TopicPartition, OffsetAndMetadata> back = c.committed(commits.keySet(), Duration.ofSeconds(30));
                for (TopicPartition tp : commits.keySet()) {
                    check(commits.get(tp).equals(back.get(tp)), "committed(%s) = %s, expected %s", tp, back.get(tp),
                            commits.get(tp));
                }
            }
            step("first consumer closed");
            p = groupProps(bootstrap, group, "ketch-compat-resume-2", "range");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                int want = 0;
                for (OffsetAndMetadata om : commits.values()) {
                    want += 100 - (int) om.offset();
                }
                Map<Integer, List<Long>> got = new TreeMap<>();
                int n = 0;
                long deadline = System.nanoTime() + STEP_WAIT.toNanos();
                int quiet = 0;
                while (n < want || quiet < 3) {
                    check(System.nanoTime() < deadline, "restarted consumer: %d of %d records within %ds: %s", n, want,
                            STEP_WAIT.toSeconds(), got.keySet());
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
                        n++;
                    }
                    quiet = n >= want && recs.isEmpty() ? quiet + 1 : 0;
                }
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : commits.entrySet()) {
                    List<Long> offs = got.getOrDefault(e.getKey().partition(), List.of());
                    check(!offs.isEmpty() && offs.get(0) == e.getValue().offset(), "restarted consumer: partition %d "
                            + "starts at offset %s, expected the committed %d", e.getKey().partition(),
                            offs.isEmpty() ? "none" : offs.get(0), e.getValue().offset());
                    check(offs.size() == 100 - e.getValue().offset(), "restarted consumer: partition %d: %d records, "
                            + "expected %d", e.getKey().partition(), offs.size(), 100 - e.getValue().offset());
                }
                check(n == want, "restarted consumer got %d records, expected %d", n, want);
                step("restarted consumer started at the committed offsets and read the %d records after them", n);
            }
        }
        System.out.println("resume ok");
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

    // ------------------------------------------------------------------------------------------
    // static membership
    // ------------------------------------------------------------------------------------------

    static void staticMembership(String bootstrap) throws Exception {
        final int partitions = 6;
        String suffix = UUID.randomUUID().toString().substring(0, 8);
        String topic = "grp-static-" + suffix;
        String group = "group-static-" + suffix;
        step("static membership: topic %s group %s", topic, group);
        try (Admin admin = Admin.create(adminProps(bootstrap));
             Producer producer = new Producer(bootstrap, topic, partitions)) {
            createTopic(admin, topic, partitions);
            List<Integer> first = producer.produceSync(60);
            List<Member> all = new ArrayList<>();
            java.util.function.BiFunction<String, String, Member> newMember = (name, instance) -> {
                Properties p = groupProps(bootstrap, group, "ketch-compat-" + name, "range");
                p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
                p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
                Member m = new Member(name, p, topic);
                all.add(m);
                return m;
            };
            // a first (the leader), then b
            Member a = newMember.apply("a", "inst-a");
            a.phase = "initial";
            a.start();
            waitBalanced("member a alone", List.of(a), topic, partitions);
            Member b = newMember.apply("b", "inst-b");
            b.phase = "initial";
            b.start();
            waitBalanced("members a and b", List.of(a, b), topic, partitions);
            check(a.assignment.equals(tps(topic, 0, 1, 2)) && b.assignment.equals(tps(topic, 3, 4, 5)),
                    "range over instance ids: a=%s b=%s, expected a=[0,1,2] b=[3,4,5]", partsOf(a.assignment),
                    partsOf(b.assignment));
            waitConsumed("first records", all, first);
            int gen = a.generation;
            Set<TopicPartition> aParts = a.assignment;
            Set<TopicPartition> bParts = b.assignment;
            ConsumerGroupDescription d = describe(admin, group);
            step("describe:%n%s", show(d));
            Set<String> instances = d.members().stream().map(m -> m.groupInstanceId().orElse("-"))
                    .collect(Collectors.toCollection(TreeSet::new));
            check(instances.equals(Set.of("inst-a", "inst-b")), "describe: instance ids %s, expected inst-a, inst-b",
                    instances);

            // ---- b closes: a static member does not leave the group
            a.phase = "restart-b";
            b.phase = "restart-b";
            step("b closes (a static member sends no LeaveGroup)");
            b.stopAndJoin();
            check(b.error == null, "b failed while closing: %s", b.error);
            Thread.sleep(1500); // a heartbeat or three of a
            d = describe(admin, group);
            step("describe after b closed:%n%s", show(d));
            check(d.groupState() == GroupState.STABLE && d.members().size() == 2,
                    "after a static member closed, the group should stay Stable with 2 members (b is kept until its "
                            + "session times out): %s", show(d));
            check(a.generation == gen && a.revokedIn("restart-b").isEmpty() && a.assignedIn("restart-b").isEmpty(),
                    "a saw a rebalance when static member b closed: generation %d -> %d%n%s", gen, a.generation,
                    a.state());

            List<Integer> second = producer.produceSync(60);
            Member b2 = newMember.apply("b2", "inst-b");
            b2.phase = "restart-b";
            step("b2 starts with b's group.instance.id");
            b2.start();
            waitFor("b2 gets b's partitions " + partsOf(bParts), STEP_WAIT, () -> {
                checkAlive(List.of(a, b2));
                return b2.assignment.equals(bParts);
            }, () -> states(List.of(a, b2)));
            waitConsumed("records produced while b was away", List.of(a, b2), second);
            Thread.sleep(1000);
            step("b2 owns %s at generation %d; a owns %s at generation %d", partsOf(b2.assignment), b2.generation,
                    partsOf(a.assignment), a.generation);
            check(b2.generation == gen, "b2 rejoined at generation %d, expected the unchanged %d (no rebalance)",
                    b2.generation, gen);
            check(a.generation == gen && a.assignment.equals(aParts) && a.revokedIn("restart-b").isEmpty()
                            && a.assignedIn("restart-b").isEmpty(),
                    "a was rebalanced when static member b came back: generation %d -> %d%n%s", gen, a.generation,
                    a.state());
            synchronized (b2.consumed) {
                for (Consumed c : b2.consumed) {
                    check(!first.contains(c.index()), "b2 re-read record %d (p%d/%d) that b had consumed and "
                            + "committed", c.index(), c.partition(), c.offset());
                }
            }
            d = describe(admin, group);
            check(d.members().size() == 2 && d.members().stream().anyMatch(m -> m.consumerId().equals(b2.memberId)
                    && m.groupInstanceId().equals(Optional.of("inst-b"))), "describe: b2 (%s) not listed as "
                    + "inst-b:%n%s", b2.memberId, show(d));

            // ---- the leader (a) restarts too: JoinGroup answers skip_assignment, still no rebalance
            a.phase = "restart-a";
            b2.phase = "restart-a";
            step("a (the leader) closes and comes back as a2");
            a.stopAndJoin();
            check(a.error == null, "a failed while closing: %s", a.error);
            List<Integer> third = producer.produceSync(60);
            Member a2 = newMember.apply("a2", "inst-a");
            a2.phase = "restart-a";
            a2.start();
            waitFor("a2 gets a's partitions " + partsOf(aParts), STEP_WAIT, () -> {
                checkAlive(List.of(a2, b2));
                return a2.assignment.equals(aParts);
            }, () -> states(List.of(a2, b2)));
            waitConsumed("records produced while a was away", List.of(a2, b2), third);
            Thread.sleep(1000);
            step("a2 owns %s at generation %d", partsOf(a2.assignment), a2.generation);
            check(a2.generation == gen && b2.generation == gen && b2.revokedIn("restart-a").isEmpty()
                            && b2.assignedIn("restart-a").isEmpty() && b2.assignment.equals(bParts),
                    "the static leader's restart rebalanced the group: generation %d, a2 at %d%n%s", gen,
                    a2.generation, states(List.of(a2, b2)));

            // ---- a second consumer with b's instance id while b2 is alive: b2 gets fenced
            b2.phase = "fence";
            a2.phase = "fence";
            Member b3 = newMember.apply("b3", "inst-b");
            b3.phase = "fence";
            step("b3 starts with inst-b while b2 is still running");
            b3.start();
            waitFor("b2 fenced (FencedInstanceIdException) and b3 owning " + partsOf(bParts), STEP_WAIT, () -> {
                checkAlive(List.of(a2, b3));
                return b2.error != null && b3.assignment.equals(bParts);
            }, () -> states(List.of(a2, b2, b3)));
            check(b2.error instanceof FencedInstanceIdException, "b2 ended with %s, expected FencedInstanceIdException",
                    b2.error);
            step("b2 fenced: %s", b2.error);
            List<Integer> fourth = producer.produceSync(60);
            waitConsumed("records after the fencing", List.of(a2, b3), fourth);
            step("b3 owns %s at generation %d; a2 at generation %d", partsOf(b3.assignment), b3.generation,
                    a2.generation);
            check(a2.generation == gen && a2.assignment.equals(aParts) && a2.revokedIn("fence").isEmpty()
                            && a2.assignedIn("fence").isEmpty(),
                    "a2 was rebalanced when b3 replaced b2: generation %d -> %d%n%s", gen, a2.generation, a2.state());
            check(b3.generation == gen, "b3 joined at generation %d, expected %d", b3.generation, gen);
            d = describe(admin, group);
            step("describe:%n%s", show(d));
            check(d.members().size() == 2 && d.members().stream().anyMatch(m -> m.consumerId().equals(b3.memberId)),
                    "describe after fencing: %s", show(d));
            a2.stopAndJoin();
            b3.stopAndJoin();
        }
        System.out.println("static ok");
    }
}
