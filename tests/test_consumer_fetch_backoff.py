"""The consumer's fetcher after a failed fetch (a fetch backoff), on real clusters (the leader change on klog and on
Apache Kafka 4.x: the consumer is klog's, its brokers either): whatever the timing of the fetcher's wake-ups around
the end of the backoff, it fetches again."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

import klog
import klog.client.consumer as consumer_module
from klog.client import ConsumerRecord, TopicPartition
from klog.testing.cluster import cluster_of

pytestmark = pytest.mark.timeout(180)


def _records(consumer: klog.Consumer, count: int, within: float = 60) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    end = time.monotonic() + within
    while len(got) < count and time.monotonic() < end:
        got += consumer.poll(timeout=0.5, max_records=count - len(got))
    assert len(got) == count, (got, {tp: (st.position, st.in_flight, st.error, st.retry_at - time.monotonic(),
                                          st.current_leader_epoch)
                                     for tp, st in consumer._core.assignment.items()})
    return got


def _fetch_rounds_read_a_late_clock(consumer: klog.Consumer, monkeypatch: pytest.MonkeyPatch, late_by: float) -> None:
    """From now on each fetch round of ``consumer`` judges the partitions' backoffs by a clock reading ``late_by``
    seconds older than the fetcher's next one: what a loaded machine does when the loop thread loses the CPU (or the
    GIL) in between, and what uvloop's millisecond timers add by waking the loop up to ~1.5 ms before a deadline."""
    real = time.monotonic
    lag = [0.0]
    monkeypatch.setattr(consumer_module, "_monotonic", lambda: real() - lag[0])
    core = consumer._core
    send = core._send_fetches

    def late():  # type: ignore[no-untyped-def]
        lag[0] = late_by
        try:
            return send()
        finally:
            lag[0] = 0.0

    core._send_fetches = late  # type: ignore[method-assign]


def test_a_fetch_backoff_ending_between_two_clock_readings_of_the_fetcher_does_not_stop_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with cluster_of("klog", tmp_path, 1) as cluster:
        cluster.wait_for_brokers()
        topic = f"t-{uuid.uuid4().hex[:8]}"
        tp = TopicPartition(topic, 0)
        assert cluster.create_topic(topic, 1, 1)[0] == 0
        leader = cluster.wait_for_leader(topic, 0)
        cluster.produce(topic, [0], 10, tag="a")
        with klog.Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            assert [r.offset for r in _records(consumer, 10)] == list(range(10))
            _fetch_rounds_read_a_late_clock(consumer, monkeypatch, 0.02)
            time.sleep(0.5)   # the fetcher long-polls at offset 10
            # the Fetch in flight fails (connection lost): the partition backs off for retry.backoff.ms
            consumer._run_on_loop(consumer._core.cluster.disconnect, leader)
            cluster.produce(topic, [0], 10, tag="b")
            assert [r.offset for r in _records(consumer, 10, within=20)] == list(range(10, 20))


@pytest.mark.parametrize("kind", ["klog", "kafka"])
def test_a_consumer_living_through_a_leader_change_goes_on_fetching(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with cluster_of(kind, tmp_path, 3) as cluster:
        cluster.wait_for_brokers()
        topic = f"t-{uuid.uuid4().hex[:8]}"
        tp = TopicPartition(topic, 0)
        assert cluster.create_topic(topic, 1, 3)[0] == 0
        old_leader = cluster.wait_for_topic(topic, 1)[0]
        cluster.produce(topic, [0], 10, tag="a")
        with klog.Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            first = _records(consumer, 10)
            _fetch_rounds_read_a_late_clock(consumer, monkeypatch, 0.02)
            cluster.stop_node(old_leader)
            cluster.wait_for_leader(topic, 0, exclude=old_leader)
            cluster.produce(topic, [0], 10, tag="b")
            second = _records(consumer, 10, within=30)
            assert [r.offset for r in second] == list(range(10, 20))
            assert second[-1].leader_epoch > first[-1].leader_epoch
