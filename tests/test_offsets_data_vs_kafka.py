"""OffsetFetch and DeleteRecords edges answered by klog as Apache Kafka 4.3.1 answers them (one broker of each kind
for the module, conftest's klog_and_kafka_bootstrap): raw requests through klog's codec, the answers compared."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


class Wire(WireClient):
    def until(self, api_key: int, version: int, body: dict[str, Any], done: Callable[[Any], bool]) -> Any:
        """The answer to ``body`` once ``done`` holds for it (a new broker's coordinators and leaders load)."""
        for _ in range(300):
            answer = self.request(api_key, version, body)
            if done(answer):
                return answer
            time.sleep(0.1)
        raise AssertionError(answer)

    def create_topic(self, partitions: int) -> str:
        name = f"data-{uuid.uuid4().hex[:8]}"
        answer = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        return name

    def coordinator_ready(self, key: str, key_type: int) -> None:
        self.until(ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]},
                   lambda a: a.coordinators[0].error_code == ErrorCode.NONE)


def fetched(answer: Any) -> list[tuple[str, int, int, int, str | None]]:
    """An OffsetFetch v8+ answer's single group: (topic, partition, error, offset, metadata), sorted (Kafka answers
    all of a group's partitions in its hash map's order)."""
    [group] = answer.groups
    assert group.error_code == ErrorCode.NONE, group
    return sorted((t.name, p.partition_index, p.error_code, p.committed_offset, p.metadata)
                  for t in group.topics for p in t.partitions)


def test_offset_fetch_of_all_partitions_requiring_stable_offsets_answers_a_pending_one_unstable(
        klog_and_kafka_bootstrap: str) -> None:
    """OffsetFetch with topics null and RequireStable while a transaction's TxnOffsetCommit is not yet ended: as
    Kafka's fetchAllOffsets, a committed partition the transaction commits again is UNSTABLE_OFFSET_COMMIT (offset
    -1, no metadata), one only the transaction commits is not listed; without RequireStable, or once the
    transaction ends, the committed offsets. klog answered the old committed offset until 2026-12-07."""
    group, transactional_id = f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    with Wire.of_bootstrap(klog_and_kafka_bootstrap, client_id="offsets-data-test") as wire:
        topic = wire.create_topic(3)
        wire.coordinator_ready(group, 0)
        wire.until(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": 5 * (p + 1), "committed_leader_epoch": -1,
                 "committed_metadata": "m"} for p in (0, 1)]}]},
            lambda a: all(p.error_code == ErrorCode.NONE for t in a.topics for p in t.partitions))
        wire.coordinator_ready(transactional_id, 1)
        producer = wire.until(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id,
                                                            "transaction_timeout_ms": 60000},
                              lambda a: a.error_code == ErrorCode.NONE)
        txn = {"transactional_id": transactional_id, "producer_id": producer.producer_id,
               "producer_epoch": producer.producer_epoch}
        assert wire.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {**txn, "group_id": group}).error_code == ErrorCode.NONE
        committed = wire.request(ApiKey.TXN_OFFSET_COMMIT, 3, {**txn, "group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "committed_offset": 90 + p,
                                            "committed_leader_epoch": -1, "committed_metadata": "tx"}
                                           for p in (1, 2)]}]})
        assert [p.error_code for t in committed.topics for p in t.partitions] == [ErrorCode.NONE] * 2

        def fetch_all(version: int, require_stable: bool) -> list[tuple[str, int, int, int, str | None]]:
            return fetched(wire.request(ApiKey.OFFSET_FETCH, version, {"require_stable": require_stable, "groups": [
                {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]}))

        stable = [(topic, 0, ErrorCode.NONE, 5, "m"), (topic, 1, ErrorCode.NONE, 10, "m")]
        for version in (8, 9):
            assert fetch_all(version, False) == stable
            assert fetch_all(version, True) == [(topic, 0, ErrorCode.NONE, 5, "m"),
                                                (topic, 1, ErrorCode.UNSTABLE_OFFSET_COMMIT, -1, "")]
        old_form = wire.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None, "require_stable": True})
        assert old_form.error_code == ErrorCode.NONE
        assert sorted((t.name, p.partition_index, p.error_code, p.committed_offset)
                      for t in old_form.topics for p in t.partitions) == [
            (topic, 0, ErrorCode.NONE, 5), (topic, 1, ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)]
        assert wire.request(ApiKey.END_TXN, 3, {**txn, "committed": True}).error_code == ErrorCode.NONE
        ended = [(topic, 0, ErrorCode.NONE, 5, "m"), (topic, 1, ErrorCode.NONE, 91, "tx"),
                 (topic, 2, ErrorCode.NONE, 92, "tx")]
        assert wire.until(ApiKey.OFFSET_FETCH, 8, {"require_stable": True, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]},
            lambda a: fetched(a) == ended)


def test_delete_records_leaves_out_a_topic_entry_naming_no_partitions(klog_and_kafka_bootstrap: str) -> None:
    """Kafka builds DeleteRecords' answer from the partitions it was asked about: a topic entry with none is not
    answered (klog answered it as an empty entry until 2026-12-07); the partitions beside it are, -1 deleting up to
    the high watermark and an offset past it OFFSET_OUT_OF_RANGE."""
    with Wire.of_bootstrap(klog_and_kafka_bootstrap, client_id="offsets-data-test") as wire:
        topic, other = wire.create_topic(1), wire.create_topic(1)
        produce = {"transactional_id": None, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(
                [{"key": b"k", "value": b"v%d" % i} for i in range(3)])}]}]}
        wire.until(ApiKey.PRODUCE, 9, produce,
                   lambda a: a.responses[0].partition_responses[0].error_code == ErrorCode.NONE)
        for offset, answer in ((-1, (0, 3, ErrorCode.NONE)), (4, (0, -1, ErrorCode.OFFSET_OUT_OF_RANGE))):
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
                {"name": other, "partitions": []},
                {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]})
            assert [(t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
                    for t in deleted.topics] == [(topic, [answer])]
        nothing = wire.request(ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
            {"name": other, "partitions": []}]})
        assert nothing.topics == []


def test_the_last_stable_offset_is_never_below_a_log_start_deleted_past_an_open_transaction(
        klog_and_kafka_bootstrap: str) -> None:
    """DeleteRecords past the first records of a transaction still open: Kafka raises the partition's first
    unstable offset to the new log start, so ListOffsets LATEST read_committed and Fetch's last stable offset answer
    the log start, not the deleted transaction start (klog answered the offset below the log start until
    2026-12-07, on its Python and native Fetch paths)."""
    with Wire.of_bootstrap(klog_and_kafka_bootstrap, client_id="offsets-data-test") as wire:
        topic = wire.create_topic(1)

        def produce(count: int, transactional_id: str | None = None, **batch: Any) -> None:
            records = encode_batch([{"key": b"k", "value": b"v"}] * count, **batch)
            wire.until(ApiKey.PRODUCE, 9, {
                "transactional_id": transactional_id, "acks": -1, "timeout_ms": 10000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
                lambda a: a.responses[0].partition_responses[0].error_code == ErrorCode.NONE)

        def latest(isolation_level: int) -> int:
            answer = wire.request(ApiKey.LIST_OFFSETS, 10, {"replica_id": -1, "isolation_level": isolation_level,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
                "timeout_ms": 5000})
            [partition] = answer.topics[0].partitions
            assert partition.error_code == ErrorCode.NONE, partition
            return int(partition.offset)

        def fetched(offset: int, isolation_level: int) -> tuple[int, int, int, int, int]:
            answer = wire.request(ApiKey.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1, "topics": [
                    {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                     "fetch_offset": offset, "last_fetched_epoch": -1,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            [partition] = answer.responses[0].partitions
            return (partition.error_code, partition.high_watermark, partition.last_stable_offset,
                    partition.log_start_offset, len(partition.records or b""))

        def delete_to(offset: int) -> None:
            deleted = wire.request(ApiKey.DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]})
            assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE, deleted

        transactional_id = f"tx-{uuid.uuid4().hex[:6]}"
        produce(3)                                                 # offsets 0-2
        wire.coordinator_ready(transactional_id, 1)
        producer = wire.until(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id,
                                                            "transaction_timeout_ms": 60000},
                              lambda a: a.error_code == ErrorCode.NONE)
        added = wire.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer.producer_id,
            "v3_and_below_producer_epoch": producer.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, added
        produce(2, transactional_id=transactional_id, producer_id=producer.producer_id,   # offsets 3-4, open
                producer_epoch=producer.producer_epoch, base_sequence=0, is_transactional=True)
        produce(1)                                                 # offset 5
        assert (latest(0), latest(1)) == (6, 3)
        delete_to(5)
        assert (latest(0), latest(1)) == (6, 5)
        assert fetched(5, 0)[:4] == fetched(5, 1)[:4] == (ErrorCode.NONE, 6, 5, 5)
        assert fetched(5, 1)[4] == 0 < fetched(5, 0)[4]       # read_committed: nothing below the open transaction
        delete_to(-1)
        assert (latest(0), latest(1)) == (6, 6)
        assert fetched(6, 1) == (ErrorCode.NONE, 6, 6, 6, 0)
