package ketch.compat;

import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What the Java client (kafka-clients 4.1) sees as one principal, for test_authorization.py:
 * {@code java -cp <jar> ketch.compat.AuthzProbe <bootstrap> <client.properties> <topic> <group>
 * <hidden-topic>}. Prints one {@code key=value} line per probe: the authorized operations of
 * describeTopics (DescribeTopicPartitions) and describeCluster with includeAuthorizedOperations,
 * and for the rest OK or the simple name of the exception the client raised
 * (TopicAuthorizationException, GroupAuthorizationException, ClusterAuthorizationException...).
 */
public final class AuthzProbe {
    private AuthzProbe() {}

    interface Probe {
        String run() throws Exception;
    }

    static void probe(String key, Probe p) {
        String out;
        try {
            out = p.run();
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            // A producer whose InitProducerId was refused fails fatally; a send racing with that
            // failure gets a generic KafkaException whose cause is the refusal: name the refusal.
            while (t.getClass() == KafkaException.class && t.getCause() != null) {
                t = t.getCause();
            }
            System.err.println(key + ": " + t);
            out = t.getClass().getSimpleName();
        }
        System.out.println(key + "=" + out);
        System.out.flush();
    }

    static String ops(Set<AclOperation> ops) {
        return ops == null ? "null" : String.join(",", new TreeSet<>(ops.stream().map(Enum::name).toList()));
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "error");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        String bootstrap = args[0];
        String topic = args[2];
        String group = args[3];
        String hidden = args[4];
        Properties base = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) {
            base.load(in);
        }
        base.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(base)) {
            DescribeTopicsOptions withOps = new DescribeTopicsOptions().includeAuthorizedOperations(true);
            probe("topic_operations", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic), withOps).allTopicNames()
                        .get(20, TimeUnit.SECONDS).get(topic);
                return ops(d.authorizedOperations());
            });
            probe("describe_hidden", () -> {
                admin.describeTopics(List.of(hidden), withOps).allTopicNames().get(20, TimeUnit.SECONDS);
                return "OK";
            });
            probe("cluster_operations", () -> ops(admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations()
                    .get(20, TimeUnit.SECONDS)));
            probe("list_topics", () -> String.join(",", new TreeSet<>(admin.listTopics().names()
                    .get(20, TimeUnit.SECONDS))));
        }
        Properties producer = (Properties) base.clone();
        producer.put("key.serializer", StringSerializer.class.getName());
        producer.put("value.serializer", StringSerializer.class.getName());
        producer.put("delivery.timeout.ms", "15000");
        producer.put("request.timeout.ms", "10000");
        producer.put("max.block.ms", "15000");
        probe("idempotent_produce", () -> {
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producer)) {
                p.send(new ProducerRecord<>(topic, "k", "from java")).get(20, TimeUnit.SECONDS);
            }
            return "OK";
        });
        Properties consumer = (Properties) base.clone();
        consumer.put("key.deserializer", StringDeserializer.class.getName());
        consumer.put("value.deserializer", StringDeserializer.class.getName());
        consumer.put("group.id", group);
        consumer.put("auto.offset.reset", "earliest");
        consumer.put("enable.auto.commit", "false");
        probe("consume", () -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumer)) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (System.nanoTime() < deadline) {
                    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                    if (!records.isEmpty()) {
                        c.commitSync();
                        return "OK";
                    }
                }
                return "nothing";
            }
        });
        System.exit(0);
    }
}
