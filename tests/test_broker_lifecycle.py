"""The broker's lifecycle state machine (klog.broker.lifecycle) without sockets or clocks, alone and driven
against the controller's (klog.controller.brokers) in a simulated clock loop.

The loop is a small cluster on a virtual clock: broker state machines, one controller state machine, a metadata
log whose records commit a little after they are proposed, brokers whose images replay the committed log a
little later, and a network with latency. Every request and response goes through klog.protocol's codec at the
newest version. Responses that carry records are sent only once the records are committed, as a Kafka controller
does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from klog.broker.lifecycle import (
    CONTROLLED_SHUTDOWN_FIRST_RETRY_MS,
    BrokerLifecycleManager,
    LifecycleRequest,
    LifecycleState,
    Listener,
)
from klog.broker.controller_channel import ControllerConnection
from klog.controller.brokers import ClusterControlManager
from klog.metadata.delta import replay
from klog.metadata.image import NO_LEADER, MetadataImage
from klog.metadata.records import MetadataRecord, record
from klog.protocol import ApiKey, decode_body, encode_body, versions
from klog.protocol.errors import ErrorCode

CLUSTER = "klog-lifecycle-cluster"
MV_4_0 = 25
FEATURES = [("metadata.version", 1, MV_4_0)]


def manager(node_id: int = 1, **kw: Any) -> BrokerLifecycleManager:
    return BrokerLifecycleManager(node_id, CLUSTER, uuid.UUID(int=node_id),
                                  [Listener("PLAINTEXT", "127.0.0.1", 9090 + node_id)], FEATURES,
                                  rng=random.Random(7), **kw)


def through_the_wire(api_key: int, body: dict[str, Any], *, response: bool) -> Any:
    v = versions(api_key)[1]
    return decode_body(api_key, v, encode_body(api_key, v, body, response=response), response=response)[0]


def hb_answer(*, caught_up: bool = True, fenced: bool = True, shut_down: bool = False, code: int = 0) -> Any:
    return through_the_wire(ApiKey.BROKER_HEARTBEAT, {"error_code": code, "is_caught_up": caught_up,
                                                      "is_fenced": fenced, "should_shut_down": shut_down},
                            response=True)


def registered(m: BrokerLifecycleManager, epoch: int = 42, now: int = 0) -> None:
    req = m.next_request(now)
    assert req is not None and req.api_key == ApiKey.BROKER_REGISTRATION
    m.on_response(req.request_id, {"error_code": 0, "broker_epoch": epoch}, now)


def running(m: BrokerLifecycleManager, now: int = 0) -> None:
    m.start(now)
    registered(m, now=now)
    m.set_metadata_offset(50)
    req = m.next_request(now)
    assert req is not None
    m.on_response(req.request_id, hb_answer(caught_up=True, fenced=True), now)
    m.set_ready_to_unfence(now)
    req = m.next_request(now + 10)
    assert req is not None and req.body["want_fence"] is False
    m.on_response(req.request_id, hb_answer(fenced=False), now + 10)
    assert m.state is LifecycleState.RUNNING


# ---- the broker's state machine alone -----------------------------------------------------------------------


def test_a_started_broker_registers_with_its_identity() -> None:
    m = manager(3, heartbeat_interval_ms=2000)
    assert m.next_request(0) is None and m.state is LifecycleState.NOT_RUNNING
    m.start(100)
    req = m.next_request(100)
    assert req is not None and req.api_key == ApiKey.BROKER_REGISTRATION
    decoded = through_the_wire(ApiKey.BROKER_REGISTRATION, req.body, response=False)
    assert (decoded.broker_id, decoded.cluster_id, decoded.incarnation_id) == (3, CLUSTER, uuid.UUID(int=3))
    assert [(lst.name, lst.port) for lst in decoded.listeners] == [("PLAINTEXT", 9093)]
    assert [(f.name, f.max_supported_version) for f in decoded.features] == [("metadata.version", MV_4_0)]
    assert m.next_request(100) is None   # one request in flight at a time
    assert decoded.previous_broker_epoch == -1   # no clean-shutdown epoch: an unclean start for the controller


def test_a_broker_registers_with_the_epoch_its_clean_shutdown_left_each_time_it_registers() -> None:
    m = manager(3, previous_broker_epoch=57)
    m.start(0)
    first = m.next_request(0)
    assert first is not None
    assert through_the_wire(ApiKey.BROKER_REGISTRATION, first.body, response=False).previous_broker_epoch == 57
    m.on_failure(first.request_id, 0, "no controller yet")
    again = m.next_request(60_000)
    assert again is not None and again.api_key == ApiKey.BROKER_REGISTRATION
    assert again.body["previous_broker_epoch"] == 57


def test_after_registering_it_heartbeats_fenced_until_caught_up_then_asks_to_be_unfenced() -> None:
    m = manager(heartbeat_interval_ms=2000)
    m.start(0)
    registered(m, epoch=42, now=5)
    m.set_metadata_offset(30)
    hb = m.next_request(5)
    assert hb is not None and hb.api_key == ApiKey.BROKER_HEARTBEAT
    assert hb.body == {"broker_id": 1, "broker_epoch": 42, "current_metadata_offset": 30, "want_fence": True,
                       "want_shut_down": False, "offline_log_dirs": [], "cordoned_log_dirs": None}
    m.on_response(hb.request_id, hb_answer(caught_up=False), 6)
    assert m.state is LifecycleState.STARTING and m.next_wakeup_ms() == 16
    hb = m.next_request(16)
    assert hb is not None
    m.on_response(hb.request_id, hb_answer(caught_up=True), 17)
    assert m.state is LifecycleState.RECOVERY
    assert m.next_request(26) is None and m.next_request(27) is not None   # Kafka: 10 ms after catching up
    m.set_ready_to_unfence(30)              # asked while a heartbeat is in flight: the next one goes at once
    m.on_response(m._in_flight.request_id, hb_answer(fenced=True), 31)  # type: ignore[union-attr]
    hb = m.next_request(31)
    assert hb is not None and hb.body["want_fence"] is False
    m.on_response(hb.request_id, hb_answer(fenced=False), 32)
    assert m.state is LifecycleState.RUNNING
    assert m.next_request(32 + 1999) is None and m.next_request(32 + 2000) is not None


def test_a_broker_registers_its_log_dirs_and_reports_failed_ones_in_an_immediate_heartbeat() -> None:
    """KIP-858, as Kafka's BrokerLifecycleManager.propagateDirectoryFailure: the online dirs' ids go in the
    registration, a failed dir goes in the next heartbeat, sent at once rather than after the interval, and in
    every heartbeat after it."""
    a, b = uuid.UUID(int=0xA1), uuid.UUID(int=0xB1)
    m = manager(heartbeat_interval_ms=2000, log_dirs=[a, b])
    m.start(0)
    req = m.next_request(0)
    assert req is not None
    assert through_the_wire(ApiKey.BROKER_REGISTRATION, req.body, response=False).log_dirs == [a, b]
    m = manager(heartbeat_interval_ms=2000, log_dirs=[a, b])
    running(m, now=0)
    assert m.next_request(500) is None   # the next heartbeat is due at 2010
    m.set_offline_log_dirs([b], 500)
    hb = m.next_request(500)
    assert hb is not None and hb.api_key == ApiKey.BROKER_HEARTBEAT
    assert through_the_wire(ApiKey.BROKER_HEARTBEAT, hb.body, response=False).offline_log_dirs == [b]
    m.on_response(hb.request_id, hb_answer(fenced=False), 501)
    m.set_offline_log_dirs([b], 502)   # reported already: no extra heartbeat
    assert m.next_request(502) is None
    assert m.next_request(2500) is None and m.next_request(2501) is not None and m._in_flight is not None
    assert m._in_flight.body["offline_log_dirs"] == [b]


def test_cordoned_log_dirs_go_in_an_immediate_heartbeat_and_every_one_after_it() -> None:
    """KIP-1066, as Kafka's BrokerLifecycleManager.propagateDirectoryCordoned: heartbeats leave the field out (null)
    until the broker reports cordoned dirs; a change is sent at once, the same dirs again send nothing extra."""
    a, b = uuid.UUID(int=0xA1), uuid.UUID(int=0xB1)
    m = manager(heartbeat_interval_ms=2000, log_dirs=[a, b])
    running(m, now=0)
    assert m.set_cordoned_log_dirs([b], 500) is True
    hb = m.next_request(500)
    assert hb is not None and through_the_wire(ApiKey.BROKER_HEARTBEAT, hb.body, response=False).cordoned_log_dirs == [b]
    m.on_response(hb.request_id, hb_answer(fenced=False), 501)
    assert m.set_cordoned_log_dirs([b], 502) is False and m.next_request(502) is None
    assert m.set_cordoned_log_dirs([], 600) is True
    hb = m.next_request(600)
    assert hb is not None and through_the_wire(ApiKey.BROKER_HEARTBEAT, hb.body, response=False).cordoned_log_dirs == []


def test_failed_requests_back_off_exponentially_up_to_half_the_session_timeout() -> None:
    m = manager(session_timeout_ms=9000)
    m.start(0)
    now, waits = 0, []
    for _ in range(9):
        req = m.next_request(now)
        assert req is not None and req.api_key == ApiKey.BROKER_REGISTRATION
        m.on_failure(req.request_id, now, "connection refused")
        wake = m.next_wakeup_ms()
        assert wake is not None and m.next_request(wake - 1) is None
        waits.append(wake - now)
        now = wake
    for want, got in zip([100, 200, 400, 800, 1600, 3200, 4500, 4500, 4500], waits):
        assert want * 0.98 - 1 <= got <= want * 1.02, waits
    registered(m, now=now)
    hb = m.next_request(now)
    assert hb is not None and m.failed_attempts == 0


def test_an_error_answer_is_retried_after_backoff_and_remembered() -> None:
    m = manager()
    m.start(0)
    req = m.next_request(0)
    assert req is not None
    m.on_response(req.request_id, {"error_code": int(ErrorCode.DUPLICATE_BROKER_REGISTRATION), "broker_epoch": -1},
                  0)
    assert m.last_error == (101, "DUPLICATE_BROKER_REGISTRATION") and not m.registered
    assert m.next_request(50) is None
    again = m.next_request(110)
    assert again is not None and again.api_key == ApiKey.BROKER_REGISTRATION


def test_stale_broker_epoch_makes_the_broker_register_again_with_the_same_incarnation() -> None:
    m = manager()
    running(m)
    hb = m.next_request(5000)
    assert hb is not None
    m.on_response(hb.request_id, hb_answer(code=ErrorCode.STALE_BROKER_EPOCH), 5000)
    req = m.next_request(5200)
    assert req is not None and req.api_key == ApiKey.BROKER_REGISTRATION
    assert req.body["incarnation_id"] == uuid.UUID(int=1)
    m.on_response(req.request_id, {"error_code": 0, "broker_epoch": 99}, 5201)
    hb = m.next_request(5201)
    assert hb is not None and hb.body["broker_epoch"] == 99 and m.state is LifecycleState.RUNNING


def test_an_unanswered_request_times_out_and_its_late_answer_is_ignored() -> None:
    m = manager(request_timeout_ms=2000)
    m.start(0)
    req = m.next_request(0)
    assert req is not None and m.next_wakeup_ms() == 2000
    assert m.next_request(1999) is None
    assert m.next_request(2000) is None   # timed out: retried after the backoff
    retry = m.next_request(2102)
    assert retry is not None and retry.request_id != req.request_id
    m.on_response(req.request_id, {"error_code": 0, "broker_epoch": 5}, 2103)
    assert not m.registered
    m.on_response(retry.request_id, {"error_code": 0, "broker_epoch": 6}, 2104)
    assert m.registered and m.broker_epoch == 6


def test_controlled_shutdown_heartbeats_want_shut_down_until_the_controller_agrees() -> None:
    m = manager(heartbeat_interval_ms=2000)
    running(m)
    m.begin_controlled_shutdown(1000)
    assert m.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN
    hb = m.next_request(1000)
    assert hb is not None and hb.body["want_shut_down"] is True and hb.body["want_fence"] is False
    m.on_response(hb.request_id, hb_answer(fenced=False, shut_down=False), 1001)
    assert m.next_wakeup_ms() == 1001 + CONTROLLED_SHUTDOWN_FIRST_RETRY_MS
    hb = m.next_request(1051)
    assert hb is not None
    m.on_response(hb.request_id, hb_answer(fenced=False, shut_down=False), 1052)
    assert m.next_wakeup_ms() == 1052 + 2000
    hb = m.next_request(3052)
    assert hb is not None
    m.on_response(hb.request_id, hb_answer(fenced=True, shut_down=True), 3053)
    assert m.state is LifecycleState.SHUTTING_DOWN and m.next_request(10_000) is None
    assert m.next_wakeup_ms() is None


def test_shutdown_before_running_skips_the_controlled_shutdown() -> None:
    m = manager()
    m.start(0)
    registered(m)
    m.begin_controlled_shutdown(10)
    assert m.state is LifecycleState.SHUTTING_DOWN and "STARTING" in (m.shutdown_reason or "")
    assert m.next_request(20) is None


def test_a_controlled_shutdown_the_controller_never_allows_ends_at_its_timeout() -> None:
    m = manager(controlled_shutdown_timeout_ms=30_000)
    running(m)
    m.begin_controlled_shutdown(1000)
    now = 1000
    while m.state is LifecycleState.PENDING_CONTROLLED_SHUTDOWN:
        req = m.next_request(now)
        if req is not None:
            m.on_failure(req.request_id, now, "controller unreachable")
        if m.state is LifecycleState.SHUTTING_DOWN:
            break
        wake = m.next_wakeup_ms()
        assert wake is not None and wake > now
        now = wake
    assert now == 31_000 and m.state is LifecycleState.SHUTTING_DOWN
    assert "30000 ms" in (m.shutdown_reason or "")


# ---- brokers and controller on a simulated clock -------------------------------------------------------------

COMMIT_DELAY_MS = 15      # proposal -> committed on the quorum
REPLAY_DELAY_MS = 25      # committed -> replayed by a broker's image
NETWORK_DELAY_MS = 2
TICK_MS = 5
TOPIC = uuid.UUID(int=0x515)


class SimBroker:
    def __init__(self, node_id: int, incarnation: uuid.UUID, now: int, *, heartbeat_interval_ms: int) -> None:
        self.node_id = node_id
        self.m = BrokerLifecycleManager(node_id, CLUSTER, incarnation,
                                        [Listener("PLAINTEXT", "127.0.0.1", 9090 + node_id)], FEATURES,
                                        heartbeat_interval_ms=heartbeat_interval_ms, rng=random.Random(node_id))
        self.replayed = -1     # highest committed offset this broker's image holds
        self.paused = False    # a paused process sends and answers nothing
        self.m.start(now)


class SimCluster:
    def __init__(self, brokers: int, *, heartbeat_interval_ms: int = 2000, session_timeout_ms: int = 9000) -> None:
        self.now = 0
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.log: list[MetadataRecord] = []
        self.commit_times: list[int] = []   # when each offset became committed
        self.committed = 0                  # offsets below are committed
        self.image = MetadataImage(cluster_id=CLUSTER)
        self.controller = ClusterControlManager(CLUSTER, session_timeout_ms=session_timeout_ms)
        self.controller.activate(self.image, 0)
        self.proposals: list[tuple[int, int, Callable[[], None]]] = []   # (commit at, end offset, then)
        self.network: list[tuple[int, Callable[[], None]]] = []
        self.brokers: dict[int, SimBroker] = {}
        self.propose([record("FeatureLevelRecord", name="metadata.version", feature_level=MV_4_0)])
        for b in range(1, brokers + 1):
            self.start(b)

    # quorum
    def propose(self, records: Any, then: Callable[[], None] = lambda: None) -> None:
        self.log += records
        self.proposals.append((self.now + COMMIT_DELAY_MS, len(self.log), then))

    def _commit_due(self) -> None:
        while self.proposals and self.proposals[0][0] <= self.now:
            _, end, then = self.proposals.pop(0)
            if end > self.committed:
                self.image, _ = replay(self.image, self.log[self.committed:end], self.committed)
                self.commit_times += [self.now] * (end - self.committed)
                self.committed = end
            then()

    # processes
    def start(self, node_id: int, incarnation: uuid.UUID | None = None) -> SimBroker:
        b = SimBroker(node_id, incarnation or uuid.uuid4(), self.now, heartbeat_interval_ms=self.heartbeat_interval_ms)
        self.brokers[node_id] = b
        return b

    def kill(self, node_id: int) -> None:
        del self.brokers[node_id]

    def _send(self, b: SimBroker, req: LifecycleRequest) -> None:
        wire_request = through_the_wire(req.api_key, req.body, response=False)

        def arrive() -> None:
            offset = len(self.log)
            if req.api_key == ApiKey.BROKER_REGISTRATION:
                result = self.controller.register_broker(wire_request, self.image, self.now, record_offset=offset)
            else:
                result = self.controller.process_heartbeat(wire_request, self.image, self.now, record_offset=offset)
            answer = through_the_wire(req.api_key, result.response, response=True)

            def respond() -> None:
                def deliver() -> None:
                    if self.brokers.get(b.node_id) is b and not b.paused:
                        b.m.on_response(req.request_id, answer, self.now)
                self.network.append((self.now + NETWORK_DELAY_MS, deliver))
            if result.records:
                self.propose(result.records, respond)
            else:
                respond()
        self.network.append((self.now + NETWORK_DELAY_MS, arrive))

    def step(self) -> None:
        self.now += TICK_MS
        due = [m for m in self.network if m[0] <= self.now]
        self.network = [m for m in self.network if m[0] > self.now]
        for _, deliver in due:
            deliver()
        self._commit_due()
        while True:
            stale = self.controller.fence_stale_broker(self.image, self.now)
            if stale.response is None:
                break
            if stale.records:
                self.propose(stale.records)
        for b in list(self.brokers.values()):
            if b.paused:
                continue
            visible = sum(1 for t in self.commit_times if t + REPLAY_DELAY_MS <= self.now)
            b.replayed = visible - 1
            b.m.set_metadata_offset(b.replayed)
            if b.m.state is LifecycleState.RECOVERY:
                b.m.set_ready_to_unfence(self.now)
            req = b.m.next_request(self.now)
            if req is not None:
                self._send(b, req)

    def run_until(self, done: Callable[[], bool], limit_ms: int) -> int:
        start = self.now
        while not done():
            assert self.now - start < limit_ms, f"not done after {limit_ms} ms of simulated time"
            self.step()
        return self.now - start

    def run_for(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.step()

    # views
    def all_running(self) -> bool:
        return all(b.m.state is LifecycleState.RUNNING for b in self.brokers.values())

    def leaders(self) -> list[int]:
        return [p.leader for _, p in sorted(self.image.topics_by_id[TOPIC].partitions.items())]

    def create_topic(self, assignment: list[list[int]]) -> None:
        recs = [record("TopicRecord", name="t", topic_id=TOPIC)]
        recs += [record("PartitionRecord", partition_id=p, topic_id=TOPIC, replicas=r, isr=r, leader=r[0],
                        leader_epoch=0, partition_epoch=0) for p, r in enumerate(assignment)]
        self.propose(recs)
        self.run_for(COMMIT_DELAY_MS + TICK_MS)


def test_brokers_register_catch_up_and_run_unfenced_with_their_registration_offset_as_epoch() -> None:
    sim = SimCluster(3)
    took = sim.run_until(sim.all_running, 5000)
    assert took < 500   # register, catch up, unfence: a few round trips, no heartbeat interval in between
    for bid, b in sim.brokers.items():
        reg = sim.image.brokers[bid]
        assert not reg.fenced and reg.epoch == b.m.broker_epoch
        assert sim.log[reg.epoch].name == "RegisterBrokerRecord" and sim.log[reg.epoch].data.broker_id == bid
    # a steady cluster writes nothing more: heartbeats renew sessions without records
    end = len(sim.log)
    sim.run_for(30_000)
    assert len(sim.log) == end and sim.all_running()


def test_sigterm_moves_leadership_away_before_the_broker_is_let_go() -> None:
    sim = SimCluster(3)
    sim.run_until(sim.all_running, 5000)
    sim.create_topic([[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]])
    assert sim.leaders() == [1, 2, 3, 1]
    leaving = sim.brokers[1]
    leaving.m.begin_controlled_shutdown(sim.now)
    sim.run_until(lambda: leaving.m.state is LifecycleState.SHUTTING_DOWN, 10_000)
    # when the controller lets broker 1 go, it leads nothing and is in no ISR, and the brokers that took over
    # have replayed the changes that made them leaders
    assert 1 not in sim.leaders() and NO_LEADER not in sim.leaders()
    assert all(1 not in p.isr for p in sim.image.topics_by_id[TOPIC].partitions.values())
    last_move = max(i for i, r in enumerate(sim.log) if r.name == "PartitionChangeRecord")
    assert all(sim.brokers[b].replayed >= last_move for b in (2, 3))
    assert sim.image.brokers[1].fenced and sim.image.brokers[1].in_controlled_shutdown
    assert leaving.m.shutdown_reason == "the controller allowed the controlled shutdown"


def test_a_silent_broker_is_fenced_after_the_session_timeout_and_its_partitions_move() -> None:
    sim = SimCluster(3, heartbeat_interval_ms=2000, session_timeout_ms=9000)
    sim.run_until(sim.all_running, 5000)
    sim.create_topic([[2, 1, 3], [2, 3, 1]])
    sim.brokers[2].paused = True
    paused_at = sim.now
    took = sim.run_until(lambda: sim.image.brokers[2].fenced, 20_000)
    # fenced no sooner than the session allows, and within it after its last heartbeat
    assert 9000 - 2000 <= took <= 9000 + COMMIT_DELAY_MS + 2 * TICK_MS, took
    assert sim.leaders() == [1, 3]
    assert all(2 not in p.isr for p in sim.image.topics_by_id[TOPIC].partitions.values())
    assert sim.now - paused_at == took


def test_a_paused_broker_that_resumes_is_unfenced_again_under_its_epoch() -> None:
    sim = SimCluster(2)
    sim.run_until(sim.all_running, 5000)
    b = sim.brokers[2]
    epoch = b.m.broker_epoch
    b.paused = True
    sim.run_until(lambda: sim.image.brokers[2].fenced, 20_000)
    b.paused = False   # the heartbeat lost while it was paused times out
    sim.run_until(lambda: not sim.image.brokers[2].fenced, 10_000)
    assert sim.image.brokers[2].epoch == epoch == b.m.broker_epoch


def test_a_cleanly_stopped_broker_rejoins_with_a_new_epoch_once_its_last_heartbeat_ages_out() -> None:
    sim = SimCluster(2, session_timeout_ms=9000)
    sim.run_until(sim.all_running, 5000)
    sim.create_topic([[1], [2, 1]])
    old = sim.brokers[1]
    old.m.begin_controlled_shutdown(sim.now)
    sim.run_until(lambda: old.m.state is LifecycleState.SHUTTING_DOWN, 10_000)
    assert sim.leaders() == [NO_LEADER, 2]
    sim.kill(1)
    restarted = sim.start(1)
    took = sim.run_until(lambda: restarted.m.state is LifecycleState.RUNNING, 20_000)
    # Kafka 4.x: refused (DUPLICATE_BROKER_REGISTRATION) until the last heartbeat of the old process is a session
    # old, then registered at the next retry
    assert 9000 - 100 <= took <= 9000 + 4600, took
    assert restarted.m.broker_epoch > old.m.broker_epoch == sim.log[old.m.broker_epoch].data.broker_epoch
    assert sim.image.brokers[1].incarnation_id == restarted.m.incarnation_id
    assert sim.leaders() == [1, 2]


def test_a_killed_broker_restarted_at_once_waits_for_its_old_session_to_expire() -> None:
    sim = SimCluster(2, session_timeout_ms=9000)
    sim.run_until(sim.all_running, 5000)
    old_epoch = sim.brokers[1].m.broker_epoch
    sim.kill(1)
    killed_at = sim.now
    restarted = sim.start(1)
    sim.run_for(1000)
    assert restarted.m.last_error == (101, "DUPLICATE_BROKER_REGISTRATION") and not restarted.m.registered
    sim.run_until(lambda: restarted.m.state is LifecycleState.RUNNING, 20_000)
    assert 9000 - 2000 <= sim.now - killed_at <= 9000 + 5000   # the session timeout plus a retry backoff
    assert restarted.m.broker_epoch > old_epoch and not sim.image.brokers[1].fenced


def test_a_new_active_controller_keeps_every_broker_and_still_fences_a_silent_one() -> None:
    sim = SimCluster(3, session_timeout_ms=9000)
    sim.run_until(sim.all_running, 5000)
    sim.create_topic([[1, 2, 3], [3, 2, 1]])
    sim.run_for(8000)   # the old controller last heard of the brokers up to 2 s ago
    successor = ClusterControlManager(CLUSTER, session_timeout_ms=9000)
    successor.activate(sim.image, sim.now)
    sim.controller = successor
    end = len(sim.log)
    sim.run_for(30_000)
    assert len(sim.log) == end and sim.all_running()   # nobody fenced, nothing written
    sim.brokers[3].paused = True
    took = sim.run_until(lambda: sim.image.brokers[3].fenced, 20_000)
    assert took <= 9000 + COMMIT_DELAY_MS + 2 * TICK_MS and sim.leaders() == [1, 2]


@pytest.mark.parametrize("seed", range(3))
def test_random_pauses_restarts_and_shutdowns_keep_the_image_consistent(seed: int) -> None:
    """Whatever happens, every proposed record replays (no replay error), a running broker is registered under
    the epoch it holds, and no partition is led by a fenced broker once the controller has caught up."""
    rng = random.Random(seed)
    sim = SimCluster(4)
    sim.run_until(sim.all_running, 5000)
    sim.create_topic([[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2], [1, 3], [2, 4]])
    for _ in range(12):
        node = rng.randint(1, 4)
        b = sim.brokers.get(node)
        action = rng.choice(["pause", "resume", "kill", "start", "sigterm"])
        if action == "pause" and b is not None:
            b.paused = True
        elif action == "resume" and b is not None and b.paused:
            b.paused = False
        elif action == "kill" and b is not None:
            sim.kill(node)
        elif action == "start" and b is None:
            sim.start(node)
        elif action == "sigterm" and b is not None and not b.paused:
            b.m.begin_controlled_shutdown(sim.now)
        sim.run_for(rng.randint(500, 12_000))
        for bid, sb in list(sim.brokers.items()):
            if sb.m.state is LifecycleState.SHUTTING_DOWN:
                sim.kill(bid)
    sim.run_for(20_000)
    for bid, sb in sim.brokers.items():
        if sb.m.state is LifecycleState.RUNNING and not sb.paused:
            assert sim.image.brokers[bid].epoch == sb.m.broker_epoch and not sim.image.brokers[bid].fenced
    for p in sim.image.topics_by_id[TOPIC].partitions.values():
        if p.leader != NO_LEADER:
            assert not sim.image.brokers[p.leader].fenced
            assert p.leader in p.isr


# -- where the driver's connection goes (ControllerConnection, no socket is opened) -----------------------------------
def test_the_controller_connection_follows_the_leader_the_raft_member_knows_and_rotates_only_without_one() -> None:
    a, b, c = ("127.0.0.1", 9001), ("127.0.0.1", 9002), ("127.0.0.1", 9003)
    leader: list[tuple[str, int] | None] = [c]
    conn = ControllerConnection([a, b, c], leader=lambda: leader[0], client_id="t", request_timeout_ms=1000)
    assert conn.next_address() == c
    # the known leader was killed: it failed, and no new one is known yet -> the configured addresses in turn
    conn.drop(rotate=True)
    leader[0] = None
    assert conn.next_address() == b
    conn.drop(rotate=True)
    assert conn.next_address() == c
    # a new leader is known: the next connection goes straight to it, wherever the rotation stands
    conn.drop(rotate=True)
    leader[0] = a
    assert conn.next_address() == a
    assert conn.next_address() == a
    # it answered NOT_CONTROLLER while the member still names it (stale): on in the rotation, not back to it
    conn.drop(rotate=True)
    assert conn.next_address() == b
    # another one failed since: the named leader is tried again
    conn.drop(rotate=True)
    assert conn.next_address() == a


def test_without_a_leader_source_the_controller_connection_rotates_through_every_address() -> None:
    addresses = [("127.0.0.1", 9001 + i) for i in range(3)]
    conn = ControllerConnection(addresses, client_id="t", request_timeout_ms=1000)
    seen = []
    for _ in range(6):
        seen.append(conn.next_address())
        conn.drop(rotate=True)
    assert seen == addresses * 2
