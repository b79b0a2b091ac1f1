// A Java consumer-group member for klog's tests: prints one JSON line per event on stdout.
// Usage: GroupConsumer <bootstrap> <topic> <group> <classic|consumer> <seconds> [instance-id]
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

public class GroupConsumer {
    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String parts(Collection<TopicPartition> tps) {
        return tps.stream().map(tp -> Integer.toString(tp.partition())).sorted().collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[2]);
        p.put("group.protocol", args[3]);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (args[3].equals("classic")) {
            p.put("session.timeout.ms", "6000");
            p.put("heartbeat.interval.ms", "500");
        }
        if (args.length > 5) p.put("group.instance.id", args[5]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000;
        final Thread main = Thread.currentThread();
        final java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            // SIGTERM: leave the group cleanly (close() sends the leave) before the JVM exits.
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stop.set(true);
                c.wakeup();
                try { main.join(20000); } catch (InterruptedException e) { }
            }));
            c.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    emit("{\"ev\":\"revoked\",\"partitions\":[" + parts(tps) + "]}");
                }
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    emit("{\"ev\":\"assigned\",\"partitions\":[" + parts(tps) + "]}");
                }
            });
            emit("{\"ev\":\"ready\"}");
            try {
                while (!stop.get() && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : records) {
                        emit("{\"ev\":\"rec\",\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":\"" + r.value() + "\"}");
                    }
                    if (!records.isEmpty()) c.commitSync();
                }
            } catch (org.apache.kafka.common.errors.WakeupException e) {
                // shutting down
            }
        }
        emit("{\"ev\":\"closed\"}");
    }
}
