"""__consumer_offsets record layouts: klog's bytes equal Apache Kafka's (checked with Kafka's own serde)."""

from __future__ import annotations

import base64
import uuid

import pytest

from klog.broker.groups import records as R
from klog.protocol import Struct
from klog.protocol.data import decode_data, encode_data

from groups_support import RecordOracle

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def oracle():
    o = RecordOracle()
    yield o
    o.close()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def to_kafka_json(obj):
    """klog's decoded/encodable dicts -> the JSON Kafka's *JsonConverter classes read and write."""
    if isinstance(obj, dict):
        return {camel(k): to_kafka_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_kafka_json(v) for v in obj]
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    if isinstance(obj, uuid.UUID):
        return kafka_uuid(obj)
    return obj


T1 = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
T2 = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")

# (record type, key, value version, value) — values written with every field Kafka knows at that version.
CASES = [
    (R.OFFSET_COMMIT, {"group": "g1", "topic": "orders", "partition": 7}, 3,
     {"offset": 42, "leader_epoch": 5, "metadata": "commit-meta ✓", "commit_timestamp": 1_700_000_000_123}),
    (R.OFFSET_COMMIT, {"group": "g1", "topic": "orders", "partition": 0}, 1,
     {"offset": 0, "metadata": "", "commit_timestamp": 1, "expire_timestamp": 99}),
    (R.OFFSET_COMMIT, {"group": "", "topic": "t", "partition": 2**31 - 1}, 0,
     {"offset": 2**63 - 1, "metadata": "m", "commit_timestamp": -1}),
    (R.OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 1}, 4,
     {"offset": 9, "leader_epoch": -1, "metadata": "x", "commit_timestamp": 3, "topic_id": T1}),
    (R.OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 1}, 4,
     {"offset": 9, "leader_epoch": 2, "metadata": "", "commit_timestamp": 3}),
    (R.GROUP_METADATA, {"group": "grp"}, 3,
     {"protocol_type": "consumer", "generation": 4, "protocol": "cooperative-sticky", "leader": "c-1",
      "current_state_timestamp": 1234, "members": [
          {"member_id": "c-1", "group_instance_id": "inst-a", "client_id": "c", "client_host": "/127.0.0.1",
           "rebalance_timeout": 300000, "session_timeout": 45000, "subscription": b"\x00\x01sub",
           "assignment": b""},
          {"member_id": "c-2", "group_instance_id": None, "client_id": "c", "client_host": "/127.0.0.1",
           "rebalance_timeout": 60000, "session_timeout": 6000, "subscription": b"",
           "assignment": b"\x00\x03abc"}]}),
    (R.GROUP_METADATA, {"group": "empty"}, 3,
     {"protocol_type": "", "generation": 0, "protocol": None, "leader": None, "current_state_timestamp": -1,
      "members": []}),
    (R.GROUP_METADATA, {"group": "grp"}, 0,
     {"protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": "m", "members": [
         {"member_id": "m", "client_id": "c", "client_host": "h", "session_timeout": 10, "subscription": b"s",
          "assignment": b"a"}]}),
    (R.GROUP_METADATA, {"group": "grp"}, 2,
     {"protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": "m",
      "current_state_timestamp": 77, "members": [
          {"member_id": "m", "client_id": "c", "client_host": "h", "rebalance_timeout": 5, "session_timeout": 10,
           "subscription": b"s", "assignment": b"a"}]}),
    (R.GROUP_METADATA, {"group": "grp"}, 4,
     {"protocol_type": "consumer", "generation": 9, "protocol": "range", "leader": "m",
      "current_state_timestamp": 77, "members": [
          {"member_id": "m", "group_instance_id": "i", "client_id": "c", "client_host": "h",
           "rebalance_timeout": 5, "session_timeout": 10, "subscription": b"s", "assignment": b"a"}]}),
    (R.CONSUMER_GROUP_METADATA, {"group_id": "cg"}, 0, {"epoch": 12, "metadata_hash": -7}),
    (R.CONSUMER_GROUP_METADATA, {"group_id": "cg"}, 0, {"epoch": 1}),
    (R.CONSUMER_GROUP_PARTITION_METADATA, {"group_id": "cg"}, 0,
     {"topics": [{"topic_id": T1, "topic_name": "a", "num_partitions": 3,
                  "partition_metadata": [{"partition": 0, "racks": ["r1", "r2"]}]}]}),
    (R.CONSUMER_GROUP_MEMBER_METADATA, {"group_id": "cg", "member_id": "Zm9vYmFyYmF6cXV4"}, 0,
     {"instance_id": "i-1", "rack_id": None, "client_id": "consumer-cg-1", "client_host": "/127.0.0.1",
      "subscribed_topic_names": ["a", "b"], "subscribed_topic_regex": None, "rebalance_timeout_ms": 300000,
      "server_assignor": "uniform"}),
    (R.CONSUMER_GROUP_MEMBER_METADATA, {"group_id": "cg", "member_id": "m2"}, 0,
     {"instance_id": None, "rack_id": "rack", "client_id": "c", "client_host": "h",
      "subscribed_topic_names": [], "subscribed_topic_regex": "a.*", "rebalance_timeout_ms": -1,
      "server_assignor": None, "classic_member_metadata": {
          "session_timeout_ms": 45000,
          "supported_protocols": [{"name": "range", "metadata": b"\x00\x03"}, {"name": "x", "metadata": b""}]}}),
    (R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": "cg"}, 0,
     {"assignment_epoch": 3, "assignment_timestamp": 1_700_000_000_000}),
    (R.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, {"group_id": "cg", "member_id": "m"}, 0,
     {"topic_partitions": [{"topic_id": T1, "partitions": [0, 2, 4]}, {"topic_id": T2, "partitions": []}]}),
    (R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"group_id": "cg", "member_id": "m"}, 0,
     {"member_epoch": 5, "previous_member_epoch": 4, "state": 0,
      "assigned_partitions": [{"topic_id": T1, "partitions": [1], "assignment_epochs": [5]}],
      "partitions_pending_revocation": [{"topic_id": T2, "partitions": [3, 4]}]}),
    # Explicit nulls in tagged fields differ from their defaults: Kafka writes them, and so does klog.
    (R.CONSUMER_GROUP_MEMBER_METADATA, {"group_id": "cg", "member_id": "m3"}, 0,
     {"instance_id": None, "rack_id": None, "client_id": "c", "client_host": "h", "subscribed_topic_names": ["t"],
      "subscribed_topic_regex": None, "rebalance_timeout_ms": 1, "server_assignor": "range",
      "classic_member_metadata": None}),
    (R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"group_id": "cg", "member_id": "m"}, 0,
     {"member_epoch": 1, "previous_member_epoch": 0, "state": 2,
      "assigned_partitions": [{"topic_id": T1, "partitions": [0], "assignment_epochs": None}],
      "partitions_pending_revocation": []}),
    # KIP-932 share groups
    (R.SHARE_GROUP_MEMBER_METADATA, {"group_id": "sh", "member_id": "m"}, 0,
     {"rack_id": None, "client_id": "share-consumer", "client_host": "/127.0.0.1",
      "subscribed_topic_names": ["jobs", "more"]}),
    (R.SHARE_GROUP_MEMBER_METADATA, {"group_id": "sh", "member_id": "m2"}, 0,
     {"rack_id": "r1", "client_id": "", "client_host": "h", "subscribed_topic_names": []}),
    (R.SHARE_GROUP_METADATA, {"group_id": "sh"}, 0, {"epoch": 7, "metadata_hash": -4242}),
    (R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": "sh"}, 0,
     {"assignment_epoch": 7, "assignment_timestamp": 1_700_000_000_000}),
    (R.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": "sh"}, 0, {"assignment_epoch": 1}),
    (R.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, {"group_id": "sh", "member_id": "m"}, 0,
     {"topic_partitions": [{"topic_id": T1, "partitions": [0, 1, 2]}, {"topic_id": T2, "partitions": []}]}),
    (R.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"group_id": "sh", "member_id": "m"}, 0,
     {"member_epoch": 7, "previous_member_epoch": 6, "state": 0,
      "assigned_partitions": [{"topic_id": T1, "partitions": [0, 1, 2]}]}),
    (R.SHARE_GROUP_STATE_PARTITION_METADATA, {"group_id": "sh"}, 0,
     {"initializing_topics": [{"topic_id": T2, "topic_name": "more", "partitions": [3]}],
      "initialized_topics": [{"topic_id": T1, "topic_name": "jobs", "partitions": [0, 1, 2]}],
      "deleting_topics": [{"topic_id": T2, "topic_name": "old"}]}),
    # KIP-1071 streams groups
    (R.STREAMS_GROUP_METADATA, {"group_id": "sg"}, 0,
     {"epoch": 4, "metadata_hash": -12345, "validated_topology_epoch": 2,
      "last_assignment_configs": [{"key": "num.standby.replicas", "value": "1"}]}),
    (R.STREAMS_GROUP_METADATA, {"group_id": "sg"}, 0, {"epoch": 1, "metadata_hash": 0}),
    (R.STREAMS_GROUP_MEMBER_METADATA, {"group_id": "sg", "member_id": "m"}, 0,
     {"instance_id": None, "rack_id": "r", "client_id": "app-StreamThread-1-consumer", "client_host": "/127.0.0.1",
      "rebalance_timeout_ms": 300000, "topology_epoch": 0, "process_id": "p-1",
      "user_endpoint": {"host": "localhost", "port": 7001}, "client_tags": [{"key": "zone", "value": "a"}]}),
    (R.STREAMS_GROUP_MEMBER_METADATA, {"group_id": "sg", "member_id": "m2"}, 0,
     {"instance_id": None, "rack_id": None, "client_id": "c", "client_host": "h", "rebalance_timeout_ms": -1,
      "topology_epoch": 3, "process_id": "p", "user_endpoint": None, "client_tags": []}),
    (R.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, {"group_id": "sg"}, 0,
     {"assignment_epoch": 4, "assignment_timestamp": 1_700_000_000_000}),
    (R.STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, {"group_id": "sg", "member_id": "m"}, 0,
     {"active_tasks": [{"subtopology_id": "0", "partitions": [0, 2]}],
      "standby_tasks": [{"subtopology_id": "1", "partitions": [1]}], "warmup_tasks": []}),
    (R.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, {"group_id": "sg", "member_id": "m"}, 0,
     {"member_epoch": 4, "previous_member_epoch": 3, "state": 2,
      "active_tasks": [{"subtopology_id": "0", "partitions": [0], "assignment_epochs": [4]}],
      "standby_tasks": [], "warmup_tasks": [],
      "active_tasks_pending_revocation": [{"subtopology_id": "1", "partitions": [2, 3]}],
      "standby_tasks_pending_revocation": [], "warmup_tasks_pending_revocation": []}),
    (R.STREAMS_GROUP_TOPOLOGY, {"group_id": "sg"}, 0,
     {"epoch": 0, "subtopologies": [
         {"subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [], "state_changelog_topics": [],
          "repartition_sink_topics": ["sg-words-repartition"], "repartition_source_topics": [],
          "copartition_groups": []},
         {"subtopology_id": "1", "source_topics": [], "source_topic_regex": ["x.*"],
          "state_changelog_topics": [{"name": "sg-counts-changelog", "partitions": 0, "replication_factor": 0,
                                      "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
          "repartition_sink_topics": [], "repartition_source_topics": [
              {"name": "sg-words-repartition", "partitions": 4, "replication_factor": 3, "topic_configs": []}],
          "copartition_groups": [{"source_topics": [0], "source_topic_regex": [], "repartition_source_topics": [0]}]},
     ]}),
]


def full(record_type: int, version: int, value: dict) -> dict:
    """``value`` with every field of the schema (defaults for omitted ones), as the decoder returns it."""
    _, _, schema = R.RECORD_TYPES[record_type]
    return decode_data(schema, version, encode_data(schema, version, value))[0].to_dict()


def in_version(fields, version: int, obj):
    """Only the fields that exist at ``version`` (what Kafka's JSON converter writes)."""
    if obj is None:
        return None
    out = {}
    for f in fields:
        if not f.present(version):
            continue
        v = obj[f.name]
        default = f.default_value()
        if f.tag is not None and v == (default.to_dict() if isinstance(default, Struct) else default):
            continue  # Kafka's JSON converter leaves out tagged fields at their default
        if f.fields is not None and v is not None:
            v = [in_version(f.fields, version, x) for x in v] if f.kind == "array" else in_version(f.fields, version, v)
        out[f.name] = v
    return out


def kafka_view(record_type: int, version: int, value: dict) -> dict:
    _, _, schema = R.RECORD_TYPES[record_type]
    return in_version(schema.message.fields, version, full(record_type, version, value))


#: Runs a test once for every record of CASES (ids name the record type and value version).
each_case = pytest.mark.parametrize("record_type,key,version,value", CASES,
                                    ids=[f"{R.RECORD_TYPES[c[0]][0]}-v{c[2]}-{i}" for i, c in enumerate(CASES)])


@each_case
def test_klog_encodes_records_byte_for_byte_like_kafka(oracle, record_type, key, version, value):
    name = R.RECORD_TYPES[record_type][0]
    want = oracle.ask({"op": "encode", "name": name, "key": to_kafka_json(key), "valueVersion": version,
                       "value": to_kafka_json(full(record_type, version, value))})
    assert "error" not in want, want
    assert R.encode_key(record_type, key).hex() == want["key"]
    assert R.encode_value(record_type, version, value).hex() == want["value"]


@each_case
def test_kafka_decodes_klog_records_to_the_same_fields(oracle, record_type, key, version, value):
    got = oracle.ask({"op": "decode", "key": R.encode_key(record_type, key).hex(),
                      "value": R.encode_value(record_type, version, value).hex()})
    assert "error" not in got, got
    assert got["type"] == record_type and got["valueVersion"] == version
    assert got["key"] == to_kafka_json(key)
    assert got["value"] == to_kafka_json(kafka_view(record_type, version, value))


@each_case
def test_klog_decodes_kafka_written_records(oracle, record_type, key, version, value):
    name = R.RECORD_TYPES[record_type][0]
    kafka = oracle.ask({"op": "encode", "name": name, "key": to_kafka_json(key), "valueVersion": version,
                        "value": to_kafka_json(full(record_type, version, value))})
    rec = R.decode_record(bytes.fromhex(kafka["key"]), bytes.fromhex(kafka["value"]))
    assert (rec.type, rec.key, rec.value_version) == (record_type, key, version)
    assert rec.value == full(record_type, version, value)


def test_tombstones_match_kafka(oracle):
    for record_type, key in [(R.OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 1}),
                             (R.GROUP_METADATA, {"group": "g"})]:
        name = R.RECORD_TYPES[record_type][0]
        want = oracle.ask({"op": "encode", "name": name, "key": to_kafka_json(key), "value": None})
        assert want == {"key": R.encode_key(record_type, key).hex(), "value": None}
        rec = R.decode_record(bytes.fromhex(want["key"]), None)
        assert rec.value is None and rec.key == key


def test_the_coordinator_writes_kafkas_current_versions(oracle):
    key, value = R.offset_commit_record("g", "t", 3, offset=10, leader_epoch=1, metadata="md", commit_timestamp=5)
    got = oracle.ask({"op": "decode", "key": key.hex(), "value": value.hex()})
    assert got["valueVersion"] == 3
    assert got["value"] == {"offset": 10, "leaderEpoch": 1, "metadata": "md", "commitTimestamp": 5}
    _, value = R.offset_commit_record("g", "t", 3, offset=10, leader_epoch=-1, metadata="", commit_timestamp=5,
                                      expire_timestamp=600)
    assert oracle.ask({"op": "decode", "key": key.hex(), "value": value.hex()})["valueVersion"] == 1


@pytest.mark.parametrize("cut", range(1, 40))
def test_truncated_values_raise_a_format_error_naming_the_field(cut):
    value = R.encode_value(R.GROUP_METADATA, 3, CASES[5][3])
    key = R.encode_key(R.GROUP_METADATA, {"group": "grp"})
    with pytest.raises(R.RecordFormatError, match=r"GroupMetadataValue v3, field .*, byte offset \d+"):
        R.decode_record(key, value[:len(value) - cut])


def test_unknown_record_types_are_reported_as_such():
    with pytest.raises(R.UnknownRecordType):
        R.decode_record(b"\x00\x63\x00\x01g", b"\x00\x00")


def test_invalid_utf8_and_negative_lengths_are_format_errors():
    key = R.encode_key(R.OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 1})
    bad = b"\x00\x03" + (1).to_bytes(8, "big") + (0).to_bytes(4, "big") + b"\x00\x02\xff\xfe" + bytes(8)
    with pytest.raises(R.RecordFormatError, match="field metadata.*UTF-8"):
        R.decode_record(key, bad)
    bad = b"\x00\x03" + (1).to_bytes(8, "big") + (0).to_bytes(4, "big") + b"\xff\xfe" + bytes(8)
    with pytest.raises(R.RecordFormatError, match="field metadata"):
        R.decode_record(key, bad)


def test_unknown_tagged_fields_are_skipped():
    # A future Kafka may add tags: v4 OffsetCommitValue with an unknown tag 5 still decodes.
    body = (7).to_bytes(8, "big") + (1).to_bytes(4, "big", signed=True) + b"\x02m" + (9).to_bytes(8, "big")
    value = b"\x00\x04" + body + b"\x01\x05\x03abc"
    key = R.encode_key(R.OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 1})
    rec = R.decode_record(key, value)
    assert rec.value["offset"] == 7 and rec.value["metadata"] == "m" and rec.value["commit_timestamp"] == 9
