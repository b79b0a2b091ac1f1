import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactional producer (Kafka 4.3: transaction protocol v2 when the cluster finalizes
 * transaction.version 2) through commit, abort, the fencing of a zombie and a consume-transform-produce loop with
 * sendOffsetsToTransaction; then a read_committed consumer reads what is visible. Prints one line per fact, the
 * same on every broker that behaves as Kafka does:
 *
 *   java TxnClient BOOTSTRAP SUFFIX [REPLICATION_FACTOR]
 */
public final class TxnClient {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 60_000;

    private TxnClient() { }

    private static Properties producerProps(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("transaction.timeout.ms", "30000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    private static Properties consumerProps(String bootstrap, String group) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        return c;
    }

    /** Every value a read_committed consumer sees in the topic up to its end (its last stable offset). */
    private static List<String> readCommitted(String bootstrap, String topic, int expected) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, "reader-" + topic))) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (values.size() < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    values.add(r.value());
                }
            }
            // a little longer: nothing beyond the expected records may show up
            long settle = System.currentTimeMillis() + 1000;
            while (System.currentTimeMillis() < settle) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String suffix = args[1];
        String data = "txn-data-" + suffix;
        String input = "txn-in-" + suffix;
        String output = "txn-out-" + suffix;
        short replication = args.length > 2 ? Short.parseShort(args[2]) : 1;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(data, 1, replication), new NewTopic(input, 1, replication),
                                       new NewTopic(output, 1, replication))).all().get();
        }

        // commit, then abort, with one producer
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, "tid-a-" + suffix))) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(data, "k", "committed-" + i));
            }
            producer.commitTransaction();
            System.out.println("COMMITTED 5");
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(data, "k", "aborted-" + i));
            }
            producer.flush();
            producer.abortTransaction();
            System.out.println("ABORTED 5");
        }

        // a zombie: a second producer with the same transactional id fences the first, whose transaction is aborted
        KafkaProducer<String, String> zombie = new KafkaProducer<>(producerProps(bootstrap, "tid-z-" + suffix));
        zombie.initTransactions();
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(data, "z", "zombie")).get();
        try (KafkaProducer<String, String> fresh = new KafkaProducer<>(producerProps(bootstrap, "tid-z-" + suffix))) {
            fresh.initTransactions();
            try {
                zombie.send(new ProducerRecord<>(data, "z", "zombie-late"));
                zombie.commitTransaction();
                System.out.println("ZOMBIE COMMITTED");
            } catch (Exception e) {
                Throwable t = e;
                while (t.getCause() != null && !(t instanceof org.apache.kafka.common.errors.ProducerFencedException)
                       && !(t instanceof org.apache.kafka.common.errors.InvalidProducerEpochException)) {
                    t = t.getCause();
                }
                System.out.println("ZOMBIE FENCED " + t.getClass().getSimpleName());
            }
            zombie.close(Duration.ZERO);
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(data, "z", "fresh"));
            fresh.commitTransaction();
            System.out.println("FRESH COMMITTED");
        }

        // consume-transform-produce: each input record once in the output, its offset committed in the transaction
        Properties plain = new Properties();
        plain.put("bootstrap.servers", bootstrap);
        plain.put("key.serializer", StringSerializer.class.getName());
        plain.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> seed = new KafkaProducer<>(plain)) {
            for (int i = 0; i < 10; i++) {
                seed.send(new ProducerRecord<>(input, "k" + i, "in-" + i));
            }
        }
        String group = "ctp-" + suffix;
        int transformed = 0;
        int transactions = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group));
             KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, "tid-ctp-" + suffix))) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (transformed < 10 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(POLL);
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), "out-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    transformed++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
            System.out.println("TRANSFORMED " + transformed);
            OffsetAndMetadata committed = consumer.committed(Set.of(new TopicPartition(input, 0)))
                .get(new TopicPartition(input, 0));
            System.out.println("GROUP OFFSET " + (committed == null ? -1 : committed.offset()));
        }
        System.out.println("CTP TRANSACTIONS>0 " + (transactions > 0));

        List<String> seen = readCommitted(bootstrap, data, 6);
        System.out.println("DATA " + String.join(",", seen));
        List<String> out = readCommitted(bootstrap, output, 10);
        out.sort(null);
        System.out.println("OUTPUT " + String.join(",", out));
    }
}
