import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.clients.producer.internals.TransactionManager;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The fault workload's transactional producer on Apache Kafka's Java client (klog.testing.faults.workload, client
 * "java"): with transaction.version 2 finalized the client runs transaction protocol v2 (KIP-890 part 2: Produce v12
 * adds the partitions, EndTxn v5 bumps the epoch), which librdkafka does not. One long-running JVM per workload
 * process, driven by lines on stdin, one answer line per command on stdout:
 *
 *   init                        a new producer (the previous one closed), initTransactions()
 *                               -> "ok" | "err MESSAGE"
 *   txn commit|abort P V [P V]  beginTransaction(), send V to partition P each, commitTransaction() or abortTransaction()
 *                               -> "ok TV" committed | "aborted TV" aborted on purpose
 *                                | "failed-aborted TV MESSAGE" an error, then abortTransaction() succeeded
 *                                | "failed TV C MESSAGE" an error and no abort: the producer is unusable (init
 *                                  again); C "committing" when commitTransaction() had been called, else "-"
 *                               (TV: 2 when the producer ran the transaction with protocol v2, else 1)
 *   quit
 *
 *   java TxnDriver BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTION_TIMEOUT_MS CALL_TIMEOUT_MS
 */
public final class TxnDriver {
    private final String bootstrap;
    private final String topic;
    private final String transactionalId;
    private final int transactionTimeoutMs;
    private final int callTimeoutMs;
    private KafkaProducer<String, String> producer;

    private TxnDriver(String[] args) {
        bootstrap = args[0];
        topic = args[1];
        transactionalId = args[2];
        transactionTimeoutMs = Integer.parseInt(args[3]);
        callTimeoutMs = Integer.parseInt(args[4]);
    }

    private Properties props() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", transactionalId);
        p.put("transaction.timeout.ms", Integer.toString(transactionTimeoutMs));
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("request.timeout.ms", "5000");
        p.put("delivery.timeout.ms", Integer.toString(transactionTimeoutMs));
        p.put("max.block.ms", Integer.toString(callTimeoutMs));
        p.put("reconnect.backoff.max.ms", "1000");
        p.put("metadata.max.age.ms", "1000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    private static String oneLine(Throwable e) {
        StringBuilder out = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return out.toString().replace('\n', ' ').replace('\r', ' ');
    }

    /** 2 when the producer runs transaction protocol v2 (the Java client decides it from the finalized feature). */
    private int transactionVersion() {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            TransactionManager tm = (TransactionManager) f.get(producer);
            return tm != null && tm.isTransactionV2Enabled() ? 2 : 1;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return 0;
        }
    }

    private void closeProducer() {
        if (producer != null) {
            try {
                producer.close(Duration.ZERO);
            } catch (RuntimeException e) {
                // an unusable producer: nothing to keep
            }
            producer = null;
        }
    }

    private String init() {
        closeProducer();
        try {
            producer = new KafkaProducer<>(props());
            producer.initTransactions();
            return "ok";
        } catch (RuntimeException e) {
            closeProducer();
            return "err " + oneLine(e);
        }
    }

    private String txn(String[] words) {
        if (producer == null) {
            return "failed 0 - no producer: init first";
        }
        boolean commit = words[1].equals("commit");
        int tv = 0;
        boolean committing = false;
        try {
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 2; i + 1 < words.length; i += 2) {
                sent.add(producer.send(new ProducerRecord<>(topic, Integer.parseInt(words[i]), null, words[i + 1])));
            }
            tv = transactionVersion();
            if (!commit) {
                producer.abortTransaction();
                return "aborted " + tv;
            }
            committing = true;
            producer.commitTransaction();
            return "ok " + tv;
        } catch (RuntimeException e) {
            String error = oneLine(e);
            try {
                producer.abortTransaction();
                return "failed-aborted " + tv + " " + error;
            } catch (RuntimeException again) {
                closeProducer();
                return "failed " + tv + " " + (committing ? "committing" : "-") + " " + error + "; abort: "
                    + oneLine(again);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        TxnDriver driver = new TxnDriver(args);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            String answer;
            if (words[0].equals("init")) {
                answer = driver.init();
            } else if (words[0].equals("txn")) {
                answer = driver.txn(words);
            } else if (words[0].equals("quit")) {
                break;
            } else {
                answer = "err unknown command " + words[0];
            }
            System.out.println(answer);
            System.out.flush();
        }
        driver.closeProducer();
    }
}
