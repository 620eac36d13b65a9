package ketch.compat;

import static ketch.compat.GroupCommits.*;
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
    // members: three members, leave, join, no loss, commits (helpers in GroupSupport)
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
