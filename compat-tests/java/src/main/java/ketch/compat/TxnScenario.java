package ketch.compat;

import static ketch.compat.TxnSupport.*;
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
import org.apache.kafka.clients.admin.TransactionState;
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
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * Idempotent and transactional producer scenarios (kafka-clients), for a Kafka-compatible broker.
 *
 * <pre>
 * TxnScenario &lt;bootstrap&gt; create-topic &lt;topic&gt; &lt;partitions&gt;
 * TxnScenario &lt;bootstrap&gt; seq-produce &lt;topic&gt; &lt;partitions&gt; &lt;count&gt; [rate/s=0] [in-flight=5]
 *     idempotent producer (acks=all, retries, max.in.flight.requests.per.connection in-flight; rate 0:
 *     unlimited): record i goes to partition i % partitions
 *     with value "p{partition}-{n}" (n counts per partition from 0). Prints "progress acked=N" lines,
 *     checks every send succeeded and that partition p acked seq n at offset n (fresh topic), prints the
 *     producer's retry/error metrics and "seq-produce ok".
 * TxnScenario &lt;bootstrap&gt; dump &lt;topic&gt; &lt;read_committed|read_uncommitted&gt;
 *     read every partition from the beginning up to its end offset for that isolation level (the LSO for
 *     read_committed) and print one JSON line per record: {"p":..,"o":..,"k":"..","v":".."}; first a line
 *     {"end":{"0":N,..},"begin":{..}}.
 * TxnScenario &lt;bootstrap&gt; commit-abort &lt;topic&gt;
 *     transactions committed and aborted across 3 partitions; read_committed / read_uncommitted consumers,
 *     end offsets and markers, the last stable offset with an open transaction.
 * TxnScenario &lt;bootstrap&gt; fence &lt;topic&gt;
 *     a second producer with the same transactional.id fences the first (open transaction aborted, zombie
 *     commit and zombie send rejected with ProducerFencedException).
 * TxnScenario &lt;bootstrap&gt; timeout-late-write &lt;topic&gt;
 *     a transaction left past transaction.timeout.ms (2 s) is aborted by the coordinator; the producer's late
 *     send (to the partition it wrote to, then with a second producer to one it did not) fails with
 *     InvalidProducerEpochException instead of opening a new transaction; neither late record is ever in
 *     the log; after abortTransaction the producer commits a new transaction.
 * TxnScenario &lt;bootstrap&gt; open-txn &lt;topic&gt; &lt;partition&gt; &lt;transactional.id&gt; &lt;release-file&gt;
 *     begin a transaction, send 3 records to the partition, print "open pid=.. epoch=..", then wait until
 *     the release file exists and abort (file content "abort") or commit ("commit"); print "ended".
 * TxnScenario &lt;bootstrap&gt; group-offsets &lt;group&gt;
 *     print the group's committed offsets as JSON lines {"t":..,"p":..,"o":..}.
 * TxnScenario &lt;bootstrap&gt; set-feature &lt;feature&gt; &lt;level&gt;
 *     Admin updateFeatures (upgrade or safe downgrade), e.g. transaction.version 1 to make Kafka 4.x clients
 *     use the pre-KIP-890 transaction protocol (AddPartitionsToTxn from the client, EndTxn v4, Produce v11);
 *     waits until describeFeatures shows the level.
 * </pre>
 *
 * Exit codes as RoundTrip: 0 ok, 1 MISMATCH:, 2 ERROR:, 3 TIMEOUT: (watchdog, KETCH_COMPAT_JAVA_TIMEOUT,
 * default 150 s), 64 usage.
 */
public final class TxnScenario {

    static final int PARTITIONS = 3;

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", envOr("KETCH_COMPAT_JAVA_LOG", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        System.setProperty("org.slf4j.simpleLogger.showThreadName", "true");
        RoundTrip.startWatchdog(Long.parseLong(envOr("KETCH_COMPAT_JAVA_TIMEOUT", "150")));
        int rc;
        try {
            if (args.length < 2) {
                usage();
                System.exit(64);
            }
            String bs = args[0];
            switch (args[1]) {
                case "create-topic" -> createTopic(bs, arg(args, 2), Integer.parseInt(arg(args, 3)));
                case "seq-produce" -> seqProduce(bs, arg(args, 2), Integer.parseInt(arg(args, 3)),
                        Integer.parseInt(arg(args, 4)), args.length > 5 ? Integer.parseInt(args[5]) : 0,
                        args.length > 6 ? Integer.parseInt(args[6]) : 5);
                case "dump" -> dump(bs, arg(args, 2), arg(args, 3));
                case "commit-abort" -> commitAbort(bs, arg(args, 2));
                case "fence" -> fence(bs, arg(args, 2));
                case "timeout-late-write" -> timeoutLateWrite(bs, arg(args, 2));
                case "open-txn" -> openTxn(bs, arg(args, 2), Integer.parseInt(arg(args, 3)), arg(args, 4),
                        Path.of(arg(args, 5)));
                case "group-offsets" -> groupOffsets(bs, arg(args, 2));
                case "set-feature" -> setFeature(bs, arg(args, 2), Short.parseShort(arg(args, 3)));
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
        System.exit(rc);
    }

    static String arg(String[] args, int i) {
        if (args.length <= i) {
            usage();
            System.exit(64);
        }
        return args[i];
    }

    static void usage() {
        System.err.println("usage: TxnScenario <bootstrap> create-topic <topic> <partitions>\n"
                + "       TxnScenario <bootstrap> seq-produce <topic> <partitions> <count> [rate] [in-flight]\n"
                + "       TxnScenario <bootstrap> dump <topic> <read_committed|read_uncommitted>\n"
                + "       TxnScenario <bootstrap> commit-abort <topic>\n"
                + "       TxnScenario <bootstrap> fence <topic>\n"
                + "       TxnScenario <bootstrap> timeout-late-write <topic>\n"
                + "       TxnScenario <bootstrap> open-txn <topic> <partition> <transactional.id> <release-file>\n"
                + "       TxnScenario <bootstrap> group-offsets <group>\n"
                + "       TxnScenario <bootstrap> set-feature <feature> <level>");
    }

    // ------------------------------------------------------------------------------------------
    // seq-produce: idempotent producer, per-partition sequence numbers in the values
    // ------------------------------------------------------------------------------------------

    static void seqProduce(String bootstrap, String topic, int partitions, int count, int rate, int inFlight)
            throws Exception {
        createTopic(bootstrap, topic, partitions);
        Properties props = producerProps(bootstrap, "lz4");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "ketch-compat-idempotent");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, Integer.toString(inFlight));
        props.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "2048"); // many small batches: several in flight
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "120000");
        int[] next = new int[partitions];
        List<Future<RecordMetadata>> futures = new ArrayList<>(count);
        int[] partOf = new int[count];
        int[] seqOf = new int[count];
        java.util.concurrent.atomic.AtomicInteger acked = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
        long t0 = System.nanoTime();
        long lastReport = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                int p = i % partitions;
                int seq = next[p]++;
                partOf[i] = p;
                seqOf[i] = seq;
                futures.add(producer.send(new ProducerRecord<>(topic, p, bytes("k" + i), bytes("p" + p + "-" + seq)),
                        (md, ex) -> {
                            if (ex == null) {
                                acked.incrementAndGet();
                            } else {
                                failed.incrementAndGet();
                            }
                        }));
                if (rate > 0) {
                    long due = t0 + (long) ((i + 1) * 1e9 / rate);
                    long now = System.nanoTime();
                    if (due > now) {
                        Thread.sleep((due - now) / 1_000_000, (int) ((due - now) % 1_000_000));
                    }
                }
                long now = System.nanoTime();
                if (now - lastReport > 200_000_000L) {
                    lastReport = now;
                    System.out.printf("progress sent=%d acked=%d failed=%d%n", i + 1, acked.get(), failed.get());
                    System.out.flush();
                }
            }
            step("all %d records sent, flushing", count);
            while (true) {
                // flush() blocks until every record is done; report progress meanwhile
                Thread flusher = new Thread(producer::flush, "flusher");
                flusher.start();
                while (flusher.isAlive()) {
                    flusher.join(500);
                    System.out.printf("progress sent=%d acked=%d failed=%d%n", count, acked.get(), failed.get());
                    System.out.flush();
                }
                break;
            }
            List<String> errors = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                try {
                    RecordMetadata md = futures.get(i).get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    if (md.partition() != partOf[i] || md.offset() != seqOf[i]) {
                        errors.add(String.format("record p%d-%d acked at partition %d offset %d (expected offset %d:"
                                + " a duplicate or a gap before it)", partOf[i], seqOf[i], md.partition(),
                                md.offset(), seqOf[i]));
                    }
                } catch (ExecutionException e) {
                    errors.add(String.format("record p%d-%d failed: %s", partOf[i], seqOf[i], e.getCause()));
                }
                if (errors.size() >= 20) {
                    break;
                }
            }
            long retries = metric(producer, "record-retry-total");
            long errorsTotal = metric(producer, "record-error-total");
            System.out.printf("metrics record-retry-total=%d record-error-total=%d%n", retries, errorsTotal);
            check(errors.isEmpty(), "%d+ bad acks: %s", errors.size(), String.join("; ", errors));
        }
        System.out.printf("seq-produce ok: %d records on %d partitions, max.in.flight %d%n", count, partitions,
                inFlight);
    }

    // ------------------------------------------------------------------------------------------
    // dump
    // ------------------------------------------------------------------------------------------

    static void dump(String bootstrap, String topic, String isolation) throws Exception {
        if (isolation.equals("read_committed")) {
            awaitStable(bootstrap, topic, 15); // the caller's transactions are over: let the markers land
        }
        Map<Integer, Long> end = new TreeMap<>();
        Map<Integer, List<Rec>> got = readAll(bootstrap, topic, isolation, 0, end);
        StringBuilder b = new StringBuilder("{\"end\":{");
        int n = 0;
        for (Map.Entry<Integer, Long> e : end.entrySet()) {
            b.append(n++ > 0 ? "," : "").append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        System.out.println(b.append("}}"));
        for (List<Rec> recs : got.values()) {
            for (Rec r : recs) {
                System.out.println("{\"p\":" + r.p() + ",\"o\":" + r.o() + ",\"k\":" + json(r.k()) + ",\"v\":"
                        + json(r.v()) + "}");
            }
        }
        System.out.flush();
    }

    static void groupOffsets(String bootstrap, String group) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            // requireStable: wait for pending transactional offset commits (UNSTABLE_OFFSET_COMMIT is retried)
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(
                    Map.of(group, new org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec()),
                    new org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata(group).get(WAIT.toSeconds(), TimeUnit.SECONDS);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offs.entrySet()) {
                System.out.println("{\"t\":" + json(e.getKey().topic()) + ",\"p\":" + e.getKey().partition()
                        + ",\"o\":" + (e.getValue() == null ? -1 : e.getValue().offset()) + "}");
            }
        }
    }

    static void setFeature(String bootstrap, String feature, short level) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            org.apache.kafka.clients.admin.FeatureMetadata before =
                    admin.describeFeatures().featureMetadata().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            org.apache.kafka.clients.admin.FinalizedVersionRange cur = before.finalizedFeatures().get(feature);
            short now = cur == null ? 0 : cur.maxVersionLevel();
            step("%s finalized level %d, setting %d", feature, now, level);
            if (now != level) {
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType type = level > now
                        ? org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UPGRADE
                        : org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.SAFE_DOWNGRADE;
                admin.updateFeatures(Map.of(feature, new org.apache.kafka.clients.admin.FeatureUpdate(level, type)),
                        new org.apache.kafka.clients.admin.UpdateFeaturesOptions()).all()
                        .get(WAIT.toSeconds(), TimeUnit.SECONDS);
            }
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                org.apache.kafka.clients.admin.FinalizedVersionRange r = admin.describeFeatures().featureMetadata()
                        .get(WAIT.toSeconds(), TimeUnit.SECONDS).finalizedFeatures().get(feature);
                short got = r == null ? 0 : r.maxVersionLevel();
                if (got == level) {
                    break;
                }
                check(System.nanoTime() < deadline, "%s still at level %d", feature, got);
                Thread.sleep(100);
            }
        }
        System.out.println("feature " + feature + " = " + level);
    }

    // ------------------------------------------------------------------------------------------
    // commit-abort
    // ------------------------------------------------------------------------------------------

    static String val(int txn, boolean commit, int p, int i) {
        return "txn" + txn + "-" + (commit ? "commit" : "abort") + "-p" + p + "-" + i;
    }

    static void commitAbort(String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, PARTITIONS);
        String tid = "ketch-java-txn-" + UUID.randomUUID().toString().substring(0, 8);
        final int perPartition = 20;
        // commit (true) / abort (false) per transaction; txn 4 only writes to partitions 0 and 1
        boolean[] plan = {true, false, false, true, true, false, true};
        Map<Integer, List<String>> committed = new TreeMap<>();
        Map<Integer, List<String>> all = new TreeMap<>();
        int[] markers = new int[PARTITIONS];
        for (int p = 0; p < PARTITIONS; p++) {
            committed.put(p, new ArrayList<>());
            all.put(p, new ArrayList<>());
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(txnProducerProps(bootstrap, tid))) {
            step("initTransactions (transactional.id=%s)", tid);
            producer.initTransactions();
            for (int t = 0; t < plan.length; t++) {
                int parts = t == 4 ? 2 : PARTITIONS;
                producer.beginTransaction();
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < perPartition; i++) {
                    for (int p = 0; p < parts; p++) {
                        String v = val(t, plan[t], p, i);
                        fs.add(producer.send(new ProducerRecord<>(topic, p, bytes("t" + t + "-" + i), bytes(v))));
                        all.get(p).add(v);
                        if (plan[t]) {
                            committed.get(p).add(v);
                        }
                    }
                }
                // flush so that the aborted records are in the log too (read_uncommitted must see them)
                producer.flush();
                for (Future<RecordMetadata> f : fs) {
                    f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                }
                if (plan[t]) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                for (int p = 0; p < parts; p++) {
                    markers[p]++;
                }
                step("transaction %d: %d records on %d partitions, %s", t, perPartition * parts, parts,
                        plan[t] ? "committed" : "aborted");
            }

            // ---- everything is decided: read_committed sees the committed records, read_uncommitted all
            check(awaitStable(bootstrap, topic, 15), "the last stable offset did not reach the high watermark "
                    + "within 15s of the last commit");
            Map<Integer, Long> endRc = new TreeMap<>();
            Map<Integer, Long> endRu = new TreeMap<>();
            Map<Integer, List<Rec>> rc = readAll(bootstrap, topic, "read_committed", 300, endRc);
            Map<Integer, List<Rec>> ru = readAll(bootstrap, topic, "read_uncommitted", 300, endRu);
            for (int p = 0; p < PARTITIONS; p++) {
                expectValues("read_committed", p, rc.get(p), committed.get(p));
                expectValues("read_uncommitted", p, ru.get(p), all.get(p));
                long hw = all.get(p).size() + markers[p];
                check(endRu.get(p) == hw, "partition %d: end offset (high watermark) %d, expected %d = %d data "
                        + "records + %d transaction markers (one control record per transaction that wrote to "
                        + "the partition)", p, endRu.get(p), hw, all.get(p).size(), markers[p]);
                check(endRc.get(p) == hw, "partition %d: read_committed end offset (last stable offset) %d, "
                        + "expected the high watermark %d: no transaction is open", p, endRc.get(p), hw);
            }
            step("read_committed sees exactly the committed records %s, read_uncommitted all data records %s, "
                    + "end offsets %s (records + markers)", sizes(committed), sizes(all), endRu);

            // ---- an open transaction holds the last stable offset back
            producer.beginTransaction();
            List<String> open = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                String v = "open-p0-" + i;
                producer.send(new ProducerRecord<>(topic, 0, bytes("open"), bytes(v)));
                open.add(v);
            }
            producer.flush();
            long lso = endRu.get(0); // the first offset of the open transaction
            List<String> plain = new ArrayList<>();
            Properties pp = producerProps(bootstrap, "none");
            pp.put(ProducerConfig.CLIENT_ID_CONFIG, "ketch-compat-plain");
            try (KafkaProducer<byte[], byte[]> plainProducer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 5; i++) {
                    String v = "plain-p0-" + i;
                    plainProducer.send(new ProducerRecord<>(topic, 0, bytes("plain"), bytes(v)))
                            .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    plain.add(v);
                }
            }
            long hwOpen = lso + open.size() + plain.size();
            step("transaction open on partition 0 from offset %d; 5 non-transactional records after it", lso);
            try (Admin admin = Admin.create(adminProps(bootstrap))) {
                Map<Integer, Long> latestRc = listOffsets(admin, topic, PARTITIONS, OffsetSpec.latest(),
                        IsolationLevel.READ_COMMITTED);
                Map<Integer, Long> latestRu = listOffsets(admin, topic, PARTITIONS, OffsetSpec.latest(),
                        IsolationLevel.READ_UNCOMMITTED);
                check(latestRc.get(0) == lso, "ListOffsets(latest, read_committed) partition 0 = %d, expected the "
                        + "last stable offset %d (first offset of the open transaction)", latestRc.get(0), lso);
                check(latestRu.get(0) == hwOpen, "ListOffsets(latest, read_uncommitted) partition 0 = %d, expected "
                        + "the high watermark %d", latestRu.get(0), hwOpen);
                for (int p = 1; p < PARTITIONS; p++) {
                    check(latestRc.get(p).equals(endRu.get(p)) && latestRu.get(p).equals(endRu.get(p)),
                            "partition %d (no open transaction): ListOffsets latest read_committed %d / "
                                    + "read_uncommitted %d, expected %d", p, latestRc.get(p), latestRu.get(p),
                            endRu.get(p));
                }
                Map<Integer, Long> earliest = listOffsets(admin, topic, PARTITIONS, OffsetSpec.earliest(),
                        IsolationLevel.READ_COMMITTED);
                for (int p = 0; p < PARTITIONS; p++) {
                    check(earliest.get(p) == 0, "ListOffsets(earliest) partition %d = %d", p, earliest.get(p));
                }
                step("ListOffsets latest: read_committed %s (LSO), read_uncommitted %s (HW)", latestRc, latestRu);
            }
            endRc.clear();
            endRu.clear();
            rc = readAll(bootstrap, topic, "read_committed", 1000, endRc);
            ru = readAll(bootstrap, topic, "read_uncommitted", 300, endRu);
            check(endRc.get(0) == lso, "read_committed consumer endOffsets partition 0 = %d, expected LSO %d",
                    endRc.get(0), lso);
            expectValues("read_committed with a transaction open (must stop at the LSO)", 0, rc.get(0),
                    committed.get(0));
            List<String> ruWant = new ArrayList<>(all.get(0));
            ruWant.addAll(open);
            ruWant.addAll(plain);
            expectValues("read_uncommitted with a transaction open", 0, ru.get(0), ruWant);
            step("read_committed stops at the LSO %d while the transaction is open; read_uncommitted reads to %d",
                    lso, endRu.get(0));

            producer.commitTransaction();
            committed.get(0).addAll(open);
            committed.get(0).addAll(plain);
            all.get(0).addAll(open);
            all.get(0).addAll(plain);
            markers[0]++;
            check(awaitStable(bootstrap, topic, 15), "the last stable offset did not reach the high watermark "
                    + "within 15s of the commit");
            endRc.clear();
            rc = readAll(bootstrap, topic, "read_committed", 300, endRc);
            expectValues("read_committed after the commit", 0, rc.get(0), committed.get(0));
            long hw = all.get(0).size() + markers[0];
            check(endRc.get(0) == hw, "read_committed end offset after the commit %d, expected %d", endRc.get(0), hw);
            step("after the commit read_committed sees the transaction and the records after it; LSO = HW = %d",
                    hw);
        }
        System.out.println("commit-abort ok");
    }

    static Map<Integer, Integer> sizes(Map<Integer, List<String>> m) {
        Map<Integer, Integer> out = new TreeMap<>();
        m.forEach((k, v) -> out.put(k, v.size()));
        return out;
    }

    // ------------------------------------------------------------------------------------------
    // fence
    // ------------------------------------------------------------------------------------------

    static Throwable fencedCause(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ProducerFencedException) {
                return c;
            }
        }
        return null;
    }

    static String chain(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
        }
        return b.toString();
    }

    static void fence(String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, PARTITIONS);
        List<String> committed = new ArrayList<>();
        List<String> all = new ArrayList<>();

        // ---- case 1: fenced with a transaction open; the new producer's InitProducerId aborts it
        String tid = "ketch-java-fence-" + UUID.randomUUID().toString().substring(0, 8);
        KafkaProducer<byte[], byte[]> zombie = new KafkaProducer<>(txnProducerProps(bootstrap, tid));
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            for (int i = 0; i < 3; i++) {
                String v = "zombie-open-" + i;
                zombie.send(new ProducerRecord<>(topic, 0, bytes("z"), bytes(v))).get(WAIT.toSeconds(),
                        TimeUnit.SECONDS);
                all.add(v);
            }
            step("producer 1 (%s): transaction open with 3 records on partition 0", tid);
            try (KafkaProducer<byte[], byte[]> fresh = new KafkaProducer<>(txnProducerProps(bootstrap, tid))) {
                long t0 = System.nanoTime();
                fresh.initTransactions();
                step("producer 2 with the same transactional.id: initTransactions ok in %d ms (aborts producer 1's"
                        + " open transaction)", (System.nanoTime() - t0) / 1_000_000);
                Throwable got = null;
                try {
                    zombie.commitTransaction();
                } catch (Throwable e) {
                    got = e;
                }
                check(got != null, "producer 1's commitTransaction succeeded after producer 2 fenced it");
                step("producer 1 commitTransaction: %s", chain(got));
                check(fencedCause(got) != null, "producer 1's commitTransaction failed with %s, expected "
                        + "ProducerFencedException", chain(got));
                fresh.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    String v = "fresh-" + i;
                    fresh.send(new ProducerRecord<>(topic, 0, bytes("f"), bytes(v)));
                    all.add(v);
                    committed.add(v);
                }
                fresh.commitTransaction();
                step("producer 2 committed 3 records");
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }

        // ---- case 2: fenced between transactions; the zombie's next send / commit fails
        String tid2 = tid + "-b";
        KafkaProducer<byte[], byte[]> zombie2 = new KafkaProducer<>(txnProducerProps(bootstrap, tid2));
        try {
            zombie2.initTransactions();
            zombie2.beginTransaction();
            zombie2.send(new ProducerRecord<>(topic, 0, bytes("z2"), bytes("zombie2-committed")));
            zombie2.commitTransaction();
            all.add("zombie2-committed");
            committed.add("zombie2-committed");
            try (KafkaProducer<byte[], byte[]> fresh = new KafkaProducer<>(txnProducerProps(bootstrap, tid2))) {
                fresh.initTransactions();
                step("producer 3 (%s) committed one record, then producer 4 with the same id initTransactions", tid2);
                Throwable sendErr = null;
                Throwable commitErr = null;
                Throwable abortErr = null;
                try {
                    zombie2.beginTransaction();
                    Future<RecordMetadata> f = zombie2.send(new ProducerRecord<>(topic, 0, bytes("z2"),
                            bytes("zombie2-late")));
                    try {
                        f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        sendErr = e.getCause();
                    }
                    zombie2.commitTransaction();
                } catch (Throwable e) {
                    commitErr = e;
                }
                if (commitErr != null && fencedCause(commitErr) == null) {
                    // an abortable error (Kafka 4.x with transaction.version 2 answers the zombie's Produce
                    // with INVALID_PRODUCER_EPOCH): the application aborts, and EndTxn says PRODUCER_FENCED
                    try {
                        zombie2.abortTransaction();
                    } catch (Throwable e) {
                        abortErr = e;
                    }
                }
                step("producer 3 after being fenced: send -> %s; commitTransaction -> %s; abortTransaction -> %s",
                        sendErr == null ? "ok" : chain(sendErr), commitErr == null ? "ok" : chain(commitErr),
                        commitErr != null && fencedCause(commitErr) == null
                                ? (abortErr == null ? "ok" : chain(abortErr)) : "(not called)");
                check(commitErr != null, "producer 3's commitTransaction succeeded after producer 4 fenced it");
                check(fencedCause(commitErr) != null || fencedCause(abortErr) != null,
                        "producer 3 fenced: neither commitTransaction (%s) nor the abortTransaction after it (%s) "
                                + "failed with ProducerFencedException", chain(commitErr),
                        abortErr == null ? "ok" : chain(abortErr));
                if (sendErr == null) {
                    all.add("zombie2-late"); // the broker took the zombie's record (it stays aborted/undecided)
                }
                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>(topic, 0, bytes("f2"), bytes("fresh2")));
                fresh.commitTransaction();
                all.add("fresh2");
                committed.add("fresh2");
            }
        } finally {
            zombie2.close(Duration.ofSeconds(5));
        }

        check(awaitStable(bootstrap, topic, 15), "the last stable offset did not reach the high watermark within 15s");
        Map<Integer, List<Rec>> rc = readAll(bootstrap, topic, "read_committed", 500, null);
        expectValues("read_committed after fencing", 0, rc.get(0), committed);
        Map<Integer, List<Rec>> ru = readAll(bootstrap, topic, "read_uncommitted", 300, null);
        List<String> ruv = values(ru.get(0));
        List<String> ruExpected = new ArrayList<>(all);
        if (!ruv.equals(ruExpected)) {
            // the zombie's late record may or may not have reached the log (it is never committed)
            ruExpected.remove("zombie2-late");
        }
        expectValues("read_uncommitted after fencing", 0, ru.get(0), ruExpected);
        step("read_committed: %s", values(rc.get(0)));
        System.out.println("fence ok");
    }

    // ------------------------------------------------------------------------------------------
    // timeout-late-write: a send after the coordinator aborted the timed-out transaction
    // ------------------------------------------------------------------------------------------

    static void timeoutLateWrite(String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, 2);
        List<String> committed = new ArrayList<>();
        List<String> all = new ArrayList<>();
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            for (int late = 0; late < 2; late++) {
                String tid = "ketch-java-timeout-" + late + "-" + UUID.randomUUID().toString().substring(0, 8);
                Properties props = txnProducerProps(bootstrap, tid);
                props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "2000");
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
                    producer.initTransactions();
                    producer.beginTransaction();
                    String early = "early-" + late;
                    producer.send(new ProducerRecord<>(topic, 0, bytes("k"), bytes(early))).get(WAIT.toSeconds(),
                            TimeUnit.SECONDS);
                    all.add(early);
                    // The coordinator aborts the transaction once it is past its timeout.
                    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                    TransactionState state;
                    while ((state = admin.describeTransactions(List.of(tid)).description(tid).get().state())
                            != TransactionState.COMPLETE_ABORT) {
                        check(System.nanoTime() < deadline, "transaction %s still %s 60 s after its 2 s timeout",
                                tid, state);
                        Thread.sleep(100);
                    }
                    step("%s: wrote %s to partition 0, then the coordinator aborted the timed-out transaction",
                            tid, early);
                    Throwable sendErr = null;
                    try {
                        producer.send(new ProducerRecord<>(topic, late, bytes("k"), bytes("late-" + late)))
                                .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        sendErr = e.getCause();
                    }
                    step("late send to partition %d: %s", late, sendErr == null ? "ok" : chain(sendErr));
                    check(sendErr instanceof InvalidProducerEpochException,
                            "the late send to partition %d should fail with InvalidProducerEpochException, got %s",
                            late, sendErr == null ? "success" : chain(sendErr));
                    Throwable commitErr = null;
                    try {
                        producer.commitTransaction();
                    } catch (Throwable e) {
                        commitErr = e;
                    }
                    step("commitTransaction: %s", commitErr == null ? "ok" : chain(commitErr));
                    check(commitErr != null, "commitTransaction succeeded after the transaction timed out");
                    producer.abortTransaction();
                    producer.beginTransaction();
                    String after = "after-" + late;
                    producer.send(new ProducerRecord<>(topic, 0, bytes("k"), bytes(after)));
                    producer.commitTransaction();
                    step("abortTransaction ok, then a new transaction committed %s", after);
                    all.add(after);
                    committed.add(after);
                }
            }
        }
        check(awaitStable(bootstrap, topic, 15), "the last stable offset did not reach the high watermark within 15s");
        Map<Integer, List<Rec>> rc = readAll(bootstrap, topic, "read_committed", 500, null);
        expectValues("read_committed", 0, rc.get(0), committed);
        expectValues("read_committed", 1, rc.get(1), List.of());
        Map<Integer, List<Rec>> ru = readAll(bootstrap, topic, "read_uncommitted", 300, null);
        expectValues("read_uncommitted", 0, ru.get(0), all);
        expectValues("read_uncommitted", 1, ru.get(1), List.of());
        System.out.println("timeout-late-write ok");
    }

    // ------------------------------------------------------------------------------------------
    // open-txn (for kafka-transactions)
    // ------------------------------------------------------------------------------------------

    static void openTxn(String bootstrap, String topic, int partition, String tid, Path release) throws Exception {
        createTopic(bootstrap, topic, partition + 1);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(txnProducerProps(bootstrap, tid))) {
            producer.initTransactions();
            producer.beginTransaction();
            RecordMetadata first = null;
            for (int i = 0; i < 3; i++) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, partition, bytes("k"),
                        bytes("open-" + i))).get(WAIT.toSeconds(), TimeUnit.SECONDS);
                if (first == null) {
                    first = md;
                }
            }
            System.out.printf("open first-offset=%d%n", first.offset());
            System.out.flush();
            long deadline = System.nanoTime() + Duration.ofSeconds(100).toNanos();
            while (!Files.exists(release)) {
                check(System.nanoTime() < deadline, "release file %s not created within 100s", release);
                Thread.sleep(50);
            }
            String what = Files.readString(release).trim();
            if (what.equals("commit")) {
                producer.commitTransaction();
            } else {
                producer.abortTransaction();
            }
            System.out.println("ended " + what);
        }
    }
}
