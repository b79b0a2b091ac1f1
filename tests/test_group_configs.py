"""Group configs on the GROUP config resource (32), as Kafka 4.3's GroupConfig: Kafka's own ``kafka-configs``
alters and describes them, and refuses bad values with Kafka's messages, on a real klog broker and on Apache
Kafka 4.3 from the same properties; a share group created with ``share.auto.offset.reset=earliest`` reads the
records written before it existed."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

import klog
import klog.aio
from klog.protocol import Struct
from klog.protocol.error_codes import ErrorCode
from klog.testing.kafka_tools import CONFIG_COMMAND, java_available, kafka_libs_dir, run_kafka_tool

from test_share_groups import _drain, _produce, _topic, broker, one_connection  # noqa: F401 - the fixture

needs_java = pytest.mark.skipif(not java_available() or kafka_libs_dir() is None,
                                reason="needs java and the Kafka 4.3 jars (tools/install-peers.sh)")


def _configs(broker, *args):
    r = run_kafka_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap_servers, "--entity-type", "groups",
                       *args, timeout=120)
    return r.returncode, r.stdout + r.stderr


@needs_java
def test_group_configs_are_altered_and_described_as_kafka(broker):
    group = f"cfg-{uuid.uuid4().hex[:8]}"
    code, out = _configs(broker, "--entity-name", group, "--alter", "--add-config",
                         "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")
    assert code == 0 and f"Completed updating config for group {group}." in out, out
    code, out = _configs(broker, "--entity-name", group, "--describe")
    assert code == 0, out
    # the same properties on both brokers (tests/test_share_groups.py): lock duration 1500 in server.properties
    assert [line.strip() for line in out.splitlines() if line.startswith("  ")] == [
        "share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset="
        "earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}",
        "share.record.lock.duration.ms=20000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.record.lock."
        "duration.ms=20000, STATIC_BROKER_CONFIG:group.share.record.lock.duration.ms=1500, DEFAULT_CONFIG:group."
        "share.record.lock.duration.ms=30000}"]
    code, out = _configs(broker, "--entity-name", group, "--describe", "--all")
    assert code == 0, out
    described = {line.split("=", 1)[0].strip(): line.split("=", 1)[1].split(" ", 1)[0]
                 for line in out.splitlines() if line.startswith("  ")}
    assert {k: described[k] for k in ("share.delivery.count.limit", "share.isolation.level",
                                      "share.partition.max.record.locks", "share.session.timeout.ms",
                                      "consumer.session.timeout.ms", "share.renew.acknowledge.enable",
                                      "share.assignment.interval.ms", "consumer.assignment.interval.ms")} == {
        "share.delivery.count.limit": "3", "share.isolation.level": "read_uncommitted",
        "share.partition.max.record.locks": "2000", "share.session.timeout.ms": "45000",
        "consumer.session.timeout.ms": "45000", "share.renew.acknowledge.enable": "true",
        "share.assignment.interval.ms": "1000", "consumer.assignment.interval.ms": "1000"}
    code, out = _configs(broker, "--entity-name", group, "--alter", "--delete-config", "share.record.lock.duration.ms")
    assert code == 0, out
    code, out = _configs(broker, "--describe")
    assert code == 0 and f"Dynamic configs for group {group} are:" in out, out
    assert "share.record.lock.duration.ms=20000" not in out


@needs_java
@pytest.mark.parametrize("setting, message", [
    ("share.record.lock.duration.ms=999",
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ("share.auto.offset.reset=sometimes",
     "Invalid value `sometimes` for configuration share.auto.offset.reset. The value must be either 'earliest', "
     "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ("no.such.key=1", "Unknown group config name: no.such.key"),
    ("share.delivery.count.limit=11",
     "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ("share.assignment.interval.ms=15001",
     "share.assignment.interval.ms must be less than or equal to group.share.max.assignment.interval.ms"),
    ("consumer.assignment.interval.ms=15001",
     "consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    # Kafka 4.3.1 names *.assignor.offload.enable group configs (GroupConfig) but its ConfigDef has none of them
    ("share.assignor.offload.enable=true", "Unknown group config name: share.assignor.offload.enable"),
])
def test_invalid_group_configs_are_refused_with_kafkas_message(broker, setting, message):
    code, out = _configs(broker, "--entity-name", f"bad-{uuid.uuid4().hex[:8]}", "--alter", "--add-config", setting)
    assert code != 0 and "InvalidConfigurationException" in out and message in out, out


def test_group_config_edge_cases_on_the_wire(broker):
    def alter(name, op, value):
        return Struct(resources=[Struct(resource_type=32, resource_name="g", configs=[
            Struct(name=name, config_operation=op, value=value)])], validate_only=False)

    async def run():
        async with one_connection(broker) as conn:
            nameless = await conn.request(32, Struct(resources=[Struct(resource_type=32, resource_name="",
                                                                       configuration_keys=None)],
                                                     include_synonyms=False, include_documentation=False), version=4)
            default = await conn.request(44, Struct(resources=[Struct(resource_type=32, resource_name="", configs=[
                Struct(name="share.isolation.level", config_operation=0, value="read_committed")])],
                validate_only=False), version=1)
            append = await conn.request(44, alter("share.isolation.level", 2, "x"), version=1)
            return nameless.results[0], default.responses[0], append.responses[0]

    nameless, default, append = asyncio.run(run())
    assert (nameless.error_code, nameless.error_message) == (ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    assert (default.error_code, default.error_message) == (ErrorCode.INVALID_REQUEST,
                                                           "Default group resources are not allowed.")
    assert (append.error_code, append.error_message) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key share.isolation.level because its type is not LIST.")


@needs_java
@pytest.mark.parametrize("reset", ["earliest", "by_duration:PT1H"])
def test_share_auto_offset_reset_reads_records_older_than_the_group(broker, reset):
    topic = _topic(broker)
    _produce(broker, topic, [b"old-1", b"old-2", b"old-3"])
    group = f"early-{topic}"
    code, out = _configs(broker, "--entity-name", group, "--alter", "--add-config", f"share.auto.offset.reset={reset}")
    assert code == 0, out
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        got = _drain([consumer], 3, timeout=30)
        consumer.commit_sync()
        assert sorted(r.value for _, r in got) == [b"old-1", b"old-2", b"old-3"]
    finally:
        consumer.close()


@needs_java
@pytest.mark.parametrize("kind", ["share", "consumer"])
def test_heartbeat_interval_group_config_is_what_members_are_told(broker, kind):
    """{share,consumer}.heartbeat.interval.ms set with kafka-configs on one group is the interval its members are
    told; the broker's group.*.heartbeat.interval.ms stays the default of other groups."""
    topic = _topic(broker)
    group = f"hb-{topic}"
    code, out = _configs(broker, "--entity-name", group, "--alter", "--add-config", f"{kind}.heartbeat.interval.ms=600")
    assert code == 0, out
    member, other = str(uuid.uuid4()), str(uuid.uuid4())

    async def script(beat, beat_other_group):
        joined = await beat(member, 0)
        elsewhere = await beat_other_group(other, 0)
        await beat(member, -1)
        await beat_other_group(other, -1)
        return joined, elsewhere

    joined, elsewhere = _beats(broker, group, topic, script, kind)
    default = 500 if kind == "share" else 5000   # PROPERTIES' group.share.heartbeat.interval.ms; Kafka's default
    assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 600)
    assert (elsewhere.error_code, elsewhere.heartbeat_interval_ms) == (0, default)


@pytest.mark.parametrize("kind", ["share", "consumer"])
def test_session_timeout_group_config_expires_a_silent_member(broker, kind):
    """{kind}.session.timeout.ms on the group (2 s, the broker's default 45 s): a member that stops heartbeating is
    removed after it, so its next heartbeat is answered UNKNOWN_MEMBER_ID; a member that kept beating stays."""
    topic = _topic(broker)
    group = f"st-{topic}"
    _set_group_configs(broker, group, {f"{kind}.session.timeout.ms": "2000", f"{kind}.heartbeat.interval.ms": "500"})
    silent, beating = str(uuid.uuid4()), str(uuid.uuid4())

    async def script(beat, beat_other_group):
        epochs = {}
        for member in (silent, beating):
            joined = await beat(member, 0)
            assert joined.error_code == ErrorCode.NONE, joined.error_message
            epochs[member] = joined.member_epoch
        until = time.monotonic() + 4.5
        while time.monotonic() < until:
            await asyncio.sleep(0.4)
            kept = await beat(beating, epochs[beating])
            assert kept.error_code == ErrorCode.NONE, kept.error_message
            epochs[beating] = kept.member_epoch
        late = await beat(silent, epochs[silent])
        await beat(beating, -1)
        return late.error_code

    assert _beats(broker, group, topic, script, kind) == ErrorCode.UNKNOWN_MEMBER_ID


def _set_group_configs(broker, group, configs):
    """IncrementalAlterConfigs on the GROUP resource, then waits until DescribeConfigs shows the values (Kafka
    propagates group configs to its brokers through the metadata log)."""
    resource = klog.client.admin.ConfigResource("group", group)
    with klog.AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.alter_configs({resource: configs})
        deadline = time.monotonic() + 15
        while True:
            described = admin.describe_configs([resource])[resource]
            if all(described[k].value == v for k, v in configs.items()) or time.monotonic() > deadline:
                break
            time.sleep(0.1)


def _transactions(broker, topic):
    """A committed, an aborted and a committed transaction (confluent-kafka's transactional producer), then a
    plain record ``end``; returns the values of the committed records and of the aborted ones."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": f"tx-{topic}"})
    committed, aborted = [b"c1", b"c2", b"c3"], [b"a1", b"a2"]
    producer.init_transactions(30)
    for values, commit in ((committed[:2], True), (aborted, False), (committed[2:], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v, partition=0)
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    _produce(broker, topic, [b"end"])
    return committed, aborted


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_share_isolation_level_read_committed_skips_aborted_transactions(broker, level):
    """share.isolation.level=read_committed: a share group acquires only below the last stable offset and never
    gets the records of aborted transactions nor the transaction markers; read_uncommitted gets every record."""
    topic = _topic(broker)
    group = f"iso-{topic}"
    _set_group_configs(broker, group, {"share.auto.offset.reset": "earliest", "share.isolation.level": level})
    committed, aborted = _transactions(broker, topic)
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        # one member reads the partition in offset order: once ``end`` arrives, every earlier record has
        while b"end" not in got and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout=0.5))
        consumer.commit_sync()
    finally:
        consumer.close()
    expected = committed + [b"end"] if level == "read_committed" else committed[:2] + aborted + committed[2:] + [b"end"]
    assert got == expected


@pytest.mark.parametrize("enabled", [True, False])
def test_renew_acknowledgement_follows_share_renew_acknowledge_enable(broker, enabled):
    """KIP-1222: a RENEW acknowledgement extends the record's lock when share.renew.acknowledge.enable is true
    (the default); when false the partition's acknowledgements are refused with INVALID_RECORD_STATE and the
    record stays acquired by the member (its ACCEPT then succeeds)."""
    topic = _topic(broker)
    group = f"renew-{topic}"
    _set_group_configs(broker, group, {"share.auto.offset.reset": "earliest",
                                       "share.renew.acknowledge.enable": str(enabled).lower()})
    _produce(broker, topic, [b"r1"])
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                  acknowledgement_mode="explicit")
    try:
        got = _drain([consumer], 1, timeout=30)
        assert [r.value for _, r in got] == [b"r1"]
        record = got[0][1]
        consumer.acknowledge(record, "renew")
        renewed = consumer.commit_sync()
        if enabled:
            assert renewed == {(topic, 0): None}
        else:
            assert isinstance(renewed[(topic, 0)], klog.client.errors.KafkaError), renewed
            assert renewed[(topic, 0)].code == ErrorCode.INVALID_RECORD_STATE
        consumer.acknowledge(record, "accept")
        assert consumer.commit_sync() == {(topic, 0): None}
    finally:
        consumer.close()


def test_poll_after_renew_returns_the_renewed_record_until_it_is_acknowledged(broker):
    """Explicit acknowledgement, as Kafka's KafkaShareConsumer: a record acknowledged with RENEW counts as
    acknowledged (the next poll does not raise); that poll renews the lock and returns the record again (same
    offset, same delivery count) instead of new ones, so it can be acknowledged later. Renewed past its first lock
    (1.5 s) it is never delivered to another member, and once accepted never again."""
    topic = _topic(broker)
    group = f"renew-poll-{topic}"
    _set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    _produce(broker, topic, [b"slow"])   # two batches: Kafka acquires whole batches
    _produce(broker, topic, [b"next"])
    worker = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                acknowledgement_mode="explicit", max_poll_records=1)
    other = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                               acknowledgement_mode="explicit")
    stolen: list[bytes] = []

    def other_polls(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for r in other.poll(timeout=0.1):
                stolen.append(r.value)
                other.acknowledge(r, "accept")

    try:
        got: list = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = worker.poll(timeout=0.5)
        assert [(r.value, r.delivery_count) for r in got] == [(b"slow", 1)]
        slow = got[0]
        started = time.monotonic()
        while time.monotonic() - started < 4.0:   # more than twice the lock duration (1.5 s)
            worker.acknowledge(slow, "renew")
            again = worker.poll(timeout=1.0)
            assert [(r.offset, r.value, r.delivery_count) for r in again] == [(slow.offset, b"slow", 1)]
            slow = again[0]
            other_polls(0.6)
        assert b"slow" not in stolen
        worker.acknowledge(slow, "accept")
        assert worker.commit_sync() == {(topic, 0): None}
        other_polls(2.5)   # past any lock: the accepted record never comes back
        assert stolen == [b"next"]
    finally:
        worker.close()
        other.close()


def test_share_read_committed_stops_at_an_open_transaction(broker):
    """read_committed share groups acquire only below the last stable offset: a plain record written after an
    open transaction's records waits for the transaction to end, then both arrive."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(broker)
    group = f"lso-{topic}"
    _set_group_configs(broker, group, {"share.auto.offset.reset": "earliest",
                                       "share.isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    _produce(broker, topic, [b"before"])
    consumer = klog.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:   # the member reads the partition
            got.extend(r.value for r in consumer.poll(timeout=0.5))
        assert got == [b"before"]
        producer.begin_transaction()
        producer.produce(topic, value=b"in-txn", partition=0)
        producer.flush(30)
        _produce(broker, topic, [b"after-txn"])
        held = [r.value for r in consumer.poll(timeout=1.5)]   # the open transaction holds the LSO back
        producer.commit_transaction(30)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(timeout=0.5))
        consumer.commit_sync()
    finally:
        consumer.close()
    assert (held, got) == ([], [b"in-txn", b"after-txn"])


def test_renew_share_fetch_acknowledges_without_fetching(broker):
    """KIP-1222 on the wire: a ShareFetch with IsRenewAck must have zero MaxWaitMs/MinBytes/MaxBytes/MaxRecords
    (else INVALID_REQUEST for the whole request), renews without acquiring; a RENEW without IsRenewAck is the
    partition's INVALID_REQUEST acknowledgement error."""
    topic = _topic(broker)
    group = f"renew-fetch-{topic}"
    _set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    _produce(broker, topic, [b"r1"])

    async def run():
        async with klog.aio.ShareConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                          acknowledgement_mode="explicit") as c:
            deadline = time.monotonic() + 30
            while not await c.poll(timeout=0.5) and time.monotonic() < deadline:
                pass
            node = c._leader((topic, 0))
            epoch = c._epochs[node]
            out = []
            for renew, limit in ((True, 10), (True, 0), (False, 0)):
                r = await c.cluster.request(node, 78, Struct(
                    group_id=group, member_id=c.member_id, share_session_epoch=epoch, max_wait_ms=limit,
                    min_bytes=limit, max_bytes=limit, max_records=limit, batch_size=10, share_acquire_mode=0,
                    is_renew_ack=renew, forgotten_topics_data=[], topics=[Struct(
                        topic_id=c.assignment[(topic, 0)], partitions=[Struct(
                            partition_index=0, partition_max_bytes=0, acknowledgement_batches=[Struct(
                                first_offset=0, last_offset=0, acknowledge_types=[4])])])]))
                epoch += 0 if r.error_code else 1
                out.append((r.error_code, [(p.error_code, p.acknowledge_error_code, len(p.acquired_records))
                                           for t in r.responses for p in t.partitions]))
            c._epochs[node] = epoch
            return out

    assert asyncio.run(run()) == [(ErrorCode.INVALID_REQUEST, []), (ErrorCode.NONE, [(0, 0, 0)]),
                                  (ErrorCode.NONE, [(0, ErrorCode.INVALID_REQUEST, 0)])]


def _beats(broker, group, topic, script, kind="share"):
    """Runs ``await script(beat, beat_other_group)`` on one connection to the group's coordinator. ``beat(member,
    epoch)`` sends a ShareGroupHeartbeat (``kind`` "share") or ConsumerGroupHeartbeat ("consumer") for ``group``:
    epoch 0 joins subscribed to ``topic``, -1 leaves; a consumer member reports as owned what it was last
    assigned, so it revokes when told to. ``beat_other_group`` does the same for another group. Returns what the
    script returns."""
    owned: dict[str, list] = {}

    async def send(conn, group_id, member, epoch):
        if kind == "share":
            return await conn.request(76, Struct(group_id=group_id, member_id=member, member_epoch=epoch, rack_id=None,
                                                 subscribed_topic_names=[topic] if epoch == 0 else None), version=1)
        answer = await conn.request(68, Struct(
            group_id=group_id, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000 if epoch == 0 else -1,
            subscribed_topic_names=[topic] if epoch == 0 else None, subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[] if epoch == 0 else owned.get(member) if epoch > 0 else None),
            version=1)
        if answer.assignment is not None:
            owned[member] = [Struct(topic_id=t.topic_id, partitions=list(t.partitions))
                             for t in answer.assignment.topic_partitions]
        return answer

    async def run():
        async with one_connection(broker) as conn:
            probe_group, probe = f"{group}-probe", str(uuid.uuid4())
            deadline = time.monotonic() + 30
            while True:   # a new broker creates __consumer_offsets on FindCoordinator, then loads it
                await conn.request(10, Struct(key="", key_type=0, coordinator_keys=[group, probe_group]), version=4)
                answer = await send(conn, probe_group, probe, 0)
                if answer.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                             ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR) \
                        or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            await send(conn, probe_group, probe, -1)
            return await script(lambda member, epoch: send(conn, group, member, epoch),
                                lambda member, epoch: send(conn, probe_group, member, epoch))

    return asyncio.run(run())


def _partitions(answer):
    return sorted(p for t in answer.assignment.topic_partitions for p in t.partitions) \
        if answer.assignment is not None else None


@pytest.mark.parametrize("kind", ["share", "consumer"])
@pytest.mark.parametrize("interval_ms", [3000, 0])
def test_assignment_interval_defers_a_new_members_partitions(broker, kind, interval_ms):
    """{share,consumer}.assignment.interval.ms (KIP-1263, a group config): a member joining right after the group's
    first assignment gets no partition until the interval has passed since that assignment (Kafka 4.3.1: at 3.1 s
    with 3000), then the two members split the partitions (a consumer member once the other revoked its half);
    at 0 it gets its share within its next heartbeats, before the 3 s."""
    topic = _topic(broker, partitions=2)
    group = f"ival-{topic}"
    _set_group_configs(broker, group, {f"{kind}.assignment.interval.ms": str(interval_ms)})
    a, b = str(uuid.uuid4()), str(uuid.uuid4())

    async def script(beat, beat_other_group):
        first = await beat(a, 0)
        assigned_at = time.monotonic()
        joined = await beat(b, 0)
        epochs = {a: first.member_epoch, b: joined.member_epoch}
        held = {a: _partitions(first), b: _partitions(joined)}
        b_assigned_after = 0.0 if held[b] else None
        while time.monotonic() - assigned_at < 12:
            if held[b] and held[a] and sorted(held[a] + held[b]) == [0, 1]:
                break
            await asyncio.sleep(0.25)
            for member in (a, b):
                got = await beat(member, epochs[member])
                assert got.error_code == ErrorCode.NONE, got.error_message
                epochs[member] = got.member_epoch
                if got.assignment is not None:
                    held[member] = _partitions(got)
                if member == b and held[b] and b_assigned_after is None:
                    b_assigned_after = time.monotonic() - assigned_at
        await beat(a, -1)
        await beat(b, -1)
        return b_assigned_after, held

    b_assigned_after, held = _beats(broker, group, topic, script, kind)
    assert b_assigned_after is not None and sorted(held[a] + held[b]) == [0, 1], (b_assigned_after, held)
    # the line between the two cases is the interval (3 s); the bounds past it leave room for a loaded machine
    if interval_ms:
        assert 2.9 <= b_assigned_after < 10, b_assigned_after
    else:
        assert b_assigned_after < 2.9, b_assigned_after
