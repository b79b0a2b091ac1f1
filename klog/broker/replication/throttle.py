"""Replication throttles (KIP-73), as ``kafka-reassign-partitions --throttle`` sets them: a byte rate per broker
(``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``, dynamic broker configs: the
broker's own resource, else the cluster default resource "", else server.properties) that limits the replication
traffic of the replicas a topic lists (``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas``: ``partition:broker`` pairs, or ``*`` for every replica).

Pure: :class:`TokenBucket` (the rate limiter) and the config readers; the replica fetcher
(:mod:`.fetcher`) asks :class:`ReplicationThrottle` which partitions it may fetch this round and how long to wait;
the leader's Fetch handler asks its own whether a throttled replica's fetch gets records now (Kafka's leader
answers a throttled partition without records while its quota is used up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from klog.metadata.image import ConfigResourceType

__all__ = ["FOLLOWER_RATE", "FOLLOWER_REPLICAS", "LEADER_RATE", "LEADER_REPLICAS", "UNTHROTTLED", "ReplicationThrottle",
           "TokenBucket", "broker_dynamic_config", "is_throttled_replica"]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
#: Kafka's default rate (Long.MAX_VALUE): no throttle.
UNTHROTTLED = 2**63 - 1
#: The bucket holds at most this many seconds of the rate (the burst a throttled replica may fetch at once).
BURST_SECONDS = 1.0


class TokenBucket:
    """Bytes per second with a burst of :data:`BURST_SECONDS`. A fetch may take more than is left (the leader
    answers at least one whole batch): the bucket goes into debt and the next fetch waits until it is paid."""

    def __init__(self, rate: int, now_ms: int) -> None:
        assert rate > 0, rate
        self.rate = rate
        self.tokens = rate * BURST_SECONDS
        self.at_ms = now_ms

    def set_rate(self, rate: int, now_ms: int) -> None:
        assert rate > 0, rate
        self._refill(now_ms)
        self.rate = rate
        self.tokens = min(self.tokens, rate * BURST_SECONDS)

    def _refill(self, now_ms: int) -> None:
        if now_ms > self.at_ms:
            self.tokens = min(self.rate * BURST_SECONDS, self.tokens + self.rate * (now_ms - self.at_ms) / 1000)
            self.at_ms = now_ms

    def available(self, now_ms: int) -> float:
        """Bytes that may be fetched now (negative: in debt)."""
        self._refill(now_ms)
        return self.tokens

    def consume(self, size: int, now_ms: int) -> None:
        assert size >= 0, size
        self._refill(now_ms)
        self.tokens -= size

    def ms_until_available(self, now_ms: int) -> int:
        """How long until there is something to fetch again (0: now)."""
        left = self.available(now_ms)
        return 0 if left > 0 else int((-left * 1000) // self.rate) + 1


def is_throttled_replica(value: str | Iterable[str] | None, partition: int, broker: int) -> bool:
    """Whether ``value`` (a topic's ``*.replication.throttled.replicas``) lists ``partition`` on ``broker``."""
    if not value:
        return False
    entries = [e.strip() for e in (value.split(",") if isinstance(value, str) else value)]
    return "*" in entries or f"{partition}:{broker}" in entries


def broker_dynamic_config(image: Any, node_id: int, key: str) -> str | None:
    """A dynamic broker config: this broker's own resource, else the cluster-wide default (resource "")."""
    if image is None:
        return None
    for resource in (str(node_id), ""):
        value = image.configs.get((ConfigResourceType.BROKER, resource), {}).get(key)
        if value is not None:
            return str(value)
    return None


class ReplicationThrottle:
    """One side of the throttle on one broker. Follower side (:meth:`follower`): its replica fetchers share one
    bucket at ``follower.replication.throttled.rate`` for the partitions whose topics list ``partition:this
    broker`` in ``follower.replication.throttled.replicas``. Leader side (:meth:`leader`): the replica fetches
    it answers share one bucket at ``leader.replication.throttled.rate`` for the partitions listed in
    ``leader.replication.throttled.replicas``. ``image()``: the broker's current metadata image; ``static_rate``:
    the rate from server.properties."""

    def __init__(self, node_id: int, image: Callable[[], Any], rate_key: str, replicas_key: str, static_rate: int,
                 clock: Callable[[], int]) -> None:
        self.node_id = node_id
        self.image = image
        self.rate_key = rate_key
        self.replicas_key = replicas_key
        self.static_rate = static_rate
        self.clock = clock
        self.bucket: TokenBucket | None = None

    @classmethod
    def follower(cls, node_id: int, image: Callable[[], Any], config: Any, clock: Callable[[], int]
                 ) -> ReplicationThrottle:
        return cls(node_id, image, FOLLOWER_RATE, FOLLOWER_REPLICAS, config[FOLLOWER_RATE], clock)

    @classmethod
    def leader(cls, node_id: int, image: Callable[[], Any], config: Any, clock: Callable[[], int]
               ) -> ReplicationThrottle:
        return cls(node_id, image, LEADER_RATE, LEADER_REPLICAS, config[LEADER_RATE], clock)

    def rate(self) -> int:
        raw = broker_dynamic_config(self.image(), self.node_id, self.rate_key)
        return self.static_rate if raw is None else int(raw)

    def is_throttled(self, topic: str, partition: int) -> bool:
        image = self.image()
        if image is None:
            return False
        return is_throttled_replica(image.topic_config(topic).get(self.replicas_key), partition, self.node_id)

    def allowance(self, now_ms: int) -> tuple[float, int]:
        """(bytes the throttled partitions may move now, ms to wait when none): unlimited without a rate."""
        rate = self.rate()
        if rate >= UNTHROTTLED:
            self.bucket = None
            return float("inf"), 0
        if rate <= 0:   # a rate of 0 stops the throttled replicas
            self.bucket = None
            return 0.0, int(BURST_SECONDS * 1000)
        if self.bucket is None:
            self.bucket = TokenBucket(rate, now_ms)
        elif self.bucket.rate != rate:
            self.bucket.set_rate(rate, now_ms)
        return self.bucket.available(now_ms), self.bucket.ms_until_available(now_ms)

    def moved(self, size: int, now_ms: int) -> None:
        """``size`` bytes of throttled replicas were fetched (follower) or sent (leader)."""
        if self.bucket is not None:
            self.bucket.consume(size, now_ms)

    def holds(self, topic: str, partition: int) -> bool:
        """The leader side's question per partition of a replica fetch: answer it without records now?"""
        return self.is_throttled(topic, partition) and self.allowance(self.clock())[0] <= 0
