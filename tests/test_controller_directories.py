"""JBOD on the active controller (klog.controller.directories through ClusterControlManager), without sockets:
default dirs of new replicas, AssignReplicasToDirs (73) and a heartbeat's OfflineLogDirs (KIP-858), as Kafka's
ClusterControlManager and ReplicationControlManager decide them. Requests are real wire messages; every result's
records are replayed into the next image."""

from __future__ import annotations

import uuid
from typing import Any

from klog.controller.brokers import ClusterControlManager
from klog.controller.directories import default_dir, placement_directories
from klog.metadata.image import MIGRATING_DIRECTORY, NO_LEADER, UNASSIGNED_DIRECTORY
from klog.metadata.records import record
from klog.protocol import ApiKey
from klog.protocol.errors import ErrorCode

from test_controller_brokers import CLUSTER, MV_4_0, TOPIC, Quorum, heartbeat, wire

A, B = uuid.UUID(int=0xA0A0_0000_0000_0000_0000_0000_0000_00A1), uuid.UUID(int=0xB0B0_0000_0000_0000_0000_0000_0000_00B1)
OTHER = uuid.UUID(int=0xC0C0_0000_0000_0000_0000_0000_0000_00C1)


def registration(broker_id: int, dirs: list[uuid.UUID]) -> Any:
    return wire(ApiKey.BROKER_REGISTRATION, {
        "broker_id": broker_id, "cluster_id": CLUSTER, "incarnation_id": uuid.UUID(int=broker_id),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + broker_id, "security_protocol": 0}],
        "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": MV_4_0}],
        "rack": None, "log_dirs": dirs})


def assign(broker_id: int, epoch: int, dirs: dict[uuid.UUID, list[int]], topic: uuid.UUID = TOPIC) -> Any:
    return wire(ApiKey.ASSIGN_REPLICAS_TO_DIRS, {
        "broker_id": broker_id, "broker_epoch": epoch,
        "directories": [{"id": d, "topics": [{"topic_id": topic, "partitions": [{"partition_index": p} for p in ps]}]}
                        for d, ps in dirs.items()]})


class JbodCluster:
    """Broker 1 with dirs A and B, broker 2 with one dir (OTHER), broker 3 with none (an older broker); all
    unfenced; topic TOPIC with partitions 0-3 on [1, 2, 3], 0 and 1 led by broker 1."""

    def __init__(self) -> None:
        self.q = Quorum()
        self.c = ClusterControlManager(CLUSTER)
        self.c.activate(self.q.image, 0)
        self.epochs: dict[int, int] = {}
        for b, dirs in ((1, [A, B]), (2, [OTHER]), (3, [])):
            resp = self.q.run(self.c.register_broker(registration(b, dirs), self.q.image, 0, record_offset=self.q.end))
            assert resp["error_code"] == 0
            self.epochs[b] = resp["broker_epoch"]
        for b in self.epochs:
            assert self.beat(b)["is_fenced"] is False
        replicas = [[1, 2, 3], [1, 2, 3], [2, 1, 3], [2, 1, 3]]
        self.q.commit([record("TopicRecord", name="t", topic_id=TOPIC)] + [
            record("PartitionRecord", partition_id=p, topic_id=TOPIC, replicas=r, isr=r, leader=r[0], leader_epoch=0,
                   partition_epoch=0, directories=placement_directories(self.q.image, r))
            for p, r in enumerate(replicas)])

    def beat(self, broker_id: int, offline: list[uuid.UUID] | None = None) -> Any:
        req = heartbeat(broker_id, self.epochs[broker_id], self.q.end - 1)
        if offline is not None:
            req = wire(ApiKey.BROKER_HEARTBEAT, {"broker_id": broker_id, "broker_epoch": self.epochs[broker_id],
                                                 "current_metadata_offset": self.q.end - 1, "want_fence": False,
                                                 "want_shut_down": False, "offline_log_dirs": offline})
        return self.q.run(self.c.process_heartbeat(req, self.q.image, 10, record_offset=self.q.end))

    def part(self, p: int) -> Any:
        return self.q.image.topics_by_id[TOPIC].partitions[p]


def test_a_new_replica_is_placed_in_its_brokers_only_dir_or_left_unassigned_when_it_has_several() -> None:
    cl = JbodCluster()
    assert default_dir(cl.q.image, 1) == UNASSIGNED_DIRECTORY
    assert default_dir(cl.q.image, 2) == OTHER
    assert default_dir(cl.q.image, 3) == MIGRATING_DIRECTORY
    assert default_dir(cl.q.image, 9) == UNASSIGNED_DIRECTORY   # not registered
    assert cl.part(0).directories == (UNASSIGNED_DIRECTORY, OTHER, MIGRATING_DIRECTORY)
    assert cl.q.image.brokers[1].directories == (A, B)


def test_before_metadata_version_3_7_iv2_replicas_carry_no_dirs() -> None:
    q = Quorum(metadata_version=16)
    c = ClusterControlManager(CLUSTER)
    q.run(c.register_broker(registration(1, [A]), q.image, 0, record_offset=q.end))
    assert placement_directories(q.image, [1]) == []
    answer = c.assign_replicas_to_dirs(assign(1, q.image.brokers[1].epoch, {A: [0]}), q.image)
    assert answer.response["error_code"] == ErrorCode.UNSUPPORTED_VERSION and not answer.records


def test_assign_replicas_to_dirs_records_the_dir_and_answers_each_partition() -> None:
    cl = JbodCluster()
    resp = cl.q.run(cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1], {A: [0, 2], B: [1, 7]}), cl.q.image))
    assert resp["error_code"] == 0
    codes = {(d["id"], p["partition_index"]): p["error_code"] for d in resp["directories"] for t in d["topics"]
             for p in t["partitions"]}
    assert codes == {(A, 0): 0, (A, 2): 0, (B, 1): 0, (B, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert cl.part(0).directory(1) == A and cl.part(2).directory(1) == A and cl.part(1).directory(1) == B
    assert cl.part(0).directory(2) == OTHER and cl.part(0).isr == (1, 2, 3) and cl.part(0).leader == 1
    unknown = cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1], {A: [0]}, topic=uuid.UUID(int=5)), cl.q.image)
    assert unknown.response["directories"][0]["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    stale = cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1] - 1, {A: [0]}), cl.q.image)
    assert stale.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH and not stale.records
    nobody = cl.c.assign_replicas_to_dirs(assign(7, 1, {A: [0]}), cl.q.image)
    assert nobody.response["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED
    # a partition without a replica on the broker
    cl.q.commit([record("PartitionRecord", partition_id=4, topic_id=TOPIC, replicas=[2, 3], isr=[2, 3], leader=2,
                        leader_epoch=0, partition_epoch=0)])
    other = cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1], {A: [4]}), cl.q.image)
    assert other.response["directories"][0]["topics"][0]["partitions"][0]["error_code"] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER and not other.records


def test_a_heartbeat_naming_an_offline_dir_moves_only_that_dirs_replicas_out_of_isr_and_leadership() -> None:
    cl = JbodCluster()
    cl.q.run(cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1], {A: [0, 2], B: [1, 3]}), cl.q.image))
    end = cl.q.end
    resp = cl.beat(1, offline=[B])
    assert resp["error_code"] == 0 and resp["is_fenced"] is False and resp["should_shut_down"] is False
    # partition 1 (led by 1, in B): led by 2 now, 1 out of the ISR; partition 3 (led by 2, in B): 1 out of the ISR
    assert cl.part(1).leader == 2 and cl.part(1).isr == (2, 3)
    assert cl.part(3).leader == 2 and cl.part(3).isr == (2, 3)
    # the replicas in A are untouched
    assert cl.part(0).leader == 1 and cl.part(0).isr == (1, 2, 3) and cl.part(2).isr == (2, 1, 3)
    assert cl.q.image.brokers[1].directories == (A,) and not cl.q.image.brokers[1].fenced
    assert [r.name for r in cl.q.log[end:]] == ["PartitionChangeRecord", "PartitionChangeRecord",
                                                 "BrokerRegistrationChangeRecord"]
    live = cl.q.image.brokers
    assert cl.part(1).offline_replicas(live) == (1,) and cl.part(0).offline_replicas(live) == ()
    # the same report again changes nothing
    end = cl.q.end
    cl.beat(1, offline=[B])
    assert cl.q.end == end
    # a replica in an offline dir is never elected: with 2 and 3 fenced, partition 1 has no leader
    for b in (2, 3):
        cl.q.run(cl.c.process_heartbeat(heartbeat(b, cl.epochs[b], cl.q.end - 1, want_fence=True), cl.q.image, 20,
                                        record_offset=cl.q.end))
    assert cl.part(1).leader == NO_LEADER and cl.part(0).leader == 1


def test_assigning_a_replica_to_a_dir_that_is_not_online_takes_it_out_of_isr_and_leadership() -> None:
    cl = JbodCluster()
    cl.beat(1, offline=[B])   # nothing assigned yet: only the registration changes
    assert cl.q.image.brokers[1].directories == (A,) and cl.part(0).leader == 1
    cl.q.run(cl.c.assign_replicas_to_dirs(assign(1, cl.epochs[1], {B: [0]}), cl.q.image))
    assert cl.part(0).directory(1) == B and cl.part(0).leader == 2 and cl.part(0).isr == (2, 3)


def test_heartbeats_record_cordoned_dirs_from_4_3_and_placement_skips_a_broker_with_every_dir_cordoned() -> None:
    """KIP-1066: at metadata.version 4.3-IV0 RegisterBrokerRecord is written at v4 (v3 before), a heartbeat naming
    cordoned dirs that differ from the registration's is recorded (BrokerRegistrationChangeRecord v3; the same dirs
    again write nothing), and new replicas avoid a broker whose dirs are all cordoned; below 4.3-IV0 the field is
    ignored."""
    from klog.broker.config import BrokerConfig
    from klog.controller.topics import CreatableTopic, TopicControlManager
    from test_controller_brokers import Quorum as MvQuorum

    def cordon(q: Any, c: ClusterControlManager, broker_id: int, epoch: int, dirs: list[uuid.UUID]) -> list[Any]:
        before = q.end
        q.run(c.process_heartbeat(wire(ApiKey.BROKER_HEARTBEAT, {
            "broker_id": broker_id, "broker_epoch": epoch, "current_metadata_offset": q.end - 1, "want_fence": False,
            "want_shut_down": False, "offline_log_dirs": [], "cordoned_log_dirs": dirs}), q.image, 10,
            record_offset=q.end))
        return q.log[before:]

    for mv, register_version in ((30, 4), (29, 3)):
        q, c = MvQuorum(mv), ClusterControlManager(CLUSTER)
        c.activate(q.image, 0)
        epochs = {}
        for b, dirs in ((1, [A, B]), (2, [OTHER])):
            req = wire(ApiKey.BROKER_REGISTRATION, {
                "broker_id": b, "cluster_id": CLUSTER, "incarnation_id": uuid.UUID(int=b),
                "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + b, "security_protocol": 0}],
                "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 30}],
                "rack": None, "log_dirs": dirs})
            epochs[b] = q.run(c.register_broker(req, q.image, 0, record_offset=q.end))["broker_epoch"]
            assert q.log[-1].version == register_version
        written = cordon(q, c, 1, epochs[1], [A, B])
        if mv < 30:
            assert q.image.brokers[1].cordoned_directories is None
            continue
        assert [(r.name, r.version, list(r.data.cordoned_log_dirs)) for r in written
                if r.name == "BrokerRegistrationChangeRecord" and r.data.cordoned_log_dirs is not None] == [
            ("BrokerRegistrationChangeRecord", 3, [A, B])]
        assert not [r for r in cordon(q, c, 1, epochs[1], [B, A]) if r.data.cordoned_log_dirs is not None]
        cordon(q, c, 2, epochs[2], [])
        assert q.image.brokers[1].has_uncordoned_dirs() is False and q.image.brokers[2].has_uncordoned_dirs()
        topics = TopicControlManager(BrokerConfig({}))
        made = topics.create_topics([CreatableTopic("c", 4, 1, None, {})], q.image, 0)
        assert {r for rec in made.records if rec.name == "PartitionRecord" for r in rec.data.replicas} == {2}
        cordon(q, c, 2, epochs[2], [OTHER])
        refused = topics.create_topics([CreatableTopic("d", 1, 1, None, {})], q.image, 0).response[0].item
        assert (refused["error_code"], refused["error_message"]) == (
            ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 1 time(s): All brokers are "
            "currently fenced, or have all their log directories cordoned.")
