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
