package ketch.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * Java client (kafka-clients) scenarios against a Kafka-compatible broker.
 *
 * <pre>
 * RoundTrip &lt;bootstrap&gt; roundtrip
 *     create a 3-partition topic; produce keyed records with headers and explicit timestamps with
 *     every codec (none, gzip, snappy, lz4, zstd), acks=all; consume them back (assign, no group);
 *     check keys, values, headers, timestamps, partitioning, per-partition order and contiguous
 *     offsets; seek; offsetsForTimes; admin listOffsets; delete the topic.
 * RoundTrip &lt;bootstrap&gt; produce &lt;topic&gt; &lt;count&gt; [firstIndex=0] [codec=lz4]
 *     create the topic (3 partitions) if missing, produce records firstIndex..firstIndex+count-1
 *     with acks=all, wait for every ack, print "produced &lt;count&gt;".
 * RoundTrip &lt;bootstrap&gt; verify &lt;topic&gt; &lt;count&gt;
 *     consume the topic from the beginning and check it holds exactly records 0..count-1,
 *     print "verified &lt;count&gt;".
 * </pre>
 *
 * Exit codes: 0 ok, 1 mismatch (message on stderr starting with "MISMATCH:"), 2 error/exception,
 * 3 watchdog timeout (KETCH_COMPAT_JAVA_TIMEOUT seconds, default 150), 64 usage.
 * KETCH_COMPAT_PRODUCER_PROPS="k=v;k2=v2" adds producer settings (e.g. enable.idempotence=false).
 */
public final class RoundTrip {

    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PARTITIONS = 3;
    static final int PER_CODEC = 200;
    static final Duration WAIT = Duration.ofSeconds(60);
    static final long T_START = System.nanoTime();

    static final class Mismatch extends RuntimeException {
        Mismatch(String msg) {
            super(msg);
        }
    }

    static void check(boolean ok, String fmt, Object... args) {
        if (!ok) {
            throw new Mismatch(String.format(fmt, args));
        }
    }

    static void step(String fmt, Object... args) {
        long ms = (System.nanoTime() - T_START) / 1_000_000;
        System.out.printf("[%6d ms] %s%n", ms, String.format(fmt, args));
        System.out.flush();
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                envOr("KETCH_COMPAT_JAVA_LOG", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        startWatchdog(Long.parseLong(envOr("KETCH_COMPAT_JAVA_TIMEOUT", "150")));
        int rc;
        try {
            if (args.length < 2) {
                usage();
                rc = 64;
            } else {
                String bootstrap = args[0];
                String scenario = args[1];
                switch (scenario) {
                    case "roundtrip" -> roundtrip(bootstrap);
                    case "produce" -> {
                        if (args.length < 4) {
                            usage();
                            System.exit(64);
                        }
                        produce(bootstrap, args[2], Integer.parseInt(args[3]),
                                args.length > 4 ? Integer.parseInt(args[4]) : 0,
                                args.length > 5 ? args[5] : "lz4");
                    }
                    case "verify" -> {
                        if (args.length < 4) {
                            usage();
                            System.exit(64);
                        }
                        verify(bootstrap, args[2], Integer.parseInt(args[3]));
                    }
                    default -> {
                        usage();
                        System.exit(64);
                    }
                }
                rc = 0;
            }
        } catch (Mismatch m) {
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
        System.err.flush();
        System.exit(rc);
    }

    static void usage() {
        System.err.println("usage: RoundTrip <bootstrap> roundtrip\n"
                + "       RoundTrip <bootstrap> produce <topic> <count> [firstIndex] [codec]\n"
                + "       RoundTrip <bootstrap> verify <topic> <count>");
    }

    static String envOr(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static void startWatchdog(long seconds) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(seconds * 1000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.flush();
            System.err.println("TIMEOUT: scenario still running after " + seconds + "s; main thread at:");
            for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
                if (e.getKey().getName().equals("main")) {
                    for (StackTraceElement el : e.getValue()) {
                        System.err.println("    at " + el);
                    }
                }
            }
            System.err.flush();
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        t.setDaemon(true);
        t.start();
    }

    // ------------------------------------------------------------------------------------------
    // client configs
    // ------------------------------------------------------------------------------------------

    static Properties adminProps(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "ketch-compat-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000");
        return p;
    }

    static Properties producerProps(String bootstrap, String codec) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "ketch-compat-producer-" + codec);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20"); // several records per batch
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "40000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // extra producer settings, e.g. KETCH_COMPAT_PRODUCER_PROPS="enable.idempotence=false;linger.ms=0"
        for (String kv : envOr("KETCH_COMPAT_PRODUCER_PROPS", "").split(";")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                p.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        }
        return p;
    }

    static Properties consumerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "ketch-compat-consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    // ------------------------------------------------------------------------------------------
    // helpers
    // ------------------------------------------------------------------------------------------

    record Hdr(String key, byte[] value) {
        @Override
        public String toString() {
            return key + "=" + (value == null ? "null" : "'" + show(value) + "'");
        }
    }

    /** What we sent, with the partition and offset the broker acknowledged. */
    record Expected(int index, byte[] key, byte[] value, long timestamp, List<Hdr> headers, int partition,
                    long offset) {
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String show(byte[] v) {
        if (v == null) {
            return "null";
        }
        String s = new String(v, 0, Math.min(v.length, 40), StandardCharsets.ISO_8859_1)
                .replaceAll("[^\\x20-\\x7e]", ".");
        return v.length > 40 ? s + "...(" + v.length + " bytes)" : s;
    }

    static int defaultPartition(byte[] key, int partitions) {
        return Utils.toPositive(Utils.murmur2(key)) % partitions;
    }

    static List<Hdr> headersOf(Iterable<Header> headers) {
        List<Hdr> out = new ArrayList<>();
        for (Header h : headers) {
            out.add(new Hdr(h.key(), h.value()));
        }
        return out;
    }

    static boolean sameHeaders(List<Hdr> a, List<Hdr> b) {
        if (a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).key().equals(b.get(i).key()) || !Arrays.equals(a.get(i).value(), b.get(i).value())) {
                return false;
            }
        }
        return true;
    }

    static byte[] makeValue(String codec, int i, Random rnd) {
        if (i == 5) {
            return new byte[0]; // empty value
        }
        if (i == 7) {
            return null; // null value (tombstone)
        }
        if (i % 10 == 0) { // large and compressible
            StringBuilder sb = new StringBuilder();
            while (sb.length() < 20_000) {
                sb.append("compressible-").append(codec).append('-').append(i).append(' ');
            }
            return b(sb.toString());
        }
        if (i % 10 == 1) { // incompressible
            byte[] v = new byte[3000];
            rnd.nextBytes(v);
            return v;
        }
        return b("value-" + codec + "-" + i + "-" + "x".repeat(i % 50));
    }

    static TopicDescription waitForTopic(Admin admin, String topic, int partitions) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS)
                        .get(topic);
                boolean ready = d.partitions().size() == partitions;
                for (TopicPartitionInfo pi : d.partitions()) {
                    ready &= pi.leader() != null && !pi.leader().isEmpty();
                }
                if (ready) {
                    return d;
                }
            } catch (ExecutionException e) {
                last = e;
            }
            Thread.sleep(100);
        }
        throw new Mismatch("topic " + topic + " did not show " + partitions + " partitions with leaders within "
                + WAIT.toSeconds() + "s" + (last == null ? "" : " (last error: " + last.getCause() + ")"));
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (true) {
            List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofSeconds(20));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : infos) {
                    tps.add(new TopicPartition(topic, pi.partition()));
                }
                tps.sort((a, z) -> Integer.compare(a.partition(), z.partition()));
                return tps;
            }
            check(System.nanoTime() < deadline, "no partitions for topic %s", topic);
            Thread.sleep(100);
        }
    }

    /** Polls until `want` records arrived (or the deadline), then a little longer to catch extras. */
    static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> drain(KafkaConsumer<byte[], byte[]> c, int want) {
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new TreeMap<>();
        int total = 0;
        long deadline = System.nanoTime() + WAIT.toNanos();
        int emptyAfterDone = 0;
        while (emptyAfterDone < 2) {
            ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(total >= want ? 300 : 500));
            for (ConsumerRecord<byte[], byte[]> r : recs) {
                got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
                total++;
            }
            if (total >= want && recs.isEmpty()) {
                emptyAfterDone++;
            }
            if (total < want && System.nanoTime() > deadline) {
                Map<Integer, Integer> counts = new TreeMap<>();
                got.forEach((p, l) -> counts.put(p, l.size()));
                throw new Mismatch("consumed only " + total + " of " + want + " records within " + WAIT.toSeconds()
                        + "s; per partition: " + counts);
            }
        }
        check(total == want, "consumed %d records, expected exactly %d", total, want);
        return got;
    }

    static void compare(String what, Expected e, ConsumerRecord<byte[], byte[]> r) {
        String at = what + " partition " + r.partition() + " offset " + r.offset();
        check(r.partition() == e.partition(), "%s: partition %d, expected %d", at, r.partition(), e.partition());
        check(r.offset() == e.offset(), "%s: expected offset %d (record #%d)", at, e.offset(), e.index());
        check(Arrays.equals(r.key(), e.key()), "%s: key '%s', expected '%s'", at, show(r.key()), show(e.key()));
        check(Arrays.equals(r.value(), e.value()), "%s: value '%s', expected '%s'", at, show(r.value()),
                show(e.value()));
        check(r.timestamp() == e.timestamp(), "%s: timestamp %d, expected %d", at, r.timestamp(), e.timestamp());
        check(r.timestampType() == TimestampType.CREATE_TIME, "%s: timestamp type %s, expected CreateTime", at,
                r.timestampType());
        List<Hdr> hs = headersOf(r.headers());
        check(sameHeaders(hs, e.headers()), "%s: headers %s, expected %s", at, hs, e.headers());
    }

    // ------------------------------------------------------------------------------------------
    // scenario: roundtrip
    // ------------------------------------------------------------------------------------------

    static void roundtrip(String bootstrap) throws Exception {
        String topic = "java-roundtrip-" + UUID.randomUUID().toString().substring(0, 8);
        Map<Integer, List<Expected>> expected = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            expected.put(p, new ArrayList<>());
        }
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            step("createTopics %s partitions=%d", topic, PARTITIONS);
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()
                    .get(WAIT.toSeconds(), TimeUnit.SECONDS);
            TopicDescription desc = waitForTopic(admin, topic, PARTITIONS);
            step("describeTopics: %s", desc);
            Set<String> names = admin.listTopics().names().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            check(names.contains(topic), "listTopics after create does not contain %s: %s", topic, names);

            // ---- produce with every codec
            long t0 = (System.currentTimeMillis() / 1000 - 3600) * 1000; // an hour ago, whole second
            Random rnd = new Random(42);
            int g = 0;
            for (String codec : CODECS) {
                step("produce %d records, compression.type=%s, acks=all", PER_CODEC, codec);
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                List<Object[]> sent = new ArrayList<>();
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, codec))) {
                    for (int i = 0; i < PER_CODEC; i++, g++) {
                        byte[] key = b("key-" + codec + "-" + (i % 11));
                        byte[] value = makeValue(codec, i, rnd);
                        long ts = t0 + g * 10L;
                        List<Hdr> hdrs = List.of(
                                new Hdr("codec", b(codec)),
                                new Hdr("index", b(Integer.toString(g))),
                                new Hdr("empty", new byte[0]),
                                new Hdr("null", null),
                                new Hdr("dup", b("first")),
                                new Hdr("dup", b("second")),
                                new Hdr("ünïcode-kéy", b("väl")));
                        RecordHeaders headers = new RecordHeaders();
                        for (Hdr h : hdrs) {
                            headers.add(new RecordHeader(h.key(), h.value()));
                        }
                        futures.add(producer.send(new ProducerRecord<>(topic, null, ts, key, value, headers)));
                        sent.add(new Object[] {g, key, value, ts, hdrs});
                    }
                    producer.flush();
                    for (int i = 0; i < futures.size(); i++) {
                        RecordMetadata md = futures.get(i).get(WAIT.toSeconds(), TimeUnit.SECONDS);
                        Object[] s = sent.get(i);
                        byte[] key = (byte[]) s[1];
                        int want = defaultPartition(key, PARTITIONS);
                        check(md.partition() == want, "codec %s record #%d: acked on partition %d, default "
                                + "partitioner (murmur2) chose %d", codec, s[0], md.partition(), want);
                        List<Expected> part = expected.get(md.partition());
                        check(md.offset() == part.size(), "codec %s record #%d: acked offset %d on partition %d, "
                                + "expected contiguous offset %d", codec, s[0], md.offset(), md.partition(),
                                part.size());
                        check(md.timestamp() == (long) s[3], "codec %s record #%d: ack timestamp %d, expected the "
                                + "CreateTime %d", codec, s[0], md.timestamp(), s[3]);
                        @SuppressWarnings("unchecked")
                        List<Hdr> hdrs = (List<Hdr>) s[4];
                        part.add(new Expected((int) s[0], key, (byte[]) s[2], (long) s[3], hdrs, md.partition(),
                                md.offset()));
                    }
                }
            }
            int total = g;
            Map<Integer, Integer> counts = new TreeMap<>();
            expected.forEach((p, l) -> counts.put(p, l.size()));
            step("all %d records acked; per partition %s", total, counts);
            for (int p = 0; p < PARTITIONS; p++) {
                check(!expected.get(p).isEmpty(), "no record landed on partition %d (keys should spread)", p);
            }

            // ---- admin listOffsets: earliest, latest, max timestamp
            Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                specs.put(new TopicPartition(topic, p), OffsetSpec.earliest());
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> earliest =
                    admin.listOffsets(specs).all().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            specs.replaceAll((tp, s) -> OffsetSpec.latest());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> latest =
                    admin.listOffsets(specs).all().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            specs.replaceAll((tp, s) -> OffsetSpec.maxTimestamp());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> maxTs =
                    admin.listOffsets(specs).all().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            for (int p = 0; p < PARTITIONS; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                List<Expected> l = expected.get(p);
                check(earliest.get(tp).offset() == 0, "admin listOffsets earliest %s = %d, expected 0", tp,
                        earliest.get(tp).offset());
                check(latest.get(tp).offset() == l.size(), "admin listOffsets latest %s = %d, expected %d", tp,
                        latest.get(tp).offset(), l.size());
                Expected last = l.get(l.size() - 1);
                check(maxTs.get(tp).offset() == last.offset() && maxTs.get(tp).timestamp() == last.timestamp(),
                        "admin listOffsets maxTimestamp %s = offset %d ts %d, expected offset %d ts %d", tp,
                        maxTs.get(tp).offset(), maxTs.get(tp).timestamp(), last.offset(), last.timestamp());
            }
            step("admin listOffsets earliest/latest/maxTimestamp ok");

            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap))) {
                // ---- consume everything from the beginning
                List<TopicPartition> tps = partitionsOf(consumer, topic);
                check(tps.size() == PARTITIONS, "consumer partitionsFor: %s, expected %d partitions", tps,
                        PARTITIONS);
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                step("consume from the beginning (assign, no group)");
                Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = drain(consumer, total);
                for (int p = 0; p < PARTITIONS; p++) {
                    List<Expected> want = expected.get(p);
                    List<ConsumerRecord<byte[], byte[]>> have = got.getOrDefault(p, List.of());
                    check(have.size() == want.size(), "partition %d: consumed %d records, expected %d", p,
                            have.size(), want.size());
                    for (int j = 0; j < want.size(); j++) {
                        check(have.get(j).offset() == j, "partition %d: record %d has offset %d (offsets must be "
                                + "contiguous from 0, in order)", p, j, have.get(j).offset());
                        compare("consume", want.get(j), have.get(j));
                    }
                }
                Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps, WAIT);
                Map<TopicPartition, Long> end = consumer.endOffsets(tps, WAIT);
                for (TopicPartition tp : tps) {
                    check(begin.get(tp) == 0L, "beginningOffsets %s = %d, expected 0", tp, begin.get(tp));
                    check(end.get(tp) == expected.get(tp.partition()).size(), "endOffsets %s = %d, expected %d",
                            tp, end.get(tp), expected.get(tp.partition()).size());
                }
                step("consumed and checked %d records; beginning/end offsets ok", total);

                // ---- seek into the middle of a partition (most likely inside a batch) and to the last record
                for (int p = 0; p < PARTITIONS; p++) {
                    List<Expected> want = expected.get(p);
                    TopicPartition tp = new TopicPartition(topic, p);
                    for (long target : new long[] {want.size() / 2 + 1, want.size() - 1, 1}) {
                        if (target >= want.size()) {
                            continue;
                        }
                        consumer.assign(List.of(tp));
                        consumer.seek(tp, target);
                        ConsumerRecord<byte[], byte[]> first = null;
                        long deadline = System.nanoTime() + WAIT.toNanos();
                        while (first == null) {
                            check(System.nanoTime() < deadline, "seek %s to %d: no record within %ds", tp, target,
                                    WAIT.toSeconds());
                            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                                first = r;
                                break;
                            }
                        }
                        check(first.offset() == target, "seek %s to %d: first record returned has offset %d", tp,
                                target, first.offset());
                        compare("after seek", want.get((int) target), first);
                    }
                }
                step("seek ok");

                // ---- offsetsForTimes
                long maxTimestamp = t0 + (total - 1) * 10L;
                for (int p = 0; p < PARTITIONS; p++) {
                    List<Expected> want = expected.get(p);
                    TopicPartition tp = new TopicPartition(topic, p);
                    int mid = want.size() / 2;
                    Object[][] cases = {
                        // {query timestamp, expected offset or null}
                        {want.get(mid).timestamp(), (long) mid},
                        {want.get(mid).timestamp() - 1, (long) mid},
                        {want.get(mid).timestamp() + 1, (long) mid + 1},
                        {t0 - 60_000, 0L},
                        {want.get(want.size() - 1).timestamp(), (long) want.size() - 1},
                        {maxTimestamp + 60_000, null},
                    };
                    for (Object[] cs : cases) {
                        long ts = (long) cs[0];
                        Long wantOffset = (Long) cs[1];
                        if (wantOffset != null && wantOffset >= want.size()) {
                            continue;
                        }
                        // expected = first record in the partition with timestamp >= ts
                        Long computed = null;
                        for (Expected e : want) {
                            if (e.timestamp() >= ts) {
                                computed = e.offset();
                                break;
                            }
                        }
                        check(java.util.Objects.equals(computed, wantOffset),
                                "harness bug: offsetsForTimes expectation %s vs %s", computed, wantOffset);
                        Map<TopicPartition, OffsetAndTimestamp> res =
                                consumer.offsetsForTimes(Map.of(tp, ts), WAIT);
                        OffsetAndTimestamp ot = res.get(tp);
                        if (wantOffset == null) {
                            check(ot == null, "offsetsForTimes %s ts=%d (after every record): got offset %d ts %d, "
                                    + "expected none (null)", tp, ts, ot == null ? -1 : ot.offset(),
                                    ot == null ? -1 : ot.timestamp());
                        } else {
                            check(ot != null, "offsetsForTimes %s ts=%d: got null, expected offset %d", tp, ts,
                                    wantOffset);
                            Expected e = want.get(wantOffset.intValue());
                            check(ot.offset() == wantOffset && ot.timestamp() == e.timestamp(),
                                    "offsetsForTimes %s ts=%d: got offset %d ts %d, expected offset %d ts %d "
                                            + "(first record with timestamp >= ts)", tp, ts, ot.offset(),
                                    ot.timestamp(), wantOffset, e.timestamp());
                        }
                    }
                }
                step("offsetsForTimes ok");
            }

            // ---- delete the topic
            step("deleteTopics %s", topic);
            admin.deleteTopics(List.of(topic)).all().get(WAIT.toSeconds(), TimeUnit.SECONDS);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                Set<String> now = admin.listTopics().names().get(WAIT.toSeconds(), TimeUnit.SECONDS);
                if (!now.contains(topic)) {
                    break;
                }
                check(System.nanoTime() < deadline, "topic %s still listed %ds after deleteTopics", topic,
                        WAIT.toSeconds());
                Thread.sleep(100);
            }
            step("topic gone from listTopics");
        }
        System.out.println("roundtrip ok: " + PARTITIONS + " partitions, " + CODECS.length * PER_CODEC
                + " records, codecs " + String.join(",", CODECS));
    }

    // ------------------------------------------------------------------------------------------
    // scenarios: produce / verify (restart durability)
    // ------------------------------------------------------------------------------------------

    static byte[] restartValue(int idx) {
        return b("value-" + idx + "-" + "p".repeat(idx % 97));
    }

    static void produce(String bootstrap, String topic, int count, int first, String codec) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()
                        .get(WAIT.toSeconds(), TimeUnit.SECONDS);
                step("created topic %s with %d partitions", topic, PARTITIONS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
                step("topic %s exists", topic);
            }
            waitForTopic(admin, topic, PARTITIONS);
        }
        List<Future<RecordMetadata>> futures = new ArrayList<>(count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, codec))) {
            for (int i = first; i < first + count; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add(new RecordHeader("index", b(Integer.toString(i))));
                futures.add(producer.send(
                        new ProducerRecord<>(topic, null, b("key-" + i), restartValue(i), headers)));
            }
            producer.flush();
            int acked = 0;
            for (Future<RecordMetadata> f : futures) {
                f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
                acked++;
            }
            check(acked == count, "acked %d of %d", acked, count);
        }
        System.out.println("produced " + count);
    }

    static void verify(String bootstrap, String topic, int count) throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap))) {
            List<TopicPartition> tps = partitionsOf(consumer, topic);
            check(tps.size() == PARTITIONS, "topic %s has partitions %s, expected %d", topic, tps, PARTITIONS);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = drain(consumer, count);
            boolean[] seen = new boolean[count];
            for (Map.Entry<Integer, List<ConsumerRecord<byte[], byte[]>>> e : got.entrySet()) {
                long next = 0;
                for (ConsumerRecord<byte[], byte[]> r : e.getValue()) {
                    check(r.offset() == next, "partition %d: offset %d where %d was expected (contiguous from 0)",
                            e.getKey(), r.offset(), next);
                    next++;
                    Header h = r.headers().lastHeader("index");
                    check(h != null, "partition %d offset %d: no 'index' header", e.getKey(), r.offset());
                    int idx = Integer.parseInt(new String(h.value(), StandardCharsets.UTF_8));
                    check(idx >= 0 && idx < count, "partition %d offset %d: unexpected record index %d",
                            e.getKey(), r.offset(), idx);
                    check(!seen[idx], "record %d consumed twice (duplicate)", idx);
                    seen[idx] = true;
                    check(Arrays.equals(r.key(), b("key-" + idx)), "record %d: key '%s'", idx, show(r.key()));
                    check(Arrays.equals(r.value(), restartValue(idx)), "record %d: value '%s'", idx,
                            show(r.value()));
                    int wantP = defaultPartition(r.key(), PARTITIONS);
                    check(r.partition() == wantP, "record %d on partition %d, expected %d", idx, r.partition(),
                            wantP);
                }
            }
            for (int i = 0; i < count; i++) {
                check(seen[i], "record %d missing", i);
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, WAIT);
            long sum = 0;
            for (TopicPartition tp : tps) {
                long n = got.getOrDefault(tp.partition(), List.of()).size();
                check(end.get(tp) == n, "endOffsets %s = %d but %d records consumed", tp, end.get(tp), n);
                sum += end.get(tp);
            }
            check(sum == count, "end offsets add up to %d, expected %d", sum, count);
        }
        System.out.println("verified " + count);
    }
}
