package ketch.compat;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.requests.ProduceResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestUtils;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Per-record produce errors (KIP-467): one batch per scenario, some of its records invalid.
 *
 * <pre>
 * RecordErrors &lt;bootstrap&gt; producer &lt;codec&gt; &lt;topic&gt;=&lt;spec&gt; [&lt;topic&gt;=&lt;spec&gt; ...]
 *     KafkaProducer (enable.idempotence=false, retries=3, linger.ms=5000, batch.size=1 MiB) sends
 *     the records of each spec to partition 0 of its topic in one batch and flushes; prints, per
 *     record, "result TOPIC INDEX ok OFFSET" or "result TOPIC INDEX EXCEPTION_CLASS MESSAGE".
 * RecordErrors &lt;bootstrap&gt; raw &lt;codec&gt; &lt;topic&gt;=&lt;spec&gt; [...]
 *     the same batch in a hand-made Produce request (version RECORD_ERRORS_PRODUCE_VERSION,
 *     default 11, acks=-1) on its own connection; prints the partition response as it came:
 *     "partition TOPIC ERROR_CODE BASE_OFFSET LOG_APPEND_TIME LOG_START_OFFSET",
 *     "error_message TOPIC MESSAGE|<null>", one "record_error TOPIC BATCH_INDEX MESSAGE|<null>" each.
 * </pre>
 * A spec is one comma-separated token per record: "k" keyed, timestamp now; letters combine:
 * n = no key, o = timestamp two days old, f = two hours in the future, x = no timestamp (-1, raw
 * only: the Java producer refuses negative timestamps). Both modes also print "ts TOPIC INDEX TS"
 * per record and "window TOPIC FROM TO" (wall clock before the send and after the answer).
 * Fields are tab-separated. Exit codes as RoundTrip: 0 ok, 2 ERROR:, 3 TIMEOUT:, 64 usage.
 */
public final class RecordErrors {

    static final long DAY_MS = 86_400_000L;
    static final long HOUR_MS = 3_600_000L;

    record Rec(byte[] key, byte[] value, long timestamp) {
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", RoundTrip.envOr("KETCH_COMPAT_JAVA_LOG", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        RoundTrip.startWatchdog(Long.parseLong(RoundTrip.envOr("KETCH_COMPAT_JAVA_TIMEOUT", "150")));
        if (args.length < 4 || !(args[1].equals("producer") || args[1].equals("raw"))) {
            System.err.println("usage: RecordErrors <bootstrap> producer|raw <codec> <topic>=<spec> ...");
            System.exit(64);
        }
        int rc;
        try {
            String bootstrap = args[0];
            String codec = args[2];
            for (int i = 3; i < args.length; i++) {
                int eq = args[i].indexOf('=');
                String topic = args[i].substring(0, eq);
                List<Rec> recs = parse(topic, args[i].substring(eq + 1), System.currentTimeMillis());
                if (args[1].equals("producer"))
                    viaProducer(bootstrap, codec, topic, recs);
                else
                    viaRawRequest(bootstrap, codec, topic, recs);
            }
            rc = 0;
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

    static List<Rec> parse(String topic, String spec, long now) {
        List<Rec> recs = new ArrayList<>();
        String[] tokens = spec.split(",");
        for (int i = 0; i < tokens.length; i++) {
            String t = tokens[i];
            long ts = t.contains("o") ? now - 2 * DAY_MS : t.contains("f") ? now + 2 * HOUR_MS
                    : t.contains("x") ? RecordBatch.NO_TIMESTAMP : now;
            byte[] key = t.contains("n") ? null : ("k" + i).getBytes(StandardCharsets.UTF_8);
            recs.add(new Rec(key, ("v" + i).getBytes(StandardCharsets.UTF_8), ts));
            out("ts", topic, i, ts);
        }
        return recs;
    }

    static void out(Object... fields) {
        StringBuilder sb = new StringBuilder();
        for (Object f : fields) {
            if (sb.length() > 0)
                sb.append('\t');
            sb.append(f == null ? "<null>" : f.toString().replace("\n", "\\n").replace("\t", "\\t"));
        }
        System.out.println(sb);
    }

    static void viaProducer(String bootstrap, String codec, String topic, List<Rec> recs) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.RETRIES_CONFIG, "3"); // INVALID_RECORD / INVALID_TIMESTAMP are not retriable
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5000"); // flush() sends at once
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        Object[] results = new Object[recs.size()];
        long from = System.currentTimeMillis();
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.partitionsFor(topic); // metadata first: the records then go out together
            for (int i = 0; i < recs.size(); i++) {
                final int index = i;
                Rec r = recs.get(i);
                producer.send(new ProducerRecord<>(topic, 0, r.timestamp(), r.key(), r.value()),
                        (RecordMetadata md, Exception e) -> results[index] = e != null ? e : md);
            }
            producer.flush();
        }
        out("window", topic, from, System.currentTimeMillis());
        for (int i = 0; i < results.length; i++) {
            Object r = results[i];
            if (r instanceof Exception e)
                out("result", topic, i, e.getClass().getName(), e.getMessage());
            else if (r instanceof RecordMetadata md)
                out("result", topic, i, "ok", md.offset());
            else
                out("result", topic, i, "none", "no callback");
        }
    }

    static void viaRawRequest(String bootstrap, String codec, String topic, List<Rec> recs) throws Exception {
        short version = Short.parseShort(RoundTrip.envOr("RECORD_ERRORS_PRODUCE_VERSION", "11"));
        MemoryRecordsBuilder builder = MemoryRecords.builder(ByteBuffer.allocate(1 << 16),
                Compression.of(CompressionType.forName(codec)).build(), TimestampType.CREATE_TIME, 0L);
        for (Rec r : recs)
            builder.append(r.timestamp(), r.key(), r.value());
        MemoryRecords records = builder.build();

        ProduceRequestData.TopicProduceDataCollection topics = new ProduceRequestData.TopicProduceDataCollection();
        topics.add(new ProduceRequestData.TopicProduceData().setName(topic).setPartitionData(List.of(
                new ProduceRequestData.PartitionProduceData().setIndex(0).setRecords(records))));
        ProduceRequestData data = new ProduceRequestData().setAcks((short) -1).setTimeoutMs(30000)
                .setTransactionalId(null).setTopicData(topics);
        RequestHeader header = new RequestHeader(ApiKeys.PRODUCE, version, "ketch-record-errors", 7);
        ByteBuffer request = RequestUtils.serialize(header.data(), ApiKeys.PRODUCE.requestHeaderVersion(version),
                data, version);

        int colon = bootstrap.lastIndexOf(':');
        long from = System.currentTimeMillis();
        byte[] body;
        try (Socket socket = new Socket(bootstrap.substring(0, colon), Integer.parseInt(bootstrap.substring(colon + 1)))) {
            socket.setSoTimeout(60_000);
            DataOutputStream os = new DataOutputStream(socket.getOutputStream());
            os.writeInt(request.remaining());
            os.write(request.array(), request.arrayOffset() + request.position(), request.remaining());
            os.flush();
            DataInputStream is = new DataInputStream(socket.getInputStream());
            body = new byte[is.readInt()];
            is.readFully(body);
        }
        out("window", topic, from, System.currentTimeMillis());
        ByteBuffer buf = ByteBuffer.wrap(body);
        ResponseHeader.parse(buf, ApiKeys.PRODUCE.responseHeaderVersion(version));
        ProduceResponseData resp = ProduceResponse.parse(new ByteBufferAccessor(buf), version).data();
        for (ProduceResponseData.TopicProduceResponse t : resp.responses()) {
            for (ProduceResponseData.PartitionProduceResponse pr : t.partitionResponses()) {
                out("partition", t.name(), pr.errorCode(), pr.baseOffset(), pr.logAppendTimeMs(), pr.logStartOffset());
                out("error_message", t.name(), pr.errorMessage());
                for (ProduceResponseData.BatchIndexAndErrorMessage e : pr.recordErrors())
                    out("record_error", t.name(), e.batchIndex(), e.batchIndexErrorMessage());
            }
        }
    }
}
