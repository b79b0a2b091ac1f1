"""The controller's broker lifecycle (klog.controller.brokers) without sockets or clocks.

Requests are real wire messages (encoded and decoded by klog.protocol at their newest version); every result's
records are appended to an in-memory metadata log at the offsets the controller named and replayed through
klog.metadata's delta into the next image, as the quorum would commit them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from klog.controller.brokers import BrokerControlState, ClusterControlManager
from klog.controller.result import ControllerResult
from klog.metadata.delta import replay
from klog.metadata.image import NO_LEADER, LeaderRecoveryState, MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol import ApiKey, decode_body, encode_body, versions
from klog.protocol.errors import ErrorCode

CLUSTER = "klog-test-cluster-id-0"
MV_4_0 = 25
TOPIC = uuid.UUID(int=0x7071)


def wire(api_key: int, body: dict[str, Any]) -> Any:
    """``body`` as the controller receives it: encoded and decoded at the newest version."""
    v = versions(api_key)[1]
    return decode_body(api_key, v, encode_body(api_key, v, body, response=False), response=False)[0]


def registration(broker_id: int, incarnation: uuid.UUID | None = None, *, cluster_id: str = CLUSTER,
                 mv_range: tuple[int, int] = (1, MV_4_0), listeners: list[str] | None = None) -> Any:
    return wire(ApiKey.BROKER_REGISTRATION, {
        "broker_id": broker_id, "cluster_id": cluster_id,
        "incarnation_id": incarnation or uuid.UUID(int=broker_id & 0xFFFF),
        "listeners": [{"name": n, "host": "127.0.0.1", "port": 9090 + broker_id, "security_protocol": 0}
                      for n in (listeners if listeners is not None else ["PLAINTEXT"])],
        "features": [{"name": "metadata.version", "min_supported_version": mv_range[0],
                      "max_supported_version": mv_range[1]}],
        "rack": None})


def heartbeat(broker_id: int, epoch: int, offset: int, *, want_fence: bool = False,
              want_shut_down: bool = False) -> Any:
    return wire(ApiKey.BROKER_HEARTBEAT, {"broker_id": broker_id, "broker_epoch": epoch,
                                          "current_metadata_offset": offset, "want_fence": want_fence,
                                          "want_shut_down": want_shut_down})


class Quorum:
    """The committed log and image: every result's records are committed at once, in order."""

    def __init__(self, metadata_version: int | None = MV_4_0) -> None:
        self.log: list[MetadataRecord] = []
        self.image = MetadataImage(cluster_id=CLUSTER)
        if metadata_version is not None:
            self.commit([record("FeatureLevelRecord", name="metadata.version", feature_level=metadata_version)])

    @property
    def end(self) -> int:
        return len(self.log)

    def commit(self, records: Any) -> None:
        if records:
            self.image, _ = replay(self.image, list(records), self.end)
            self.log += records

    def run(self, result: ControllerResult[Any]) -> Any:
        self.commit(result.records)
        return result.response


class Cluster:
    def __init__(self, brokers: int = 3, *, metadata_version: int | None = MV_4_0, timeout_ms: int = 9000,
                 unclean: bool = False) -> None:
        self.q = Quorum(metadata_version)
        self.c = ClusterControlManager(CLUSTER, session_timeout_ms=timeout_ms, unclean_leader_election=unclean)
        self.c.activate(self.q.image, 0)
        self.epochs: dict[int, int] = {}
        for b in range(1, brokers + 1):
            self.register(b, 0)

    def register(self, broker_id: int, now: int, incarnation: uuid.UUID | None = None) -> dict[str, Any]:
        resp = self.q.run(self.c.register_broker(registration(broker_id, incarnation), self.q.image, now,
                                                 record_offset=self.q.end))
        if resp["error_code"] == 0:
            self.epochs[broker_id] = resp["broker_epoch"]
        return resp

    def beat(self, broker_id: int, now: int, **flags: bool) -> dict[str, Any]:
        req = heartbeat(broker_id, self.epochs[broker_id], self.q.end - 1, **flags)
        return self.q.run(self.c.process_heartbeat(req, self.q.image, now, record_offset=self.q.end))

    def unfence_all(self, now: int) -> None:
        for b in self.epochs:
            assert self.beat(b, now)["is_fenced"] is False

    def topic(self, replicas: list[list[int]], name: str = "t") -> None:
        recs = [record("TopicRecord", name=name, topic_id=TOPIC)]
        recs += [record("PartitionRecord", partition_id=p, topic_id=TOPIC, replicas=r, isr=r, leader=r[0],
                        leader_epoch=0, partition_epoch=0) for p, r in enumerate(replicas)]
        self.q.commit(recs)

    def partition(self, p: int) -> Any:
        return self.q.image.topics_by_id[TOPIC].partitions[p]

    def expire(self, now: int) -> list[int]:
        """The brokers fenced by the sessions expired at ``now``."""
        fenced = []
        while True:
            result = self.c.fence_stale_broker(self.q.image, now)
            if result.response is None:
                return fenced
            if result.records:
                fenced.append(result.response)
            self.q.run(result)


def test_registration_writes_a_fenced_registration_whose_epoch_is_its_offset() -> None:
    q = Quorum()
    c = ClusterControlManager(CLUSTER)
    result = c.register_broker(registration(1), q.image, 0, record_offset=q.end)
    (rec,) = result.records
    assert rec.name == "RegisterBrokerRecord" and result.response["error_code"] == 0
    offset = q.end
    q.run(result)
    b = q.image.brokers[1]
    assert result.response["broker_epoch"] == offset == b.epoch == rec.data.broker_epoch
    assert b.fenced and not b.in_controlled_shutdown
    assert [e.port for e in b.endpoints] == [9091] and b.incarnation_id == uuid.UUID(int=1)
    assert b.supported_features == (("metadata.version", 1, MV_4_0),)


def test_heartbeat_unfences_only_a_broker_caught_up_to_its_registration() -> None:
    cl = Cluster(1)
    epoch = cl.epochs[1]
    behind = cl.q.run(cl.c.process_heartbeat(heartbeat(1, epoch, epoch - 1), cl.q.image, 10,
                                             record_offset=cl.q.end))
    assert behind == {"throttle_time_ms": 0, "error_code": 0, "is_caught_up": False, "is_fenced": True,
                      "should_shut_down": False}
    assert cl.q.image.brokers[1].fenced
    wants_fence = cl.q.run(cl.c.process_heartbeat(heartbeat(1, epoch, epoch, want_fence=True), cl.q.image, 20,
                                                  record_offset=cl.q.end))
    assert wants_fence["is_caught_up"] and wants_fence["is_fenced"] and cl.q.image.brokers[1].fenced
    end = cl.q.end
    caught_up = cl.q.run(cl.c.process_heartbeat(heartbeat(1, epoch, epoch), cl.q.image, 30,
                                                record_offset=cl.q.end))
    assert caught_up["is_caught_up"] and not caught_up["is_fenced"]
    assert [r.name for r in cl.q.log[end:]] == ["BrokerRegistrationChangeRecord"]
    assert cl.q.log[end].data.fenced == -1 and not cl.q.image.brokers[1].fenced
    assert cl.c.sessions[1].state is BrokerControlState.UNFENCED


def test_before_metadata_version_3_3_fencing_uses_fence_and_unfence_records() -> None:
    cl = Cluster(1, metadata_version=5)
    cl.beat(1, 10)
    assert cl.q.log[-1].name == "UnfenceBrokerRecord" and not cl.q.image.brokers[1].fenced
    cl.expire(10_000)
    assert cl.q.log[-1].name == "FenceBrokerRecord" and cl.q.image.brokers[1].fenced


def test_a_stale_or_unknown_broker_epoch_is_refused_without_records() -> None:
    cl = Cluster(1)
    for req in (heartbeat(1, cl.epochs[1] + 1, 100), heartbeat(7, 0, 100)):
        result = cl.c.process_heartbeat(req, cl.q.image, 10, record_offset=cl.q.end)
        assert result.records == ()
        assert result.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH and result.response["is_fenced"]


def test_duplicate_node_id_with_a_live_session_is_refused_until_the_session_expires() -> None:
    cl = Cluster(1, timeout_ms=9000)
    cl.unfence_all(1000)
    other = uuid.uuid4()
    refused = cl.c.register_broker(registration(1, other), cl.q.image, 5000, record_offset=cl.q.end)
    assert refused.records == () and refused.response["error_code"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert refused.response["broker_epoch"] == -1
    assert cl.expire(10_001) == [1]
    old_epoch = cl.epochs[1]
    accepted = cl.register(1, 10_002, other)
    assert accepted["error_code"] == 0 and accepted["broker_epoch"] > old_epoch
    assert cl.q.image.brokers[1].incarnation_id == other and cl.q.image.brokers[1].fenced


def test_the_same_incarnation_re_registers_with_a_new_epoch_even_with_a_live_session() -> None:
    cl = Cluster(1)
    cl.unfence_all(1000)
    first = cl.epochs[1]
    again = cl.register(1, 2000)
    assert again["error_code"] == 0 and again["broker_epoch"] > first
    assert cl.q.image.brokers[1].epoch == again["broker_epoch"] and cl.q.image.brokers[1].fenced
    stale = cl.c.process_heartbeat(heartbeat(1, first, 100), cl.q.image, 2100, record_offset=cl.q.end)
    assert stale.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH


@pytest.mark.parametrize("case, code", [
    ("cluster", ErrorCode.INCONSISTENT_CLUSTER_ID),
    ("features", ErrorCode.UNSUPPORTED_VERSION),
    ("no listeners", ErrorCode.INVALID_REGISTRATION),
    ("listener twice", ErrorCode.INVALID_REGISTRATION),
    ("negative id", ErrorCode.INVALID_REGISTRATION),
])
def test_bad_registrations_are_refused_with_kafkas_error_codes(case: str, code: int) -> None:
    q = Quorum()
    c = ClusterControlManager(CLUSTER)
    req = {"cluster": registration(1, cluster_id="another-cluster"),
           "features": registration(1, mv_range=(1, MV_4_0 - 1)),
           "no listeners": registration(1, listeners=[]),
           "listener twice": registration(1, listeners=["A", "A"]),
           "negative id": registration(-3)}[case]
    result = c.register_broker(req, q.image, 0, record_offset=q.end)
    assert result.records == () and result.response["error_code"] == code
    assert result.error_message and c.sessions == {}
    assert "error_message" not in result.response, "Kafka's BrokerRegistrationResponse has no error message"


def test_registrations_beyond_the_broker_limit_are_refused_naming_it() -> None:
    q = Quorum()
    c = ClusterControlManager(CLUSTER, max_registered_brokers=2)
    for b in (1, 2):
        assert q.run(c.register_broker(registration(b), q.image, 0, record_offset=q.end))["error_code"] == 0
    refused = c.register_broker(registration(3), q.image, 0, record_offset=q.end)
    assert refused.response["error_code"] == ErrorCode.INVALID_REGISTRATION
    assert refused.error_message is not None and "MAX_REGISTERED_BROKERS=2" in refused.error_message
    assert q.run(c.register_broker(registration(2), q.image, 0, record_offset=q.end))["error_code"] == 0


def test_an_expired_session_fences_the_broker_and_moves_its_leaders_to_the_isr() -> None:
    cl = Cluster(3, timeout_ms=9000)
    cl.unfence_all(0)
    cl.topic([[1, 2, 3], [2, 3, 1], [1]])
    for now in (3000, 6000, 9000):
        cl.beat(2, now)
        cl.beat(3, now)
    assert cl.c.next_expiry_ms() == 9001   # broker 1 was last heard of at 0
    assert cl.expire(9000) == []
    end = cl.q.end
    assert cl.expire(9001) == [1]
    assert [r.name for r in cl.q.log[end:]] == ["PartitionChangeRecord"] * 3 + ["BrokerRegistrationChangeRecord"]
    assert cl.q.image.brokers[1].fenced
    p0, p1, p2 = cl.partition(0), cl.partition(1), cl.partition(2)
    assert (p0.leader, p0.isr, p0.leader_epoch) == (2, (2, 3), 1)
    assert (p1.leader, p1.isr, p1.leader_epoch) == (2, (2, 3), 0)   # ISR shrank, leader kept
    # the only ISR member is gone: no leader, the ISR is kept (as Kafka does without ELR)
    assert (p2.leader, p2.isr, p2.leader_epoch) == (NO_LEADER, (1,), 1)
    assert cl.expire(20_000) == [2, 3]   # one broker per call, oldest session first


def test_a_fenced_broker_that_catches_up_again_leads_its_offline_partitions() -> None:
    cl = Cluster(2)
    cl.unfence_all(0)
    cl.topic([[1], [2, 1]])
    cl.beat(2, 5000)
    cl.expire(9001)
    assert cl.partition(0).leader == NO_LEADER and cl.partition(1).isr == (2,)
    cl.beat(1, 9500)   # same epoch, caught up: unfenced again
    assert not cl.q.image.brokers[1].fenced
    assert (cl.partition(0).leader, cl.partition(0).leader_epoch) == (1, 2)
    assert cl.partition(1).isr == (2,)   # the ISR grows back through AlterPartition, not here


def test_unclean_leader_election_lets_an_out_of_sync_replica_lead_as_recovering() -> None:
    cl = Cluster(2, unclean=True)
    cl.unfence_all(0)
    cl.topic([[1, 2]])
    cl.q.commit([record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, isr=[1])])
    cl.beat(2, 5000)
    cl.expire(9001)
    p = cl.partition(0)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), LeaderRecoveryState.RECOVERING)


def test_a_topic_config_turns_unclean_election_off_for_that_topic() -> None:
    cl = Cluster(2, unclean=True)
    cl.unfence_all(0)
    cl.topic([[1, 2]])
    cl.q.commit([record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, isr=[1]),
                 record("ConfigRecord", resource_type=2, resource_name="t", name="unclean.leader.election.enable",
                        value="false")])
    cl.beat(2, 5000)
    cl.expire(9001)
    assert cl.partition(0).leader == NO_LEADER


@pytest.mark.parametrize("cluster_value, topic_value, elected", [
    ("true", None, 2),        # the cluster-wide dynamic config turns it on over the static "false"
    ("true", "false", NO_LEADER),   # a topic's own value wins over the cluster's
    ("false", None, NO_LEADER),
])
def test_the_cluster_wide_dynamic_unclean_election_config_applies_below_a_topics_own(
        cluster_value: str, topic_value: str | None, elected: int) -> None:
    cl = Cluster(2, unclean=False)
    cl.unfence_all(0)
    cl.topic([[1, 2]])
    records = [record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, isr=[1]),
               record("ConfigRecord", resource_type=4, resource_name="", name="unclean.leader.election.enable",
                      value=cluster_value)]
    if topic_value is not None:
        records.append(record("ConfigRecord", resource_type=2, resource_name="t",
                              name="unclean.leader.election.enable", value=topic_value))
    cl.q.commit(records)
    cl.beat(2, 5000)
    cl.expire(9001)
    assert cl.partition(0).leader == elected


def test_want_fence_from_a_running_broker_fences_it_at_once() -> None:
    cl = Cluster(2)
    cl.unfence_all(0)
    cl.topic([[1, 2]])
    resp = cl.beat(1, 100, want_fence=True)
    assert resp["is_fenced"] and not resp["should_shut_down"]
    assert cl.q.image.brokers[1].fenced and cl.partition(0).leader == 2


def test_controlled_shutdown_moves_leaders_away_then_lets_the_broker_go() -> None:
    cl = Cluster(3)
    cl.unfence_all(0)
    cl.topic([[1, 2, 3], [2, 1, 3], [3, 2, 1]])
    end = cl.q.end
    first = cl.beat(1, 100, want_shut_down=True)
    assert first["is_fenced"] is False and first["should_shut_down"] is False
    names = [r.name for r in cl.q.log[end:]]
    assert names == ["BrokerRegistrationChangeRecord"] + ["PartitionChangeRecord"] * 3
    assert cl.q.log[end].data.in_controlled_shutdown == 1
    b1 = cl.q.image.brokers[1]
    assert b1.in_controlled_shutdown and not b1.fenced
    assert [cl.partition(p).leader for p in range(3)] == [2, 2, 3]
    assert all(1 not in cl.partition(p).isr for p in range(3))
    assert cl.c.sessions[1].state is BrokerControlState.CONTROLLED_SHUTDOWN
    # broker 1 leads nothing now, but brokers 2 and 3 have not replayed the leader changes yet
    assert cl.beat(1, 200, want_shut_down=True)["should_shut_down"] is False
    cl.beat(2, 300)
    assert cl.beat(1, 400, want_shut_down=True)["should_shut_down"] is False
    cl.beat(3, 500)
    end = cl.q.end
    done = cl.beat(1, 600, want_shut_down=True)
    assert done["should_shut_down"] is True and done["is_fenced"] is True
    assert [r.name for r in cl.q.log[end:]] == ["BrokerRegistrationChangeRecord"]
    assert cl.q.image.brokers[1].fenced
    # its session ends without records: it is fenced already
    assert cl.expire(100_000) == [2, 3]


def test_a_broker_that_leads_nothing_shuts_down_at_once() -> None:
    cl = Cluster(2)
    cl.unfence_all(0)
    cl.topic([[2, 1]])
    resp = cl.beat(1, 100, want_shut_down=True)
    assert resp["should_shut_down"] and resp["is_fenced"]
    assert cl.partition(0).isr == (2,) and cl.q.image.brokers[1].fenced


def test_controlled_shutdown_of_the_last_isr_member_takes_its_partitions_offline() -> None:
    cl = Cluster(2)
    cl.unfence_all(0)
    cl.topic([[1]])
    cl.beat(1, 100, want_shut_down=True)
    p = cl.partition(0)
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    cl.beat(2, 200)
    assert cl.beat(1, 300, want_shut_down=True)["should_shut_down"]


def test_a_cleanly_shut_down_broker_re_registers_once_its_last_heartbeat_ages_out_and_leads_again() -> None:
    cl = Cluster(2, timeout_ms=9000)
    cl.unfence_all(0)
    cl.topic([[1]])
    cl.beat(1, 100, want_shut_down=True)
    cl.beat(2, 200)
    assert cl.beat(1, 300, want_shut_down=True)["should_shut_down"]
    old = cl.epochs[1]
    restarted = uuid.uuid4()   # the restarted process: a new incarnation
    # as Kafka 4.x: the shut-down process's last heartbeat still holds the node id for a session
    assert cl.register(1, 9300, restarted)["error_code"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    cl.beat(2, 9000)
    assert cl.expire(9301) == []   # already fenced: its session ends without records
    resp = cl.register(1, 9301, restarted)
    assert resp["error_code"] == 0 and resp["broker_epoch"] > old
    b = cl.q.image.brokers[1]
    assert b.fenced and not b.in_controlled_shutdown and b.epoch == resp["broker_epoch"]
    assert cl.beat(1, 9400)["is_fenced"] is False
    assert cl.partition(0).leader == 1


def test_heartbeats_under_the_replaced_epoch_are_stale_while_the_new_registration_commits() -> None:
    # decisions are made against the committed image: the old epoch must not be unfenced (its records would
    # not replay after the new RegisterBrokerRecord)
    cl = Cluster(1)
    old = cl.epochs[1]
    pending = cl.c.register_broker(registration(1, uuid.uuid4()), cl.q.image, 10, record_offset=cl.q.end)
    assert pending.response["error_code"] == 0 and cl.q.image.brokers[1].epoch == old   # not committed yet
    stale = cl.c.process_heartbeat(heartbeat(1, old, 100), cl.q.image, 20, record_offset=cl.q.end + 1)
    assert stale.records == () and stale.response["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    cl.q.run(pending)
    cl.epochs[1] = pending.response["broker_epoch"]
    assert cl.beat(1, 30)["is_fenced"] is False


def test_a_registration_without_heartbeats_holds_no_session() -> None:
    # what Kafka 4.3's controller does: two incarnations registering back to back both succeed
    cl = Cluster(1)
    first = cl.epochs[1]
    again = cl.register(1, 10, uuid.uuid4())
    assert again["error_code"] == 0 and again["broker_epoch"] > first


def test_a_new_controller_gives_every_registered_broker_a_full_session() -> None:
    cl = Cluster(2)
    cl.unfence_all(0)
    successor = ClusterControlManager(CLUSTER, session_timeout_ms=9000)
    successor.activate(cl.q.image, 50_000)
    assert successor.fence_stale_broker(cl.q.image, 59_000).response is None
    assert successor.fence_stale_broker(cl.q.image, 59_001).response == 1


def test_a_broker_marked_in_controlled_shutdown_is_not_elected_even_when_unfenced_again() -> None:
    # Kafka's isActive: the InControlledShutdown mark of a registration lasts until the broker registers again
    cl = Cluster(3)
    cl.unfence_all(0)
    cl.topic([[3, 2], [2, 3]])
    cl.beat(2, 100, want_shut_down=True)   # leads partition 1: controlled shutdown, marked
    assert cl.q.image.brokers[2].in_controlled_shutdown and cl.partition(1).leader == 3
    cl.beat(1, 9000)
    cl.beat(3, 9000)
    assert cl.expire(9101) == [2]           # went silent before it was let go
    cl.beat(2, 9200)                        # back, same epoch, caught up: unfenced, still marked
    b2 = cl.q.image.brokers[2]
    assert not b2.fenced and b2.in_controlled_shutdown
    cl.q.commit([record("PartitionChangeRecord", partition_id=0, topic_id=TOPIC, isr=[3, 2])])
    cl.beat(2, 18_000)
    assert cl.expire(18_001) == [1, 3]
    assert cl.partition(0).leader == NO_LEADER


def test_unregister_takes_a_live_broker_out_of_every_isr_then_drops_its_registration_and_session() -> None:
    """Kafka's unregisterBroker: no liveness check; ISR removal first (leaders move as on fencing), then the
    UnregisterBrokerRecord with the registered epoch; its heartbeats are stale from then on."""
    cl = Cluster(3)
    cl.unfence_all(0)
    cl.topic([[1, 2, 3], [2, 1], [1]])
    end = cl.q.end
    answer = cl.q.run(cl.c.unregister_broker(1, cl.q.image))
    assert answer == {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": ""}
    assert [r.name for r in cl.q.log[end:]] == ["PartitionChangeRecord"] * 3 + ["UnregisterBrokerRecord"]
    assert cl.q.log[-1].data.broker_epoch == cl.epochs[1]
    assert 1 not in cl.q.image.brokers
    p0, p1, p2 = cl.partition(0), cl.partition(1), cl.partition(2)
    assert (p0.leader, p0.isr) == (2, (2, 3))
    assert (p1.leader, p1.isr) == (2, (2,))
    assert (p2.leader, p2.isr) == (NO_LEADER, (1,))   # its only ISR member: offline, the ISR kept
    assert 1 not in cl.c.sessions and not [key for key in cl.c.last_contact_ms if key[0] == 1]
    assert cl.beat(1, 100)["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    # registered again (the same process, or a new one): a new epoch
    assert cl.register(1, 200)["error_code"] == ErrorCode.NONE


def test_unregister_of_an_id_with_no_registration_is_broker_id_not_registered() -> None:
    cl = Cluster(2)
    result = cl.c.unregister_broker(7, cl.q.image)
    assert not result.records
    assert result.response == {"throttle_time_ms": 0, "error_code": ErrorCode.BROKER_ID_NOT_REGISTERED,
                               "error_message": "Broker ID 7 is not currently registered"}
