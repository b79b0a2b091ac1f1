// The Java client's consume-transform-produce loop, as Kafka's documentation writes it, for klog's tests: a
// read_committed KafkaConsumer in group <group> reads <input>, a KafkaProducer with transactional.id <tid> writes each
// value upper-cased to <output> and commits the consumed offsets in the same transaction (sendOffsetsToTransaction
// with the consumer's group metadata, KIP-447). Every <abort-every>th transaction is aborted instead, and the consumer
// rewound to its committed offsets, so the records are read and written again. After <stall-after> commits (-1:
// never) it writes one more transaction, flushes it and waits without committing, to be SIGKILLed. It exits once it
// has committed <expected> records in all (counting those committed before it started, from the group's offsets).
// One JSON line per event on stdout.
// Usage: TransactionalCopy <bootstrap> <input> <output> <group> <tid> <expected> <abort-every> <stall-after> <seconds>
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

public class TransactionalCopy {
    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], tid = args[4];
        long expected = Long.parseLong(args[5]);
        int abortEvery = Integer.parseInt(args[6]), stallAfter = Integer.parseInt(args[7]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[8]) * 1000;

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("isolation.level", "read_committed");
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        c.put("max.poll.records", "50");
        // a SIGKILLed predecessor leaves the group within seconds, not the default 45 s
        c.put("session.timeout.ms", "6000");
        c.put("heartbeat.interval.ms", "500");
        c.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        c.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("linger.ms", "5");
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            emit("{\"ev\":\"initialized\"}");
            consumer.subscribe(List.of(input));
            long committed = -1;   // records committed so far, all instances: known once partitions are assigned
            int transactions = 0, commits = 0;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (committed < 0 && !consumer.assignment().isEmpty()) {
                    committed = 0;
                    Set<TopicPartition> assigned = consumer.assignment();
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(assigned).entrySet())
                        if (e.getValue() != null) committed += e.getValue().offset();
                    emit("{\"ev\":\"assigned\",\"committed\":" + committed + "}");
                }
                if (committed >= expected) break;
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                transactions++;
                if (stallAfter >= 0 && commits == stallAfter) {
                    producer.flush();
                    emit("{\"ev\":\"stalled\",\"records\":" + records.count() + "}");
                    Thread.sleep(Long.MAX_VALUE);
                }
                if (abortEvery > 0 && transactions % abortEvery == 0) {
                    producer.abortTransaction();
                    // read the aborted batch again: back to the last committed offsets
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(next.keySet()).entrySet())
                        consumer.seek(e.getKey(), e.getValue() == null ? 0 : e.getValue().offset());
                    emit("{\"ev\":\"aborted\",\"records\":" + records.count() + "}");
                } else {
                    producer.commitTransaction();
                    commits++;
                    committed += records.count();
                    emit("{\"ev\":\"committed\",\"records\":" + records.count() + ",\"total\":" + committed + "}");
                }
            }
            emit("{\"ev\":\"done\",\"committed\":" + committed + "}");
        }
    }
}
