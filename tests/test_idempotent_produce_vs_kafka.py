"""An idempotent Produce whose producer the partition has no state of, on klog and on Apache Kafka 4.x from the
same properties (one broker of each kind for the module): Kafka's ProducerAppendInfo.checkSequence accepts any
first sequence from a producer without an epoch on the partition ("possibly because all producer records have
been deleted due to retention or the DeleteRecords API"), so neither broker answers UNKNOWN_PRODUCER_ID; after
DeleteRecords removed all of a producer's records, the partition still knows its sequence (Kafka keeps the
producer's entry until ``producer.id.expiration.ms``): the next sequence is appended, a retry of the last batch is
a duplicate answered with its offset, and a gap is OUT_OF_ORDER_SEQUENCE_NUMBER."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


@pytest.fixture
def bootstrap(klog_and_kafka_bootstrap: str) -> str:
    return klog_and_kafka_bootstrap


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="idempotence-test")

    def create_topic(self) -> str:
        name = f"idem-{uuid.uuid4().hex[:8]}"
        answer = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False})
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        return name

    def producer_id(self) -> tuple[int, int]:
        """InitProducerId, asked again while the broker's producer id manager starts (Kafka: a few seconds)."""
        deadline = time.monotonic() + 60
        while True:
            answer = self.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                               "transaction_timeout_ms": -1, "producer_id": -1,
                                                               "producer_epoch": -1})
            if answer.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                         ErrorCode.NOT_COORDINATOR) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert answer.error_code == ErrorCode.NONE, answer
        return int(answer.producer_id), int(answer.producer_epoch)

    def produce(self, topic: str, producer: tuple[int, int], sequence: int) -> tuple[int, int]:
        """One record at ``sequence``, acks=1, until the topic's leader is ready: (error code, base offset)."""
        batch = encode_batch([{"value": b"v%d" % sequence}], producer_id=producer[0], producer_epoch=producer[1],
                             base_sequence=sequence)
        for _ in range(100):
            answer = self.request(ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                      "topic_data": [{"name": topic, "partition_data": [
                                                          {"index": 0, "records": batch}]}]})
            partition: Any = answer.responses[0].partition_responses[0]
            if partition.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                            ErrorCode.LEADER_NOT_AVAILABLE):
                return int(partition.error_code), int(partition.base_offset)
            self.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        raise AssertionError(f"{topic} has no leader")

    def delete_records(self, topic: str, offset: int) -> int:
        answer = self.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": offset}]}], "timeout_ms": 30000})
        return int(answer.topics[0].partitions[0].error_code)


def test_a_producer_the_partition_does_not_know_is_accepted_at_any_first_sequence(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        producer = wire.producer_id()
        assert wire.produce(topic, producer, 5) == (ErrorCode.NONE, 0)
        assert wire.produce(topic, producer, 6) == (ErrorCode.NONE, 1)
        assert wire.produce(topic, producer, 8)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # a producer id no InitProducerId gave out: the partition has no state of it either
        assert wire.produce(topic, (producer[0] + 1000, 0), 17) == (ErrorCode.NONE, 2)


def test_a_producer_whose_records_were_all_deleted_keeps_its_sequence(bootstrap: str) -> None:
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        producer = wire.producer_id()
        assert [wire.produce(topic, producer, seq) for seq in range(3)] == [(ErrorCode.NONE, n) for n in range(3)]
        assert wire.delete_records(topic, 3) == ErrorCode.NONE
        assert wire.produce(topic, producer, 2) == (ErrorCode.NONE, 2)   # a retry: a duplicate, its offset
        assert wire.produce(topic, producer, 5)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert wire.produce(topic, producer, 3) == (ErrorCode.NONE, 3)
