"""Share-group administration (KIP-932) on a real klog broker and on Apache Kafka 4.3 from the same properties:
Kafka's own ``kafka-share-groups`` (ShareGroupCommand) lists, describes (members, state, offsets), resets,
deletes offsets of and deletes a share group; DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92) and the share-group state RPCs between brokers (Initialize 83, Read 84, Delete 86,
ReadSummary 87) answer as Kafka's do."""

from __future__ import annotations

import asyncio

import pytest

import klog
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool

from test_share_groups import PROPERTIES, _drain, _join, _produce, _topic, broker, one_connection  # noqa: F401 - the fixture

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

needs_java = pytest.mark.skipif(not java_available() or kafka_libs_dir() is None,
                                reason="needs java and the Kafka 4.3 jars (tools/install-peers.sh)")


def _tool(broker, *args):
    r = run_kafka_tool(SHARE_GROUP_COMMAND, "--bootstrap-server", broker.bootstrap_servers, *args, timeout=120)
    return r.returncode, r.stdout + r.stderr


def _rows(output):
    """The table rows of a ShareGroupCommand answer, split on whitespace (header rows included)."""
    return [line.split() for line in output.splitlines() if line.strip()]


def _offsets(broker, group):
    """{(topic, partition): (start offset, lag)} from ``--describe`` (offsets)."""
    code, out = _tool(broker, "--describe", "--group", group)
    assert code == 0, out
    return {(r[1], int(r[2])): (int(r[3]), int(r[4])) for r in _rows(out) if r[0] == group}


def _consumed_group(broker, records=10):
    """A topic, its share group, and a member that consumed (and accepted) ``records`` records."""
    topic = _topic(broker)
    group = f"g-{topic}"
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    _join(broker, topic, [consumer])
    values = [f"v{i}".encode() for i in range(records)]
    _produce(broker, topic, values)
    got = _drain([consumer], records)
    consumer.commit_sync()
    assert sorted(r.value for _, r in got) == sorted(values)
    return topic, group, consumer, values


@needs_java
def test_share_group_tool_lists_and_describes_a_live_group_and_refuses_to_reset_it(broker):
    topic, group, consumer, _ = _consumed_group(broker)
    try:
        code, out = _tool(broker, "--list")
        assert code == 0 and group in out.split(), out
        code, out = _tool(broker, "--describe", "--group", group, "--members")
        assert code == 0, out
        members = [r for r in _rows(out) if r[0] == group]
        assert [(r[1], r[-1]) for r in members] == [(consumer.member_id, f"{topic}:0")], out
        code, out = _tool(broker, "--describe", "--group", group, "--state")
        assert code == 0, out
        assert [r[-2:] for r in _rows(out) if r[0] == group] == [["Stable", "1"]], out
        start = _start(broker, group, topic)
        assert _offsets(broker, group) == {(topic, 0): (start, 0)}
        code, out = _tool(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                          "--execute")
        assert code != 0 and f"Share group '{group}' is not empty." in out, out
    finally:
        consumer.close()


def _start(broker, group, topic):
    """The share-partition start offset ``--describe`` shows: past the consumed records (Kafka moves it past the
    acknowledged ones lazily, klog at once; the lag is 0 either way)."""
    code, out = _tool(broker, "--describe", "--group", group)
    start = next(int(r[3]) for r in _rows(out) if r[0] == group and r[1] == topic)
    assert start >= 1
    return start


@needs_java
def test_share_group_tool_resets_offsets_and_the_group_consumes_again_from_there(broker):
    topic, group, consumer, values = _consumed_group(broker)
    consumer.close()
    code, out = _tool(broker, "--describe", "--group", group, "--state")
    assert code == 0 and [r[-2:] for r in _rows(out) if r[0] == group] == [["Empty", "0"]], out
    code, out = _tool(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert code == 0, out
    assert [r[1:] for r in _rows(out) if r[0] == group] == [[topic, "0", "0"]], out
    # every record of the log (the join markers and the 10 values) is to be delivered again
    assert _offsets(broker, group) == {(topic, 0): (0, _end_offset(broker, topic))}
    again = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        got = _drain([again], len(values))
        again.commit_sync()
        assert sorted(r.value for _, r in got) == sorted(values)
        assert all(r.delivery_count == 1 for _, r in got)
    finally:
        again.close()


def _end_offset(broker, topic):
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        return next(iter(admin.list_offsets({(topic, 0): "latest"}).values())).offset


@needs_java
def test_share_group_tool_deletes_offsets_then_the_group(broker):
    topic, group, consumer, _ = _consumed_group(broker)
    consumer.close()
    code, out = _tool(broker, "--delete-offsets", "--group", group, "--topic", topic)
    assert code == 0 and [topic, "Successful"] in _rows(out), out
    code, out = _tool(broker, "--describe", "--group", group)
    assert code == 0 and f"Share group '{group}' has no offset information." in out, out
    code, out = _tool(broker, "--delete", "--group", group)
    assert code == 0 and f"Deletion of requested share groups ('{group}') was successful." in out, out
    code, out = _tool(broker, "--list")
    assert code == 0 and group not in out.split(), out
    code, out = _tool(broker, "--delete", "--group", f"none-{topic}")
    assert f"Group 'none-{topic}' is not a share group." in out, out


@needs_java
def test_share_group_tool_reset_creates_the_group_with_its_offsets(broker):
    topic = _topic(broker)
    _produce(broker, topic, [b"a", b"b", b"c"])
    group = f"new-{topic}"
    code, out = _tool(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert code == 0 and [group, topic, "0", "0"] in _rows(out), out
    assert _offsets(broker, group) == {(topic, 0): (0, 3)}
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        got = _drain([consumer], 3)
        consumer.commit_sync()
        assert sorted(r.value for _, r in got) == [b"a", b"b", b"c"]
    finally:
        consumer.close()


# -- the wire, as Kafka answers it ---------------------------------------------------------------------------------

def _requests(broker, calls):
    async def run():
        async with one_connection(broker) as conn:
            return [await conn.request(key, body, version=version) for key, version, body in calls]

    return asyncio.run(run())


def _topic_id(broker, topic):
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        return admin.describe_topics([topic])[topic].topic_id


def _state_partition(responses):
    """(error code, message, the other fields) of each single-partition share-state response."""
    out = []
    for r in responses:
        p = r.results[0].partitions[0]
        fields = {k: getattr(p, k) for k in ("state_epoch", "start_offset", "leader_epoch",
                                               "delivery_complete_count") if hasattr(p, k)}
        if hasattr(p, "state_batches"):
            fields["state_batches"] = list(p.state_batches)
        out.append((p.error_code, p.error_message, fields))
    return out


def test_share_group_state_rpcs_initialize_read_summarize_and_delete(broker):
    topic = _topic(broker)
    _consumed_group(broker)[2].close()   # the share coordinator is up (its topic exists)
    tid = _topic_id(broker, topic)
    group = f"rpc-{topic}"

    def one(**partition):
        return Struct(group_id=group, topics=[Struct(topic_id=tid, partitions=[Struct(partition=0, **partition)])])

    initialize = (83, 0, one(state_epoch=1, start_offset=5))
    read = (84, 0, one(leader_epoch=0))
    summary = (87, 1, one(leader_epoch=0))
    delete = (86, 0, one())
    uninitialized = (ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.",
                     {"state_epoch": 0, "start_offset": 0, "state_batches": []})
    assert _state_partition(_requests(broker, [read, initialize, read, summary, initialize, delete, read,
                                               summary])) == [
        uninitialized,
        (0, None, {}),
        (0, None, {"state_epoch": 1, "start_offset": 5, "state_batches": []}),
        (0, None, {"state_epoch": 1, "leader_epoch": 0, "start_offset": 5, "delivery_complete_count": 0}),
        (0, None, {}),   # the same state epoch again: accepted
        (0, None, {}),
        uninitialized,
        (0, None, {"state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "delivery_complete_count": -1}),
    ]


def test_share_group_offset_apis_answer_per_partition_as_kafka(broker):
    topic, group, consumer, _ = _consumed_group(broker)
    consumer.close()
    other = _topic(broker)   # the group never read it
    describe = Struct(groups=[Struct(group_id=group, topics=None), Struct(group_id=f"none-{topic}", topics=None),
                              Struct(group_id=group, topics=[Struct(topic_name=other, partitions=[0])])])
    alter = Struct(group_id=group, topics=[
        Struct(topic_name=topic, partitions=[Struct(partition_index=0, start_offset=2),
                                             Struct(partition_index=9, start_offset=2)]),
        Struct(topic_name=f"none-{topic}", partitions=[Struct(partition_index=0, start_offset=1)])])
    delete_offsets = Struct(group_id=group, topics=[Struct(topic_name=f"none-{topic}")])
    delete_unknown = Struct(group_id=f"none-{topic}", topics=[Struct(topic_name=topic)])
    described, altered, deleted, unknown, after = _requests(broker, [
        (90, 1, describe), (91, 0, alter), (92, 0, delete_offsets), (92, 0, delete_unknown),
        (90, 1, Struct(groups=[Struct(group_id=group, topics=None)]))])
    mine, nobody, asked = described.groups
    assert [(t.topic_name, [(p.partition_index, p.lag, p.error_code) for p in t.partitions]) for t in mine.topics] \
        == [(topic, [(0, 0, 0)])]
    assert (nobody.error_code, nobody.topics) == (0, [])
    no_state = (-1, 0, -1, 0)   # start offset, leader epoch, lag, error: what a share-partition without state shows
    assert [[(p.start_offset, p.leader_epoch, p.lag, p.error_code) for p in t.partitions] for t in asked.topics] \
        == [[no_state]]
    assert altered.error_code == 0
    assert {(t.topic_name, p.partition_index, p.error_code) for t in altered.responses for p in t.partitions} == {
        (topic, 0, 0), (topic, 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (f"none-{topic}", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (f"none-{topic}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert (unknown.error_code, unknown.responses) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    [(t, ps)] = [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
                 for t in after.groups[0].topics]
    assert (t, ps) == (topic, [(0, 2)])


def _klog(broker, *args):
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "klog.cli", *args, "--bootstrap-server", broker.bootstrap_servers],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_klog_groups_lists_and_describes_a_share_group(broker):
    """``klog groups`` (the klog CLI, a client) on a share group, against klog and Kafka alike."""
    import json

    topic, group, consumer, _ = _consumed_group(broker)
    try:
        listed = [line for line in _klog(broker, "groups", "list").splitlines() if group in line]
        assert len(listed) == 1 and "share" in listed[0], listed
        members = json.loads(_klog(broker, "groups", "describe", group, "--members", "-f", "json"))
        assert members["state"] == "Stable" and members["protocol_type"] == "share"
        assert [(m["consumer_id"], m["assignment"]) for m in members["members"]] == [
            (consumer.member_id, [[topic, 0]])]
        described = json.loads(_klog(broker, "groups", "describe", group, "-f", "json"))
        assert [(p["topic"], p["partition"], p["lag"]) for p in described["partitions"]] == [(topic, 0, 0)]
        assert described["total_lag"] == 0 and described["partitions"][0]["current_offset"] >= 1
    finally:
        consumer.close()


class _HeldStateStore:
    """A share coordinator whose InitializeShareGroupState and DeleteShareGroupState wait until the test answers
    them (``held``: the futures, in order)."""

    def __init__(self):
        self.held = []

    async def summary(self, group_id, topic_id, partition):
        return Struct(error_code=0, state_epoch=0)

    async def _held(self):
        future = asyncio.get_running_loop().create_future()
        self.held.append(future)
        return await future

    async def initialize(self, group_id, topic_id, partition, *, state_epoch, start_offset):
        return await self._held()

    async def delete(self, group_id, topic_id, partition):
        return await self._held()


async def _share_admin_coordinator():
    from types import SimpleNamespace

    from klog.broker.groups import GroupCoordinator
    from klog.broker.groups.share import ShareGroup

    from groups_support import Client, FakeClock
    from test_groups_replicated_writes import ReplicatedContext

    ctx = ReplicatedContext(topics={"t": 2})
    ctx.auto = 0
    store = _HeldStateStore()
    ctx.share_partitions = SimpleNamespace(store=store, drop_group=lambda group_id, topic=None: None)
    coord = GroupCoordinator(ctx, clock=FakeClock(), persist=True)
    await coord.start(run_timers=False)
    group = ShareGroup("sg")
    coord.groups["sg"] = group
    return coord, ctx, store, group, Client(coord)


async def _until_held(store, count):
    for _ in range(100):
        if len(store.held) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{count} share state write(s) never started: {store.held}")


def _member():
    from klog.broker.groups.share import ShareMember

    return ShareMember(member_id="m1", subscribed_topic_names=["t"])


def test_alter_share_group_offsets_refuses_a_group_a_member_joined_while_its_state_was_written():
    """AlterShareGroupOffsets checks the group is empty, then writes the share state (awaits): a member joining
    meanwhile makes it answer NON_EMPTY_GROUP without recording the altered partitions in the group (it recorded
    them and answered NONE for a group with a member)."""
    async def run():
        coord, ctx, store, group, client = await _share_admin_coordinator()
        alter = asyncio.ensure_future(client.call(91, 0, group_id="sg", topics=[
            dict(topic_name="t", partitions=[dict(partition_index=0, start_offset=3)])]))
        await _until_held(store, 1)
        group.put_member(_member())
        store.held[0].set_result(0)
        answer = await alter
        assert answer.error_code == ErrorCode.NON_EMPTY_GROUP
        assert group.initialized == {}
        await coord.stop()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_deleting_a_share_group_stops_deleting_its_state_once_a_member_joined():
    """DeleteGroups of an empty share group deletes each share-partition's state (awaits): a member joining
    meanwhile stops it (the group keeps the rest of its state and is not deleted; it went on deleting the state
    of the partitions the new member consumes)."""
    async def run():
        coord, ctx, store, group, client = await _share_admin_coordinator()
        tid = ctx.topic_id("t")
        group.initialized[tid] = {0, 1}
        delete = asyncio.ensure_future(client.call(42, 2, groups_names=["sg"]))
        await _until_held(store, 1)
        group.put_member(_member())
        store.held[0].set_result(0)
        for _ in range(20):
            await asyncio.sleep(0)
        started = len(store.held)
        for future in store.held[1:]:   # (so that the old path ends too)
            future.set_result(0)
        answer = await delete
        assert started == 1                                   # partition 1's state was not deleted
        assert answer.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        assert coord.groups.get("sg") is group and group.initialized == {tid: {0, 1}}
        await coord.stop()

    asyncio.run(asyncio.wait_for(run(), 30))
