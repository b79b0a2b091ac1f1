"""Replication throttles, pure (klog.broker.replication.throttle): the token bucket the replica fetchers share, the
throttled-replica lists topics carry and the dynamic broker rate read from the metadata image."""

from __future__ import annotations

import uuid

import pytest

from klog.broker.config import ConfigError, validate_topic_configs
from klog.broker.replication.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    UNTHROTTLED,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationThrottle,
    TokenBucket,
    broker_dynamic_config,
    is_throttled_replica,
)
from klog.metadata.delta import replay
from klog.metadata.image import EMPTY_IMAGE, MetadataImage
from klog.metadata.records import record


def test_a_bucket_lets_a_second_of_its_rate_through_then_paces_to_the_rate():
    bucket = TokenBucket(1000, now_ms=0)
    assert bucket.available(0) == 1000
    bucket.consume(1000, 0)
    assert bucket.available(0) == 0 and bucket.ms_until_available(0) == 1
    assert bucket.available(500) == 500   # refilled at 1000 bytes/s
    assert bucket.available(10_000) == 1000   # never more than one second's worth


def test_a_fetch_larger_than_what_is_left_puts_the_bucket_in_debt_until_paid():
    bucket = TokenBucket(1000, now_ms=0)
    bucket.consume(3000, 0)   # a leader answers at least one whole batch
    assert bucket.available(0) == -2000
    assert bucket.ms_until_available(0) == 2001
    assert bucket.available(2000) == 0 and bucket.available(2001) > 0


def test_bytes_taken_over_time_never_exceed_the_rate_plus_one_burst():
    bucket = TokenBucket(10_000, now_ms=0)
    taken = 0
    for now in range(0, 5000, 7):   # a fetcher asking every 7 ms, each time for 1500 bytes if allowed
        if bucket.available(now) > 0:
            bucket.consume(1500, now)
            taken += 1500
    assert taken <= 10_000 * 5 + 10_000 + 1500


def test_a_rate_change_keeps_what_was_used():
    bucket = TokenBucket(1000, now_ms=0)
    bucket.consume(800, 0)
    bucket.set_rate(100, 0)
    assert bucket.available(0) == 100   # capped at the new burst
    bucket.set_rate(5000, 0)
    assert bucket.available(0) == 100   # a higher rate refills faster, it does not give tokens at once
    assert bucket.available(10) == 150


@pytest.mark.parametrize("value, partition, broker, expected", [
    ("0:1,1:2", 0, 1, True), ("0:1,1:2", 1, 1, False), ("*", 7, 3, True), ("", 0, 1, False), (None, 0, 1, False),
    (["0:2", "1:2"], 1, 2, True),
])
def test_throttled_replica_lists_name_partition_broker_pairs_or_every_replica(value, partition, broker, expected):
    assert is_throttled_replica(value, partition, broker) is expected


@pytest.mark.parametrize("bad", ["x", "0:", ":1", "*,0:1", "0-1"])
def test_topic_throttle_lists_are_validated_as_kafka_does(bad):
    with pytest.raises(ConfigError, match="follower.replication.throttled.replicas"):
        validate_topic_configs({"follower.replication.throttled.replicas": bad})
    assert validate_topic_configs({"leader.replication.throttled.replicas": "0:1, 1:2"}) == {
        "leader.replication.throttled.replicas": ["0:1", "1:2"]}


def image_with(configs: list[tuple[int, str, str, str | None]]) -> MetadataImage:
    records = [record("FeatureLevelRecord", name="metadata.version", feature_level=25),
               record("TopicRecord", name="t", topic_id=uuid.UUID(int=3))]
    records += [record("ConfigRecord", resource_type=rtype, resource_name=name, name=key, value=value)
                for rtype, name, key, value in configs]
    return replay(EMPTY_IMAGE, records, 0)[0]


def test_the_broker_rate_is_its_own_dynamic_config_else_the_cluster_default():
    image = image_with([(4, "", FOLLOWER_RATE, "500"), (4, "2", FOLLOWER_RATE, "100")])
    assert broker_dynamic_config(image, 2, FOLLOWER_RATE) == "100"
    assert broker_dynamic_config(image, 3, FOLLOWER_RATE) == "500"
    assert broker_dynamic_config(image_with([]), 3, FOLLOWER_RATE) is None


def test_the_follower_throttle_applies_to_listed_replicas_of_this_broker_at_its_rate():
    image = image_with([(4, "3", FOLLOWER_RATE, "2000"), (2, "t", FOLLOWER_REPLICAS, "0:3,1:2")])
    throttle = ReplicationThrottle.follower(3, lambda: image, {FOLLOWER_RATE: UNTHROTTLED}, lambda: 0)
    assert throttle.is_throttled("t", 0) and not throttle.is_throttled("t", 1)
    assert throttle.allowance(0) == (2000, 0)
    throttle.moved(5000, 0)
    assert throttle.allowance(0) == (-3000, 1501)
    unthrottled = ReplicationThrottle.follower(3, lambda: image_with([]), {FOLLOWER_RATE: UNTHROTTLED}, lambda: 0)
    assert unthrottled.allowance(0) == (float("inf"), 0)
    stopped = ReplicationThrottle.follower(3, lambda: image_with([(4, "", FOLLOWER_RATE, "0")]),
                                           {FOLLOWER_RATE: UNTHROTTLED}, lambda: 0)
    assert stopped.allowance(0)[0] == 0


def test_the_leader_throttle_holds_listed_replicas_once_its_rate_is_used_up():
    now = [0]
    image = image_with([(4, "1", LEADER_RATE, "1000"), (2, "t", LEADER_REPLICAS, "0:1")])
    throttle = ReplicationThrottle.leader(1, lambda: image, {LEADER_RATE: UNTHROTTLED}, lambda: now[0])
    assert not throttle.holds("t", 0)
    throttle.moved(4000, 0)
    assert throttle.holds("t", 0) and not throttle.holds("t", 1)   # partition 1 is not listed
    now[0] = 3001
    assert not throttle.holds("t", 0)
    # the static rate from server.properties applies until a dynamic one is set
    static = ReplicationThrottle.leader(1, lambda: image_with([(2, "t", LEADER_REPLICAS, "*")]),
                                        {LEADER_RATE: 10}, lambda: 0)
    assert not static.holds("t", 5)
    static.moved(11, 0)
    assert static.holds("t", 5)
