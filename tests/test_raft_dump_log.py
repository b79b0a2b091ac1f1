"""Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` (DumpLogSegments) reads the metadata log and the
snapshots a klog controller quorum (3 ``klog-broker`` processes) wrote: the bootstrap transaction with its
FeatureLevelRecord, NoOpRecords, LEADER_CHANGE control batches, and ``.checkpoint`` snapshots of each member's
image, without errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from klog.testing.controller_quorum import ControllerQuorum
from test_storage_oracle import run_dump

pytestmark = pytest.mark.java

ERROR_MARKERS = ("Exception", "rror", "Mismatches", "isvalid: false", "Unknown", "unknown")


@pytest.mark.long
def test_dump_log_decodes_every_members_metadata_log_and_snapshot(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3) as q:
        leader = q.wait_for_leader()
        q.wait_applied(min_end_offset=8)
        q.kill(leader)  # a second epoch: another LEADER_CHANGE
        q.wait_for_leader(exclude=leader)
        q.start_node(leader)
        q.wait_applied(min_end_offset=30)
    begin_seen = False
    leader_changes = 0
    for node in q.nodes:
        d = q.metadata_dir(node)
        logs = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".log")]
        log_dump = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
        assert not [line for line in log_dump.splitlines() if any(m in line for m in ERROR_MARKERS)], log_dump[-3000:]
        # DumpLogSegments reports a file whose first offset is not 0 as "-1 is followed by <first>" (later
        # segments; the log after a snapshot installed from the leader). Any other gap is a failure.
        bases = {f"-1 is followed by {int(Path(f).name.split('.')[0])}" for f in logs}
        gaps = [line.strip() for line in log_dump.splitlines() if "is followed by" in line]
        assert set(gaps) <= bases, gaps
        assert "NO_OP_RECORD" in log_dump, f"node {node}: no NO_OP_RECORD in\n{log_dump[-3000:]}"
        leader_changes += log_dump.count("LeaderChange")
        begin_seen |= "BEGIN_TRANSACTION_RECORD" in log_dump and "END_TRANSACTION_RECORD" in log_dump
        checkpoints = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".checkpoint")]
        assert checkpoints, f"node {node} wrote no snapshot"
        snap_dump = run_dump(checkpoints, "--cluster-metadata-decoder")
        assert not [line for line in snap_dump.splitlines() if any(m in line for m in ERROR_MARKERS)], snap_dump[-3000:]
        for expected in ("SnapshotHeader", "KRaftVoters", "FEATURE_LEVEL_RECORD", "metadata.version", "SnapshotFooter"):
            assert expected in snap_dump, f"node {node}: no {expected} in\n{snap_dump[-3000:]}"
    assert begin_seen, "no member's log holds the bootstrap transaction"
    assert leader_changes >= 2, "two epochs, so at least two LEADER_CHANGE control batches"


def test_dump_log_reads_metadata_segments_rolled_at_metadata_log_segment_bytes(tmp_path: Path) -> None:
    props = {"metadata.log.segment.bytes": 1024, "metadata.max.idle.interval.ms": 50,
             "metadata.log.max.snapshot.interval.ms": 0}  # no snapshots: every segment stays
    with ControllerQuorum(tmp_path, 3, properties=props) as q:
        q.wait_for_leader()
        deadline = time.monotonic() + 60
        while min(len(list(q.metadata_dir(i).glob("*.log"))) for i in q.nodes) < 3:
            assert time.monotonic() < deadline, "segments did not roll"
            time.sleep(0.2)
    for node in q.nodes:
        logs = sorted(str(p) for p in q.metadata_dir(node).glob("*.log"))
        assert all(os.path.getsize(f) <= 1024 for f in logs), "metadata.log.segment.bytes bounds each segment"
        out = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
        assert not [line for line in out.splitlines() if any(m in line for m in ERROR_MARKERS)], out[-3000:]
        bases = {f"-1 is followed by {int(Path(f).name.split('.')[0])}" for f in logs}
        assert {line.strip() for line in out.splitlines() if "is followed by" in line} <= bases
        assert "BEGIN_TRANSACTION_RECORD" in out and "NO_OP_RECORD" in out


def _sample(field, version: int, n: int):  # noqa: ANN001, ANN202
    """A non-default value for every field kind, so tagged fields are written and shown too."""
    from klog.protocol.struct import Struct

    if field.kind == "struct":
        return Struct(**{f.name: _sample(f, version, n + i) for i, f in enumerate(field.fields)})
    if field.kind == "array":
        if field.fields is not None:
            return [Struct(**{f.name: _sample(f, version, n + i) for i, f in enumerate(field.fields)})]
        return [_sample_primitive(field.elem, n), _sample_primitive(field.elem, n + 1)]
    return _sample_primitive(field.kind, n)


def _sample_primitive(kind: str, n: int):  # noqa: ANN202
    import uuid as _uuid

    return {"int8": 1 + n % 100, "int16": 300 + n, "int32": 70_000 + n, "int64": 5_000_000_000 + n,
            "uint16": 9000 + n, "float64": 1.5 + n, "bool": True, "string": f"s{n}",
            "bytes": bytes([n % 256, 1, 2]), "uuid": _uuid.UUID(int=(n + 1) * 0x1234567890ABCDEF)}[kind]


def test_klog_dump_log_prints_every_metadata_record_as_kafkas_decoder_does(tmp_path: Path) -> None:
    """Every metadata record type at every version, every field set (tagged ones too), and the Raft control
    records: ``klog dump-log`` shows each record's JSON exactly as ``kafka-dump-log --cluster-metadata-decoder``
    does, for a segment and for a snapshot."""
    import json
    import re
    import subprocess
    import uuid

    from klog.metadata.records import ControlRecord, MetadataRecord, MetadataRecordType, encode_batch
    from klog.metadata.storage import SnapshotId, snapshot_bytes
    from klog.protocol.data import CONTROL_RECORD_SCHEMAS, METADATA_RECORD_SCHEMAS
    from klog.protocol.struct import Struct
    from test_cli import klog_command

    records = []
    for key, schema in sorted(METADATA_RECORD_SCHEMAS.items()):
        for version in range(schema.min_version, schema.max_version + 1):
            fields = {f.name: (_sample(f, version, i) if f.present(version) else f.default_value())
                      for i, f in enumerate(schema.message.fields)}
            records.append(MetadataRecord(MetadataRecordType(key), version, Struct(**fields)))
    from klog.metadata.records import ControlRecordType, control
    leader_change = control(ControlRecordType.LEADER_CHANGE, version=0, leader_id=2,
                            voters=[{"voter_id": 1}, {"voter_id": 2}], granting_voters=[{"voter_id": 2}])
    kraft_version = control(ControlRecordType.KRAFT_VERSION, version=0, kraft_version=1)
    assert isinstance(leader_change, ControlRecord) and CONTROL_RECORD_SCHEMAS
    meta_dir = tmp_path / "__cluster_metadata-0"
    meta_dir.mkdir()
    data = b"".join(encode_batch([r], base_offset=i, epoch=3) for i, r in enumerate(records))
    data += encode_batch([leader_change, kraft_version], base_offset=len(records), epoch=4)
    segment = meta_dir / f"{0:020d}.log"
    segment.write_bytes(data)
    snapshot = meta_dir / SnapshotId(len(records), 3).filename
    snapshot.write_bytes(snapshot_bytes(records, SnapshotId(len(records), 3), kraft_version=1,
                                        voters=[{"voter_id": 1, "voter_directory_id": uuid.UUID(int=7),
                                                 "endpoints": [{"name": "CONTROLLER", "host": "h", "port": 9}],
                                                 "kraft_version_feature": {"min_supported_version": 0,
                                                                           "max_supported_version": 1}}],
                                        last_contained_log_time_ms=1234))

    record_line = re.compile(r"^\| offset: (\d+) .*? headerKeys: \[\] (.*)$")

    def payloads(text: str) -> list[tuple[int, str, object]]:
        out = []
        for line in text.splitlines():
            m = record_line.match(line)
            if m:
                label, _, body = m.group(2).partition("{")
                out.append((int(m.group(1)), label.strip(), json.loads("{" + body)))
        return out

    for path, extra in ((segment, ("--deep-iteration",)), (snapshot, ())):
        kafka = payloads(run_dump([str(path)], "--cluster-metadata-decoder", *extra))
        ours = payloads(subprocess.run([*klog_command(), "dump-log", str(path)], capture_output=True, text=True,
                                       timeout=120, check=True).stdout)
        assert len(kafka) >= len(records), f"Kafka's tool printed {len(kafka)} records"
        mismatches = [(k, o) for k, o in zip(kafka, ours) if k != o]
        assert not mismatches and len(kafka) == len(ours), mismatches[:5]
