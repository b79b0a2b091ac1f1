"""klog.protocol against Apache Kafka's own generated message classes (kafka-clients jar, Java).

A small Java program (below; run with ``java Oracle.java`` against the jars that ``tools/install-peers.sh``
fetches) reads messages as Kafka's JSON form and writes them with Kafka's serializers, and parses our bytes
with Kafka's parsers. For every API and every version the jar supports:

- Kafka writes the same bytes as we do for the same values;
- Kafka parses our bytes and writes them back unchanged (so it read every field as we meant it).
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from klog.protocol import API_SCHEMAS, Struct, decode_body, encode_body
from klog.protocol.samples import expected_decoded, plain, sample_struct
from klog.protocol.schema import Field

pytestmark = pytest.mark.java

LIBS = Path(__file__).resolve().parent.parent / ".cache" / "kafka" / "libs"

ORACLE_JAVA = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;

// One JSON request per stdin line, one JSON answer per stdout line.
//   {"op":"versions"} -> {"apis": {"<key>": [lowest, highest]}}
//   {"op":"encode","api":K,"kind":"request"|"response","version":V,"json":{...}} -> {"hex": "..."}
//   {"op":"reencode","api":K,"kind":...,"version":V,"hex":"..."} -> {"hex": "..."}
public class Oracle {
  static final ObjectMapper MAPPER = new ObjectMapper();

  static ApiMessage newMessage(ApiMessageType type, String kind) {
    return kind.equals("request") ? type.newRequest() : type.newResponse();
  }

  static Class<?> converter(ApiMessage message) throws Exception {
    return Class.forName(message.getClass().getName() + "JsonConverter");
  }

  static String hex(ApiMessage message, short version) {
    ByteBuffer buf = MessageUtil.toByteBufferAccessor(message, version).buffer();
    byte[] out = new byte[buf.remaining()];
    buf.get(out);
    return HexFormat.of().formatHex(out);
  }

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    String line;
    while ((line = in.readLine()) != null) {
      ObjectNode answer = MAPPER.createObjectNode();
      try {
        JsonNode req = MAPPER.readTree(line);
        String op = req.get("op").asText();
        if (op.equals("versions")) {
          ObjectNode apis = answer.putObject("apis");
          for (ApiMessageType t : ApiMessageType.values()) {
            apis.putArray(Short.toString(t.apiKey())).add(t.lowestSupportedVersion()).add(t.highestSupportedVersion(true));
          }
        } else {
          ApiMessageType type = ApiMessageType.fromApiKey((short) req.get("api").asInt());
          short version = (short) req.get("version").asInt();
          String kind = req.get("kind").asText();
          ApiMessage message;
          if (op.equals("encode")) {
            Method read = converter(newMessage(type, kind)).getMethod("read", JsonNode.class, short.class);
            message = (ApiMessage) read.invoke(null, req.get("json"), version);
          } else {
            message = newMessage(type, kind);
            byte[] data = HexFormat.of().parseHex(req.get("hex").asText());
            ByteBufferAccessor accessor = new ByteBufferAccessor(ByteBuffer.wrap(data));
            message.read(accessor, version);
            if (accessor.remaining() != 0) throw new IllegalStateException(accessor.remaining() + " bytes left over");
          }
          answer.put("hex", hex(message, version));
        }
      } catch (Throwable e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        answer.put("error", cause.toString());
      }
      out.println(MAPPER.writeValueAsString(answer));
    }
  }
}
"""


class Oracle:
    def __init__(self, workdir: Path) -> None:
        src = workdir / "Oracle.java"
        src.write_text(ORACLE_JAVA)
        self.proc = subprocess.Popen(
            ["java", "-cp", f"{LIBS}/*", str(src)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
        )

    def ask(self, request: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Java oracle exited")
        return dict(json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    if shutil.which("java") is None or not list(LIBS.glob("kafka-clients-*.jar")):
        pytest.skip("needs java and the Kafka jars: run tools/install-peers.sh")
    o = Oracle(tmp_path_factory.mktemp("oracle"))
    try:
        yield o
    finally:
        o.close()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def to_kafka_json(fields: tuple[Field, ...], version: int, value: Any) -> dict:
    """Our value in the JSON form Kafka's generated JsonConverters read."""
    out: dict[str, Any] = {}
    d = value.__dict__ if isinstance(value, Struct) else value
    for f in fields:
        if not f.present(version) or f.name not in d:
            continue
        out[_camel(f.name)] = _json_value(f, version, d[f.name])
    return out


def _json_value(f: Field, version: int, v: Any) -> Any:
    if v is None:
        return None
    if f.kind == "struct":
        return to_kafka_json(f.fields or (), version, v)
    if f.kind == "array":
        if f.fields is not None:
            return [to_kafka_json(f.fields, version, e) for e in v]
        elem = Field(f.name, f.elem or "int32", f.versions)
        return [_json_value(elem, version, e) for e in v]
    if f.kind == "uuid":
        return base64.urlsafe_b64encode(v.bytes).decode().rstrip("=")
    if f.kind in ("bytes", "records"):
        return base64.b64encode(bytes(v)).decode()
    return v


def _kafka_versions(oracle: Oracle) -> dict[int, tuple[int, int]]:
    apis = oracle.ask({"op": "versions"})["apis"]
    return {int(k): (lo, hi) for k, (lo, hi) in apis.items()}


def test_kafka_and_klog_write_and_read_the_same_bytes_for_every_api_and_version(oracle: Oracle) -> None:
    kafka_versions = _kafka_versions(oracle)
    checked = 0
    expected = 0
    failures: list[str] = []
    for key, s in sorted(API_SCHEMAS.items()):
        assert key in kafka_versions, f"Kafka 4.x does not know API {key}"
        lo, hi = kafka_versions[key]
        # Kafka 4 dropped some old versions (KIP-896) that we keep for old clients: those are checked against
        # aiokafka and kafka-python's legacy classes instead (test_protocol_interop).
        assert s.valid[1] >= hi, f"{s.name}: Kafka has version {hi}, we stop at {s.valid[1]}"
        for version in range(max(lo, s.valid[0]), hi + 1):
            for kind, msg in (("request", s.request), ("response", s.response)):
                expected += 4
                rng = random.Random(f"java-{key}-{kind}-{version}")
                for _ in range(4):
                    body = sample_struct(msg.fields, version, s.is_flexible(version), rng)
                    ours = encode_body(key, version, body, response=kind == "response")
                    where = f"{s.name}{kind.capitalize()} v{version}"
                    theirs = oracle.ask({"op": "encode", "api": key, "kind": kind, "version": version,
                                         "json": to_kafka_json(msg.fields, version, body)})
                    if "error" in theirs:
                        failures.append(f"{where}: Kafka could not read our values: {theirs['error']}")
                        break
                    if theirs["hex"] != ours.hex():
                        failures.append(f"{where}: Kafka wrote {theirs['hex']}, we wrote {ours.hex()}")
                        break
                    back = oracle.ask({"op": "reencode", "api": key, "kind": kind, "version": version,
                                       "hex": ours.hex()})
                    if back.get("hex") != ours.hex():
                        failures.append(f"{where}: Kafka parsed our bytes differently: {back}")
                        break
                    decoded, _ = decode_body(key, version, bytes.fromhex(theirs["hex"]),
                                             response=kind == "response")
                    assert plain(decoded) == expected_decoded(msg.fields, version, body), where
                    checked += 1
    assert not failures, "\n".join(failures[:20])
    assert checked == expected and expected > 1000


def test_uuid_json_form_matches_kafka() -> None:
    # Kafka's Uuid.toString(): URL-safe base64 without padding.
    u = uuid.UUID("00000000-0000-0000-0000-000000000001")
    assert _json_value(Field("x", "uuid", (0, 1)), 0, u) == "AAAAAAAAAAAAAAAAAAAAAQ"
