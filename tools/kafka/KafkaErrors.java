// Apache Kafka's error list as data: the input of tools/gen-error-codes.py (which runs this).
//
//   java -cp '<kafka libs>/*' tools/kafka/KafkaErrors.java
//
// Prints the Kafka version, then one line per org.apache.kafka.common.protocol.Errors constant:
// code, name, retriable (its exception is a RetriableException), default message ("" for NONE,
// which has no exception); tab separated.
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.utils.AppInfoParser;

public class KafkaErrors {
    public static void main(String[] args) {
        System.out.println(AppInfoParser.getVersion());
        for (Errors error : Errors.values()) {
            ApiException exception = error.exception();
            String message = exception == null ? "" : exception.getMessage();
            if (message.contains("\t") || message.contains("\n")) {
                throw new IllegalStateException(error.name() + ": message breaks the tab-separated format");
            }
            System.out.println(error.code() + "\t" + error.name() + "\t"
                + (exception instanceof RetriableException) + "\t" + message);
        }
    }
}
