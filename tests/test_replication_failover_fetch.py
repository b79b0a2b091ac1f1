"""A follower's fetcher and a partition that joins it while the leader holds its fetch, on a real 3-node klog
cluster.

A follower fetches every partition it follows from one broker in one Fetch, which that broker holds for up to
``replica.fetch.wait.max.ms`` while it has nothing new. When a partition leader is SIGKILLed and fenced, the
surviving follower adds the partition to its fetcher of the new leader, which it already follows other partitions
from: the held Fetch does not name the partition, and acks=all writes to the new leader need the follower's fetch
of it. klog's fetcher does not wait for the held Fetch's answer (Apache Kafka's does: up to 500 ms by default,
measured in its failovers): it asks again at once, on a new connection (a connection answers in order).

The hold here is 60 s and the producer gives up after 20 s (room for a loaded CI machine): its acknowledgement comes
while the held Fetch is still held, so the follower's first fetch of the partition did not wait for it.

Likewise a partition the fetcher leaves out of a round (its replication throttle used up, an error's backoff,
another fetcher's append under way) is asked again when its wait ends: the Fetch for the others asks the leader to
hold it no longer than that.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.testing.cluster import CLUSTER_TIMING, KlogCluster

pytestmark = pytest.mark.timeout(180)

#: how long a leader holds a follower's Fetch while it has nothing new (Kafka's default is 500 ms)
HOLD_MS = 60_000
#: the producer's limit for an acknowledgement: well inside the hold
DELIVERY_TIMEOUT_MS = 20_000
#: (replica.socket.timeout.ms must be at least replica.fetch.wait.max.ms, as Kafka checks)
PROPERTIES: dict[str, Any] = {**CLUSTER_TIMING, "min.insync.replicas": 2, "replica.fetch.wait.max.ms": HOLD_MS,
                              "replica.socket.timeout.ms": HOLD_MS, "replica.lag.time.max.ms": 120_000}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KlogCluster]:
    with KlogCluster(tmp_path, 3, properties=PROPERTIES) as started:
        started.wait_for_brokers()
        yield started


def create_placed(cluster: KlogCluster, replicas: list[int], configs: dict[str, str] | None = None) -> str:
    """A 1-partition topic on ``replicas`` (the first leads), once every node names its leader."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    with cluster.wire(replicas[0]) as wire:
        answer = wire.request(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": replicas}],
             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30_000, "validate_only": False}).topics[0]
    assert answer.error_code == 0, answer
    assert cluster.wait_for_leader(name, 0) == replicas[0]
    cluster.wait_for_isr(name, 0, replicas)
    return name


def produce_acks_all(cluster: KlogCluster, topic: str, *values: bytes) -> list[str]:
    """Idempotent acks=all records; the delivery errors (none: acknowledged within DELIVERY_TIMEOUT_MS)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": DELIVERY_TIMEOUT_MS})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
    assert producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 10) == 0
    return errors


def test_follower_fetches_a_partition_from_its_new_leader_without_waiting_for_the_fetch_that_leader_holds(
        cluster: KlogCluster) -> None:
    controller = cluster.wait_for_controller()
    victim, new_leader = [n for n in cluster.node_ids if n != controller][:2]
    follower = controller   # not killed, so the quorum and the fencing go on undisturbed
    # the follower fetches `held` from the new leader: that fetcher's Fetch is held while `held` gets no records
    held = create_placed(cluster, [new_leader, follower])
    moved = create_placed(cluster, [victim, new_leader, follower])
    # a write to `held` answers the held Fetch; the follower's next one (its new offset) is held from now for HOLD_MS
    errors = produce_acks_all(cluster, held, b"before")
    assert errors == [], (errors, "\n".join(cluster.log_lines(new_leader)[-40:]))

    seen_before = len(cluster.log_lines(follower))
    cluster.kill(victim)
    assert cluster.wait_for_leader(moved, 0, exclude=victim) == new_leader
    # acks=all on the new leader (ISR: it and the follower) needs the follower's fetch of `moved`
    errors = produce_acks_all(cluster, moved, b"after the failover")
    assert errors == [], (errors, "\n".join(cluster.log_lines(follower)[seen_before:][-40:]),
                          "\n".join(cluster.log_lines(new_leader)[-40:]))
    assert any(f"replica fetcher {new_leader}-0: a partition joined while broker {new_leader} held a fetch" in line
               for line in cluster.log_lines(follower)[seen_before:]), "\n".join(cluster.log_lines(follower)[-30:])


#: the follower's replication throttle: a second of it passes at once, then the bucket refills at this rate
THROTTLE_BYTES_PER_S = 100_000


def test_a_throttled_partition_is_fetched_again_when_its_bucket_refills_not_when_the_held_fetch_ends(
        cluster: KlogCluster) -> None:
    """A partition the follower's throttle holds back sits out a round; the Fetch for the others, which the leader
    holds while they get nothing, is asked to wait no longer than the bucket needs, so the throttled partition's
    acks=all writes pass at the throttled rate, not one bucket's worth per HOLD_MS."""
    controller = cluster.wait_for_controller()
    leader = next(n for n in cluster.node_ids if n != controller)
    follower = controller
    idle = create_placed(cluster, [leader, follower])   # the follower's fetches of it are held: nothing is written
    throttled = create_placed(cluster, [leader, follower],
                              {"follower.replication.throttled.replicas": f"0:{follower}"})
    with cluster.wire(follower) as wire:   # a broker's config goes to that broker, as Kafka's admin client sends it
        answer = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": 4, "resource_name": str(follower), "configs": [{
                "name": "follower.replication.throttled.rate", "config_operation": 0,
                "value": str(THROTTLE_BYTES_PER_S)}]}], "validate_only": False})
    assert [r.error_code for r in answer.responses] == [0], answer
    assert produce_acks_all(cluster, idle, b"before") == []
    # four buckets' worth: the first passes at once, the rest at the rate (3 s), within DELIVERY_TIMEOUT_MS
    values = [bytes(10_000) for _ in range(4 * THROTTLE_BYTES_PER_S // 10_000)]
    errors = produce_acks_all(cluster, throttled, *values)
    assert errors == [], (errors[:3], len(errors), "\n".join(cluster.log_lines(follower)[-30:]))
