// The Java client (kafka-clients, unchanged) over SASL, for compat-tests/test_sasl.py. Run with the
// single-file source launcher: java -cp '<kafka libs>/*' SaslClients.java <case>...
// Each case is "protocol,mechanism,user,password,bootstrap,topic[,truststore]" (OAUTHBEARER: see
// oauth() for its "user" field; the password is unused): it produces 50
// records (idempotent, acks=all), consumes them back in a group, and prints one line:
// "OK <case>" or "AUTH_FAILED <case>: <exception message>" (SaslAuthenticationException), or
// "FAILED <case>: ..." for anything else (exit code 1 then).
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.*;

public class SaslClients {
    static final int COUNT = 50;

    public static void main(String[] args) {
        boolean failed = false;
        for (String spec : args) {
            String[] f = spec.split(",", -1);
            Properties p = new Properties();
            p.put("bootstrap.servers", f[4]);
            p.put("security.protocol", f[0]);
            p.put("sasl.mechanism", f[1]);
            if (f[1].equals("OAUTHBEARER")) {
                oauth(p, f[2]);
            } else {
                String module = f[1].equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                                                     : "org.apache.kafka.common.security.scram.ScramLoginModule";
                p.put("sasl.jaas.config", module + " required username=\"" + f[2] + "\" password=\"" + f[3] + "\";");
            }
            if (f.length > 6 && !f[6].isEmpty()) {
                p.put("ssl.truststore.type", "PEM");
                p.put("ssl.truststore.location", f[6]);
            }
            try {
                roundTrip(p, f[5]);
                System.out.println("OK " + spec);
            } catch (Exception e) {
                Throwable t = e;
                while (t != null && !(t instanceof SaslAuthenticationException)) t = t.getCause();
                if (t != null) {
                    System.out.println("AUTH_FAILED " + spec + ": " + t.getMessage());
                } else {
                    System.out.println("FAILED " + spec + ": " + e);
                    e.printStackTrace(System.out);
                    failed = true;
                }
            }
        }
        System.exit(failed ? 1 : 0);
    }

    // OAUTHBEARER's "user" field: "sub=<name>" or "sub=<name>;scope=<scope>" for Kafka's unsecured
    // login (a token made by the client, alg none), or "file=<path>" for a signed token read from
    // a file (sasl.oauthbearer.token.endpoint.url=file:..., which the JVM must allow with
    // -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls).
    static void oauth(Properties p, String spec) {
        String module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
        if (spec.startsWith("file=")) {
            p.put("sasl.jaas.config", module + " required;");
            p.put("sasl.login.callback.handler.class",
                  "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler");
            p.put("sasl.oauthbearer.token.endpoint.url", "file://" + spec.substring(5));
            return;
        }
        StringBuilder jaas = new StringBuilder(module + " required");
        for (String kv : spec.split(";")) {
            String[] x = kv.split("=", 2);
            jaas.append(" unsecuredLoginStringClaim_").append(x[0]).append("=\"").append(x[1]).append("\"");
        }
        p.put("sasl.jaas.config", jaas + ";");
    }

    static void roundTrip(Properties base, String topic) throws Exception {
        Properties pp = (Properties) base.clone();
        pp.put("acks", "all");
        pp.put("max.block.ms", "20000");
        pp.put("delivery.timeout.ms", "30000");
        pp.put("request.timeout.ms", "15000");
        try (Producer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            // The first record alone: with bad credentials each send() waits for a fresh login to
            // fail (about a second each, against Kafka too), so a failed login ends the case here.
            producer.send(new ProducerRecord<>(topic, "k0", "v0")).get();
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 1; i < COUNT; i++) sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            for (var s : sent) s.get();
        }
        Properties cp = (Properties) base.clone();
        cp.put("group.id", "g-" + UUID.randomUUID());
        cp.put("auto.offset.reset", "earliest");
        cp.put("default.api.timeout.ms", "20000");
        Set<String> seen = new HashSet<>();
        try (Consumer<String, String> consumer = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (seen.size() < COUNT && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) seen.add(r.key());
            }
            consumer.commitSync();
        }
        if (seen.size() < COUNT) throw new IllegalStateException("consumed " + seen.size() + " of " + COUNT);
    }
}
