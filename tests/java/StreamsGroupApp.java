import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count run with the streams rebalance protocol (KIP-1071, group.protocol=streams), unchanged
 * against klog and Apache Kafka: args bootstrap, application id, input topic, output topic, state dir, the
 * application.server (host:port) it advertises for Interactive Queries.
 *
 * Prints one line per event on stdout: "STATE <new state>", and after each move to RUNNING "TASKS <its active
 * tasks>" and "HOSTS <every instance's host:port and its partitions>" (the endpoints the coordinator sent). Reads
 * stdin and closes the application cleanly (leaving the group) at end of input or a "stop" line; exits 0 then.
 */
public class StreamsGroupApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[5]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            if (now == KafkaStreams.State.RUNNING) {
                TreeSet<String> tasks = new TreeSet<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        tasks.add(task.taskId().toString());
                    }
                }
                System.out.println("TASKS " + String.join(",", tasks));
                TreeMap<String, TreeSet<String>> hosts = new TreeMap<>();
                Collection<StreamsMetadata> all = streams.metadataForAllStreamsClients();
                for (StreamsMetadata m : all) {
                    TreeSet<String> parts = hosts.computeIfAbsent(m.host() + ":" + m.port(), h -> new TreeSet<>());
                    m.topicPartitions().forEach(tp -> parts.add(tp.toString()));
                }
                System.out.println("HOSTS " + hosts);
            }
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("ERROR " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // wait for the test's stop
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("CLOSED");
        System.out.flush();
    }
}
