// The Java client's transactional producer for benches/bench_transactions.py: Apache Kafka's own KafkaProducer
// (the kafka-clients jar of the Kafka install), run with the JDK's source-file launcher, no build step:
//
//     java -cp '<kafka libs>/*' benches/sidebyside/TxnProducerDriver.java BOOTSTRAP TOPIC ID_PREFIX
//
// It reads commands from stdin, one per line, and answers each with one line on stdout:
//   init SIZE            a producer with transactional.id ID_PREFIX-SIZE, initTransactions(); answers
//                        "ok TRANSACTION_VERSION" (the transaction protocol the client speaks: 2 when the broker
//                        finalizes transaction.version 2, KIP-890 part 2, else 1)
//   round SIZE RECORDS   RECORDS records of the payload in transactions of SIZE records on partition 0: per
//                        transaction beginTransaction(), send() x SIZE, commitTransaction() (timed); answers
//                        "round RECORDS_WRITTEN WALL_NS ABORTED C1 C2 ..." with each commitTransaction()'s time in
//                        ns. A transaction the broker fails with an abortable error (the client's
//                        TransactionAbortableException or an ApiException other than fencing) is aborted and
//                        written again, inside the round's wall time; ABORTED counts them.
//   quit                 closes the producers and exits
// Producer settings: -Dkey=value pairs after the arguments are passed through (the bench gives the same
// acks, linger.ms, batch.size and transaction.timeout.ms as to confluent-kafka's producer).
// An error is answered "error MESSAGE" and ends the driver.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnProducerDriver {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String idPrefix = args[2];
        int recordSize = Integer.parseInt(args[3]);
        Properties base = new Properties();
        for (int i = 4; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            base.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        byte[] payload = new byte[recordSize];
        new Random().nextBytes(payload);
        Map<Integer, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            String line;
            while ((line = in.readLine()) != null) {
                String[] cmd = line.trim().split(" ");
                if (cmd[0].equals("quit")) {
                    break;
                } else if (cmd[0].equals("init")) {
                    int size = Integer.parseInt(cmd[1]);
                    Properties props = new Properties();
                    props.putAll(base);
                    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, idPrefix + "-" + size);
                    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
                    producer.initTransactions();
                    producers.put(size, producer);
                    System.out.println("ok " + transactionVersion(producer));
                } else if (cmd[0].equals("round")) {
                    int size = Integer.parseInt(cmd[1]);
                    int records = Integer.parseInt(cmd[2]);
                    KafkaProducer<byte[], byte[]> producer = producers.get(size);
                    int txns = Math.max(1, records / size);
                    long[] commits = new long[txns];
                    int aborted = 0;
                    long t0 = System.nanoTime();
                    for (int t = 0; t < txns; t++) {
                        AtomicReference<Exception> failed = new AtomicReference<>();
                        try {
                            producer.beginTransaction();
                            for (int r = 0; r < size; r++) {
                                producer.send(new ProducerRecord<>(topic, 0, null, payload), (md, e) -> {
                                    if (e != null) failed.compareAndSet(null, e);
                                });
                            }
                            long c0 = System.nanoTime();
                            producer.commitTransaction();
                            commits[t] = System.nanoTime() - c0;
                            if (failed.get() != null) throw new KafkaException(failed.get());
                        } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                                 | UnsupportedVersionException e) {
                            throw e;   // fatal: the producer cannot go on
                        } catch (KafkaException e) {
                            producer.abortTransaction();   // abortable: abort, and write the transaction again
                            aborted++;
                            t--;
                            if (aborted > 100) throw e;
                        }
                    }
                    long wall = System.nanoTime() - t0;
                    StringBuilder out = new StringBuilder("round ").append(txns * size).append(' ').append(wall)
                        .append(' ').append(aborted);
                    for (long c : commits) out.append(' ').append(c);
                    System.out.println(out);
                } else {
                    throw new IllegalArgumentException("unknown command: " + line);
                }
                System.out.flush();
            }
        } catch (Exception e) {
            System.out.println("error " + e.toString().replace('\n', ' '));
            System.out.flush();
        } finally {
            for (KafkaProducer<byte[], byte[]> p : producers.values()) p.close();
        }
    }

    /** The transaction protocol the producer speaks: 2 once the broker finalized transaction.version 2. */
    static String transactionVersion(KafkaProducer<byte[], byte[]> producer) {
        try {
            java.lang.reflect.Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(producer);
            java.lang.reflect.Method m = tm.getClass().getDeclaredMethod("isTransactionV2Enabled");
            m.setAccessible(true);
            return ((Boolean) m.invoke(tm)) ? "2" : "1";
        } catch (ReflectiveOperationException e) {
            return "unknown";
        }
    }
}
