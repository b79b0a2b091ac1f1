"""A transactional batch verified by its coordinator before a marker of its producer landed on the partition is not
appended after that marker (Kafka's VerificationGuard, KIP-890 part 1).

A leader asks the producer's transaction coordinator whether the partition is in the producer's transaction before
it appends the producer's first transactional batch there (``transaction.partition.verification.enable``); with the
coordinator on another broker that is a round trip. Under transaction protocol 1 a client's abort does not bump
the epoch: if its ABORT marker reaches the partition while the verification's answer is on its way, the batch
verified for the aborted transaction was appended after the marker and opened a transaction no marker would ever
close (the partition's last stable offset stuck there: read_committed consumers and the log cleaner stop). Here
the verification's answer is held back (in process, around the broker's real coordinator) while the client
aborts; the batch must then be refused with INVALID_TXN_STATE and leave no transaction open. A TxnOffsetCommit's
write to its group's ``__consumer_offsets`` partition is verified and guarded the same way."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import klog
from klog.protocol import ApiKey
from klog.protocol.error_codes import ErrorCode as E
from klog.testing.wire import WireClient
from test_transactions_v2_wire import committed_offset, txn_offset_commit
from test_transactions_wire import add, end, init, new_topic, produce_txn

pytestmark = pytest.mark.timeout(120)

# the Python Produce path (the native one verifies a local coordinator's answer in the same turn as its append)
CONFIG = {"klog.produce.native.enable": False, "klog.network.native.front.enable": False,
          "transaction.partition.verification.enable": True, "transaction.state.log.num.partitions": 1}


def test_a_batch_verified_before_its_producers_abort_marker_landed_is_refused_and_opens_no_transaction():
    from klog.client.loop_thread import call_in_loop
    with klog.Broker(config=CONFIG) as broker, WireClient(broker.host, broker.port) as client, \
            WireClient(broker.host, broker.port) as producer_conn:
        server = broker._require()
        tid = "guarded"
        topic, pid, epoch = transaction_on_a_new_topic(client, tid)

        produced = aborted_while_verifying(server, client, tid, pid, epoch, topic, 0, lambda: produce_txn(
            producer_conn, tid, topic, pid, epoch, 0, [b"late"]))
        assert produced == [E.INVALID_TXN_STATE]
        open_txns = call_in_loop(server.loop, lambda: server.state.producers.ongoing_txns(topic, 0), timeout=30)
        assert open_txns == {}
        # the partition's last stable offset is its end: a read_committed ListOffsets answers it
        listed = client.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == broker_log_end(server, topic)


def test_txn_offsets_verified_before_their_producers_abort_marker_landed_are_refused_and_open_no_transaction():
    """TxnOffsetCommit (v3, transaction protocol 1): the group's __consumer_offsets partition is verified with the
    transaction coordinator before the offsets are written. Written after the abort's marker, they would be a
    transaction no marker closes: OffsetFetch with require_stable answering UNSTABLE_OFFSET_COMMIT for ever, the
    partition's last stable offset stuck. A commit before (nothing held back) shows the unguarded path works."""
    from klog.client.loop_thread import call_in_loop
    from klog.broker.coordinator.runtime import partition_for
    with klog.Broker(config=CONFIG) as broker, WireClient(broker.host, broker.port) as client, \
            WireClient(broker.host, broker.port) as producer_conn:
        server = broker._require()
        topic = new_topic(client)
        tid, group = "guarded-offsets", "guarded-group"
        initiated: Any = init(client, tid)
        assert initiated.error_code == E.NONE
        pid, epoch = initiated.producer_id, initiated.producer_epoch
        transactions = server.state.transactions
        offsets_partition = partition_for(group, transactions.offsets_partitions)

        def add_offsets() -> int:
            return int(client.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": tid, "producer_id": pid,
                                                                     "producer_epoch": epoch, "group_id": group}
                                      ).error_code)

        assert add_offsets() == E.NONE
        assert txn_offset_commit(producer_conn, 3, tid, pid, epoch, group, topic, 5) == E.NONE
        assert end(client, tid, pid, epoch, commit=True) == E.NONE
        assert committed_offset(client, group, topic) == 5   # once the COMMIT marker is written

        deadline = time.monotonic() + 20
        while (code := add_offsets()) == E.CONCURRENT_TRANSACTIONS:   # the commit's markers still being written
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert code == E.NONE
        committed = aborted_while_verifying(server, client, tid, pid, epoch, OFFSETS_TOPIC, offsets_partition,
                                            lambda: txn_offset_commit(producer_conn, 3, tid, pid, epoch, group,
                                                                      topic, 9))
        assert committed == [E.INVALID_TXN_STATE]   # Kafka: the log refuses the write its guard no longer holds
        open_txns = call_in_loop(server.loop, lambda: server.state.producers.ongoing_txns(OFFSETS_TOPIC,
                                                                                          offsets_partition),
                                 timeout=30)
        assert open_txns == {}
        assert stable_offset(client, group, topic) == (E.NONE, 5)   # the first transaction's, nothing pending
        listed = client.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": OFFSETS_TOPIC, "partitions": [{"partition_index": offsets_partition,
                                                    "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == broker_log_end(server, OFFSETS_TOPIC, offsets_partition)


def test_concurrent_verifications_of_a_partition_append_in_sequence_order_and_share_one_guard():
    """Two Produce requests of one producer in flight on a partition its transaction has not written yet share the
    partition's verification guard (Kafka: one VerificationStateEntry per producer, which keeps the lowest sequence
    being verified and is cleared by the append of a transactional batch or marker, not by a refused one). The
    coordinator's answer to the second comes back first: its batch (sequence 1) is refused OUT_OF_ORDER_SEQUENCE_NUMBER
    (the old code appended it ahead of sequence 0). The first, answered next, is appended (with that refusal alone,
    the old guard answered INVALID_TXN_STATE, an abortable error: the refused request had ended the guard both
    held); the second's retry then joins the transaction and the commit makes both readable."""
    from klog.client.loop_thread import call_in_loop
    with klog.Broker(config=CONFIG) as broker, WireClient(broker.host, broker.port) as client, \
            WireClient(broker.host, broker.port) as first_conn, WireClient(broker.host, broker.port) as second_conn:
        server = broker._require()
        tid = "shared-guard"
        topic, pid, epoch = transaction_on_a_new_topic(client, tid)
        with verifications_held_back(server) as held:
            first = Answer(lambda: produce_txn(first_conn, tid, topic, pid, epoch, 0, [b"first"]))
            held.until_waiting(1)
            second = Answer(lambda: produce_txn(second_conn, tid, topic, pid, epoch, 1, [b"second"]))
            held.until_waiting(2)
            held.release(1)   # the second request's answer first
            assert second.get() == E.OUT_OF_ORDER_SEQUENCE_NUMBER   # old: NONE, ahead of sequence 0
            held.release(0)
            assert first.get() == E.NONE   # old guard, once the second is refused: INVALID_TXN_STATE
        assert produce_txn(second_conn, tid, topic, pid, epoch, 1, [b"second"]) == E.NONE   # the retry joins
        assert end(client, tid, pid, epoch, commit=True) == E.NONE
        deadline = time.monotonic() + 20
        while call_in_loop(server.loop, lambda: server.state.producers.ongoing_txns(topic, 0), timeout=30):
            assert time.monotonic() < deadline   # until the COMMIT marker is on the partition
            time.sleep(0.02)
        assert broker_log_end(server, topic) == 3   # the two batches and the marker
        listed = client.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].offset == 3


def transaction_on_a_new_topic(client: WireClient, tid: str) -> tuple[str, int, int]:
    """A new topic and a transaction of ``tid`` (protocol 1) with its partition 0 added: (topic, producer id, epoch)."""
    topic = new_topic(client)
    initiated: Any = init(client, tid)
    assert initiated.error_code == E.NONE
    pid, epoch = initiated.producer_id, initiated.producer_epoch
    assert add(client, tid, pid, epoch, topic, [0]) == {0: E.NONE}
    return topic, pid, epoch


class Answer:
    """``send()`` run on its own thread (a request in flight); ``get()`` its answer."""

    def __init__(self, send: Callable[[], int]) -> None:
        self.answers: list[int] = []
        self.thread = threading.Thread(target=lambda: self.answers.append(send()))
        self.thread.start()

    def get(self) -> int:
        self.thread.join(30)
        assert self.answers, "no answer"
        return self.answers[0]


class HeldVerifications:
    """The transaction coordinator's verification answers, each held back (on its way to the leader) until the test
    releases it, by the order the verifications were asked in."""

    def __init__(self) -> None:
        self.asked: list[threading.Event] = []
        self.released: list[threading.Event] = []

    def until_waiting(self, count: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.asked) < count or not all(e.is_set() for e in self.asked[:count]):
            assert time.monotonic() < deadline, f"{len(self.asked)} verification(s) asked, {count} expected"
            time.sleep(0.01)

    def release(self, index: int) -> None:
        self.released[index].set()


@contextlib.contextmanager
def verifications_held_back(server: Any) -> Iterator[HeldVerifications]:
    from klog.client.loop_thread import call_in_loop
    transactions = server.state.transactions
    real = transactions.add_or_verify
    held = HeldVerifications()

    async def answer_held_back(*args: Any) -> dict[tuple[str, int], int]:
        answered, released = threading.Event(), threading.Event()
        held.asked.append(answered)
        held.released.append(released)
        codes = await real(*args)   # the coordinator's real answer, on its way back to the leader
        answered.set()
        while not released.is_set():
            await asyncio.sleep(0.01)
        return codes

    call_in_loop(server.loop, lambda: setattr(transactions, "add_or_verify", answer_held_back), timeout=30)
    try:
        yield held
    finally:
        for released in held.released:
            released.set()
        call_in_loop(server.loop, lambda: transactions.__dict__.pop("add_or_verify", None), timeout=30)


def aborted_while_verifying(server: Any, client: WireClient, tid: str, pid: int, epoch: int, topic: str,
                            partition: int, send: Callable[[], int]) -> list[int]:
    """``send``'s answer when the transaction coordinator's real verification answer is held back (in process,
    around the broker's coordinator) until the client's abort (protocol 1: no epoch bump) has put its ABORT marker
    on ``topic``-``partition``."""
    with verifications_held_back(server) as held:
        answer = Answer(send)
        held.until_waiting(1)
        log_end = broker_log_end(server, topic, partition)
        assert end(client, tid, pid, epoch, commit=False) == E.NONE
        deadline = time.monotonic() + 20
        while broker_log_end(server, topic, partition) == log_end:   # until the ABORT marker is on the partition
            assert time.monotonic() < deadline
            time.sleep(0.02)
        held.release(0)
        return [answer.get()]


OFFSETS_TOPIC = "__consumer_offsets"


def stable_offset(client: WireClient, group: str, topic: str) -> tuple[int, int]:
    """(error, committed offset) of the group's partition 0 as OffsetFetch v8 with require_stable answers it."""
    fetched = client.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": True})
    partition = fetched.groups[0].topics[0].partitions[0]
    return int(partition.error_code), int(partition.committed_offset)


def broker_log_end(server: Any, topic: str, partition: int = 0) -> int:
    from klog.client.loop_thread import call_in_loop
    return int(call_in_loop(server.loop, lambda: server.state.partitions.get(topic, partition).log_end_offset,
                            timeout=30))
