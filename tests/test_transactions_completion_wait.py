"""klog's transaction coordinator holds a request about a transactional id that arrives while the id's previous
transaction has its markers written (``klog.transaction.completion.wait.ms``) and answers it once that transaction is
complete, where Kafka answers CONCURRENT_TRANSACTIONS at once and the client retries 20 ms later (librdkafka's and
the Java client's AddPartitionsToTxn backoff: a producer starting its next transaction at once paid those 20 ms
about once every hundred commits, klog's ~22 ms commit p99 in benches/bench_transactions.py). With the wait set to
0 klog answers as Kafka does, which the second test shows for an AddPartitionsToTxn pipelined behind the EndTxn
(read before the markers can be written, however fast the coordinator writes them)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from klog.protocol import ApiKey, encode_request
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient
from test_transactions_wire import CONFIG, add_when_ready, init

pytestmark = pytest.mark.timeout(120)

#: partitions per transaction: their markers take the coordinator a moment after EndTxn is answered
PARTITIONS = 16
ROUNDS = 30


def _wire(tmp_path, wait_ms: int) -> Iterator[WireClient]:
    with BrokerProcess(tmp_path, {**CONFIG, "klog.transaction.completion.wait.ms": wait_ms}) as proc, \
            WireClient(proc.host, proc.port) as client:
        yield client


def _new_topic(wire: WireClient) -> str:
    name = f"w-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert response.topics[0].error_code == E.NONE, response
    deadline = time.monotonic() + 15
    while True:
        meta = wire.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        partitions = meta.topics[0].partitions
        if len(partitions) == PARTITIONS and all(p.leader_id >= 0 for p in partitions):
            return name
        assert time.monotonic() < deadline, meta
        time.sleep(0.05)


def _commit_and_add(wire: WireClient, tid: str, pid: int, epoch: int, topic: str, partitions: list[int]
                    ) -> tuple[int, dict[int, int]]:
    """EndTxn (commit) and the next AddPartitionsToTxn pipelined in one write, so the coordinator reads the second
    while the first transaction's markers are still to be written however fast it writes them: EndTxn's error
    code and the AddPartitionsToTxn's per partition."""
    end_body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    add_body = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": partitions}]}
    end_id, add_id = wire.next_correlation_id(), wire.next_correlation_id()
    wire.send_raw(encode_request(ApiKey.END_TXN, 3, end_id, wire.client_id, end_body)
                  + encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_id, wire.client_id, add_body))
    got_end, ended = wire.receive(ApiKey.END_TXN, 3)
    got_add, added = wire.receive(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    assert (got_end, got_add) == (end_id, add_id)
    return ended.error_code, {p.partition_index: p.partition_error_code
                              for t in added.results_by_topic_v3_and_below for p in t.results_by_partition}


def _next_transaction_answers(wire: WireClient) -> list[int]:
    """Commit a transaction over PARTITIONS partitions and add them to the next one in the same write: the first
    error code of each such AddPartitionsToTxn."""
    topic = _new_topic(wire)
    init_response = init(wire, "completion-wait")
    assert init_response.error_code == E.NONE, init_response
    pid, epoch = init_response.producer_id, init_response.producer_epoch
    partitions = list(range(PARTITIONS))
    assert set(add_when_ready(wire, "completion-wait", pid, epoch, topic, partitions).values()) == {E.NONE}
    answers = []
    for _ in range(ROUNDS):
        ended, codes = _commit_and_add(wire, "completion-wait", pid, epoch, topic, partitions)
        assert ended == E.NONE
        answers.append(max(codes.values()))
        if answers[-1]:
            codes = add_when_ready(wire, "completion-wait", pid, epoch, topic, partitions)
            assert set(codes.values()) == {E.NONE}, codes
    return answers


def test_adding_partitions_while_the_previous_commit_writes_its_markers_waits_for_them(tmp_path) -> None:
    for wire in _wire(tmp_path, 100):
        assert _next_transaction_answers(wire) == [E.NONE] * ROUNDS


def test_without_the_wait_the_same_sequence_is_answered_concurrent_transactions(tmp_path) -> None:
    for wire in _wire(tmp_path, 0):
        answers = _next_transaction_answers(wire)
    assert answers == [E.CONCURRENT_TRANSACTIONS] * ROUNDS, answers
