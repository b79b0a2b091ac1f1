"""Protocol codec speed: klog.protocol vs kafka-python 3.x's protocol classes, measured in the same run.

Run: ``.venv/bin/pytest benches -o addopts="" -k bench_protocol`` (pytest-benchmark is disabled by the default
addopts).

Hot paths measured:
- decoding a Produce request with 100 partitions of 1 KiB record batches (flexible v9 and classic v7),
- encoding a Fetch response with 100 partitions (flexible v12 and classic v11),
- the request header.

Targets (ratios of medians vs kafka-python in the same run, checked at the end): Fetch response encode at least
3x faster; Produce request decode at least as fast as kafka-python's (itself generated, compiled code - both are
bound by CPython object creation and memoryview slicing per partition).
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from klog.protocol import (
    ApiKey,
    FileRegion,
    decode_request,
    decode_request_header,
    encode_request,
    encode_response,
)

kp_produce = pytest.importorskip("kafka.protocol.producer")
kp_fetch = pytest.importorskip("kafka.protocol.consumer")

PARTITIONS = 100
BATCH = bytes(range(256)) * 4  # 1 KiB stands in for a record batch; the codec does not look inside
TARGET_SPEEDUP = {"fetch-response-encode": 3.0, "produce-request-decode": 1.0}

_STATS: dict[str, dict[str, float]] = {}


def _produce_body(topics: int = 1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": f"bench-topic-{t}", "partition_data": [
            {"index": p, "records": BATCH} for p in range(PARTITIONS // topics)]} for t in range(topics)],
    }


def _fetch_body(records: Any) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
        "responses": [{"topic": "bench-topic", "topic_id": uuid.UUID(int=7), "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 1000 + p, "last_stable_offset": 1000 + p,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records}
            for p in range(PARTITIONS)]}],
    }


def _record(benchmark: Any, group: str, impl: str, fn: Callable[[], Any]) -> None:
    benchmark.group = group
    benchmark(fn)
    _STATS.setdefault(group, {})[impl] = benchmark.stats.stats.median


@pytest.mark.parametrize("version", [7, 9])
def test_decode_produce_request_klog(benchmark: Any, version: int) -> None:
    frame = memoryview(encode_request(ApiKey.PRODUCE, version, 1, "bench", _produce_body()))[4:]

    def run() -> Any:
        header, off = decode_request_header(frame)
        return decode_request(header, frame, off)

    req = run()
    assert len(req.topic_data[0].partition_data) == PARTITIONS
    _record(benchmark, f"produce-request-decode-v{version}", "klog", run)


@pytest.mark.parametrize("version", [7, 9])
def test_decode_produce_request_kafka_python(benchmark: Any, version: int) -> None:
    frame = encode_request(ApiKey.PRODUCE, version, 1, "bench", _produce_body())[4:]
    cls = kp_produce.ProduceRequest
    # kafka-python parses the header itself, then the body.
    header_len = len(frame) - len(bytes(cls(version=version, **_kp_produce_kwargs(version)).encode(version=version)))

    def run() -> Any:
        return cls.decode(frame[header_len:], version=version)

    req = run()
    assert len(req.topic_data[0].partition_data) == PARTITIONS
    _record(benchmark, f"produce-request-decode-v{version}", "kafka-python", run)


def _kp_produce_kwargs(version: int) -> dict[str, Any]:
    cls = kp_produce.ProduceRequest
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        cls.TopicProduceData(version=version, name="bench-topic-0", partition_data=[
            cls.TopicProduceData.PartitionProduceData(version=version, index=p, records=BATCH)
            for p in range(PARTITIONS)])]}


@pytest.mark.parametrize("version", [11, 12])
def test_encode_fetch_response_klog(benchmark: Any, version: int) -> None:
    body = _fetch_body(BATCH)
    _record(benchmark, f"fetch-response-encode-v{version}", "klog",
            lambda: encode_response(ApiKey.FETCH, version, 1, body))


@pytest.mark.parametrize("version", [11, 12])
def test_encode_fetch_response_kafka_python(benchmark: Any, version: int) -> None:
    cls = kp_fetch.FetchResponse
    topic_cls = cls.FetchableTopicResponse
    part_cls = topic_cls.PartitionData

    def run() -> bytes:
        # Building the objects is part of the cost for kafka-python as it is for us (we take plain dicts).
        resp = cls(version=version, throttle_time_ms=0, error_code=0, session_id=0, responses=[
            topic_cls(version=version, topic="bench-topic", partitions=[
                part_cls(version=version, partition_index=p, error_code=0, high_watermark=1000 + p,
                         last_stable_offset=1000 + p, log_start_offset=0, aborted_transactions=None,
                         preferred_read_replica=-1, records=BATCH)
                for p in range(PARTITIONS)])])
        resp.with_header(correlation_id=1)
        return bytes(resp.encode(header=True, framed=True))

    ours = b"".join(bytes(c) for c in encode_response(ApiKey.FETCH, version, 1, _fetch_body(BATCH)))
    assert run() == ours  # same bytes: a fair comparison
    _record(benchmark, f"fetch-response-encode-v{version}", "kafka-python", run)


def test_encode_fetch_response_with_file_regions_klog(benchmark: Any) -> None:
    body = _fetch_body(FileRegion(0, 0, 1 << 20))
    benchmark.group = "fetch-response-encode-sendfile"
    chunks = benchmark(lambda: encode_response(ApiKey.FETCH, 12, 1, body))
    assert sum(isinstance(c, FileRegion) for c in chunks) == PARTITIONS


def test_decode_request_header_klog(benchmark: Any) -> None:
    frame = encode_request(ApiKey.FETCH, 12, 1, "bench-client", _fetch_body(None) | {"topics": []})[4:]
    benchmark.group = "request-header-decode"
    benchmark(decode_request_header, frame)


def test_speedups_vs_kafka_python(benchmark: Any) -> None:
    """Ratios of the medians measured above (same run, same machine); runs last in this module."""
    benchmark.group = "summary"
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    lines = []
    for group, impls in sorted(_STATS.items()):
        if "klog" in impls and "kafka-python" in impls:
            ratio = impls["kafka-python"] / impls["klog"]
            lines.append((group, impls["klog"] * 1e6, impls["kafka-python"] * 1e6, ratio))
    assert lines, "run the whole module: the ratios need both implementations' benchmarks"
    for group, ours, theirs, ratio in lines:
        print(f"{group}: klog {ours:.1f} us, kafka-python {theirs:.1f} us, speedup {ratio:.1f}x")
    for group, _, _, ratio in lines:
        target = TARGET_SPEEDUP[group.rsplit("-v", 1)[0]]
        assert ratio >= target, f"{group}: {ratio:.2f}x kafka-python's speed, target {target}x"
