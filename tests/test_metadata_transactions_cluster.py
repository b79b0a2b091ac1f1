"""KIP-868 on a real 3-node quorum (combined ``broker,controller`` klog-broker processes): the active controller is
SIGKILLed in the middle of a metadata transaction (a CreateTopics whose records exceed
``klog.controller.max.records.per.batch``, held after its first committed batch by the documented test-only hook
``KLOG_TEST_HOLD_METADATA_TRANSACTION_FILE``). The new active controller writes an AbortTransactionRecord before
anything else; no broker ever lists a half-created topic; the same CreateTopics retried succeeds; the restarted
node replays the log to the same topic; and Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` decodes the
Begin/Abort/End records of every member's log."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from klog.controller.writer import HOLD_TRANSACTION_ENV
from klog.protocol import ApiKey
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient
from test_storage_oracle import run_dump

pytestmark = [pytest.mark.timeout(300), pytest.mark.java]

PARTITIONS = 60
BATCH = 20   # 62 framed records: 4 batches, the first committed before the kill
TOPIC = "wide"
ERROR_MARKERS = ("Exception", "rror", "Mismatches", "isvalid: false", "Unknown", "unknown")


def _partitions_listed(host: str, port: int, topic: str) -> int | None:
    """How many partitions the node's Metadata lists for ``topic`` (None: not listed)."""
    with WireClient(host, port, timeout=5) as wire:
        answer = wire.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    t = answer.topics[0]
    return len(t.partitions) if t.error_code == 0 else None


def _create(host: str, port: int, timeout_ms: int = 30000) -> tuple[int, str | None]:
    with WireClient(host, port, timeout=timeout_ms / 1000 + 15) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 3, "assignments": [],
             "configs": []}], "timeout_ms": timeout_ms, "validate_only": False})
    return response.topics[0].error_code, response.topics[0].error_message


@pytest.mark.long
def test_a_metadata_transaction_cut_by_a_controller_sigkill_is_aborted_by_the_next_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hold = tmp_path / "hold-metadata-transaction"
    monkeypatch.setenv(HOLD_TRANSACTION_ENV, str(hold))
    with ControllerQuorum(tmp_path / "q", 3, roles="broker,controller",
                          properties={"klog.controller.max.records.per.batch": BATCH,
                                      # no snapshots: every member's log keeps every record for kafka-dump-log
                                      "metadata.log.max.snapshot.interval.ms": 0}) as q:
        leader = q.wait_for_leader()
        deadline = time.monotonic() + 30
        while any(_partitions_listed(q.nodes[i].host, q.nodes[i].port, "probe") is not None for i in q.nodes):
            assert time.monotonic() < deadline
            time.sleep(0.1)

        # every node's Metadata, polled until the end: the topic is absent or whole, never half created
        seen: list[tuple[int, int | None]] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                for i in q.live():
                    node = q.nodes[i]
                    try:
                        seen.append((i, _partitions_listed(node.host, node.port, TOPIC)))
                    except (OSError, TimeoutError, ConnectionError, EOFError):
                        pass   # the node being killed
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        hold.write_text("held")
        attempt: dict[str, object] = {}

        def first_attempt() -> None:   # on the active controller's own node: the kill cuts it (no forwarding retry)
            try:
                attempt["answer"] = _create(q.nodes[leader].host, q.nodes[leader].port)
            except Exception as e:   # noqa: BLE001 - the forwarding node may fail the request: any outcome
                attempt["answer"] = repr(e)

        creator = threading.Thread(target=first_attempt, daemon=True)
        creator.start()
        try:
            deadline = time.monotonic() + 30
            while not any(HOLD_TRANSACTION_ENV in line for line in q.nodes[leader].lines):
                assert time.monotonic() < deadline, q.nodes[leader].lines[-20:]
                time.sleep(0.05)
            time.sleep(0.5)   # the first batch is committed: the other members applied it (held back)
            assert all(_partitions_listed(q.nodes[i].host, q.nodes[i].port, TOPIC) is None for i in q.live())
            q.kill(leader)   # SIGKILL with the transaction half written
            killed_at = time.monotonic()
            hold.unlink()
            new_leader = q.wait_for_leader(exclude=leader)
            deadline = time.monotonic() + 30
            while not any("aborting it" in line for line in q.nodes[new_leader].lines):
                assert time.monotonic() < deadline, q.nodes[new_leader].lines[-20:]
                time.sleep(0.05)
            aborted_s = time.monotonic() - killed_at
            creator.join(60)
            survivors = [i for i in q.nodes if i != leader]
            assert all(_partitions_listed(q.nodes[i].host, q.nodes[i].port, TOPIC) is None for i in survivors)

            # the same CreateTopics, retried, succeeds (the aborted records are gone, the name is free)
            node = q.nodes[survivors[0]]
            deadline = time.monotonic() + 60
            while (answer := _create(node.host, node.port)) != (0, None):
                assert time.monotonic() < deadline, answer
                time.sleep(0.5)
            created_s = time.monotonic() - killed_at
            deadline = time.monotonic() + 30
            while any(_partitions_listed(q.nodes[i].host, q.nodes[i].port, TOPIC) != PARTITIONS for i in survivors):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            # the killed node replays Begin ... (killed) ... Abort, Begin ... End to the same topic
            q.start_node(leader)
            deadline = time.monotonic() + 60
            while _partitions_listed(q.nodes[leader].host, q.nodes[leader].port, TOPIC) != PARTITIONS:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        finally:
            stop.set()
            watcher.join(10)
            if hold.exists():
                hold.unlink()
        half = [(i, n) for i, n in seen if n is not None and n != PARTITIONS]
        assert not half, f"a broker listed a half-created topic: {half[:5]}"
        assert any(n == PARTITIONS for _, n in seen), "the watcher never saw the topic"
        print(f"abort seen {aborted_s:.2f} s after the SIGKILL, the retried CreateTopics done {created_s:.2f} s after "
              f"it; first attempt answered {attempt.get('answer')!r}; {len(seen)} Metadata answers watched")

    # Kafka's decoder reads every member's log: the aborted transaction, and the committed one after it
    for i in q.nodes:
        d = q.metadata_dir(i)
        logs = [str(d / n) for n in sorted(os.listdir(d)) if n.endswith(".log")]
        dump = run_dump(logs, "--cluster-metadata-decoder", "--deep-iteration")
        assert not [line for line in dump.splitlines() if any(m in line for m in ERROR_MARKERS)], dump[-3000:]
        assert "ABORT_TRANSACTION_RECORD" in dump and "Controller failover" in dump, f"node {i}: no abort"
        assert dump.count("klog controller operation") >= 2, f"node {i}: not two BeginTransactionRecords"
        assert "END_TRANSACTION_RECORD" in dump
        abort_at = dump.index("ABORT_TRANSACTION_RECORD")
        assert dump.index("klog controller operation") < abort_at < dump.rindex("klog controller operation")
