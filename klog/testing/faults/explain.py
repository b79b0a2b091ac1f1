"""What the replicas hold behind a transactional anomaly, as Apache Kafka's ``kafka-dump-log`` (DumpLogSegments)
prints it from every node's files: :func:`explain_transactions` adds to each ``aborted_read``, ``torn_transaction``
and ``lost_committed`` finding of the checker the batches of the transaction's producer on the partitions of its
values (producer id and epoch, leader epoch, the COMMIT/ABORT markers after them) and the aborted transactions each
replica's ``.txnindex`` lists for that producer, so that a failed run explains itself. It reads the data dirs, so
:func:`klog.testing.faults.run.run` calls it before the nodes' filesystems are unmounted.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

__all__ = ["explain_transactions"]

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
#: the checker's findings that name a transaction (a poll's aborted read names several: ``txns``)
TXN_ANOMALIES = ("aborted_read", "torn_transaction", "lost_committed")
#: findings explained per anomaly kind (each costs nothing more: one dump per node covers them all)
MAX_EXPLAINED = 5
#: lines kept per replica and partition: the producer's batches from the first holding a value of the transaction
MAX_LINES = 24
#: how long one node's dump may take (a JVM start, a few MB of segments)
DUMP_TIMEOUT_S = 120.0

_HEADER = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) "
                     r"partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) isControl: (\w+)")
_RECORD = re.compile(r"\| offset: (\d+) .*?(?:payload: (.*)|endTxnMarker: (\w+) coordinatorEpoch: (-?\d+))$")
_TXN_INDEX = re.compile(r"producerId: (-?\d+) firstOffset: (-?\d+) lastOffset: (-?\d+) lastStableOffset: (-?\d+)")


def _transactions(events: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    """Transaction name -> the (partition, value) pairs it wrote, from the history's invocations."""
    return {e["txn"]: [(int(p), str(v)) for p, v in e["values"]] for e in events
            if e.get("f") == "txn" and e.get("type") == "invoke"}


def _values(finding: Mapping[str, Any], txns: Mapping[str, list[tuple[int, str]]]) -> dict[int, set[str]]:
    """Partition -> the values the finding's transaction(s) wrote there."""
    out: dict[int, set[str]] = {}
    for name in [finding["txn"]] if "txn" in finding else finding.get("txns", []):
        for p, v in txns.get(name, []):
            out.setdefault(p, set()).add(v)
    return out


def _dump(files: Sequence[Path]) -> dict[str, list[str]]:
    """File path -> the lines DumpLogSegments prints for it (one JVM for all of them)."""
    out = run_kafka_tool(DUMP_LOG_SEGMENTS, "--print-data-log", "--files", ",".join(str(f) for f in files),
                         timeout=DUMP_TIMEOUT_S)
    by_file: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.stdout.splitlines():
        if line.startswith("Dumping "):
            current = by_file.setdefault(line[len("Dumping "):].strip(), [])
        elif current is not None:
            current.append(line)
    return by_file


def _batches(lines: Iterable[str]) -> list[tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    """A log's batches: (header fields, [record fields]) as :data:`_HEADER` and :data:`_RECORD` read them."""
    batches: list[tuple[tuple[str, ...], list[tuple[str, ...]]]] = []
    for line in lines:
        header = _HEADER.search(line)
        if header is not None:
            batches.append((header.groups(), []))
            continue
        record = _RECORD.search(line)
        if record is not None and batches:
            batches[-1][1].append(tuple(g or "" for g in record.groups()))
    return batches


def _partition_lines(logs: Sequence[list[str]], indexes: Sequence[list[str]], values: set[str]) -> list[str]:
    """One replica's account of one partition: the batches of the producer(s) that wrote ``values`` there, from the
    first holding one of them, with the values and markers in them; then the .txnindex entries of those producers."""
    batches = [b for lines in logs for b in _batches(lines)]
    writers = {h[2] for h, records in batches if any(r[1] in values for r in records)}
    if not writers:
        return [f"none of {sorted(values)} in this replica's log ({len(batches)} batches)"]
    first = min(i for i, (h, records) in enumerate(batches) if any(r[1] in values for r in records))
    out: list[str] = []
    for (base, last, pid, epoch, leader_epoch, transactional, control), records in batches[first:]:
        if pid not in writers:
            continue
        what = [f"marker {r[2]} (coordinator epoch {r[3]})" for r in records if r[2]] if control == "true" else \
            [r[1] for r in records if r[1] in values] or [f"{len(records)} other records"]
        kind = "control" if control == "true" else "transactional" if transactional == "true" else "plain"
        out.append(f"offsets {base}-{last} producer {pid} epoch {epoch} leader epoch {leader_epoch} {kind}: "
                    f"{', '.join(what)}")
        if len(out) >= MAX_LINES:
            out.append("...")
            break
    for lines in indexes:
        for line in lines:
            entry = _TXN_INDEX.search(line)
            if entry is not None and entry.group(1) in writers:
                out.append(f"txnindex: producer {entry.group(1)} aborted offsets {entry.group(2)}-{entry.group(3)} "
                           f"(last stable offset {entry.group(4)})")
    return out


def explain_transactions(data_dirs: Mapping[int, Path], topic: str, events: Sequence[Mapping[str, Any]],
                         details: dict[str, list[dict[str, Any]]]) -> None:
    """Adds ``"replicas"`` to the first :data:`MAX_EXPLAINED` findings of each of :data:`TXN_ANOMALIES`: for each
    node and partition of the transaction's values, what :func:`_partition_lines` reads there. Without java or the
    Kafka jars, says so instead."""
    findings = [f for kind in TXN_ANOMALIES for f in details.get(kind, [])[:MAX_EXPLAINED]]
    if not findings:
        return
    if not java_available() or kafka_libs_dir(Path(__file__).parent) is None:
        for finding in findings:
            finding["replicas"] = "kafka-dump-log unavailable (no java or no Kafka jars)"
        return
    txns = _transactions(events)
    wanted = {p for finding in findings for p in _values(finding, txns)}
    dumps: dict[int, dict[str, list[str]]] = {}
    failed: dict[int, str] = {}
    for node, data_dir in sorted(data_dirs.items()):
        files = [f for p in sorted(wanted) for f in sorted((data_dir / f"{topic}-{p}").glob("*.log"))
                 + sorted((data_dir / f"{topic}-{p}").glob("*.txnindex"))]
        try:
            dumps[node] = _dump(files) if files else {}
        except (OSError, subprocess.SubprocessError) as exc:   # the run's result matters more than its account
            dumps[node] = {}
            failed[node] = str(exc)
    for finding in findings:
        replicas: dict[str, list[str]] = {}
        for node, by_file in dumps.items():
            for p, values in sorted(_values(finding, txns).items()):
                if node in failed:
                    replicas[f"node {node} {topic}-{p}"] = [f"kafka-dump-log failed: {failed[node]}"]
                    continue
                pdir = str(data_dirs[node] / f"{topic}-{p}")
                logs = [lines for f, lines in sorted(by_file.items()) if f.startswith(pdir + "/") and f.endswith(".log")]
                indexes = [lines for f, lines in sorted(by_file.items())
                           if f.startswith(pdir + "/") and f.endswith(".txnindex")]
                replicas[f"node {node} {topic}-{p}"] = _partition_lines(logs, indexes, values) if logs else \
                    ["no log of this partition here"]
        finding["replicas"] = replicas
