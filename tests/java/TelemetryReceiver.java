// A KIP-714 client telemetry receiver for Apache Kafka's broker (metric.reporters=TelemetryReceiver): without one,
// Kafka does not advertise GetTelemetrySubscriptions/PushTelemetry. It decodes each pushed payload as OTLP
// MetricsData, as klog's receiver does, so a payload that is not one is refused with INVALID_RECORD on both brokers.
// Compiled and put on the broker's classpath by tests/test_client_telemetry.py.

import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;

public class TelemetryReceiver implements MetricsReporter, ClientTelemetry {
    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> {
            try {
                MetricsData.parseFrom(payload.data());
            } catch (Exception e) {
                throw new IllegalArgumentException("not OTLP MetricsData", e);
            }
        };
    }

    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }
    @Override public void configure(Map<String, ?> configs) { }
}
