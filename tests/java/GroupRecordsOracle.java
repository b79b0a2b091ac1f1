// Oracle for klog's __consumer_offsets record layouts: encodes and decodes records with Apache Kafka's own
// group-coordinator serde (GroupCoordinatorRecordSerde and the generated *JsonConverter classes).
// Protocol: one JSON request per stdin line, one JSON answer per stdout line.
//   {"op":"encode","name":"OffsetCommit","type":1,"key":{...},"valueVersion":3,"value":{...}|null}
//       -> {"key":"<hex>","value":"<hex>"|null}
//   {"op":"decode","key":"<hex>","value":"<hex>"|null}
//       -> {"type":1,"key":{...},"valueVersion":3|null,"value":{...}|null}
// Errors answer {"error":"..."} and the oracle keeps going.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class GroupRecordsOracle {
    static final String PKG = "org.apache.kafka.coordinator.group.generated.";
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final HexFormat HEX = HexFormat.of();

    static ApiMessage fromJson(String cls, JsonNode json, short version) throws Exception {
        Class<?> conv = Class.forName(PKG + cls + "JsonConverter");
        return (ApiMessage) conv.getMethod("read", JsonNode.class, short.class).invoke(null, json, version);
    }

    static JsonNode toJson(ApiMessage msg, short version) throws Exception {
        Class<?> conv = Class.forName(msg.getClass().getName() + "JsonConverter");
        return (JsonNode) conv.getMethod("write", msg.getClass(), short.class).invoke(null, msg, version);
    }

    public static void main(String[] args) throws Exception {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            ObjectNode out = MAPPER.createObjectNode();
            try {
                JsonNode req = MAPPER.readTree(line);
                if (req.get("op").asText().equals("encode")) {
                    String name = req.get("name").asText();
                    ApiMessage key = fromJson(name + "Key", req.get("key"), (short) 0);
                    CoordinatorRecord record;
                    if (req.get("value").isNull()) {
                        record = CoordinatorRecord.tombstone(key);
                    } else {
                        short v = (short) req.get("valueVersion").asInt();
                        record = CoordinatorRecord.record(key,
                            new ApiMessageAndVersion(fromJson(name + "Value", req.get("value"), v), v));
                    }
                    out.put("key", HEX.formatHex(serde.serializeKey(record)));
                    byte[] value = serde.serializeValue(record);
                    if (value == null) out.putNull("value"); else out.put("value", HEX.formatHex(value));
                } else {
                    ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(req.get("key").asText()));
                    ByteBuffer value = req.get("value").isNull() ? null
                        : ByteBuffer.wrap(HEX.parseHex(req.get("value").asText()));
                    short type = key.duplicate().getShort();
                    CoordinatorRecord record = serde.deserialize(key, value);
                    out.put("type", type);
                    out.set("key", toJson(record.key(), (short) 0));
                    if (record.value() == null) {
                        out.putNull("valueVersion");
                        out.putNull("value");
                    } else {
                        out.put("valueVersion", record.value().version());
                        out.set("value", toJson(record.value().message(), record.value().version()));
                    }
                }
            } catch (Throwable t) {
                Throwable c = t.getCause() != null ? t.getCause() : t;
                out.removeAll();
                out.put("error", c.getClass().getSimpleName() + ": " + c.getMessage());
            }
            System.out.println(MAPPER.writeValueAsString(out));
            System.out.flush();
        }
    }
}
