"""Edge cases of the transaction APIs a client or tool can send, against klog and Apache Kafka 4.x alike (the same
requests, the same answers): InitProducerId (a producer id without its epoch, the last epoch after a new producer's
bump, a stale epoch while a transaction is open), AddPartitionsToTxn (internal topics, the batched v4+ form),
AddOffsetsToTxn (the empty group id), EndTxn (v4 and v5 answers), TxnOffsetCommit (classic and consumer groups),
ListTransactions (duration filter, bad regex), DescribeTransactions and DescribeProducers (error fields)."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from test_transactions_wire import (  # noqa: F401 - ``wire``: the fixture (klog and Kafka)
    add, add_when_ready, end, end_until_done, find_coordinator, new_topic, wire)

from klog.broker.coordinator.runtime import partition_for
from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

#: what a broker answers while its coordinators load (Kafka, for a few seconds after the first ask)
RETRIABLE = {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
OFFSETS_PARTITIONS = 3   # offsets.topic.num.partitions of test_transactions_wire's CONFIG


def retried(wire: WireClient, key: int, version: int, body: dict[str, Any], code: Any = None) -> Any:
    """The answer once it is not a coordinator's loading error (``code``: where the error code is)."""
    deadline = time.monotonic() + 30
    while True:
        answer = wire.request(key, version, body)
        if (code(answer) if code else answer.error_code) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def new_tid(wire: WireClient) -> str:
    tid = f"edge-{uuid.uuid4().hex[:8]}"
    find_coordinator(wire, tid)
    return tid


def init(wire: WireClient, tid: str | None, version: int = 4, pid: int = -1, epoch: int = -1,
         timeout_ms: int = 60000) -> tuple[int, int, int]:
    answer = retried(wire, ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": tid,
                                                             "transaction_timeout_ms": timeout_ms,
                                                             "producer_id": pid, "producer_epoch": epoch})
    return int(answer.error_code), int(answer.producer_id), int(answer.producer_epoch)


def describe(wire: WireClient, tid: str) -> Any:
    return wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]}).transaction_states[0]


def settled(wire: WireClient, tid: str) -> Any:
    """The id's state once no transaction of it is being completed."""
    deadline = time.monotonic() + 30
    while True:
        state = describe(wire, tid)
        if not state.transaction_state.startswith("Prepare") or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def add_topics(wire: WireClient, tid: str, pid: int, epoch: int, topics: list[tuple[str, list[int]]],
               version: int = 3) -> list[tuple[str, int, int]]:
    """(topic, partition, error) sorted (Kafka answers a refusal's partitions in no set order)."""
    answer = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics]})
    assert answer.error_code == E.NONE and not answer.results_by_transaction
    return sorted((t.name, p.partition_index, p.partition_error_code) for t in answer.results_by_topic_v3_and_below
                  for p in t.results_by_partition)


def add_batched(wire: WireClient, transactions: list[tuple[str, int, int, bool, str, list[int]]],
                version: int = 5) -> list[tuple[str, list[tuple[int, int]]]]:
    """AddPartitionsToTxn v4+ as a partition leader sends it: (transactional id, its partitions' errors) each."""
    answer = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {"transactions": [
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": verify,
         "topics": [{"name": topic, "partitions": partitions}]}
        for tid, pid, epoch, verify, topic, partitions in transactions]})
    assert answer.error_code == E.NONE and not answer.results_by_topic_v3_and_below
    return [(r.transactional_id, [(p.partition_index, p.partition_error_code) for t in r.topic_results
                                  for p in t.results_by_partition]) for r in answer.results_by_transaction]


def add_offsets(wire: WireClient, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
    return int(retried(wire, ApiKey.ADD_OFFSETS_TO_TXN, version, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": group}).error_code)


def end_v5(wire: WireClient, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    answer = wire.request(ApiKey.END_TXN, 5, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                              "committed": commit})
    return int(answer.error_code), int(answer.producer_id), int(answer.producer_epoch)


def test_init_producer_id_refuses_what_kafka_refuses(wire):
    versions = {a.api_key: a.max_version for a in wire.request(ApiKey.API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert versions[ApiKey.INIT_PRODUCER_ID] == 5   # no v6 (KIP-939's keep_prepared_txn) on either
    tid = new_tid(wire)
    assert init(wire, "") == (E.INVALID_REQUEST, -1, -1)
    assert init(wire, "", version=0) == (E.INVALID_REQUEST, -1, -1)
    for timeout in (0, -5, 900001):   # transaction.max.timeout.ms is 900000
        assert init(wire, tid, timeout_ms=timeout) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
    assert init(wire, tid, timeout_ms=900000)[0] == E.NONE
    # a producer id without its epoch (or the reverse) is no KIP-360 recovery: INVALID_REQUEST, idempotent too
    for transactional_id in (new_tid(wire), None):
        assert init(wire, transactional_id, pid=12345) == (E.INVALID_REQUEST, -1, -1)
        assert init(wire, transactional_id, epoch=3) == (E.INVALID_REQUEST, -1, -1)
    # an id the coordinator does not know gets a new producer id whatever the request names
    code, pid, epoch = init(wire, new_tid(wire), pid=12345, epoch=3)
    assert (code, epoch) == (E.NONE, 0) and pid != 12345


def test_a_new_producers_bump_leaves_no_last_epoch_to_retry(wire):
    """InitProducerId without an epoch (a new producer instance) bumps the epoch and forgets the previous one: only
    the producer that named its epoch may retry its bump (Kafka's prepareIncrementProducerEpoch)."""
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    assert init(wire, tid)[1:] == (pid, e0 + 1)
    assert init(wire, tid)[1:] == (pid, e0 + 2)
    assert init(wire, tid, pid=pid, epoch=e0 + 1) == (E.PRODUCER_FENCED, -1, -1)
    assert init(wire, tid, pid=pid + 7, epoch=e0 + 2) == (E.PRODUCER_FENCED, -1, -1)
    assert init(wire, tid, pid=pid, epoch=e0 + 9) == (E.PRODUCER_FENCED, -1, -1)
    assert init(wire, tid, pid=pid, epoch=e0 + 2) == (E.NONE, pid, e0 + 3)
    assert init(wire, tid, pid=pid, epoch=e0 + 2) == (E.NONE, pid, e0 + 3)   # its retry: the same answer
    assert init(wire, tid, pid=pid, epoch=e0 + 1) == (E.PRODUCER_FENCED, -1, -1)
    assert init(wire, tid, version=3, pid=pid, epoch=e0 + 1) == (E.INVALID_PRODUCER_EPOCH, -1, -1)


def test_init_producer_id_with_a_stale_epoch_aborts_the_open_transaction(wire):
    """Kafka checks only the producer id while a transaction is open: a stale epoch fences it too (aborted with a
    bumped epoch, CONCURRENT_TRANSACTIONS until then); another producer id is fenced."""
    topic = new_topic(wire)
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    _, _, e1 = init(wire, tid, pid=pid, epoch=e0)
    assert add_when_ready(wire, tid, pid, e1, topic, [0]) == {0: E.NONE}
    assert init(wire, tid, pid=pid + 1000, epoch=e1)[0] == E.PRODUCER_FENCED
    assert describe(wire, tid).transaction_state == "Ongoing"
    answer = wire.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                       "producer_id": pid, "producer_epoch": e0})
    assert answer.error_code == E.CONCURRENT_TRANSACTIONS
    state = settled(wire, tid)
    assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", e1 + 1)
    assert add(wire, tid, pid, e1, topic, [0]) == {0: E.PRODUCER_FENCED}


def test_add_partitions_to_txn_client_form(wire):
    topic = new_topic(wire)
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    one = [(topic, [0])]
    assert add_topics(wire, tid, pid, e0 + 1, one) == [(topic, 0, E.PRODUCER_FENCED)]
    assert add_topics(wire, tid, pid, e0 + 1, one, version=1) == [(topic, 0, E.INVALID_PRODUCER_EPOCH)]
    assert add_topics(wire, tid, pid + 100, e0, one) == [(topic, 0, E.INVALID_PRODUCER_ID_MAPPING)]
    assert add_topics(wire, "nope-" + tid, pid, e0, one) == [(topic, 0, E.INVALID_PRODUCER_ID_MAPPING)]
    assert add_topics(wire, "", pid, e0, one) == [(topic, 0, E.INVALID_REQUEST)]
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    assert add_topics(wire, tid, pid, e0, [(topic, [0]), (missing, [0])]) == sorted([
        (topic, 0, E.OPERATION_NOT_ATTEMPTED), (missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION)])
    assert add_topics(wire, tid, pid, e0, [(topic, [0, 5, -1])]) == [
        (topic, -1, E.UNKNOWN_TOPIC_OR_PARTITION), (topic, 0, E.OPERATION_NOT_ATTEMPTED),
        (topic, 5, E.UNKNOWN_TOPIC_OR_PARTITION)]
    # no client may add an internal topic's partition (markers in __transaction_state would corrupt it)
    for internal in ("__transaction_state", "__consumer_offsets"):
        assert add_topics(wire, tid, pid, e0, [(topic, [0]), (internal, [0])]) == [
            (internal, 0, E.TOPIC_AUTHORIZATION_FAILED), (topic, 0, E.OPERATION_NOT_ATTEMPTED)]
    assert describe(wire, tid).transaction_state == "Empty"
    assert add_topics(wire, tid, pid, e0, []) == []
    assert add_topics(wire, tid, pid, e0, [(topic, [0, 0]), (topic, [0])]) == [(topic, 0, E.NONE)] * 3
    state = describe(wire, tid)
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]


def test_add_partitions_to_txn_batched_form(wire):
    """AddPartitionsToTxn v4+ (a partition leader's, answered to anyone without an authorizer): one result per
    transaction, verify-only answers TRANSACTION_ABORTABLE for a partition outside the transaction."""
    topic = new_topic(wire)
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    assert add_topics(wire, tid, pid, e0, [(topic, [0])]) == [(topic, 0, E.NONE)]
    assert add_batched(wire, [(tid, pid, e0, True, topic, [0]), ("nope-" + tid, pid, e0, True, topic, [0]),
                              (tid, pid, e0 + 1, True, topic, [0]), ("", pid, e0, True, topic, [0])]) == [
        (tid, [(0, E.NONE)]), ("nope-" + tid, [(0, E.INVALID_PRODUCER_ID_MAPPING)]),
        (tid, [(0, E.PRODUCER_FENCED)]), ("", [(0, E.INVALID_REQUEST)])]
    other = new_topic(wire)
    assert add_batched(wire, [(tid, pid, e0, True, other, [0])]) == [(tid, [(0, E.TRANSACTION_ABORTABLE)])]
    assert add_batched(wire, [(tid, pid, e0, True, "missing-" + tid, [0])]) == [
        (tid, [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert add_batched(wire, [(tid, pid, e0, False, other, [0])], version=4) == [(tid, [(0, E.NONE)])]
    assert sorted(t.topic for t in describe(wire, tid).topics) == sorted([topic, other])


def test_add_offsets_to_txn(wire):
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    assert add_offsets(wire, tid, pid, e0 + 1, "g") == E.PRODUCER_FENCED
    assert add_offsets(wire, tid, pid, e0 + 1, "g", version=1) == E.INVALID_PRODUCER_EPOCH
    assert add_offsets(wire, tid, pid + 9, e0, "g") == E.INVALID_PRODUCER_ID_MAPPING
    assert add_offsets(wire, "nope-" + tid, pid, e0, "g") == E.INVALID_PRODUCER_ID_MAPPING
    assert add_offsets(wire, "", pid, e0, "g") == E.INVALID_REQUEST
    # no group is looked at: an unknown one, and "" (its __consumer_offsets partition) are added
    group = f"never-{uuid.uuid4().hex[:6]}"
    assert add_offsets(wire, tid, pid, e0, group) == E.NONE
    assert add_offsets(wire, tid, pid, e0, "") == E.NONE
    partitions = {p for t in describe(wire, tid).topics if t.topic == "__consumer_offsets" for p in t.partitions}
    assert partitions == {partition_for(group, OFFSETS_PARTITIONS), partition_for("", OFFSETS_PARTITIONS)}
    assert end_until_done(wire, tid, pid, e0, False) == E.NONE


def test_end_txn_v4_and_v5_answers(wire):
    topic = new_topic(wire)
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    assert end(wire, tid, pid, e0, True, 4) == E.INVALID_TXN_STATE      # nothing begun
    assert end(wire, tid, pid, e0, False, 4) == E.INVALID_TXN_STATE
    assert end(wire, tid, pid, e0 + 1, True, 4) == E.PRODUCER_FENCED
    assert end(wire, tid, pid, e0 + 1, True, 1) == E.INVALID_PRODUCER_EPOCH
    assert end(wire, tid, pid + 9, e0, True, 4) == E.INVALID_PRODUCER_ID_MAPPING
    assert end(wire, "", pid, e0, True, 4) == E.INVALID_REQUEST
    assert add_when_ready(wire, tid, pid, e0, topic, [0]) == {0: E.NONE}
    assert end_until_done(wire, tid, pid, e0, False) == E.NONE
    settled(wire, tid)
    assert end(wire, tid, pid, e0, False, 4) == E.NONE                  # a retried abort
    assert end(wire, tid, pid, e0, True, 4) == E.INVALID_TXN_STATE
    # v5 (transaction protocol v2): every end bumps the epoch and answers it
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    assert end_v5(wire, tid, pid, e0, True) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_v5(wire, tid, pid, e0, False) == (E.NONE, pid, e0 + 1)  # an abort of nothing
    settled(wire, tid)
    assert end_v5(wire, tid, pid, e0, False) == (E.NONE, pid, e0 + 1)  # its retry
    assert end_v5(wire, tid, pid, e0 + 1, True) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_v5(wire, tid, pid, e0 + 7, False) == (E.PRODUCER_FENCED, -1, -1)
    assert end_v5(wire, tid, pid + 9, e0 + 1, False) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 of one topic."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def group_ready(wire: WireClient, group: str) -> None:
    deadline = time.monotonic() + 30
    while wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}
                       ).coordinators[0].error_code != E.NONE:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def txn_commit(wire: WireClient, version: int, txn: tuple[str, int, int], group: str, topic: str,
               generation: int = -1, member: str = "", instance: str | None = None) -> int:
    answer = retried(wire, ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": txn[0], "group_id": group, "producer_id": txn[1], "producer_epoch": txn[2],
        "generation_id": generation, "member_id": member, "group_instance_id": instance,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                   "committed_leader_epoch": -1, "committed_metadata": None}]}]},
        code=lambda a: a.topics[0].partitions[0].error_code)
    return int(answer.topics[0].partitions[0].error_code)


def group_txn(wire: WireClient, prefix: str) -> tuple[str, str, tuple[str, int, int]]:
    """A new topic, a new group (its coordinator found) and a new transactional producer (id, producer id, epoch)."""
    topic = new_topic(wire)
    group = f"{prefix}-{uuid.uuid4().hex[:6]}"
    group_ready(wire, group)
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    return topic, group, (tid, pid, e0)


def test_txn_offset_commit_checks(wire):
    topic, group, txn = group_txn(wire, "g")
    tid, pid, e0 = txn
    assert [txn_commit(wire, v, txn, group, topic) for v in (0, 3)] == [E.INVALID_TXN_STATE] * 2   # not added
    assert txn_commit(wire, 4, txn, group, topic) == E.TRANSACTION_ABORTABLE
    assert add_offsets(wire, tid, pid, e0, group) == E.NONE
    assert txn_commit(wire, 3, (tid, pid + 50, e0), group, topic) == E.INVALID_PRODUCER_ID_MAPPING
    assert txn_commit(wire, 3, (tid, pid, e0 + 1), group, topic) == E.INVALID_PRODUCER_EPOCH
    assert txn_commit(wire, 3, txn, group, "missing-" + tid) == E.UNKNOWN_TOPIC_OR_PARTITION
    # an empty transactional id is asked of the transaction coordinator too, never written unverified
    assert [txn_commit(wire, v, ("", pid, e0), group, topic) for v in (3, 4, 5)] == [E.INVALID_REQUEST] * 3
    # the group does not exist: a generation is illegal, a member id at generation -1 is a "simple" group's commit
    assert txn_commit(wire, 3, txn, group, topic, 3, "x") == E.ILLEGAL_GENERATION
    assert txn_commit(wire, 3, txn, group, topic, -1, "x") == E.NONE
    assert end_until_done(wire, tid, pid, e0, False) == E.NONE


def txn_commit_topics(wire: WireClient, version: int, txn: tuple[str, int, int], group: str,
                      topics: list[tuple[str, list[int]]], metadata: str | None = None
                      ) -> list[tuple[str, list[tuple[int, int]]]]:
    """TxnOffsetCommit of ``topics`` (generation -1, no member): (topic, [(partition, error)]) in answer order."""
    answer = wire.request(ApiKey.TXN_OFFSET_COMMIT, version, {
        "transactional_id": txn[0], "group_id": group, "producer_id": txn[1], "producer_epoch": txn[2],
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": 5, "committed_leader_epoch": -1,
                                               "committed_metadata": metadata} for p in ps]} for t, ps in topics]})
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics]


def test_txn_offset_commit_refuses_unknown_topics_before_the_coordinators(wire):
    """Kafka's KafkaApis refuses unknown topics and partitions itself, one entry per topic in the order first
    named, and merges the group coordinator's answers after them; with nothing left, neither coordinator is asked
    (no transaction or group error, no partition added to the transaction at v5)."""
    topic, group, txn = group_txn(wire, "gu")
    tid, pid, e0 = txn
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    unknown = E.UNKNOWN_TOPIC_OR_PARTITION
    assert txn_commit(wire, 3, txn, group, topic) == E.INVALID_TXN_STATE   # (retried while the coordinator loads)
    # outside the transaction: the known partition gets the verification's INVALID_TXN_STATE, after the refusals
    assert txn_commit_topics(wire, 3, txn, group, [(topic, [0, 7]), (missing, [0]), (topic, [1])]) == [
        (topic, [(7, unknown), (1, unknown), (0, E.INVALID_TXN_STATE)]), (missing, [(0, unknown)])]
    assert txn_commit_topics(wire, 3, ("", pid, e0), "", [(missing, [0]), (topic, [3])]) == [
        (missing, [(0, unknown)]), (topic, [(3, unknown)])]
    assert txn_commit_topics(wire, 3, txn, group, [(missing, []), (topic, [])]) == [(missing, [])]
    for topics in ([], [(missing, [0, 1])]):
        assert txn_commit_topics(wire, 5, txn, group, topics) == [(t, [(p, unknown) for p in ps]) for t, ps in topics]
    assert describe(wire, tid).transaction_state == "Empty"
    assert add_offsets(wire, tid, pid, e0, group) == E.NONE
    assert txn_commit_topics(wire, 3, txn, group, [(topic, [0]), (missing, [0]), (topic, [0])]) == [
        (missing, [(0, unknown)]), (topic, [(0, E.NONE), (0, E.NONE)])]
    assert txn_commit_topics(wire, 3, txn, group, [(topic, [0]), (topic, [0])]) == [
        (topic, [(0, E.NONE)]), (topic, [(0, E.NONE)])]
    assert end_until_done(wire, tid, pid, e0, False) == E.NONE


def test_a_txn_offset_commit_at_generation_minus_one_makes_the_group(wire):
    """Kafka's validateTransactionalOffsetCommit makes a "simple" group at once (an empty classic group, kept when
    the transaction aborts): a later commit naming a member at a generation answers UNKNOWN_MEMBER_ID, not the
    ILLEGAL_GENERATION of a group that does not exist."""
    topic, group, txn = group_txn(wire, "gs")
    tid, pid, e0 = txn
    assert add_offsets(wire, tid, pid, e0, group) == E.NONE
    assert txn_commit(wire, 3, txn, group, topic, 3, "x") == E.ILLEGAL_GENERATION
    # made even when nothing is written (every offset's metadata too large)
    assert txn_commit_topics(wire, 3, txn, group, [(topic, [0])], "m" * 4097) == [
        (topic, [(0, E.OFFSET_METADATA_TOO_LARGE)])]
    assert txn_commit(wire, 3, txn, group, topic, 3, "x") == E.UNKNOWN_MEMBER_ID
    assert txn_commit(wire, 3, txn, group, topic) == E.NONE
    assert txn_commit(wire, 3, txn, group, topic, 3, "x") == E.UNKNOWN_MEMBER_ID
    assert txn_commit(wire, 3, txn, group, topic, -1, "x") == E.NONE
    assert end_until_done(wire, tid, pid, e0, False) == E.NONE
    described = wire.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
    assert [(g.error_code, g.group_state, g.protocol_type) for g in described.groups] == [(E.NONE, "Empty", "")]
    settled(wire, tid)
    _, _, e1 = init(wire, tid, pid=pid, epoch=e0)
    assert add_offsets(wire, tid, pid, e1, group) == E.NONE
    assert txn_commit(wire, 3, (tid, pid, e1), group, topic, 3, "x") == E.UNKNOWN_MEMBER_ID
    assert end_until_done(wire, tid, pid, e1, False) == E.NONE


def member_commits(wire: WireClient, group: str, topic: str, generation: int, member: str) -> tuple[str, int, int]:
    """A transaction with the group's offsets partition, and TxnOffsetCommit v3 and v4 of ``member`` at
    ``generation`` (the group's generation or the member's epoch), another generation, another member, no
    generation, and of a producer outside the group: the transaction (id, producer id, epoch)."""
    tid = new_tid(wire)
    _, pid, e0 = init(wire, tid)
    txn = (tid, pid, e0)
    assert add_offsets(wire, tid, pid, e0, group) == E.NONE
    for version in (3, 4):
        assert txn_commit(wire, version, txn, group, topic, generation, member) == E.NONE
        assert txn_commit(wire, version, txn, group, topic, generation + 1, member) == E.ILLEGAL_GENERATION
        assert txn_commit(wire, version, txn, group, topic, generation, "nobody") == E.UNKNOWN_MEMBER_ID
        assert txn_commit(wire, version, txn, group, topic, -1, member) == E.ILLEGAL_GENERATION
        assert txn_commit(wire, version, txn, group, topic) == E.NONE   # a producer outside the group
    return txn


def test_txn_offset_commit_of_a_classic_group_member(wire):
    """A classic group between its JoinGroup and SyncGroup (CompletingRebalance) takes a member's transactional
    offsets (Kafka: its state is not enforced for them); the member and generation are."""
    topic = new_topic(wire)
    group = f"gc-{uuid.uuid4().hex[:6]}"
    group_ready(wire, group)
    body = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}], "reason": None}
    joined = wire.request(ApiKey.JOIN_GROUP, 9, body)
    joined = wire.request(ApiKey.JOIN_GROUP, 9, {**body, "member_id": joined.member_id})
    assert joined.error_code == E.NONE
    member, generation = joined.member_id, joined.generation_id
    txn = member_commits(wire, group, topic, generation, member)
    for version in (3, 4):
        assert txn_commit(wire, version, txn, group, topic, generation, member, "inst") == E.UNKNOWN_MEMBER_ID
    assert txn_commit(wire, 2, txn, group, topic, generation + 1, member) == E.NONE   # v2 sends no generation
    assert end_until_done(wire, txn[0], txn[1], txn[2], False) == E.NONE


def test_txn_offset_commit_of_a_consumer_group_member(wire):
    topic = new_topic(wire)
    group = f"gk-{uuid.uuid4().hex[:6]}"
    group_ready(wire, group)
    member = str(uuid.uuid4())
    beat = wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 5000, "subscribed_topic_names": [topic], "server_assignor": None,
        "topic_partitions": []})
    assert beat.error_code == E.NONE
    epoch = beat.member_epoch
    txn = member_commits(wire, group, topic, epoch, member)
    for version in (3, 4):   # a stale member epoch reads ILLEGAL_GENERATION (TxnOffsetCommit has no STALE_MEMBER_EPOCH)
        assert txn_commit(wire, version, txn, group, topic, epoch - 1, member) == E.ILLEGAL_GENERATION
    assert end_until_done(wire, txn[0], txn[1], txn[2], False) == E.NONE


def list_transactions(wire: WireClient, version: int, prefix: str, **filters: Any) -> tuple[int, list[Any], list]:
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None,
            **filters}
    answer = wire.request(ApiKey.LIST_TRANSACTIONS, version, body)
    return (int(answer.error_code), sorted(answer.unknown_state_filters),
            sorted((s.transactional_id[len(prefix):], s.transaction_state) for s in answer.transaction_states
                   if s.transactional_id.startswith(prefix)))


def test_list_and_describe_transactions(wire):
    topic = new_topic(wire)
    prefix = f"list-{uuid.uuid4().hex[:6]}-"
    pids = []
    for n in range(3):
        find_coordinator(wire, prefix + str(n))
        pids.append(init(wire, prefix + str(n))[1])
    for n in (0, 1):
        assert add_when_ready(wire, prefix + str(n), pids[n], 0, topic, [0]) == {0: E.NONE}
    assert end_until_done(wire, prefix + "1", pids[1], 0, True) == E.NONE
    settled(wire, prefix + "1")
    every = [("0", "Ongoing"), ("1", "CompleteCommit"), ("2", "Empty")]
    for version in (0, 1, 2):
        assert list_transactions(wire, version, prefix) == (E.NONE, [], every)
    assert list_transactions(wire, 0, prefix, state_filters=["Bogus", "Ongoing", "ongoing", "", "Dead"]) == (
        E.NONE, ["", "Bogus", "ongoing"], [("0", "Ongoing")])
    assert list_transactions(wire, 0, prefix, state_filters=["Bogus"]) == (E.NONE, ["Bogus"], [])
    assert list_transactions(wire, 0, prefix, state_filters=["Bogus", "Bogus"]) == (E.NONE, ["Bogus"], [])
    assert list_transactions(wire, 0, prefix, producer_id_filters=[pids[2], -1])[2] == [("2", "Empty")]
    # the duration filter passes every transaction that started longer ago, an Empty id's (start time -1) too
    time.sleep(0.01)
    assert list_transactions(wire, 1, prefix, duration_filter=0)[2] == every
    assert list_transactions(wire, 1, prefix, duration_filter=1)[2] == every
    assert list_transactions(wire, 1, prefix, duration_filter=3_600_000)[2] == [("2", "Empty")]
    assert list_transactions(wire, 1, prefix, duration_filter=0, state_filters=["CompleteCommit"])[2] == [
        ("1", "CompleteCommit")]
    assert list_transactions(wire, 1, prefix, duration_filter=-5)[2] == every
    assert list_transactions(wire, 2, prefix, transactional_id_pattern=prefix + "[01]")[2] == every[:2]
    assert list_transactions(wire, 2, prefix, transactional_id_pattern=prefix[:4])[2] == []   # a full match
    assert list_transactions(wire, 2, prefix, transactional_id_pattern="")[2] == every
    for bad in ("([", r"\p{Alpha}+"):
        assert list_transactions(wire, 2, prefix, transactional_id_pattern=bad, state_filters=["Bogus"]) == (
            E.INVALID_REGULAR_EXPRESSION, [], [])
    states = wire.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [
        prefix + "0", prefix + "2", "nope-" + prefix, ""]}).transaction_states
    assert [(s.error_code, s.transaction_state, s.producer_id == pids[n], s.producer_epoch, s.transaction_timeout_ms)
            for n, s in zip((0, 2), states)] == [(E.NONE, "Ongoing", True, 0, 60000), (E.NONE, "Empty", True, 0, 60000)]
    assert [(t.topic, list(t.partitions)) for t in states[0].topics] == [(topic, [0])]
    assert states[0].transaction_start_time_ms > 0 and states[1].transaction_start_time_ms == -1
    # an error leaves every other field at its default (0)
    assert [(s.error_code, s.transactional_id, s.transaction_state, s.transaction_timeout_ms,
             s.transaction_start_time_ms, s.producer_id, s.producer_epoch, s.topics) for s in states[2:]] == [
        (E.TRANSACTIONAL_ID_NOT_FOUND, "nope-" + prefix, "", 0, 0, 0, 0, []),
        (E.INVALID_REQUEST, "", "", 0, 0, 0, 0, [])]
    assert end_until_done(wire, prefix + "0", pids[0], 0, False) == E.NONE


def test_describe_producers_errors(wire):
    topic = new_topic(wire)
    body = {"topics": [{"name": topic, "partition_indexes": [0, 1, -1]},
                       {"name": "missing-" + topic, "partition_indexes": [0]},
                       {"name": "bad name", "partition_indexes": [0]}]}
    deadline = time.monotonic() + 30   # until the new partition's replica is hosted (Kafka: a moment later)
    answer = wire.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    while answer.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline:
        time.sleep(0.1)
        answer = wire.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    got = [(t.name, p.partition_index, p.error_code, p.error_message, list(p.active_producers))
           for t in answer.topics for p in t.partitions]
    assert got[:3] == [(topic, 0, E.NONE, None, []), (topic, 1, E.UNKNOWN_TOPIC_OR_PARTITION, None, []),
                       (topic, -1, E.UNKNOWN_TOPIC_OR_PARTITION, None, [])]
    # a topic's error carries its message (Kafka's ApiError), a partition's none
    assert got[3] == ("missing-" + topic, 0, E.UNKNOWN_TOPIC_OR_PARTITION,
                      "This server does not host this topic-partition.", [])
    assert got[4][2] == E.INVALID_TOPIC_EXCEPTION and "bad name" in got[4][3]


@pytest.fixture(params=["klog", "kafka"])
def fresh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A broker of its own: no group has been asked for yet, so no ``__consumer_offsets`` exists."""
    from test_transactions_wire import CONFIG

    from klog.testing.kafka import one_broker

    with one_broker(request.param, tmp_path_factory.mktemp(request.param), CONFIG) as servers:
        host, port = servers.split(",")[0].rsplit(":", 1)
        with WireClient(host, int(port)) as client:
            yield client


def test_a_txn_offset_commit_before_the_offsets_topic_exists_is_verified(fresh):
    """TxnOffsetCommit v3 of a group outside the transaction, on a broker without ``__consumer_offsets``: refused
    (Kafka: COORDINATOR_NOT_AVAILABLE, no coordinator until FindCoordinator makes the topic; klog, which makes it
    at the first write: INVALID_TXN_STATE, verified there), never written: the group's offsets stay stable."""
    topic = new_topic(fresh)
    tid = new_tid(fresh)
    _, pid, e0 = init(fresh, tid)
    group = f"late-{uuid.uuid4().hex[:6]}"
    answer = fresh.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": e0, "generation_id": -1,
        "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                   "committed_leader_epoch": -1, "committed_metadata": None}]}]})
    assert answer.topics[0].partitions[0].error_code in (E.COORDINATOR_NOT_AVAILABLE, E.INVALID_TXN_STATE)
    assert add_when_ready(fresh, tid, pid, e0, topic, [0]) == {0: E.NONE}
    assert end_until_done(fresh, tid, pid, e0, True) == E.NONE
    group_ready(fresh, group)
    deadline = time.monotonic() + 30
    while True:
        fetched = retried(fresh, ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}], "require_stable": True},
            code=lambda a: a.groups[0].error_code or a.groups[0].topics[0].partitions[0].error_code).groups[0]
        assert fetched.error_code == E.NONE, fetched
        fetched = fetched.topics[0].partitions[0]
        if fetched.error_code != E.UNSTABLE_OFFSET_COMMIT or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (fetched.error_code, fetched.committed_offset) == (E.NONE, -1)


def test_a_retried_init_producer_id_that_rotated_the_producer_id_gets_the_same_answer(wire):
    """InitProducerId naming the exhausted epoch (Short.MaxValue - 1) moves the id to a new producer id, epoch 0;
    a retry of it (the previous producer id, the exhausted epoch: the producer never got the answer) is answered
    the same, not fenced (Kafka's isValidProducerId and the rotation's recorded last epoch)."""
    tid = new_tid(wire)
    _, pid, epoch = init(wire, tid)
    while epoch < 32766:
        code, _, epoch = init(wire, tid, pid=pid, epoch=epoch)
        assert code == E.NONE
    code, rotated, new_epoch = init(wire, tid, pid=pid, epoch=epoch)
    assert code == E.NONE and rotated != pid and new_epoch == 0
    assert init(wire, tid, pid=pid, epoch=epoch) == (E.NONE, rotated, 0)
    assert init(wire, tid, pid=pid, epoch=epoch - 1) == (E.PRODUCER_FENCED, -1, -1)
    assert init(wire, tid, pid=rotated, epoch=0) == (E.NONE, rotated, 1)
