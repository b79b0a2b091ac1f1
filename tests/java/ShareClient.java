import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's Java share consumer (KafkaShareConsumer, Kafka 4.3) with explicit acknowledgement. Prints one line
 * per fact, the same on every broker that behaves as Kafka does:
 *
 *   1. one consumer, 30 records: the first delivery of offset%3 == 0 is ACCEPTED, 1 RELEASED, 2 REJECTED, each
 *      poll's acknowledgements committed with commitSync; a record delivered again is ACCEPTED. Released records
 *      come back with delivery count 2, accepted and rejected ones never again.
 *   2. two consumers of one group on one partition, 100 records, every delivery ACCEPTED: every record is seen
 *      exactly once between them.
 *
 * Both groups read from the start (share.auto.offset.reset=earliest, set as a GROUP config with the Admin client).
 *
 *   java ShareClient BOOTSTRAP SUFFIX
 */
public final class ShareClient {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 90_000;
    /** how long nothing more may arrive once the expected deliveries are in */
    private static final long QUIET_MS = 3_000;
    private static final int FIRST = 30;
    private static final int SECOND = 100;

    private ShareClient() { }

    private static Properties consumerProps(String bootstrap, String group) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("share.acknowledgement.mode", "explicit");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return c;
    }

    private static void produce(String bootstrap, String topic, String prefix, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, prefix + i));
            }
            producer.flush();
        }
    }

    private static void earliest(Admin admin, String group) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
            new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
    }

    private static String failures(Map<TopicIdPartition, Optional<KafkaException>> outcome) {
        List<String> failed = new ArrayList<>();
        outcome.forEach((tp, error) -> error.ifPresent(e -> failed.add(tp + ": " + e)));
        return failed.isEmpty() ? "" : " " + failed;
    }

    /** Scenario 1: every value's delivery counts, in delivery order. */
    private static void acknowledgeTypes(String bootstrap, String topic, String group) {
        Map<Integer, List<Integer>> counts = new TreeMap<>();
        String commitErrors = "";
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(consumerProps(bootstrap, group))) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            long quietSince = -1;
            while (System.currentTimeMillis() < deadline) {
                int got = 0;
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    got++;
                    int i = Integer.parseInt(r.value().substring(1));
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    counts.computeIfAbsent(i, k -> new ArrayList<>()).add(count);
                    AcknowledgeType type = count > 1 ? AcknowledgeType.ACCEPT
                        : new AcknowledgeType[] {AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                                 AcknowledgeType.REJECT}[(int) (r.offset() % 3)];
                    consumer.acknowledge(r, type);
                }
                commitErrors += failures(consumer.commitSync());
                boolean complete = counts.size() == FIRST
                    && counts.values().stream().mapToInt(List::size).sum() == FIRST + FIRST / 3;
                if (got > 0 || !complete) {
                    quietSince = -1;
                } else if (quietSince < 0) {
                    quietSince = System.currentTimeMillis();
                } else if (System.currentTimeMillis() - quietSince >= QUIET_MS) {
                    break;
                }
            }
        }
        Map<String, List<String>> byKind = new TreeMap<>();
        for (Map.Entry<Integer, List<Integer>> e : counts.entrySet()) {
            String kind = new String[] {"ACCEPTED", "RELEASED", "REJECTED"}[e.getKey() % 3];
            byKind.computeIfAbsent(kind, k -> new ArrayList<>()).add(e.getValue().toString());
        }
        System.out.println("RECORDS DELIVERED " + counts.size());
        for (Map.Entry<String, List<String>> e : byKind.entrySet()) {
            List<String> distinct = e.getValue().stream().distinct().toList();
            System.out.println(e.getKey() + " " + e.getValue().size() + " DELIVERY COUNTS " + distinct);
        }
        System.out.println("COMMIT ERRORS" + (commitErrors.isEmpty() ? " none" : commitErrors));
    }

    /** Scenario 2: two members, every delivery accepted. */
    private static void allAccept(String bootstrap, String topic, String group) {
        Map<String, Integer> seen = new TreeMap<>();
        int deliveries = 0;
        List<KafkaShareConsumer<String, String>> consumers = List.of(
            new KafkaShareConsumer<>(consumerProps(bootstrap, group)),
            new KafkaShareConsumer<>(consumerProps(bootstrap, group)));
        try {
            for (KafkaShareConsumer<String, String> c : consumers) {
                c.subscribe(List.of(topic));
            }
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            long quietSince = -1;
            while (System.currentTimeMillis() < deadline) {
                int got = 0;
                // one thread: each consumer is used by this thread only, one after the other
                for (KafkaShareConsumer<String, String> c : consumers) {
                    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                        got++;
                        deliveries++;
                        seen.merge(r.value(), 1, Integer::sum);
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                    }
                    c.commitSync();
                }
                if (got > 0 || seen.size() < SECOND) {
                    quietSince = -1;
                } else if (quietSince < 0) {
                    quietSince = System.currentTimeMillis();
                } else if (System.currentTimeMillis() - quietSince >= QUIET_MS) {
                    break;
                }
            }
        } finally {
            for (KafkaShareConsumer<String, String> c : consumers) {
                c.close();
            }
        }
        long twice = seen.values().stream().filter(n -> n > 1).count();
        System.out.println("ALL ACCEPT DISTINCT " + seen.size() + " DELIVERIES " + deliveries + " REPEATED " + twice);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String suffix = args[1];
        String topic1 = "share-acks-" + suffix;
        String topic2 = "share-queue-" + suffix;
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic(topic1, 1, (short) 1), new NewTopic(topic2, 1, (short) 1)))
                .all().get();
            earliest(admin, "acks-" + suffix);
            earliest(admin, "queue-" + suffix);
        }
        produce(bootstrap, topic1, "v", FIRST);
        produce(bootstrap, topic2, "q", SECOND);
        acknowledgeTypes(bootstrap, topic1, "acks-" + suffix);
        allAccept(bootstrap, topic2, "queue-" + suffix);
    }
}
