"""``__cluster_metadata-0`` on disk: klog's log, snapshots and quorum-state against Apache Kafka's.

Both directions are checked against the real thing:
- Kafka 4.x's ``DumpLogSegments --cluster-metadata-decoder`` decodes a metadata log and a snapshot klog wrote
  (every record type at every version, with random field values, plus the Raft control records) without error
  and prints exactly the records klog wrote;
- a real KRaft Apache Kafka is started from the jars, a topic is created, the broker stopped, and klog reads its
  ``__cluster_metadata-0`` (log, bootstrap snapshot, quorum-state) into an image holding the topic, its
  partitions, configs and the broker registration; every record value re-encodes to Kafka's exact bytes.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from klog.metadata.image import ConfigResourceType
from klog.metadata.records import (
    CONTROL_RECORD_VERSION,
    ControlRecord,
    MetadataRecord,
    MetadataRecordError,
    MetadataRecordType,
    control,
    decode_record,
    encode_record,
    record,
)
from klog.metadata.storage import (
    METADATA_TOPIC,
    MetadataLog,
    QuorumState,
    SnapshotId,
    quorum_state_json,
    read_quorum_state,
    read_snapshot,
    write_quorum_state,
)
from klog.protocol.data import CONTROL_RECORD_SCHEMAS, METADATA_RECORD_SCHEMAS
from klog.protocol.samples import sample_struct
from klog.protocol.struct import Struct
from klog.records import decode_batches as raw_batches
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

DUMP = "org.apache.kafka.tools.DumpLogSegments"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
T1 = uuid.UUID("cbe07bd0-55d1-4333-8e29-360960467579")
# DumpLogSegments' names for control records
CONTROL_LABELS = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter", 5: "KRaftVersion", 6: "KRaftVoters"}
LINE = re.compile(r"^\| offset: (\d+) .*?(payload: |LeaderChange: |SnapshotHeader |SnapshotFooter |KRaftVersion "
                  r"|KRaftVoters )(\{.*\})$")


def needs_kafka() -> Path:
    libs = kafka_libs_dir(Path(__file__).parent)
    if not java_available() or libs is None:
        pytest.skip("needs java and the Kafka jars: run tools/install-peers.sh")
    return libs


def dump(files: list[str]) -> str:
    out = run_kafka_tool(DUMP, "--cluster-metadata-decoder", "--files", ",".join(files),
                         libs=needs_kafka(), timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    bad = [line for line in (out.stdout + out.stderr).splitlines()
           if ("rror" in line or "xception" in line or "isvalid: false" in line) and "SLF4J" not in line]
    assert not bad, "\n".join(bad[:20])
    return out.stdout


def dumped_records(text: str) -> list[tuple[int, str, dict]]:
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2).strip(), json.loads(m.group(3))))
    return out


def camel(name: str) -> str:
    head, *rest = name.split("_")
    out = head + "".join(w[:1].upper() + w[1:] for w in rest)
    return out.replace("kraftVersion", "kRaftVersion").replace("KraftVersion", "KRaftVersion")


def kafka_json(fields, version: int, value: Any) -> dict:
    """How Kafka's generated JsonConverter prints a message: camelCase names, uuids in Kafka's base64, bytes in
    base64, tagged fields only when they differ from their default."""
    out = {}
    for f in fields:
        if not f.present(version):
            continue
        v = getattr(value, f.name)
        if f.is_tagged(version) and v == f.default_value():
            continue
        out[camel(f.name)] = _json_value(f, version, v)
    return out


def _json_value(f, version: int, v: Any) -> Any:
    if v is None:
        return None
    if f.kind == "uuid":
        return base64.urlsafe_b64encode(v.bytes).decode().rstrip("=")
    if f.kind == "bytes":
        return base64.b64encode(bytes(v)).decode()
    if f.kind == "struct":
        return kafka_json(f.fields, version, v)
    if f.kind == "array":
        if f.fields is not None:
            return [kafka_json(f.fields, version, e) for e in v]
        if f.elem == "uuid":
            return [base64.urlsafe_b64encode(e.bytes).decode().rstrip("=") for e in v]
        return list(v)
    return v


def ascii_only(v: Any) -> Any:
    """Sample strings without non-ASCII characters (the JVM's stdout encoding depends on the locale)."""
    if isinstance(v, str):
        return v.encode("ascii", "replace").decode()
    if isinstance(v, list):
        return [ascii_only(x) for x in v]
    if isinstance(v, Struct):
        return Struct(**{k: ascii_only(x) for k, x in v.__dict__.items()})
    return v


def expected_line(rec: MetadataRecord | ControlRecord) -> tuple[str, dict]:
    if isinstance(rec, ControlRecord):
        schema = CONTROL_RECORD_SCHEMAS[rec.type]
        return CONTROL_LABELS[rec.type], kafka_json(schema.message.fields, CONTROL_RECORD_VERSION, rec.data)
    schema = METADATA_RECORD_SCHEMAS[rec.type]
    return "payload:", {"type": rec.type.name, "version": rec.version,
                        "data": kafka_json(schema.message.fields, rec.version, rec.data)}


def all_records_random(seed: int) -> list[MetadataRecord]:
    rng = random.Random(seed)
    out = []
    for key, schema in sorted(METADATA_RECORD_SCHEMAS.items()):
        for version in range(schema.min_version, schema.max_version + 1):
            for _ in range(3):
                value = ascii_only(sample_struct(schema.message.fields, version, True, rng))
                out.append(decode_record(encode_record(MetadataRecord(MetadataRecordType(key), version, value))))
    return out


# ---- klog writes, Kafka reads --------------------------------------------------------------------------------


@pytest.mark.java
def test_kafka_dump_log_decodes_every_record_type_and_version_in_a_log_klog_wrote(tmp_path):
    voters = [{"voter_id": 1, "voter_directory_id": T1, "endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1",
                                                                      "port": 9093}],
               "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}}]
    written: list[tuple[int, Any]] = []
    with MetadataLog(str(tmp_path)) as log:
        batches = [
            [control("LeaderChangeMessage", leader_id=1, voters=[{"voter_id": 1}], granting_voters=[{"voter_id": 1}]),
             control("KRaftVersionRecord", kraft_version=1), control("VotersRecord", voters=voters)],
        ]
        records = all_records_random(1)
        batches += [records[i:i + 7] for i in range(0, len(records), 7)]
        for epoch, batch in enumerate(batches, start=1):
            first, last = log.append(batch, epoch)
            assert last - first + 1 == len(batch)
            written += [(first + i, r) for i, r in enumerate(batch)]
        log.flush()
        segment = os.path.join(log.dir, f"{0:020d}.log")
    got = dumped_records(dump([segment]))
    assert [(o, *expected_line(r)) for o, r in written] == got
    assert len(got) == 3 + sum(s.max_version - s.min_version + 1 for s in METADATA_RECORD_SCHEMAS.values()) * 3


@pytest.mark.java
def test_kafka_dump_log_decodes_a_snapshot_klog_wrote(tmp_path):
    with MetadataLog(str(tmp_path)) as log:
        log.append([record("FeatureLevelRecord", name="metadata.version", feature_level=30),
                    record("TopicRecord", name="orders", topic_id=T1),
                    *[record("PartitionRecord", partition_id=p, topic_id=T1, replicas=[1, 2], isr=[1, 2], leader=1,
                             leader_epoch=0, partition_epoch=0) for p in range(3)],
                    record("ConfigRecord", resource_type=2, resource_name="orders", name="retention.ms",
                           value="1000")], epoch=4, timestamp=1_700_000_000_000)
        log.append([record("PartitionChangeRecord", partition_id=1, topic_id=T1, leader=2, isr=[2])], epoch=5)
        image = log.load("cluster-x").image
        voters = [{"voter_id": 1, "voter_directory_id": T1, "endpoints": [], "kraft_version_feature": {}}]
        sid = log.write_snapshot(image, kraft_version=1, voters=voters)
        assert sid == SnapshotId(7, 5) and log.snapshots() == [sid]
        assert not [n for n in os.listdir(log.dir) if n.endswith(".part")]
        path = os.path.join(log.dir, sid.filename)
    out = dump([path])
    assert "Snapshot end offset: 7, epoch: 5" in out
    got = dumped_records(out)
    assert [kind for _, kind, _ in got[:3]] == ["SnapshotHeader", "KRaftVersion", "KRaftVoters"]
    assert got[0][2] == {"version": 0, "lastContainedLogTimestamp": image.last_contained_log_time_ms}
    assert got[-1][1:] == ("SnapshotFooter", {"version": 0})
    payloads = [d for _, kind, d in got if kind == "payload:"]
    assert [p["type"] for p in payloads] == ["FEATURE_LEVEL_RECORD", "TOPIC_RECORD"] + ["PARTITION_RECORD"] * 3 + [
        "CONFIG_RECORD"]
    assert payloads[3]["data"]["leader"] == 2 and payloads[3]["data"]["leaderEpoch"] == 1
    assert payloads[3]["data"]["partitionEpoch"] == 1 and payloads[3]["data"]["isr"] == [2]
    assert [o for o, _, _ in got] == list(range(len(got)))  # offsets count from 0 within a snapshot


# ---- Kafka writes, klog reads --------------------------------------------------------------------------------


@pytest.mark.java
@pytest.mark.long
def test_klog_reads_the_metadata_log_a_real_kafka_wrote(tmp_path):
    libs = needs_kafka()
    from klog.testing.kafka import apache_kafka

    kafka_dir = tmp_path / "kafka"
    with apache_kafka(kafka_dir) as bootstrap:
        port = int(bootstrap.rsplit(":", 1)[1])
        r = run_kafka_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--create", "--topic", "orders",
                           "--partitions", "3", "--config", "retention.ms=12345", libs=libs)
        assert r.returncode == 0, r.stderr[-2000:]
    data = kafka_dir / "kafka-data"
    cluster_id = re.search(r"^cluster.id=(\S+)$", (data / "meta.properties").read_text(), re.M).group(1)
    copy = tmp_path / "copy"
    shutil.copytree(data / f"{METADATA_TOPIC}-0", copy / f"{METADATA_TOPIC}-0")
    kafka_quorum_state = (copy / f"{METADATA_TOPIC}-0" / "quorum-state").read_bytes()

    with MetadataLog(str(copy)) as log:
        assert log.log_end_offset > 10
        image = log.load(cluster_id).image
        assert image.cluster_id == cluster_id and image.highest_offset == log.log_end_offset - 1
        assert image.metadata_version is not None and image.metadata_version >= 7
        orders = image.topic("orders")
        assert orders is not None and sorted(orders.partitions) == [0, 1, 2]
        for p in orders.partitions.values():
            assert p.replicas == (1,) and p.partition_epoch >= 0 and p.leader in (1, -1)
        assert image.topic_config("orders") == {"retention.ms": "12345"}
        assert image.topics_by_id[orders.id] is orders
        b = image.brokers[1]
        assert b.endpoint("PLAINTEXT").port == port and b.endpoint("PLAINTEXT").host == "127.0.0.1"
        assert b.epoch > 0 and 1 in image.controllers
        # Kafka's own bootstrap snapshot (00000000000000000000-0000000000.checkpoint) reads too
        snaps = log.snapshots()
        assert SnapshotId(0, 0) in snaps
        snap = log.read_snapshot(SnapshotId(0, 0))
        assert [r.name for r in snap.control_records][0] == "SnapshotHeaderRecord"
        # the quorum-state file parses and is written back byte for byte
        state = log.read_quorum_state()
        assert state is not None and state.leader_id == 1 and state.leader_epoch >= 1
        assert quorum_state_json(state).encode() == kafka_quorum_state.rstrip(b"\n")
        # every record value Kafka wrote re-encodes to the same bytes
        raw = raw_batches(open(os.path.join(log.dir, f"{0:020d}.log"), "rb").read())
        n = 0
        for batch in raw:
            if batch.is_control:
                continue
            for rec in batch.records:
                assert encode_record(decode_record(rec.value, rec.offset)) == rec.value, rec.offset
                n += 1
        assert n > 10
        # and klog's snapshot of that image is one Kafka reads
        sid = log.write_snapshot(image)
        path = os.path.join(log.dir, sid.filename)
    got = dumped_records(dump([path]))
    assert {"type": "TOPIC_RECORD", "version": 0,
            "data": {"name": "orders", "topicId": base64.urlsafe_b64encode(orders.id.bytes).decode().rstrip("=")}} \
        in [d for _, kind, d in got if kind == "payload:"]
    reloaded = MetadataLog(str(copy))
    try:
        assert reloaded.load(cluster_id).image == image
    finally:
        reloaded.close()


# ---- the log, snapshots and quorum-state without Java ---------------------------------------------------------


def test_log_appends_reads_and_reloads_with_snapshot_and_tail(tmp_path):
    with MetadataLog(str(tmp_path)) as log:
        assert log.load().image.highest_offset == -1
        log.append([record("TopicRecord", name="a", topic_id=T1),
                    record("PartitionRecord", partition_id=0, topic_id=T1, replicas=[1], isr=[1], leader=1)], 1)
        sid = log.write_snapshot(log.load().image)
        assert sid == SnapshotId(2, 1)
        log.append([record("PartitionChangeRecord", partition_id=0, topic_id=T1, leader=-1)], 2)
        batches = list(log.read())
        assert [(b.base_offset, b.epoch, len(b.records)) for b in batches] == [(0, 1, 2), (2, 2, 1)]
        assert [b.base_offset for b in log.read(2)] == [2]
        assert log.load(end_offset=2).image.partition("a", 0).leader == 1  # only what is committed
        image = log.load().image
        assert image.partition("a", 0).leader == -1 and image.highest_offset == 2 and image.epoch == 2
    with MetadataLog(str(tmp_path)) as log:  # reopened: the same image from the snapshot plus the log tail
        assert log.load().image == image
        log.truncate_to(2)
        assert log.load().image.partition("a", 0).leader == 1


def test_incomplete_or_corrupt_snapshots_are_refused_with_the_file_named(tmp_path):
    with MetadataLog(str(tmp_path)) as log:
        log.append([record("TopicRecord", name="a", topic_id=T1)], 1)
        sid = log.write_snapshot(log.load().image)
        path = os.path.join(log.dir, sid.filename)
    data = open(path, "rb").read()
    last = raw_batches(data)[-1]
    cut = tmp_path / f"{5:020d}-{1:010d}.checkpoint"
    cut.write_bytes(data[:last.position])
    with pytest.raises(MetadataRecordError, match=r"does not end with a SnapshotFooter"):
        read_snapshot(str(cut))
    flipped = bytearray(data)
    flipped[100] ^= 0x40
    cut.write_bytes(bytes(flipped))
    with pytest.raises(MetadataRecordError, match=rf"snapshot {re.escape(str(cut))}: .*corrupt record batch"):
        read_snapshot(str(cut))
    (tmp_path / "x.checkpoint.part").write_bytes(b"partial")
    assert SnapshotId.parse("x.checkpoint.part") is None and SnapshotId.parse(cut.name) == SnapshotId(5, 1)


def test_quorum_state_formats_of_both_data_versions(tmp_path):
    path = str(tmp_path / "quorum-state")
    assert read_quorum_state(path) is None
    v1 = QuorumState(leader_id=2, leader_epoch=7, voted_id=2, voted_directory_id=T1)
    write_quorum_state(path, v1)
    assert open(path).read() == ('{"leaderId":2,"leaderEpoch":7,"votedId":2,"votedDirectoryId":'
                                 '"y-B70FXRQzOOKTYJYEZ1eQ","data_version":1}')
    assert read_quorum_state(path) == v1 and not os.path.exists(path + ".tmp")
    v0 = QuorumState(leader_id=1, leader_epoch=3, data_version=0, cluster_id="abc", current_voters=(1, 2, 3))
    write_quorum_state(path, v0)
    assert json.loads(open(path).read())["currentVoters"] == [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}]
    assert read_quorum_state(path) == v0
    for bad in ("", "[1]", '{"leaderId":1}', '{"data_version":7}', '{"data_version":1}'):
        open(path, "w").write(bad)
        with pytest.raises(ValueError, match="quorum-state: unreadable quorum state"):
            read_quorum_state(path)


def test_config_resource_types_are_kafkas():
    assert {t.name: t.value for t in ConfigResourceType} == {
        "UNKNOWN": 0, "TOPIC": 2, "BROKER": 4, "BROKER_LOGGER": 8, "CLIENT_METRICS": 16, "GROUP": 32}
