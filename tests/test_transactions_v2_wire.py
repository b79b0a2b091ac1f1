"""Transaction protocol v2 (KIP-890 part 2, ``transaction.version`` 2, the default of a new cluster on klog and on
Apache Kafka 4.3) on the wire, the same request sequence against both: EndTxn v5 bumps the producer epoch at every
commit and abort and answers it, Produce v12 adds the partition to the transaction from the leader (no
AddPartitionsToTxn from the client), and what Jepsen's analysis of the classic protocol found (a delayed marker,
EndTxn or produce retry of transaction N landing on transaction N+1) cannot happen: each is refused and N+1's
records stay exactly as N+1 ends them for read_committed readers."""

from __future__ import annotations

import time
import uuid

import pytest
from test_transactions_wire import fetch_committed, init, new_topic, wire  # noqa: F401 - ``wire``: the fixture

from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.records import decode_batches, encode_batch
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(120)

#: how long a test waits for a condition that follows an answer (a marker written after EndTxn answered)
SETTLE_S = 15.0


def produce_v12(wire: WireClient, tid: str | None, topic: str, pid: int, epoch: int, seq: int,
                values: list[bytes], transactional: bool = True) -> int:
    """A transactional batch with Produce v12: the partition leader adds the partition to the transaction. Retried
    while the previous transaction's markers are being written (CONCURRENT_TRANSACTIONS, as Kafka answers v12)."""
    batch = encode_batch([{"value": v} for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         is_transactional=transactional)
    deadline = time.monotonic() + SETTLE_S
    while True:
        response = wire.request(ApiKey.PRODUCE, 12, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                                     "topic_data": [{"name": topic, "partition_data": [
                                                         {"index": 0, "records": batch}]}]})
        code = response.responses[0].partition_responses[0].error_code
        if code not in (E.NOT_LEADER_OR_FOLLOWER, E.CONCURRENT_TRANSACTIONS, E.NOT_ENOUGH_REPLICAS) \
                or time.monotonic() > deadline:
            return int(code)
        time.sleep(0.05)


def end_v5(wire: WireClient, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    """EndTxn v5: (error, producer id, producer epoch), retried while the coordinator answers
    CONCURRENT_TRANSACTIONS."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        r = wire.request(ApiKey.END_TXN, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                             "committed": commit})
        if r.error_code != E.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return int(r.error_code), int(r.producer_id), int(r.producer_epoch)
        time.sleep(0.05)


def committed_values(wire: WireClient, topic: str) -> list[bytes]:
    """What a read_committed consumer reads (below the LSO, aborted transactions dropped)."""
    fetched = fetch_committed(wire, topic)
    aborted = {(a.producer_id, a.first_offset) for a in fetched.aborted_transactions or []}
    values: list[bytes] = []
    aborted_pids: set[int] = set()
    for batch in decode_batches(bytes(fetched.records or b""), allow_partial_trailing=True):
        if batch.is_control:
            aborted_pids.discard(batch.producer_id)
            continue
        if (batch.producer_id, batch.base_offset) in aborted:
            aborted_pids.add(batch.producer_id)
        if batch.producer_id in aborted_pids:
            continue
        values.extend(bytes(r.value) for r in batch.records if r.value is not None)
    return values


def wait_stable(wire: WireClient, topic: str, end: int) -> None:
    """Until the partition's last stable offset reaches ``end`` (the transaction's marker is written)."""
    deadline = time.monotonic() + SETTLE_S
    while fetch_committed(wire, topic).last_stable_offset < end:
        assert time.monotonic() < deadline, fetch_committed(wire, topic)
        time.sleep(0.05)


def marker(wire: WireClient, pid: int, epoch: int, topic: str, commit: bool) -> int:
    """A WriteTxnMarkers v2 marker of transaction protocol v2, as a coordinator sends it (a delayed one here)."""
    r = wire.request(ApiKey.WRITE_TXN_MARKERS, 2, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0, "transaction_version": 2}]})
    return int(r.markers[0].topics[0].partitions[0].error_code)


def test_finalized_transaction_version_is_2_on_a_new_cluster(wire):
    versions = wire.request(ApiKey.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    finalized = {f.name: f.max_version_level for f in versions.finalized_features}
    assert finalized.get("transaction.version") == 2
    advertised = {a.api_key: a.max_version for a in versions.api_keys}
    assert advertised[ApiKey.END_TXN] >= 5 and advertised[ApiKey.PRODUCE] >= 12
    assert advertised[ApiKey.TXN_OFFSET_COMMIT] >= 5


def test_end_txn_v5_bumps_the_epoch_at_every_end_and_recognises_its_retries(wire):
    topic = new_topic(wire)
    tid = f"v2-end-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5)
    pid, epoch = first.producer_id, first.producer_epoch
    assert (first.error_code, epoch) == (E.NONE, 0)
    assert end_v5(wire, tid, pid, 0, True) == (E.INVALID_TXN_STATE, -1, -1)     # Empty: nothing to commit
    assert produce_v12(wire, tid, topic, pid, 0, 0, [b"a"]) == E.NONE           # no AddPartitionsToTxn
    assert end_v5(wire, tid, pid, 0, True) == (E.NONE, pid, 1)                  # the answer carries the bump
    assert end_v5(wire, tid, pid, 0, True) == (E.NONE, pid, 1)                  # a retry: answered again
    assert end_v5(wire, tid, pid, 0, False)[0] == E.INVALID_TXN_STATE           # a retry of the other outcome
    assert end_v5(wire, tid, pid, 1, True)[0] == E.INVALID_TXN_STATE            # nothing open to commit
    assert end_v5(wire, tid, pid, 7, True)[0] == E.PRODUCER_FENCED              # an epoch it never had
    assert end_v5(wire, tid, pid + 1, 1, True)[0] == E.INVALID_PRODUCER_ID_MAPPING
    assert end_v5(wire, tid, pid, 1, False) == (E.NONE, pid, 2)                 # v2 may abort nothing: a bump
    assert produce_v12(wire, tid, topic, pid, 2, 0, [b"b"]) == E.NONE
    assert end_v5(wire, tid, pid, 2, False) == (E.NONE, pid, 3)
    wait_stable(wire, topic, 4)   # a, COMMIT, b, ABORT
    assert committed_values(wire, topic) == [b"a"]
    described = describe(wire, tid)
    assert (described.producer_id, described.producer_epoch) == (pid, 3)


def test_late_marker_end_txn_and_produce_of_transaction_n_do_not_touch_transaction_n_plus_1(wire):
    """Jepsen's anomalies of the classic protocol: a delayed COMMIT/ABORT marker, EndTxn or produce retry of a
    finished transaction reaching the partition or the coordinator while the producer's next transaction runs."""
    topic = new_topic(wire)
    tid = f"v2-late-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5)
    pid, epoch = first.producer_id, first.producer_epoch
    # transaction N: committed, its markers carry the bumped epoch
    assert produce_v12(wire, tid, topic, pid, epoch, 0, [b"n"]) == E.NONE
    code, _, next_epoch = end_v5(wire, tid, pid, epoch, True)
    assert (code, next_epoch) == (E.NONE, epoch + 1)
    wait_stable(wire, topic, 2)
    # transaction N+1 opens on the same partition
    assert produce_v12(wire, tid, topic, pid, next_epoch, 0, [b"n+1"]) == E.NONE
    # N's marker delivered again, late (a coordinator retry): refused, N+1 stays open
    assert marker(wire, pid, next_epoch, topic, True) == E.INVALID_PRODUCER_EPOCH
    assert marker(wire, pid, next_epoch, topic, False) == E.INVALID_PRODUCER_EPOCH
    assert marker(wire, pid, epoch, topic, True) == E.INVALID_PRODUCER_EPOCH
    assert fetch_committed(wire, topic).last_stable_offset == 2
    # N's EndTxn retried late reaches the coordinator during N+1: fenced, N+1 untouched
    assert end_v5(wire, tid, pid, epoch, True)[0] == E.PRODUCER_FENCED
    assert end_v5(wire, tid, pid, epoch, False)[0] == E.PRODUCER_FENCED
    # N's batch retried late (its epoch is below the partition's): refused, not appended to N+1
    assert produce_v12(wire, tid, topic, pid, epoch, 1, [b"n-late"]) == E.INVALID_PRODUCER_EPOCH
    # N+1 ends as its producer decides: aborted, so read_committed readers see N's record only
    assert end_v5(wire, tid, pid, next_epoch, False) == (E.NONE, pid, next_epoch + 1)
    wait_stable(wire, topic, 4)
    assert committed_values(wire, topic) == [b"n"]
    fetched = fetch_committed(wire, topic)
    assert [(a.producer_id, a.first_offset) for a in fetched.aborted_transactions] == [(pid, 2)]
    # and a late ABORT marker of N+1 cannot end N+2 either
    assert produce_v12(wire, tid, topic, pid, next_epoch + 1, 0, [b"n+2"]) == E.NONE
    assert marker(wire, pid, next_epoch + 1, topic, False) == E.INVALID_PRODUCER_EPOCH
    assert end_v5(wire, tid, pid, next_epoch + 1, True)[0] == E.NONE
    wait_stable(wire, topic, 6)
    assert committed_values(wire, topic) == [b"n", b"n+2"]


def describe(wire: WireClient, tid: str) -> object:
    return wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def test_a_new_producer_instance_fences_an_open_transaction(wire):
    """InitProducerId while a v2 transaction is open: the coordinator aborts it with the epoch fenced (one bump,
    as Kafka 4.3: the fence's bump is the abort's; CONCURRENT_TRANSACTIONS until done), then the new instance
    gets the next epoch."""
    topic = new_topic(wire)
    tid = f"v2-fence-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5)
    pid = first.producer_id
    assert produce_v12(wire, tid, topic, pid, 0, 0, [b"zombie"]) == E.NONE
    second = init(wire, tid, version=5)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (E.NONE, pid, 2)
    assert end_v5(wire, tid, pid, 0, True)[0] == E.PRODUCER_FENCED
    assert produce_v12(wire, tid, topic, pid, 0, 1, [b"zombie-late"]) == E.INVALID_PRODUCER_EPOCH
    wait_stable(wire, topic, 2)
    assert committed_values(wire, topic) == []


def test_a_timed_out_v2_transaction_is_aborted_past_the_producers_epoch(wire):
    topic = new_topic(wire)
    tid = f"v2-timeout-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5, transaction_timeout_ms=1000)
    pid = first.producer_id
    assert produce_v12(wire, tid, topic, pid, 0, 0, [b"slow"]) == E.NONE
    deadline = time.monotonic() + SETTLE_S
    while describe(wire, tid).transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, describe(wire, tid)
        time.sleep(0.1)
    assert describe(wire, tid).producer_epoch == 1   # fenced: the abort's bump
    # the producer's commit with its old epoch reads as a retry of the end that bumped it, of the other outcome
    assert end_v5(wire, tid, pid, 0, True)[0] == E.INVALID_TXN_STATE
    assert produce_v12(wire, tid, topic, pid, 0, 1, [b"slow-late"]) == E.INVALID_PRODUCER_EPOCH
    wait_stable(wire, topic, 2)
    assert committed_values(wire, topic) == []


def test_a_broker_verify_only_add_partitions_answers_transaction_abortable_outside_the_transaction(wire):
    """AddPartitionsToTxn v5 from a partition leader (verify only, for protocol v1 producers): a partition outside
    the transaction is TRANSACTION_ABORTABLE (Produce v11 answers it as is, older versions INVALID_TXN_STATE)."""
    topic = new_topic(wire)
    tid = f"v2-verify-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5)
    pid, epoch = first.producer_id, first.producer_epoch

    def verify(epoch: int) -> int:
        r = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": [{
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
            "topics": [{"name": topic, "partitions": [0]}]}]})
        return int(r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code)

    assert verify(epoch) == E.TRANSACTION_ABORTABLE
    assert verify(epoch + 1) == E.PRODUCER_FENCED

    def produce_at(version: int) -> int:   # a protocol v1 producer's batch, its partition never added
        batch = encode_batch([{"value": b"v1"}], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                             is_transactional=True)
        r = wire.request(ApiKey.PRODUCE, version, {"transactional_id": tid, "acks": -1, "timeout_ms": 5000,
                                                   "topic_data": [{"name": topic, "partition_data": [
                                                       {"index": 0, "records": batch}]}]})
        return int(r.responses[0].partition_responses[0].error_code)

    # the leader verifies (KIP-890 part 1): TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE before
    assert produce_at(11) == E.TRANSACTION_ABORTABLE
    assert produce_at(10) == E.INVALID_TXN_STATE
    assert produce_v12(wire, tid, topic, pid, epoch, 0, [b"x"]) == E.NONE
    assert verify(epoch) == E.NONE
    assert end_v5(wire, tid, pid, epoch, True)[0] == E.NONE


#: Kafka's isProducerEpochExhausted: Short.MaxValue - 1
EXHAUSTED_EPOCH = 32766


@pytest.mark.long
@pytest.mark.timeout(900)
def test_an_end_that_exhausts_the_epochs_moves_the_producer_to_its_next_producer_id(wire):
    """A long-lived v2 producer bumps its epoch at every transaction: the end that reaches the last epoch writes
    its markers with it and answers a new producer id, epoch 0 (its retry is answered the same); the producer goes
    on with it. (InitProducerId with the producer's id and epoch walks the epoch up to the exhausted one first.)"""
    topic = new_topic(wire)
    tid = f"v2-exhaust-{uuid.uuid4().hex[:6]}"
    first = init(wire, tid, version=5)
    pid, epoch = first.producer_id, first.producer_epoch
    while epoch < EXHAUSTED_EPOCH:
        bumped = wire.request(ApiKey.INIT_PRODUCER_ID, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                           "producer_id": pid, "producer_epoch": epoch})
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (E.NONE, pid, epoch + 1)
        epoch = bumped.producer_epoch
    assert produce_v12(wire, tid, topic, pid, epoch, 0, [b"last"]) == E.NONE
    code, next_pid, next_epoch = end_v5(wire, tid, pid, epoch, True)
    assert code == E.NONE and next_pid != pid and next_epoch == 0
    assert end_v5(wire, tid, pid, epoch, True) == (E.NONE, next_pid, 0)    # its retry
    assert produce_v12(wire, tid, topic, next_pid, 0, 0, [b"first"]) == E.NONE
    assert end_v5(wire, tid, next_pid, 0, True) == (E.NONE, next_pid, 1)
    wait_stable(wire, topic, 4)
    assert committed_values(wire, topic) == [b"last", b"first"]


def txn_offset_commit(wire: WireClient, version: int, tid: str, pid: int, epoch: int, group: str, topic: str,
                      offset: int) -> int:
    """TxnOffsetCommit of one offset (no generation: a producer outside the group), retried while the group's
    coordinator is not ready or the previous transaction is still ending."""
    retriable = {E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
                 E.CONCURRENT_TRANSACTIONS}
    deadline = time.monotonic() + SETTLE_S
    while True:
        r = wire.request(ApiKey.TXN_OFFSET_COMMIT, version, {
            "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        code = int(r.topics[0].partitions[0].error_code)
        if code not in retriable or time.monotonic() > deadline:
            return code
        time.sleep(0.1)


def committed_offset(wire: WireClient, group: str, topic: str) -> int:
    """The group's stable committed offset (OffsetFetch v8 require_stable), once no transaction holds it."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        r = wire.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}], "require_stable": True})
        partition = r.groups[0].topics[0].partitions[0]
        if partition.error_code != E.UNSTABLE_OFFSET_COMMIT or time.monotonic() > deadline:
            assert partition.error_code == E.NONE, r
            return int(partition.committed_offset)
        time.sleep(0.05)


def test_txn_offset_commit_v5_joins_the_transaction_without_add_offsets_to_txn(wire):
    """TxnOffsetCommit v5 (protocol v2): the group coordinator's partition is added to the producer's transaction
    on the server; v4 without AddOffsetsToTxn is only verified, and refused. The offsets count at COMMIT only."""
    topic = new_topic(wire)
    tid = f"v2-offsets-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 30   # the group's coordinator (Kafka creates __consumer_offsets on the first ask)
    while wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}
                       ).coordinators[0].error_code != E.NONE:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    first = init(wire, tid, version=5)
    pid = first.producer_id
    assert txn_offset_commit(wire, 4, tid, pid, 0, group, topic, 3) == E.TRANSACTION_ABORTABLE
    assert txn_offset_commit(wire, 5, tid, pid, 0, group, topic, 5) == E.NONE
    assert end_v5(wire, tid, pid, 0, True) == (E.NONE, pid, 1)
    assert committed_offset(wire, group, topic) == 5
    assert txn_offset_commit(wire, 5, tid, pid, 1, group, topic, 9) == E.NONE
    assert txn_offset_commit(wire, 5, tid, pid, 0, group, topic, 7) == E.INVALID_PRODUCER_EPOCH   # a late one
    assert end_v5(wire, tid, pid, 1, False) == (E.NONE, pid, 2)
    assert committed_offset(wire, group, topic) == 5
