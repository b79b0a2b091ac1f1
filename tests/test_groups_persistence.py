"""Group state in ``__consumer_offsets`` on klog's real storage: written in Kafka's layouts, read back on
startup, decodable by Kafka's own DumpLogSegments --offsets-decoder."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import uuid

import pytest

from klog.broker.config import BrokerConfig
from klog.broker.context import BrokerState
from klog.controller.topics import CreatableTopic
from klog.broker.groups import GroupCoordinator
from klog.protocol.errors import ErrorCode as E

from groups_support import Client, FakeClock, consumer_subscription, run_async_tests

JOIN, SYNC, HEARTBEAT, COMMIT, FETCH, CGH, CGD, LIST, DELETE = 11, 14, 12, 8, 9, 68, 69, 16, 42


def broker_state(data_dir: str, **extra) -> BrokerState:
    props = {"log.dirs": data_dir, "listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": "5",
             "group.initial.rebalance.delay.ms": "0", "group.consumer.session.timeout.ms": "10000",
             "group.consumer.min.session.timeout.ms": "1000",
             # every membership change assigns at once (Kafka 4.3 waits share.assignment.interval.ms between
             # assignments; these tests replay the epochs of an assignment per change, not that interval)
             "group.share.assignment.interval.ms": "0"}
    props.update(extra)
    return BrokerState(BrokerConfig(props), asyncio.get_running_loop())


async def open_coordinator(data_dir: str, clock: FakeClock) -> tuple[BrokerState, GroupCoordinator]:
    state = broker_state(data_dir)
    if state.partition_count("t") is None:
        await state.controller_apis.create([CreatableTopic("t", 4)])
    coord = GroupCoordinator(state, clock=clock)
    await coord.start(run_timers=False)
    return state, coord


async def close(state: BrokerState, coord: GroupCoordinator) -> None:
    await coord.stop()
    state.close()


async def classic_group(coord) -> tuple[list[Client], list]:
    clients = [Client(coord, f"c{i}") for i in range(2)]
    joins = []
    for c in clients:
        fields = dict(group_id="cg", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                      group_instance_id=None, protocol_type="consumer",
                      protocols=[dict(name="range", metadata=consumer_subscription("t"))])
        r = await c.call(JOIN, 9, **fields)
        fields["member_id"] = r.member_id
        joins.append(asyncio.ensure_future(c.call(JOIN, 9, **fields)))
    for _ in range(5):
        await asyncio.sleep(0)
    coord.timer.poll()
    joins = [await j for j in joins]
    syncs = [c.call(SYNC, 5, group_id="cg", generation_id=j.generation_id, member_id=j.member_id,
                    protocol_type="consumer", protocol_name="range",
                    assignments=[dict(member_id=m.member_id, assignment=f"A:{m.member_id}".encode())
                                 for m in j.members]) for c, j in zip(clients, joins)]
    results = await asyncio.gather(*syncs)
    assert all(r.error_code == 0 for r in results)
    return clients, joins


async def test_groups_and_offsets_survive_a_coordinator_restart(tmp_path):
    clock = FakeClock()
    data = str(tmp_path / "data")
    state, coord = await open_coordinator(data, clock)
    clients, joins = await classic_group(coord)
    leader = joins[0]
    r = await clients[0].call(COMMIT, 8, group_id="cg", generation_id_or_member_epoch=leader.generation_id,
                              member_id=leader.member_id, topics=[dict(name="t", partitions=[
                                  dict(partition_index=p, committed_offset=100 + p, committed_leader_epoch=p,
                                       committed_metadata=f"md-{p} ✓") for p in range(4)])])
    assert all(p.error_code == 0 for p in r.topics[0].partitions)
    kip848 = str(uuid.uuid4())
    r = await Client(coord, "java").call(CGH, 1, group_id="kg", member_id=kip848, member_epoch=0,
                                         rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
                                         topic_partitions=[])
    assert r.error_code == 0 and r.member_epoch == 2   # Kafka 4.3.1: a new group at 1, the subscription bumps it
    # a member with no topic: the group stays at its first epoch (1) and writes no epoch record
    idle = str(uuid.uuid4())
    r = await Client(coord, "java").call(CGH, 1, group_id="idle", member_id=idle, member_epoch=0,
                                         rebalance_timeout_ms=30000, subscribed_topic_names=[], topic_partitions=[])
    assert r.error_code == 0 and r.member_epoch == 1
    await Client(coord).call(COMMIT, 8, group_id="simple", generation_id_or_member_epoch=-1, member_id="",
                             topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=5,
                                                                     committed_metadata=None)])])
    await Client(coord).call(COMMIT, 8, group_id="gone", generation_id_or_member_epoch=-1, member_id="",
                             topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=5,
                                                                     committed_metadata=None)])])
    assert (await Client(coord).call(DELETE, 2, groups_names=["gone"])).results[0].error_code == 0
    await close(state, coord)

    state, coord = await open_coordinator(data, clock)
    try:
        group = coord.groups["cg"]
        assert group.state_name() == "Stable" and group.generation_id == leader.generation_id
        assert {m.member_id: m.assignment for m in group.members.values()} == {
            j.member_id: f"A:{j.member_id}".encode() for j in joins}
        # Members keep heartbeating into the restored generation without a rebalance.
        for c, j in zip(clients, joins):
            c.coordinator = coord
            r = await c.call(HEARTBEAT, 4, group_id="cg", generation_id=j.generation_id, member_id=j.member_id)
            assert r.error_code == 0
        f = await Client(coord).call(FETCH, 8, groups=[dict(group_id="cg", topics=None),
                                                       dict(group_id="simple", topics=None),
                                                       dict(group_id="gone", topics=None)])
        cg, simple, gone = f.groups
        assert {p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata)
                for p in cg.topics[0].partitions} == {p: (100 + p, p, f"md-{p} ✓") for p in range(4)}
        assert simple.topics[0].partitions[0].committed_offset == 5 and gone.topics == []
        d = await Client(coord).call(CGD, 0, group_ids=["kg"], include_authorized_operations=False)
        kg = d.groups[0]
        assert (kg.error_code, kg.group_epoch, kg.assignment_epoch) == (0, 2, 2)
        assert kg.members[0].member_id == kip848 and kg.members[0].member_epoch == 2
        assert sorted(kg.members[0].assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
        r = await Client(coord, "java").call(CGH, 1, group_id="kg", member_id=kip848, member_epoch=2,
                                             topic_partitions=[dict(topic_id=kg.members[0].assignment
                                                                    .topic_partitions[0].topic_id,
                                                                    partitions=[0, 1, 2, 3])])
        assert (r.error_code, r.member_epoch) == (0, 2)
        d = await Client(coord).call(CGD, 0, group_ids=["idle"], include_authorized_operations=False)
        assert [(g.error_code, g.group_epoch, g.assignment_epoch, [m.member_epoch for m in g.members])
                for g in d.groups] == [(0, 1, 1, [1])]
        listed = await Client(coord).call(LIST, 5, states_filter=[], types_filter=[])
        assert {g.group_id for g in listed.groups} == {"cg", "kg", "idle", "simple"}
    finally:
        await close(state, coord)


async def test_a_static_member_back_under_its_own_member_id_survives_a_coordinator_restart(tmp_path):
    # A static member that left (epoch -2) and joins again with the same member id replaces itself: its records
    # must not end with the tombstones of the member it replaces (the same key), or a reload forgets it.
    clock = FakeClock()
    data = str(tmp_path / "data")
    state, coord = await open_coordinator(data, clock)
    member = str(uuid.uuid4())

    async def beat(epoch: int, **kw):
        return await Client(coord, "java").call(CGH, 1, group_id="sg", member_id=member, member_epoch=epoch,
                                                instance_id="i1", **kw)

    r = await beat(0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[])
    assert r.error_code == 0
    assert (await beat(-2)).member_epoch == -2
    r = await beat(0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[])
    assert r.error_code == 0 and r.member_epoch > 0
    await close(state, coord)

    state, coord = await open_coordinator(data, clock)
    try:
        d = await Client(coord).call(CGD, 0, group_ids=["sg"], include_authorized_operations=False)
        assert [(m.member_id, m.instance_id, m.member_epoch) for m in d.groups[0].members] == [
            (member, "i1", r.member_epoch)]
    finally:
        await close(state, coord)


async def test_share_group_membership_survives_a_coordinator_restart(tmp_path):
    """ShareGroup* records (10-15): the group epoch, members, member epochs, assignments and share-partitions with
    state are replayed; members heartbeat on with their epochs (the previous one too); a left member stays gone."""
    SGH, SGD = 76, 77
    clock = FakeClock()
    data = str(tmp_path / "data")
    state, coord = await open_coordinator(data, clock)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    java = Client(coord, "share-worker")
    epochs = {}
    for mid in ids:
        r = await java.call(SGH, 1, group_id="sg", member_id=mid, member_epoch=0, rack_id=None,
                            subscribed_topic_names=["t"])
        assert r.error_code == 0, r
        epochs[mid] = r.member_epoch
    assert list(epochs.values()) == [2, 3, 4]   # a new group starts at epoch 1, as Kafka's
    r = await java.call(SGH, 1, group_id="sg", member_id=ids[0], member_epoch=2, rack_id=None,
                        subscribed_topic_names=None)
    assert (r.error_code, r.member_epoch) == (0, 4)
    r = await java.call(SGH, 1, group_id="sg", member_id=ids[2], member_epoch=-1, rack_id=None,
                        subscribed_topic_names=None)
    assert r.error_code == 0
    before = await java.call(SGD, 1, group_ids=["sg"], include_authorized_operations=False)
    await close(state, coord)

    state, coord = await open_coordinator(data, clock)
    try:
        java.coordinator = coord
        after = await java.call(SGD, 1, group_ids=["sg"], include_authorized_operations=False)
        g = after.groups[0]
        assert (g.error_code, g.group_epoch, g.assignment_epoch) == (0, 5, 4)
        assert [(m.member_id, m.member_epoch, m.client_id) for m in g.members] == \
            [(m.member_id, m.member_epoch, m.client_id) for m in before.groups[0].members]
        assert {m.member_id: [(t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions]
                for m in g.members} == {ids[0]: [("t", [0, 1])], ids[1]: [("t", [2, 3])]}   # the simple assignor's
        assert coord.groups["sg"].initialized == {coord.topic_catalog().by_name["t"][0]: {0, 1, 2, 3}}
        # ids[1] still has epoch 3 (its previous one is 0): it moves to the assignment epoch; ids[0] heartbeats on
        r = await java.call(SGH, 1, group_id="sg", member_id=ids[1], member_epoch=3, rack_id=None,
                            subscribed_topic_names=None)
        assert (r.error_code, r.member_epoch) == (0, 5)
        r = await java.call(SGH, 1, group_id="sg", member_id=ids[0], member_epoch=4, rack_id=None,
                            subscribed_topic_names=None)
        assert (r.error_code, r.member_epoch) == (0, 5)
        # the previous epoch is accepted (its answer may have been lost); an older one is fenced
        r = await java.call(SGH, 1, group_id="sg", member_id=ids[0], member_epoch=4, rack_id=None,
                            subscribed_topic_names=None)
        assert (r.error_code, r.member_epoch) == (0, 5)
        r = await java.call(SGH, 1, group_id="sg", member_id=ids[0], member_epoch=2, rack_id=None,
                            subscribed_topic_names=None)
        assert r.error_code == E.FENCED_MEMBER_EPOCH
        r = await java.call(SGH, 1, group_id="sg", member_id=ids[2], member_epoch=4, rack_id=None,
                            subscribed_topic_names=None)
        assert r.error_code == E.UNKNOWN_MEMBER_ID   # it left before the restart
        for mid in ids[:2]:
            r = await java.call(SGH, 1, group_id="sg", member_id=mid, member_epoch=-1, rack_id=None,
                                subscribed_topic_names=None)
            assert r.error_code == 0
        assert (await java.call(DELETE, 2, groups_names=["sg"])).results[0].error_code == 0
    finally:
        await close(state, coord)
    state, coord = await open_coordinator(data, clock)
    try:
        assert "sg" not in coord.groups   # the deletion's tombstones are replayed too
    finally:
        await close(state, coord)


async def test_consumer_offsets_is_compacted_by_the_log_cleaner_and_reloads_the_latest_values(tmp_path):
    clock = FakeClock()
    data = str(tmp_path / "data")
    small = {"offsets.topic.segment.bytes": "4096", "log.cleaner.backoff.ms": "50"}
    state = broker_state(data, **small)
    await state.controller_apis.create([CreatableTopic("t", 4)])
    coord = GroupCoordinator(state, clock=clock)
    await coord.start(run_timers=False)
    c = Client(coord)
    for i in range(400):
        r = await c.call(COMMIT, 8, group_id="busy", generation_id_or_member_epoch=-1, member_id="", topics=[
            dict(name="t", partitions=[dict(partition_index=p, committed_offset=i * 10 + p,
                                            committed_metadata=f"round {i}") for p in range(4)])])
        assert all(p.error_code == 0 for p in r.topics[0].partitions)
    partition = coord.topic.partition_for("busy")
    plog = state.partition_log("__consumer_offsets", partition)
    # 1,600 commit records went to the log (the cleaner, already running, may have cleaned part of it)
    assert plog.log_end_offset >= 400 * 4
    state.partitions.log_manager.wake_cleaner()
    for _ in range(200):
        cleaned = dict(((t, p), o) for t, p, o in state.partitions.log_manager.cleaner_checkpoints())
        if cleaned.get(("__consumer_offsets", partition), -1) >= plog.segment_base_offsets()[-1]:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"__consumer_offsets-{partition} was not cleaned: {cleaned}")
    records = list(coord.topic.read_partition(partition))
    active = plog.segment_base_offsets()[-1]
    assert len([r for r in records if r[0] < active]) <= 4, "one record per committed partition before the active segment"
    assert plog.size_in_bytes < 2 * 4096 + 1024, "the log stays near its live size"
    await close(state, coord)

    state, coord = await open_coordinator(data, clock)
    try:
        f = await Client(coord).call(FETCH, 5, group_id="busy", topics=None)
        assert {p.partition_index: (p.committed_offset, p.metadata) for p in f.topics[0].partitions} == {
            p: (3990 + p, "round 399") for p in range(4)}
    finally:
        await close(state, coord)


@pytest.mark.java
async def test_kafka_dump_log_segments_decodes_klogs_consumer_offsets(tmp_path):
    from klog.testing.kafka_tools import run_kafka_tool

    from groups_support import KAFKA_LIBS

    clock = FakeClock()
    data = str(tmp_path / "data")
    state, coord = await open_coordinator(data, clock)
    clients, joins = await classic_group(coord)
    await clients[0].call(COMMIT, 8, group_id="cg", generation_id_or_member_epoch=joins[0].generation_id,
                          member_id=joins[0].member_id, topics=[dict(name="t", partitions=[
                              dict(partition_index=1, committed_offset=77, committed_metadata="hello")])])
    await Client(coord, "java").call(CGH, 1, group_id="cg2", member_id=str(uuid.uuid4()), member_epoch=0,
                                     rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[])
    await close(state, coord)
    files = sorted(glob.glob(os.path.join(data, "__consumer_offsets-*", "*.log")))
    files = [f for f in files if os.path.getsize(f) > 0]
    assert files
    out = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(files), "--offsets-decoder",
                         "--print-data-log", libs=KAFKA_LIBS, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "Unknown" not in text and "Exception" not in text, text[-3000:]
    keys, payloads = [], []
    for line in text.splitlines():
        if " key: " in line and " payload: " in line:
            key = line.split(" key: ", 1)[1].split(" payload: ", 1)[0]
            payload = line.split(" payload: ", 1)[1]
            keys.append(json.loads(key))
            payloads.append(None if payload.strip() in ("", "null", "<DELETE>") else json.loads(payload))
    commits = [(k, p) for k, p in zip(keys, payloads) if k["type"] == "1"]
    assert any(k["data"] == {"group": "cg", "topic": "t", "partition": 1} and p["data"]["offset"] == 77
               and p["data"]["metadata"] == "hello" and p["version"] == "3" for k, p in commits)
    metadata = [p for k, p in zip(keys, payloads) if k["type"] == "2" and p is not None]
    last = metadata[-1]
    assert last["version"] == "3" and last["data"]["protocolType"] == "consumer"
    assert {m["memberId"] for m in last["data"]["members"]} == {j.member_id for j in joins}
    types = {k["type"] for k in keys}
    assert {"3", "5", "6", "7", "8"} <= types, types  # KIP-848 records for cg2




async def test_a_coordinator_unloads_the_offsets_partitions_it_resigns_and_reloads_them_when_elected(tmp_path):
    """Kafka's onResignation / onElection, on real storage: the leadership of ``__consumer_offsets`` partitions
    comes from the broker's image on a quorum (here set by hand, as a leader change would)."""
    from klog.broker.groups.storage import partition_for

    clock = FakeClock()
    state = broker_state(str(tmp_path / "data"))
    await state.controller_apis.create([CreatableTopic("t", 4)])
    led = set(range(5))
    state.led_partitions = lambda topic: set(led)   # what a quorum member reads from its image
    coord = GroupCoordinator(state, clock=clock)
    await coord.topic.ensure_topic_async()
    await coord.start(run_timers=False)
    try:
        assert coord.owned_partitions == led
        clients, joins = await classic_group(coord)
        leader = joins[0]
        r = await clients[0].call(COMMIT, 8, group_id="cg", generation_id_or_member_epoch=leader.generation_id,
                                  member_id=leader.member_id, topics=[dict(name="t", partitions=[
                                      dict(partition_index=p, committed_offset=10 + p, committed_metadata="")
                                      for p in range(4)])])
        assert all(p.error_code == 0 for p in r.topics[0].partitions)
        other = next(g for g in (f"g{i}" for i in range(50)) if partition_for(g, 5) != partition_for("cg", 5))
        await Client(coord).call(COMMIT, 8, group_id=other, generation_id_or_member_epoch=-1, member_id="",
                                 topics=[dict(name="t", partitions=[dict(partition_index=0, committed_offset=7,
                                                                         committed_metadata=None)])])

        led.discard(partition_for("cg", 5))   # another broker now leads cg's partition
        coord.on_metadata_published()
        assert "cg" not in coord.groups and coord.offsets.group_offsets("cg") == {}
        j = joins[0]
        hb = await clients[0].call(HEARTBEAT, 4, group_id="cg", generation_id=j.generation_id, member_id=j.member_id)
        assert hb.error_code == E.NOT_COORDINATOR
        f = await Client(coord).call(FETCH, 8, groups=[dict(group_id="cg", topics=None),
                                                       dict(group_id=other, topics=None)])
        assert [g.error_code for g in f.groups] == [E.NOT_COORDINATOR, 0]
        assert f.groups[1].topics[0].partitions[0].committed_offset == 7
        listed = await Client(coord).call(LIST, 5, states_filter=[], types_filter=[])
        assert {g.group_id for g in listed.groups} == {other}

        led.add(partition_for("cg", 5))   # elected again: the group and its offsets are read back
        coord.on_metadata_published()
        group = coord.groups["cg"]
        assert group.state_name() == "Stable" and group.generation_id == leader.generation_id
        f = await Client(coord).call(FETCH, 8, groups=[dict(group_id="cg", topics=None)])
        assert {p.partition_index: p.committed_offset for p in f.groups[0].topics[0].partitions} == {
            p: 10 + p for p in range(4)}
        hb = await clients[0].call(HEARTBEAT, 4, group_id="cg", generation_id=j.generation_id, member_id=j.member_id)
        assert hb.error_code == 0
    finally:
        await close(state, coord)


run_async_tests(globals())
