"""``group.initial.rebalance.delay.ms`` as librdkafka's own test clusters have it (Kafka's default, 3 s), on a klog
node and an Apache Kafka 4.3 node started from the same properties, with raw classic-group requests.

librdkafka's group tests (0102 static members, 0113 cooperative rebalances, 0118 a commit in a revoke callback)
subscribe two consumers together and count on both sharing a new group's first generation: the first JoinGroup of
an Empty group waits the delay for more members. With the delay at 0 (klog.testing's default, for speed) the first
member to join gets a generation of its own at once, and the second one's join then starts another rebalance that
revokes what the first was just given (0102: "Expected rebalance event NO_ERROR got _REVOKE_PARTITIONS"): a race
the clients lose on Kafka as on klog, more often on klog, which completes a join and sync in about 2 ms where
Kafka takes about 50 (docs/compatibility.md, librdkafka's suite). Here: two static members joining 0.5 s apart
share generation 1; a member joining the Stable group afterwards rebalances it at once (no delay: the group is not
Empty), and the first members learn it from their heartbeat (REBALANCE_IN_PROGRESS), which is how 0102's first
consumer lost its partitions. Each step's answer is compared with the one Apache Kafka 4.3.1 gave.

And 0118's commit, with confluent-kafka (librdkafka 2.x): its second consumer commits in a revoke callback 5 s after
unassigning and expects the commit to fail, which it does when the revocation is the close's (librdkafka refuses it
itself, ``_DESTROY``). When that consumer joined first and alone (delay 0, its JoinGroup ahead), the first
consumer's join revokes it instead; it rejoins while the callback sleeps, and its commit carries its member id and
the group's current generation (the next one once the rebalance completed): a current member's commit, which Kafka
accepts as klog does (NO_ERROR, the failure once seen in CI under load)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from klog.testing.kafka import one_broker
from klog.testing.wire import until

from test_groups_vs_kafka import Conn, assert_kafkas_answers, join, ready

pytestmark = pytest.mark.timeout(300)

#: librdkafka's trivup clusters leave the delay at Kafka's default
PROPERTIES = {"num.partitions": 2, "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 3000,
              "group.min.session.timeout.ms": 1000, "auto.create.topics.enable": "true"}
JOIN, HEARTBEAT, SYNC = 11, 12, 14


@pytest.fixture(scope="module", params=["klog", pytest.param("kafka", marks=pytest.mark.java)])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp(f"initial-delay-{request.param}")
    with one_broker(request.param, root, PROPERTIES) as bootstrap:
        yield bootstrap


def sync(group: str, generation: int, member: str, instance: str, assignments: list[dict[str, object]]) -> dict:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": assignments}


def heartbeat(group: str, generation: int, member: str, instance: str) -> dict:
    return {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": instance}


async def scenario(bootstrap: str, tag: str) -> list:
    group = f"initial-delay-{tag}"
    await ready(bootstrap, [group], {"dt": 2})
    out: list = []
    async with Conn(bootstrap) as a, Conn(bootstrap) as b, Conn(bootstrap) as c:
        # two static members subscribing together (as 0102's two consumers): the first join waits the delay
        first = asyncio.ensure_future(a.call(JOIN, 5, join(group, "", instance="a")))
        await asyncio.sleep(0.5)
        rb = await b.call(JOIN, 5, join(group, "", instance="b"))
        ra = await first
        leader = ra if ra.member_id == ra.leader else rb
        out.append(("together", ra.error_code, rb.error_code, ra.generation_id, rb.generation_id,
                    ra.leader == rb.leader, len(leader.members)))
        gen = ra.generation_id
        follower = rb if leader is ra else ra
        parked = asyncio.ensure_future((b if follower is rb else a).call(
            SYNC, 3, sync(group, gen, follower.member_id, "b" if follower is rb else "a", [])))
        leader_conn, leader_instance = (a, "a") if leader is ra else (b, "b")
        assignments = [{"member_id": m.member_id, "assignment": b""} for m in leader.members]
        s1 = await leader_conn.call(SYNC, 3, sync(group, gen, leader.member_id, leader_instance, assignments))
        s2 = await parked
        out.append(("synced", s1.error_code, s2.error_code))
        # a member joining the Stable group afterwards: a rebalance at once, which the others learn by heartbeat
        late = asyncio.ensure_future(c.call(JOIN, 5, join(group, "", instance="c")))
        h = await a.call(HEARTBEAT, 3, heartbeat(group, gen, ra.member_id, "a"))
        while h.error_code == 0:   # until the late JoinGroup has arrived
            await asyncio.sleep(0.1)
            h = await a.call(HEARTBEAT, 3, heartbeat(group, gen, ra.member_id, "a"))
        out.append(("late-joiner-heartbeat", h.error_code))
        rejoin_b = asyncio.ensure_future(b.call(JOIN, 5, join(group, rb.member_id, instance="b")))
        ra2 = await a.call(JOIN, 5, join(group, ra.member_id, instance="a"))
        rb2, rc = await rejoin_b, await late
        out.append(("rebalanced", ra2.error_code, rb2.error_code, rc.error_code, ra2.generation_id - gen,
                    rc.generation_id - gen, max(len(ra2.members), len(rb2.members), len(rc.members))))
    return out


def test_members_joining_a_new_group_within_the_initial_delay_share_its_first_generation(broker: str) -> None:
    assert_kafkas_answers(broker, scenario, "d", KAFKA_ANSWERS)


def test_a_commit_in_a_revoke_callback_after_rejoining_carries_the_new_generation_and_is_accepted(
        broker: str) -> None:
    topic, group = f"revoke-commit-{uuid.uuid4().hex[:8]}", f"revoke-commit-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker})
    for i in range(20):
        producer.produce(topic, f"m{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    common = {"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": 10000}
    results: list[object] = []
    late = Consumer(common)

    def revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        positions = consumer.position(partitions)
        consumer.unassign()
        if results:   # the close's revocation
            return
        time.sleep(3)   # 0118 sleeps 5 s: meanwhile this member rejoins and the group completes a generation
        try:
            consumer.commit(offsets=positions, asynchronous=False)
            results.append(KafkaError.NO_ERROR)
        except KafkaException as exc:
            results.append(exc.args[0].code())

    first = Consumer(common)
    try:
        first.subscribe([topic], on_revoke=revoked)
        until(lambda: (first.poll(0.2), len(first.assignment()) == 2)[1], "the first member's assignment")
        late.subscribe([topic])
        until(lambda: (late.poll(0.2), first.poll(0.2), results)[2], "the revoke callback's commit")
        assert results == [KafkaError.NO_ERROR]   # Kafka 4.3.1 accepts it too
    finally:
        late.close()
        first.close()


# -- Apache Kafka 4.3.1's answers (recorded from its side of this test) -------------------------------------------
KAFKA_ANSWERS: list = [
    ("together", 0, 0, 1, 1, True, 2),
    ("synced", 0, 0),
    ("late-joiner-heartbeat", 27),
    ("rebalanced", 0, 0, 0, 1, 1, 3),
]
