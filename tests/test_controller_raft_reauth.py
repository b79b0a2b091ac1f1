"""KIP-368 session lifetime on klog's own protocols of a SASL controller listener: the Raft connections between the
voters (and the observers' metadata fetches, which follow the same code) log in again on a new connection before
``listener.name.controller.connections.max.reauth.ms`` ends their session, and the listener closes one whose session
ended. Real processes: three combined nodes whose controller listener is SASL_PLAINTEXT with a 3 s session; nodes 1
and 2 log in to it with PLAIN (the listener's JAAS users), node 3 with SCRAM-SHA-512 (a credential formatted into the
metadata log with ``--add-scram``), so deleting that credential shows what happens to a node that can no longer log
in.

On Kafka the Raft RPCs are Kafka requests, re-authenticated in band on the open connection
(tests/test_controller_reauth_vs_kafka.py checks that on both)."""

from __future__ import annotations

import re
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic, ScramMechanism, UserScramCredentialDeletion

from klog.controller.applier import new_cluster_id
from klog.controller.metadata_feed import OBSERVER_PREAMBLE, FeedRequest, encode_request
from klog.controller.quorum import RAFT_PREAMBLE
from klog.protocol.errors import ErrorCode
from klog.testing.cluster import KlogCluster
from klog.testing.process import broker_command
from klog.testing.wire import WireClient

pytestmark = pytest.mark.timeout(240)

REAUTH_MS = 3000
#: how long the quorum is watched across session ends (two renewals of every connection)
WATCH_S = 6.0
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" '
                   'password="controller-secret" user_controller="controller-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="node3" '
              'password="node3-secret";')
PROPERTIES = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
    "listener.name.controller.connections.max.reauth.ms": REAUTH_MS,
    "sasl.mechanism.controller.protocol": "PLAIN",
    "offsets.topic.replication.factor": 1,
}
NODE3 = {"sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
         "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
RENEWED = re.compile(r"raft: node (\d+) renewed its SASL session with node (\d+)")


def _format_with_node3_credential(nodes: KlogCluster) -> None:
    """Format every node of ``nodes`` into one new cluster whose first records hold node 3's SCRAM credential."""
    cluster_id = new_cluster_id()
    for path in nodes.properties_files.values():
        formatted = subprocess.run(broker_command() + ["format", "-t", cluster_id, "-c", str(path), "--add-scram",
                                                       "SCRAM-SHA-512=[name=node3,password=node3-secret]"],
                                   capture_output=True, text=True, timeout=60)
        assert formatted.returncode == 0, formatted.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KlogCluster]:
    root: Path = tmp_path_factory.mktemp("raft-reauth")
    nodes = KlogCluster(root, 3, properties=PROPERTIES, node_properties={3: NODE3})
    _format_with_node3_credential(nodes)
    with nodes:
        nodes.wait_for_brokers()
        yield nodes


def admin_of(cluster: KlogCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.client_ports[1]}"})


def create_topic(admin: AdminClient, name: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)


def renewals(cluster: KlogCluster) -> set[tuple[int, int]]:
    return {(int(m[1]), int(m[2])) for i in cluster.controller_ids for line in cluster.log_lines(i)
            if (m := RENEWED.search(line))}


FAILED_RENEWAL = re.compile(r"raft: node 3 could not renew its SASL session with node (\d+)")


def failed_renewals(cluster: KlogCluster, since: int) -> set[int]:
    """The peers node 3 failed to renew its session with, in its log lines from ``since`` on."""
    return {int(m[1]) for line in cluster.log_lines(3)[since:] if (m := FAILED_RENEWAL.search(line))}


def leader_view(cluster: KlogCluster, leader: int) -> tuple[int, dict[int, int]]:
    """DescribeQuorum on ``leader``'s controller listener: its high watermark and each voter's log end offset as the
    leader knows it (what the voter acknowledged)."""
    wire = logged_in(cluster, leader)
    try:
        answer = wire.request(55, 1, {"topics": [{"topic_name": "__cluster_metadata",
                                                  "partitions": [{"partition_index": 0}]}]})
    finally:
        wire.close()
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE, partition
    return int(partition.high_watermark), {int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters}


def test_raft_connections_renew_their_sessions_without_a_new_election(cluster: KlogCluster) -> None:
    leader = cluster.quorum.wait_for_leader()
    epoch = cluster.quorum.quorum_state(leader).leader_epoch   # type: ignore[union-attr]
    admin = admin_of(cluster)
    deadline = time.monotonic() + WATCH_S
    created = 0
    while time.monotonic() < deadline:   # metadata keeps committing across the session ends
        create_topic(admin, f"through-renewals-{created}")
        created += 1
        time.sleep(0.5)
    states = {i: cluster.quorum.quorum_state(i) for i in cluster.controller_ids}
    assert {(s.leader_id, s.leader_epoch) for s in states.values() if s is not None} == {(leader, epoch)}, states
    # every voter moved its raft connection to each peer to a new login at least once
    pairs = {(i, j) for i in cluster.controller_ids for j in cluster.controller_ids if i != j}
    assert renewals(cluster) >= pairs, "\n".join(cluster.log_lines(1)[-30:])
    # and no connection outlived its session (the listener would have closed it)
    ended = [line for i in cluster.controller_ids for line in cluster.log_lines(i)
             if "its SASL session ended" in line]
    assert not ended, ended
    assert created >= 3


def logged_in(cluster: KlogCluster, node: int) -> WireClient:
    """A connection to ``node``'s controller listener, logged in with PLAIN as the nodes' user."""
    wire = WireClient("127.0.0.1", cluster.controller_ports[node], client_id="raft-reauth-test", timeout=10)
    assert wire.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.NONE
    login = wire.request(36, 2, {"auth_bytes": b"\0controller\0controller-secret"})
    assert (login.error_code, login.session_lifetime_ms) == (ErrorCode.NONE, REAUTH_MS), login
    return wire


def test_the_listener_closes_raft_and_observer_connections_whose_session_ended(cluster: KlogCluster) -> None:
    """Connections that never log in again, as a klog node before KIP-368 support: served until the session ends,
    closed at their next message after it."""
    raft, observer = logged_in(cluster, 1), logged_in(cluster, 1)
    try:
        started = time.monotonic()
        raft.send_raw(RAFT_PREAMBLE + struct.pack(">ih", 2, 0))
        observer.send_raw(OBSERVER_PREAMBLE + struct.pack(">ih", 77, 0) + bytes(16))
        observer.send_raw(encode_request(FeedRequest(0, 0, 1024)))
        assert observer.read_frame()   # served while the session lasts
        time.sleep(max(0.0, started + REAUTH_MS / 1000 + 0.5 - time.monotonic()))
        observer.send_raw(encode_request(FeedRequest(0, 0, 1024)))
        raft.send_raw(struct.pack(">i", 4) + b"late")
        for closed in (observer, raft):
            with pytest.raises(OSError):   # closed (a timeout, were it kept open, is an OSError too: checked below)
                closed.sock.settimeout(5)
                closed.read_frame()
    finally:
        raft.close()
        observer.close()
    # the node's log is read by a thread of the test: under load its lines come moments after the close
    deadline = time.monotonic() + 15
    while True:
        ended = [line for line in cluster.log_lines(1) if "its SASL session ended" in line]
        both = (any("raft: closing node 2's connection" in line for line in ended)
                and any("observer 77" in line for line in ended))
        if both or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert any("raft: closing node 2's connection" in line for line in ended), ended
    assert any("observer 77" in line for line in ended), ended


def test_a_node_whose_credential_is_deleted_loses_its_raft_connections(cluster: KlogCluster) -> None:
    since = len(cluster.log_lines(3))
    admin = admin_of(cluster)
    deletion = UserScramCredentialDeletion("node3", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=30)
    # node 3 fails to log in again to each peer within a session's lifetime of the deletion, and says so
    deadline = time.monotonic() + 30
    while failed_renewals(cluster, since) != {1, 2}:
        assert time.monotonic() < deadline, "\n".join(cluster.log_lines(3)[-30:])
        time.sleep(0.2)
    # nodes 1 and 2 still form the quorum (node 3 still hears them: their logins are PLAIN) ...
    leader = cluster.quorum.wait_for_leader(nodes=[1, 2], exclude=3)
    admin = admin_of(cluster)
    for n in range(3):
        create_topic(admin, f"after-deletion-{n}")
    # ... but the leader hears nothing from node 3 any more: what node 3 acknowledged stays behind what commits
    high_watermark, acknowledged = leader_view(cluster, leader)
    assert acknowledged[3] < high_watermark, (high_watermark, acknowledged)
    refused = [line for i in (1, 2) for line in cluster.log_lines(i)
               if "failed authentication" in line and "SCRAM-SHA-512" in line]
    assert refused, "\n".join(cluster.log_lines(leader)[-30:])


@pytest.mark.long   # a second cluster; the Raft tests above cover the shared session code in CI
def test_an_observer_renews_its_session_and_is_cut_off_once_its_credential_is_deleted(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A broker-only node (node 1) follows a one-controller quorum, logging in with SCRAM-SHA-512."""
    root: Path = tmp_path_factory.mktemp("observer-reauth")
    nodes = KlogCluster(root, 1, controllers=1, properties=PROPERTIES, node_properties={1: NODE3})
    _format_with_node3_credential(nodes)
    with nodes:
        nodes.wait_for_brokers()
        admin = admin_of(nodes)
        deadline = time.monotonic() + 30
        created = 0
        # metadata keeps reaching the observer across its renewals (the topics are listed from its image)
        while not any("observer 1: renewed its SASL session" in line for line in nodes.log_lines(1)) \
                or created < 3:
            assert time.monotonic() < deadline, "\n".join(nodes.log_lines(1)[-30:])
            create_topic(admin, f"observed-{created}")
            created += 1
            time.sleep(0.5)
        listed = admin.list_topics(timeout=30).topics
        assert {f"observed-{n}" for n in range(created)} <= set(listed), sorted(listed)
        deletion = UserScramCredentialDeletion("node3", ScramMechanism.SCRAM_SHA_512)
        for future in admin.alter_user_scram_credentials([deletion]).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while not any("observer 1: could not renew its SASL session" in line for line in nodes.log_lines(1)):
            assert time.monotonic() < deadline, "\n".join(nodes.log_lines(1)[-30:])
            time.sleep(0.2)
