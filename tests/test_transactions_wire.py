"""The transaction APIs on the wire, against klog and Apache Kafka 4.x alike: the same request sequence must get
the same error codes (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED and its pre-v2 reading INVALID_PRODUCER_EPOCH,
INVALID_TXN_STATE, OPERATION_NOT_ATTEMPTED, CONCURRENT_TRANSACTIONS...), and WriteTxnMarkers (v1 and v2) ends a
producer's transaction on a partition: the last stable offset moves, a read_committed Fetch lists an aborted
transaction, a stale epoch's marker is refused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.records import encode_batch
from klog.testing.process import BrokerProcess
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

CONFIG = {"num.partitions": 1, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
          "auto.create.topics.enable": "false",
          # a timed-out transaction is aborted within half a second of its timeout (test_transactions_v2_wire)
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


@pytest.fixture(scope="module", params=["klog", "kafka"])
def wire(request, tmp_path_factory) -> Iterator[WireClient]:
    if request.param == "klog":
        with BrokerProcess(tmp_path_factory.mktemp("klog-txn-wire"), CONFIG) as proc, \
                WireClient(proc.host, proc.port) as client:
            yield client
        return
    from klog.testing.kafka import KafkaStartError, apache_kafka
    from klog.testing.kafka_tools import kafka_libs_dir

    libs = kafka_libs_dir()
    if libs is None:
        pytest.skip("Apache Kafka jars not installed (tools/install-peers.sh)")
    try:
        with apache_kafka(tmp_path_factory.mktemp("kafka-txn-wire"), config=CONFIG, libs=libs,
                          heap="512m") as kafka:
            host, port = str(kafka).rsplit(":", 1)
            with WireClient(host, int(port)) as client:
                yield client
    except KafkaStartError as exc:   # pragma: no cover
        pytest.skip(str(exc))


def new_topic(wire: WireClient) -> str:
    name = f"w-{uuid.uuid4().hex[:10]}"
    response = wire.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False})
    assert response.topics[0].error_code == E.NONE, response
    deadline = time.monotonic() + 15   # until the broker's metadata has it with a leader (Kafka: a moment later)
    while True:
        meta = wire.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        topic = meta.topics[0]
        if topic.error_code == E.NONE and topic.partitions and topic.partitions[0].leader_id >= 0:
            return name
        assert time.monotonic() < deadline, meta
        time.sleep(0.05)


def find_coordinator(wire: WireClient, tid: str) -> None:
    """FindCoordinator for a transactional id (key type 1) until it answers: Kafka creates __transaction_state on
    the first one and answers NOT_COORDINATOR to the transaction APIs before it is loaded."""
    deadline = time.monotonic() + 30
    while True:
        found = wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
        if found.error_code == E.NONE:
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def init(wire: WireClient, tid: str, version: int = 4, **extra: int) -> object:
    find_coordinator(wire, tid)
    deadline = time.monotonic() + 30
    while True:
        response = wire.request(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": tid, "transaction_timeout_ms": 60000, **extra})
        if response.error_code not in (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                                       E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS) or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def add(wire: WireClient, tid: str, pid: int, epoch: int, topic: str, partitions: list[int],
        version: int = 3) -> dict[int, int]:
    response = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})
    return {p.partition_index: p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_when_ready(wire: WireClient, tid: str, pid: int, epoch: int, topic: str, partitions: list[int]
                   ) -> dict[int, int]:
    """AddPartitionsToTxn retried while the coordinator answers a retriable error (loading, or the previous
    transaction's markers still being written: CONCURRENT_TRANSACTIONS)."""
    retriable = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS}
    deadline = time.monotonic() + 20
    codes = add(wire, tid, pid, epoch, topic, partitions)
    while set(codes.values()) & retriable and time.monotonic() < deadline:
        time.sleep(0.1)
        codes = add(wire, tid, pid, epoch, topic, partitions)
    return codes


def end(wire: WireClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return wire.request(ApiKey.END_TXN, version, {"transactional_id": tid, "producer_id": pid,
                                                  "producer_epoch": epoch, "committed": commit}).error_code


def end_until_done(wire: WireClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    deadline = time.monotonic() + 20
    code = end(wire, tid, pid, epoch, commit)
    while code == E.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
        time.sleep(0.1)
        code = end(wire, tid, pid, epoch, commit)
    return code


def produce_txn(wire: WireClient, tid: str, topic: str, pid: int, epoch: int, seq: int, values: list[bytes]) -> int:
    batch = encode_batch([{"value": v} for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         is_transactional=True)
    deadline = time.monotonic() + 20
    while True:   # a topic just made may not have its leader yet (Kafka answers NOT_LEADER_OR_FOLLOWER)
        response = wire.request(ApiKey.PRODUCE, 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                                    "topic_data": [{"name": topic, "partition_data": [
                                                        {"index": 0, "records": batch}]}]})
        code = response.responses[0].partition_responses[0].error_code
        if code != E.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


def fetch_committed(wire: WireClient, topic: str) -> object:
    response = wire.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                    "last_fetched_epoch": -1, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return response.responses[0].partitions[0]


def test_the_coordinator_answers_the_errors_kafka_answers(wire):
    topic = new_topic(wire)
    tid = f"codes-{uuid.uuid4().hex[:6]}"
    find_coordinator(wire, tid)
    assert add_when_ready(wire, tid, 1234, 0, topic, [0]) == {0: E.INVALID_PRODUCER_ID_MAPPING}   # an unknown id
    first = init(wire, tid)
    assert first.error_code == E.NONE and first.producer_epoch == 0
    pid = first.producer_id
    assert end(wire, tid, pid, 0, True) == E.INVALID_TXN_STATE                  # Empty: nothing to end
    assert add(wire, tid, pid + 1, 0, topic, [0]) == {0: E.INVALID_PRODUCER_ID_MAPPING}
    assert add(wire, tid, pid, 0, topic, [0, 7]) == {0: E.OPERATION_NOT_ATTEMPTED, 7: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add(wire, tid, pid, 0, topic, [0]) == {0: E.NONE}
    assert add(wire, tid, pid, 0, topic, [0]) == {0: E.NONE}                     # already in: idempotent
    second = init(wire, tid)     # aborts the open transaction, then bumps the epoch
    assert (second.error_code, second.producer_id) == (E.NONE, pid) and second.producer_epoch > 0
    epoch = second.producer_epoch
    assert add(wire, tid, pid, 0, topic, [0], version=2) == {0: E.PRODUCER_FENCED}
    assert add(wire, tid, pid, 0, topic, [0], version=1) == {0: E.INVALID_PRODUCER_EPOCH}
    assert end(wire, tid, pid, 0, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert add_when_ready(wire, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    assert end_until_done(wire, tid, pid, epoch, True) == E.NONE
    assert end_until_done(wire, tid, pid, epoch, True) == E.NONE                  # a retried commit
    assert end(wire, tid, pid, epoch, False) == E.INVALID_TXN_STATE               # an abort after it
    offsets = wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": tid, "producer_id": pid,
                                                          "producer_epoch": epoch - 1, "group_id": "g"})
    assert offsets.error_code == E.PRODUCER_FENCED
    too_long = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid,
                                                         "transaction_timeout_ms": 900001})
    assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_write_txn_markers_end_a_transaction_on_the_partition(wire):
    topic = new_topic(wire)
    tid = f"markers-{uuid.uuid4().hex[:6]}"
    init(wire, tid)
    first = init(wire, tid)      # epoch 1: a marker of epoch 0 is stale
    pid, epoch = first.producer_id, first.producer_epoch
    assert epoch == 1
    assert add(wire, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    assert produce_txn(wire, tid, topic, pid, epoch, 0, [b"a", b"b"]) == E.NONE
    open_fetch = fetch_committed(wire, topic)
    assert (open_fetch.high_watermark, open_fetch.last_stable_offset) == (2, 0)
    for version in (1, 2):   # a marker with an older epoch than the partition knows is refused
        stale = wire.request(ApiKey.WRITE_TXN_MARKERS, version, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch - 1, "transaction_result": False,
            "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]})
        assert stale.markers[0].topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
    unknown = wire.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
        "topics": [{"name": f"nope-{uuid.uuid4().hex[:6]}", "partition_indexes": [0]}], "coordinator_epoch": 0}]})
    assert unknown.markers[0].topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    # the coordinator's abort: its markers make the two records an aborted transaction
    assert end_until_done(wire, tid, pid, epoch, False) == E.NONE
    deadline = time.monotonic() + 10
    done = fetch_committed(wire, topic)
    while done.last_stable_offset != 3 and time.monotonic() < deadline:
        time.sleep(0.1)
        done = fetch_committed(wire, topic)
    assert (done.high_watermark, done.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, 0)]
    # a marker written straight to the partition (as a coordinator does) after a new transaction
    assert add_when_ready(wire, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    assert produce_txn(wire, tid, topic, pid, epoch, 2, [b"c"]) == E.NONE
    direct = wire.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
        "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]})
    assert direct.markers[0].topics[0].partitions[0].error_code == E.NONE
    after = fetch_committed(wire, topic)
    assert (after.high_watermark, after.last_stable_offset) == (5, 5)


def test_a_transactional_batch_for_a_partition_outside_the_transaction_is_refused(wire):
    """KIP-890 part 1 (transaction.partition.verification.enable, on by default): the partition leader asks the
    coordinator before a producer's first transactional batch on a partition."""
    topic = new_topic(wire)
    tid = f"verify-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    assert produce_txn(wire, tid, topic, pid, epoch, 0, [b"not-added"]) == E.INVALID_TXN_STATE
    assert add_when_ready(wire, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    assert produce_txn(wire, tid, topic, pid, epoch, 0, [b"added"]) == E.NONE
    assert produce_txn(wire, tid, topic, pid, epoch + 1, 1, [b"other-epoch"]) != E.NONE
    assert end_until_done(wire, tid, pid, epoch, True) == E.NONE
    deadline = time.monotonic() + 10   # the COMMIT marker is written after EndTxn is answered
    done = fetch_committed(wire, topic)
    while (done.last_stable_offset, done.high_watermark) != (2, 2) and time.monotonic() < deadline:
        time.sleep(0.05)
        done = fetch_committed(wire, topic)
    assert (done.last_stable_offset, done.high_watermark) == (2, 2)
    # the transaction is over: a late batch of it cannot open a new one on the partition (until the coordinator
    # has written CompleteCommit, after the markers, the leader answers the retriable NOT_ENOUGH_REPLICAS)
    deadline = time.monotonic() + 10
    late = produce_txn(wire, tid, topic, pid, epoch, 1, [b"late"])
    while late == E.NOT_ENOUGH_REPLICAS and time.monotonic() < deadline:
        time.sleep(0.05)
        late = produce_txn(wire, tid, topic, pid, epoch, 1, [b"late"])
    assert late == E.INVALID_TXN_STATE
