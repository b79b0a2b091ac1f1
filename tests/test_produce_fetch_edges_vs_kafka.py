"""Produce and Fetch requests a client should not send, answered by klog as Apache Kafka 4.x answers them (one
broker of each kind for the module, started from the same properties; klog twice: with its native Produce/Fetch
paths and native front on, their defaults, and with all three off, so both of klog's paths answer each case).
Each case first warms the partition's native routes (a Produce and Fetches the Python path serves and routes), so
the odd request reaches the native path first where it is on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode
from klog.records import encode_batch
from klog.testing.kafka import one_broker
from klog.testing.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

#: klog with every request on its Python handlers (the native Produce and Fetch paths and the native front off)
PYTHON_PATHS = {"klog.produce.native.enable": "false", "klog.fetch.native.enable": "false",
                "klog.network.native.front.enable": "false"}


@pytest.fixture(scope="module", params=["klog", "klog-python", "kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    kind = "kafka" if request.param == "kafka" else "klog"
    properties = PYTHON_PATHS if request.param == "klog-python" else {}
    with one_broker(kind, tmp_path_factory.mktemp(request.param), properties) as servers:
        yield servers


class Wire(WireClient):
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        super().__init__(host, int(port), client_id="edges-test")

    def create_topic(self, **configs: str) -> str:
        name = f"edge-{uuid.uuid4().hex[:8]}"
        answer = self.request(ApiKey.CREATE_TOPICS, 5, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}],
            "timeout_ms": 30000, "validate_only": False})
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        return name

    def produce(self, topic: str, records: Any, *, version: int = 9, acks: int = 1,
                extra: list[dict[str, Any]] | None = None) -> Any:
        """One Produce of ``records`` to partition 0 (and ``extra`` topic entries): the answer's partitions as
        (topic, index, error code, base offset)."""
        answer = self.request(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
                                                        "topic_data": [{"name": topic, "partition_data": [
                                                            {"index": 0, "records": records}]}] + (extra or [])})
        return [(t.name, p.index, p.error_code, p.base_offset)
                for t in answer.responses for p in t.partition_responses]

    def warm(self, topic: str) -> int:
        """A record produced (until the new topic's leader is ready) and read back twice: the partition is routed
        to klog's native paths; the partition's log end offset."""
        for _ in range(200):
            [(_, _, code, offset)] = self.produce(topic, encode_batch([{"key": b"k", "value": b"v"}]))
            if code == ErrorCode.NONE:
                break
            assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            ErrorCode.LEADER_NOT_AVAILABLE), code
            time.sleep(0.05)
        else:
            raise AssertionError(f"{topic} has no leader")
        for _ in range(2):
            [partition] = self.fetch(topic, offset)["partitions"]
            assert partition["error_code"] == ErrorCode.NONE, partition
        return offset + 1

    def fetch(self, topic: str, offset: int, *, version: int = 12, **fields: Any) -> dict[str, Any]:
        """One sessionless Fetch of partition 0 (``fields`` override the request's top-level fields): the top-level
        error code and each partition's (error code, high watermark, last stable offset, log start offset,
        record bytes)."""
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": "", **fields}
        answer = self.request(ApiKey.FETCH, version, body)
        return {"error_code": answer.error_code, "partitions": [
            {"error_code": p.error_code, "high_watermark": p.high_watermark,
             "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
             "records": len(p.records or b"")} for t in answer.responses for p in t.partitions]}


def test_a_fetch_with_an_isolation_level_neither_0_nor_1_is_answered_unknown_server_error(bootstrap: str) -> None:
    """Kafka's IsolationLevel.forId throws for any other value: the request's error response, UNKNOWN_SERVER_ERROR
    at the top and on each partition, nothing read (klog served it as read_uncommitted until 2026-12-07)."""
    refused = {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "partitions": [
        {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "high_watermark": -1, "last_stable_offset": -1,
         "log_start_offset": -1, "records": 0}]}
    with Wire(bootstrap) as wire:
        topic = wire.create_topic()
        end = wire.warm(topic)
        for level in (2, -1):
            assert wire.fetch(topic, 0, isolation_level=level) == refused
        with Wire(bootstrap) as fresh:
            assert fresh.fetch(topic, 0, isolation_level=2) == refused
        assert wire.fetch(topic, 0, isolation_level=1)["partitions"][0]["high_watermark"] == end
