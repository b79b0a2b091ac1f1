"""Broker lifecycle on a 3-node quorum of combined ``broker,controller`` klog processes (real processes, Kafka's
properties): every broker registers and heartbeats to the active controller, which fences a broker whose session
expired (a paused process) and unfences it when it heartbeats again; a SIGKILLed and restarted broker rejoins
with a new broker epoch; SIGTERM runs a controlled shutdown (the controller moves the broker's leaderships away
and answers ShouldShutDown) before the process exits."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from klog.protocol import ApiKey
from klog.testing.controller_quorum import ControllerQuorum
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

HEARTBEAT_INTERVAL_MS = 300
SESSION_TIMEOUT_MS = 1500
LIFECYCLE = {"broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "broker.session.timeout.ms": SESSION_TIMEOUT_MS}
#: Bound on each wait of these tests (a loaded 2-core machine; the session timeout itself is 1.5 s).
WAIT_S = 30.0


def _metadata(node: Any, topic: str | None = None) -> Any:
    with WireClient(node.host, node.port) as wire:
        return wire.request(ApiKey.METADATA, 9, {"topics": None if topic is None else [{"name": topic}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})


def _listed_brokers(node: Any) -> list[int]:
    return sorted(b.node_id for b in _metadata(node).brokers)


def _described_brokers(node: Any) -> list[tuple[int, bool]]:
    with WireClient(node.host, node.port) as wire:
        answer = wire.request(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                           "endpoint_type": 1})
    return sorted((b.broker_id, b.is_fenced) for b in answer.brokers)


def _wait(condition: Callable[[], bool], what: str, q: ControllerQuorum, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            tails = {i: n.lines[-8:] for i, n in q.nodes.items()}
            raise AssertionError(f"not within {timeout}s: {what}; logs: {tails}")
        time.sleep(0.1)


def _create_on(node: Any, name: str, partitions: int, on_broker: int | None = None) -> int:
    """Create ``name`` with one replica per partition (all on ``on_broker`` when given, else placed by the
    controller)."""
    assignments = [] if on_broker is None else [{"partition_index": p, "broker_ids": [on_broker]}
                                                 for p in range(partitions)]
    with WireClient(node.host, node.port) as wire:
        response = wire.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": name, "num_partitions": -1 if assignments else partitions,
             "replication_factor": -1 if assignments else 1, "assignments": assignments,
             "configs": []}], "timeout_ms": 30000, "validate_only": False})
    return int(response.topics[0].error_code)


def _stop_all_cleanly(q: ControllerQuorum, nodes: list[int]) -> None:
    for i in nodes:
        node = q.nodes[i]
        assert node.stop() == 0, f"node {i}:\n" + "\n".join(node.lines[-20:])
        assert not [line for line in node.lines if "Traceback" in line], "\n".join(node.lines[-30:])


def test_brokers_register_are_fenced_when_paused_and_shut_down_under_control(tmp_path: Path) -> None:
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=LIFECYCLE) as q:
        leader = q.wait_for_leader()
        everyone = sorted(q.nodes)
        _wait(lambda: all(_listed_brokers(n) == everyone for n in q.nodes.values()),
              "every node's Metadata lists the 3 registered, unfenced brokers", q)
        assert all(_described_brokers(n) == [(i, False) for i in everyone] for n in q.nodes.values())

        # a paused broker misses its heartbeats: fenced once its session expires, unfenced when it resumes
        paused = next(i for i in everyone if i != leader)
        others = [i for i in everyone if i != paused]
        os.kill(q.nodes[paused].pid, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            _wait(lambda: all(_listed_brokers(q.nodes[i]) == others for i in others),
                  f"broker {paused} fenced after its session timed out", q)
            assert time.monotonic() - stopped_at >= SESSION_TIMEOUT_MS / 1000 * 0.9
            assert all(_described_brokers(q.nodes[i]) == [(i2, False) for i2 in others] for i in others)
        finally:
            os.kill(q.nodes[paused].pid, signal.SIGCONT)
        _wait(lambda: all(_listed_brokers(n) == everyone for n in q.nodes.values()),
              f"broker {paused} unfenced after it resumed", q)

        # SIGTERM on the node that leads the partitions: its leaderships move away (no other replica: offline,
        # as Kafka leaves a partition whose ISR has no other live member) before it exits
        leader = q.wait_for_leader()   # the resumed member may have stood for election
        topic = f"cs-{uuid.uuid4().hex[:8]}"
        _wait(lambda: _create_on(q.nodes[leader], topic, 2, on_broker=leader) == 0,
              f"topic {topic} created on the controller's broker", q)
        _wait(lambda: all({p.leader_id for p in _metadata(n, topic).topics[0].partitions} == {leader}
                          for n in q.nodes.values()), f"{topic} led by node {leader} everywhere", q)
        terminated = q.nodes[leader]
        assert terminated.stop() == 0, "\n".join(terminated.lines[-20:])
        assert any("the controller allowed the controlled shutdown" in line for line in terminated.lines), \
            "\n".join(terminated.lines[-30:])
        rest = [i for i in everyone if i != leader]
        q.wait_for_leader(exclude=leader, nodes=rest)
        _wait(lambda: all({p.leader_id for p in _metadata(q.nodes[i], topic).topics[0].partitions} == {-1}
                          and _listed_brokers(q.nodes[i]) == rest for i in rest),
              f"{topic}'s partitions offline and broker {leader} not listed after its controlled shutdown", q)
        _stop_all_cleanly(q, rest)


@pytest.mark.long
def test_a_killed_and_restarted_broker_rejoins_with_a_new_epoch_once_its_old_session_expired(tmp_path: Path) -> None:
    # a session long enough that the restarted process registers while its previous one is still alive
    session_timeout_ms = 5000
    props = {**LIFECYCLE, "broker.session.timeout.ms": session_timeout_ms}
    with ControllerQuorum(tmp_path, 3, roles="broker,controller", properties=props) as q:
        leader = q.wait_for_leader()
        everyone = sorted(q.nodes)
        _wait(lambda: all(_listed_brokers(n) == everyone for n in q.nodes.values()),
              "every node's Metadata lists the 3 brokers", q)
        victim = next(i for i in everyone if i != leader)

        def registration() -> Any:
            """The victim's registration in the latest snapshot of the controller's image."""
            return q.wait_applied(0, nodes=[leader])[leader].image.brokers.get(victim)

        _wait(lambda: registration() is not None and not registration().fenced,
              f"broker {victim} unfenced in the controller's snapshot", q)
        before = registration()

        q.kill(victim)
        killed_at = time.monotonic()
        q.start_node(victim)

        def rejoined() -> bool:
            now = registration()
            return now is not None and not now.fenced and now.epoch > before.epoch \
                and now.incarnation_id != before.incarnation_id
        _wait(rejoined, f"broker {victim} registered again with a new epoch and unfenced", q)
        # as Kafka 4: refused while the killed process's session lives, accepted once it expired
        assert time.monotonic() - killed_at >= session_timeout_ms / 1000 * 0.9
        lines = q.nodes[victim].lines
        assert any("BrokerRegistration answered DUPLICATE_BROKER_REGISTRATION" in line for line in lines), \
            "\n".join(lines[-20:])
        _wait(lambda: all(_listed_brokers(n) == everyone for n in q.nodes.values()),
              f"broker {victim} listed again everywhere", q)
        _stop_all_cleanly(q, everyone)
