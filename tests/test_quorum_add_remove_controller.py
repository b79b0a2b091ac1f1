"""KIP-853 dynamic controller quorums: ``kafka-metadata-quorum add-controller`` / ``remove-controller`` (Kafka's own
tool, AddRaftVoter 80 / RemoveRaftVoter 81 on the controller listener) against real ``klog-broker`` processes.

A controller formatted standalone leads a quorum of one; a formatted controller that is not running is refused
(no caught-up observer: REQUEST_TIMED_OUT); two controllers formatted with ``--no-initial-controllers`` start,
show as observers with their directory ids, and become voters through add-controller; ``describe --replication``
then lists three voters with their real directory ids. One voter restarts on another controller port and the
voter set follows (UpdateRaftVoter). With the first leader killed the other two elect a leader and create
topics. remove-controller takes a voter out. The same flow runs against Apache Kafka 4.3.1, one cluster per
system.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from klog.controller.raft import ObserverState
from klog.controller.auto_join import (
    AUTO_JOIN_BACKOFF_MAX_MS,
    AddSelf,
    AutoJoinState,
    RemoveStaleSelf,
    auto_join_backoff_ms,
    decide_auto_join,
)
from klog.controller.quorum import replaced_voter
from klog.controller.voter_changes import (
    UpdateVoter,
    VoterSetState,
    decide_add_voter,
    decide_remove_voter,
    decide_update_voter,
)
from klog.protocol import Struct
from klog.protocol.errors import ErrorCode
from klog.testing.kafka import answers_api_versions, free_port
from klog.testing.kafka_tools import java_available, kafka_libs_dir, run_kafka_tool
from klog.testing.process import BrokerProcess, broker_command

QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
TOPICS_COMMAND = "org.apache.kafka.tools.TopicCommand"
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


# -- the pure decisions ----------------------------------------------------------------------------------------------
def _state(**kw: object) -> VoterSetState:
    base = dict(node_id=1, is_leader=True, leader_id=1, cluster_id=CLUSTER_ID, dynamic=True,
                voters=frozenset({1}), directory_ids={}, change_pending=False, listener_name="CONTROLLER")
    return VoterSetState(**{**base, **kw})  # type: ignore[arg-type]


def _add(voter_id: int = 2, listeners: list[tuple[str, str, int]] | None = None, cluster_id: str | None = CLUSTER_ID
         ) -> Struct:
    eps = [Struct(name=n, host=h, port=p) for n, h, p in (listeners or [("CONTROLLER", "127.0.0.1", 9094)])]
    return Struct(cluster_id=cluster_id, timeout_ms=30000, voter_id=voter_id, voter_directory_id=uuid.uuid4(),
                  listeners=eps, ack_when_committed=True)


def _code(name: str) -> int:
    return int(ErrorCode[name])


NOW_MS = 1_700_000_000_000.0


def _observing(request_: Struct, *, caught_up_ms: float = NOW_MS - 5_000, fetched_ms: float = NOW_MS - 100,
               directory_id: uuid.UUID | None = None, **kw: object) -> VoterSetState:
    """The leader's view with the new voter fetching as an observer (caught up 5 s ago, last fetch 100 ms ago)."""
    seen = ObserverState(42, fetched_ms, caught_up_ms, directory_id or request_.voter_directory_id)
    return _state(observers={int(request_.voter_id): seen}, now_ms=NOW_MS, **kw)


def test_add_voter_takes_the_endpoint_on_the_quorum_listener() -> None:
    request_ = _add(2, [("PLAINTEXT", "h", 1), ("CONTROLLER", "127.0.0.1", 9094)])
    decided = decide_add_voter(_observing(request_), request_)
    assert not hasattr(decided, "error_code")
    assert (decided.voter.node_id, decided.voter.host, decided.voter.port) == (2, "127.0.0.1", 9094)  # type: ignore[union-attr]
    assert decided.directory_id == request_.voter_directory_id  # type: ignore[union-attr]


def test_add_voter_admits_only_a_caught_up_observer_with_that_directory_id() -> None:
    # Kafka's AddVoterHandler: REQUEST_TIMED_OUT ("... since it is lagging behind") unless the new voter is an
    # observer of the leader (same replica key) that has caught up once and fetched within the last hour
    request_ = _add(2)
    cases = {"not an observer": _state(now_ms=NOW_MS),
             "never caught up": _observing(request_, caught_up_ms=-1.0),
             "silent for over an hour": _observing(request_, fetched_ms=NOW_MS - 3_600_001),
             "another directory": _observing(request_, directory_id=uuid.uuid4())}
    for why, state in cases.items():
        decided = decide_add_voter(state, request_)
        assert getattr(decided, "error_code", None) == _code("REQUEST_TIMED_OUT"), why
        assert "lagging behind" in decided.message, decided  # type: ignore[union-attr]


@pytest.mark.parametrize(("state", "request_", "error"), [
    (_state(is_leader=False, leader_id=3), _add(), "NOT_LEADER_OR_FOLLOWER"),   # before the catch-up check
    (_state(dynamic=False), _add(), "UNSUPPORTED_VERSION"),   # a static controller.quorum.voters quorum
    (_state(change_pending=True), _add(), "REQUEST_TIMED_OUT"),
    (_state(voters=frozenset({1, 2})), _add(2), "DUPLICATE_VOTER"),
    (_state(), _add(2, [("PLAINTEXT", "h", 1)]), "INVALID_REQUEST"),
    (_state(), _add(2, cluster_id="another-cluster-id-xxxx"), "INCONSISTENT_CLUSTER_ID"),
    (_state(), _add(0), "INVALID_REQUEST"),
])
def test_add_voter_refusals_carry_kafkas_error_codes(state: VoterSetState, request_: Struct, error: str) -> None:
    decided = decide_add_voter(state, request_)
    assert getattr(decided, "error_code", None) == _code(error), decided


def test_remove_voter_needs_a_voter_with_that_directory_id_and_keeps_one() -> None:
    d2 = uuid.uuid4()
    state = _state(voters=frozenset({1, 2}), directory_ids={2: d2})
    assert decide_remove_voter(state, Struct(cluster_id=None, voter_id=2, voter_directory_id=d2)).node_id == 2  # type: ignore[union-attr]
    wrong = decide_remove_voter(state, Struct(cluster_id=None, voter_id=2, voter_directory_id=uuid.uuid4()))
    assert getattr(wrong, "error_code", None) == _code("VOTER_NOT_FOUND")
    absent = decide_remove_voter(state, Struct(cluster_id=None, voter_id=5, voter_directory_id=uuid.uuid4()))
    assert getattr(absent, "error_code", None) == _code("VOTER_NOT_FOUND")
    last = decide_remove_voter(_state(), Struct(cluster_id=None, voter_id=1, voter_directory_id=uuid.uuid4()))
    assert getattr(last, "error_code", None) == _code("INVALID_REQUEST")
    # a voter whose directory id is not known (the zero UUID: a static quorum's): any directory id names it
    assert decide_remove_voter(state, Struct(cluster_id=None, voter_id=1, voter_directory_id=uuid.uuid4())).node_id == 1  # type: ignore[union-attr]


def _update(voter_id: int, directory_id: uuid.UUID, port: int = 9095, kraft: tuple[int, int] = (0, 1),
            listener: str = "CONTROLLER") -> Struct:
    return Struct(cluster_id=CLUSTER_ID, current_leader_epoch=3, voter_id=voter_id, voter_directory_id=directory_id,
                  listeners=[Struct(name=listener, host="127.0.0.1", port=port)],
                  k_raft_version_feature=Struct(min_supported_version=kraft[0], max_supported_version=kraft[1]))


def test_update_voter_takes_a_voters_new_endpoint_named_by_its_voter_key() -> None:
    d2 = uuid.uuid4()
    state = _state(voters=frozenset({1, 2}), directory_ids={2: d2})
    decided = decide_update_voter(state, _update(2, d2, port=9095))
    assert isinstance(decided, UpdateVoter) and (decided.voter.port, decided.directory_id) == (9095, d2)
    refusals = {"VOTER_NOT_FOUND": [_update(4, uuid.uuid4()), _update(2, uuid.uuid4())],
                "INVALID_REQUEST": [_update(2, d2, kraft=(0, 0)), _update(2, d2, listener="PLAINTEXT")]}
    for error, requests in refusals.items():
        for r in requests:
            assert getattr(decide_update_voter(state, r), "error_code", None) == _code(error), r
    follower = dataclasses.replace(state, is_leader=False, leader_id=1)
    assert getattr(decide_update_voter(follower, _update(2, d2)), "error_code", None) == _code("NOT_LEADER_OR_FOLLOWER")


def test_describe_quorum_reports_the_directory_id_an_added_voter_was_added_with() -> None:
    from klog.controller.describe_quorum import QuorumStatus, ReplicaStatus, describe_quorum_response
    from klog.controller.quorum import Voter

    d2 = uuid.uuid4()
    status = QuorumStatus(node_id=1, leader_id=1, leader_epoch=3, high_watermark=10, is_leader=True,
                          voters=[ReplicaStatus(1, 10, 0, 0), ReplicaStatus(2, 10, 0, 0)], observers=[],
                          endpoints={1: Voter(1, "h", 1), 2: Voter(2, "h", 2)}, listener_name="CONTROLLER",
                          directory_ids={2: d2})
    request = Struct(topics=[Struct(topic_name="__cluster_metadata", partitions=[Struct(partition_index=0)])])
    voters = describe_quorum_response(status, request)["topics"][0]["partitions"][0]["current_voters"]
    assert [(v["replica_id"], v["replica_directory_id"]) for v in voters] == [(1, uuid.UUID(int=0)), (2, d2)]


def _joining(**kw: object) -> AutoJoinState:
    """Node 3 (directory MINE) observing a quorum of voters 1 and 2 led by 1, its period passed."""
    base = dict(node_id=3, directory_id=MINE, enabled=True, dynamic=True, leader_id=1, voters=frozenset({1, 2}),
                directory_ids={1: uuid.uuid4(), 2: uuid.uuid4()}, in_flight=False, now_ms=NOW_MS,
                next_attempt_ms=NOW_MS - 1)
    return AutoJoinState(**{**base, **kw})  # type: ignore[arg-type]


MINE = uuid.uuid4()


def test_auto_join_adds_itself_once_its_period_passed() -> None:
    # Kafka's pollFollowerAsObserver: AddRaftVoter to the leader when its voter key is not a voter
    assert decide_auto_join(_joining()) == AddSelf(1)
    quiet = {"auto-join off": _joining(enabled=False), "a static quorum": _joining(dynamic=False),
             "leader unknown": _joining(leader_id=-1), "a request unanswered": _joining(in_flight=True),
             "the period not passed": _joining(next_attempt_ms=NOW_MS + 1),
             "already a voter with its directory id": _joining(voters=frozenset({1, 2, 3}),
                                                               directory_ids={3: MINE}),
             "a voter whose directory id is not known": _joining(voters=frozenset({1, 2, 3}), directory_ids={})}
    for why, state in quiet.items():
        assert decide_auto_join(state) is None, why


def test_auto_join_first_removes_the_voter_holding_its_id_under_another_directory() -> None:
    # its disk was replaced and reformatted: Kafka's observer sends RemoveRaftVoter for the voter key with its node
    # id, then (the voter gone) AddRaftVoter
    old = uuid.uuid4()
    stale = _joining(voters=frozenset({1, 2, 3}), directory_ids={3: old})
    assert decide_auto_join(stale) == RemoveStaleSelf(1, old)
    assert decide_auto_join(_joining(directory_ids={3: old})) == AddSelf(1)
    assert replaced_voter(3, [1, 2, 3], {3: old}, MINE)
    for voters, ids, mine in (([1, 2, 3], {3: MINE}, MINE), ([1, 2], {3: old}, MINE),
                              ([1, 2, 3], {3: uuid.UUID(int=0)}, MINE), ([1, 2, 3], {3: old}, None)):
        assert not replaced_voter(3, voters, ids, mine), (voters, ids, mine)


def test_auto_join_waits_the_period_and_backs_off_after_failures() -> None:
    # the period is controller.quorum.fetch.timeout.ms (Kafka's update-voter-set period); failures double it
    assert [auto_join_backoff_ms(2000, n) for n in range(6)] == [2000, 4000, 8000, 16000, AUTO_JOIN_BACKOFF_MAX_MS,
                                                                 AUTO_JOIN_BACKOFF_MAX_MS]
    assert auto_join_backoff_ms(60_000, 3) == 60_000


# -- real processes ----------------------------------------------------------------------------------------------------
needs_kafka_tools = pytest.mark.skipif(not java_available() or kafka_libs_dir() is None,
                                       reason="Java or Kafka's jars missing (tools/install-peers.sh)")


class _Launcher:
    """Three combined nodes of one system on 127.0.0.1 with Kafka's properties: node 1 formatted ``--standalone``,
    the others ``--no-initial-controllers``, all given node 1's controller listener as bootstrap server."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        # 4: formatted to join, never started (add-controller refuses it: not a caught-up observer)
        self.ports = {i: free_port() for i in (1, 2, 3, 4)}
        self.client_ports = {i: free_port() for i in (1, 2, 3, 4)}
        self.cfgs: dict[int, Path] = {}
        #: the nodes started with controller.quorum.auto.join.enable=true
        self.auto_join: set[int] = set()

    def wipe(self, i: int) -> None:
        """Node ``i``'s disk replaced: its log dir (meta.properties, directory id, metadata log) gone."""
        shutil.rmtree(self.tmp_path / f"node-{i}")

    def properties(self, i: int) -> dict[str, str]:
        listeners = f"PLAINTEXT://127.0.0.1:{self.client_ports[i]},CONTROLLER://127.0.0.1:{self.ports[i]}"
        return {"process.roles": "broker,controller", "node.id": str(i),
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.ports[1]}",
                "controller.listener.names": "CONTROLLER", "listeners": listeners, "advertised.listeners": listeners,
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": str(self.tmp_path / f"node-{i}"), "offsets.topic.replication.factor": "1",
                "controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000",
                "broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "6000",
                **({"controller.quorum.auto.join.enable": "true"} if i in self.auto_join else {})}

    def write(self, i: int) -> Path:
        cfg = self.tmp_path / f"controller-{i}.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in self.properties(i).items()))
        self.cfgs[i] = cfg
        return cfg

    def directory_id(self, i: int) -> str:
        """The directory id ``format`` wrote into node ``i``'s meta.properties (a voter's key names it)."""
        meta = (self.tmp_path / f"node-{i}" / "meta.properties").read_text()
        return re.search(r"^directory.id=(\S+)$", meta, re.M).group(1)  # type: ignore[union-attr]


class _KlogNodes(_Launcher):
    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.nodes: dict[int, BrokerProcess] = {}

    def format(self, i: int) -> Path:
        cfg = self.write(i)
        out = subprocess.run([*broker_command(), "format", "-t", CLUSTER_ID, "-c", str(cfg),
                              "--standalone" if i == 1 else "--no-initial-controllers"], capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert out.returncode == 0, out.stderr
        return cfg

    def start(self, i: int, *, formatted: bool = False) -> None:
        cfg = self.write(i) if formatted else self.format(i)
        node = self.nodes[i] = BrokerProcess(self.tmp_path / f"node-{i}", {"listeners": self.properties(i)["listeners"]},
                                             properties_file=cfg)
        node.spawn()

    def wait_started(self, i: int) -> None:
        self.nodes[i].wait_started()

    def wait_joining(self, i: int) -> None:
        """A joining klog controller says when it learnt the voters (its broker serves once it is a voter)."""
        _wait(f"node {i} learning the voters", lambda: any("joins the quorum of voters [1" in line
                                                           for line in self.nodes[i].lines))

    def kill(self, i: int) -> None:
        self.nodes[i].kill()

    def tail(self, i: int) -> list[str]:
        (self.tmp_path / f"klog-{i}.log").write_text("\n".join(self.nodes[i].lines))   # the whole log, to read
        return self.nodes[i].lines[-30:]

    def close(self) -> None:
        for n in self.nodes.values():
            n.stop()


class _KafkaNodes(_Launcher):
    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.libs = kafka_libs_dir()
        self.jvm = ["java", "-Dlog4j2.level=WARN", "-Djava.awt.headless=true", "-cp", f"{self.libs}/*"]

    def format(self, i: int) -> Path:
        cfg = self.write(i)
        fmt = subprocess.run([*self.jvm, "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", str(cfg),
                              "--standalone" if i == 1 else "--no-initial-controllers"], capture_output=True,
                             text=True, timeout=120)
        assert fmt.returncode == 0, fmt.stdout + fmt.stderr
        return cfg

    def start(self, i: int, *, formatted: bool = False) -> None:
        cfg = self.write(i) if formatted else self.format(i)
        out = open(self.tmp_path / f"kafka-{i}.out", "ab")
        self.procs[i] = subprocess.Popen([self.jvm[0], "-Xmx512m", "-Xms512m", *self.jvm[1:], "kafka.Kafka", str(cfg)],
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_started(self, i: int) -> None:
        _wait(f"Kafka node {i} serving", lambda: answers_api_versions(self.client_ports[i]), 180)

    def wait_joining(self, i: int) -> None:
        """A joining Kafka controller fetches the log as an observer; its broker serves once registered."""
        self.wait_started(i)

    def kill(self, i: int) -> None:
        self.procs[i].kill()
        self.procs[i].wait(10)

    def tail(self, i: int) -> list[str]:
        return (self.tmp_path / f"kafka-{i}.out").read_text(errors="replace").splitlines()[-30:]

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()


def _quorum(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kafka_tool(QUORUM_COMMAND, "--bootstrap-controller", f"127.0.0.1:{port}", *args, timeout=90)


def _voters(port: int) -> set[int]:
    out = _quorum(port, "describe", "--status")
    assert out.returncode == 0, out.stderr
    match = re.search(r"CurrentVoters:\s*\[(.*)\]", out.stdout)
    assert match, out.stdout
    return {int(i) for i in re.findall(r'"id":\s*(\d+)', match.group(1))} or \
        {int(i) for i in re.findall(r"\d+", match.group(1).split("@")[0])}


def _voter_endpoints(port: int) -> dict[int, list[str]]:
    """``describe --status``'s CurrentVoters: voter id -> its endpoints (``CONTROLLER://host:port``)."""
    out = _quorum(port, "describe", "--status")
    assert out.returncode == 0, out.stderr
    match = re.search(r"CurrentVoters:\s*(\[.*\])", out.stdout)
    assert match, out.stdout
    return {v["id"]: v.get("endpoints", []) for v in json.loads(match.group(1))}


def _replication(port: int) -> dict[int, tuple[str, str]]:
    """``describe --replication``: node id -> (directory id, status: Leader / Follower / Observer)."""
    out = _quorum(port, "describe", "--replication")
    assert out.returncode == 0, out.stderr
    rows = [row.split() for row in out.stdout.splitlines()[1:] if row.split()]
    return {int(r[0]): (r[1], r[-1]) for r in rows}


def _replication_rows(port: int) -> set[tuple[int, str, str]]:
    """``describe --replication``'s rows as (node id, directory id, status): a node id may show twice (a replaced
    disk's old directory id stays listed as an observer for a while on Kafka)."""
    out = _quorum(port, "describe", "--replication")
    assert out.returncode == 0, out.stderr
    rows = [row.split() for row in out.stdout.splitlines()[1:] if row.split()]
    return {(int(r[0]), r[1], r[-1]) for r in rows}


def _wait(what: str, check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout}s")
        time.sleep(1.0)


def _add_controller(bootstrap_port: int, cfg: Path) -> subprocess.CompletedProcess[str]:
    """add-controller, retried while the leader answers that the new voter is not caught up yet (Kafka)."""
    deadline = time.monotonic() + 60
    while True:
        out = _quorum(bootstrap_port, "--command-config", str(cfg), "add-controller")
        if out.returncode == 0 or "TimeoutException" not in out.stderr + out.stdout or time.monotonic() > deadline:
            return out
        time.sleep(2)


@needs_kafka_tools
@pytest.mark.timeout(600)
@pytest.mark.parametrize("system", ["klog", "kafka"])
@pytest.mark.long
def test_add_controller_grows_a_standalone_quorum_that_survives_its_first_leader(tmp_path: Path, system: str
                                                                                 ) -> None:
    nodes = _KlogNodes(tmp_path) if system == "klog" else _KafkaNodes(tmp_path)
    ports = nodes.ports
    try:
        nodes.start(1)
        nodes.wait_started(1)
        for i in (2, 3):
            nodes.start(i)
        assert _voters(ports[1]) == {1}
        # a formatted controller that is not running is no caught-up observer: the leader refuses it
        nodes.format(4)
        refused = _quorum(ports[1], "--command-config", str(nodes.cfgs[4]), "add-controller")
        assert refused.returncode != 0 and "TimeoutException" in refused.stderr + refused.stdout, refused
        for i in (2, 3):
            nodes.wait_joining(i)
            # waiting to be added, it fetches the log as an observer, named with its directory id
            _wait(f"node {i} observing", lambda: _replication(ports[1]).get(i) == (nodes.directory_id(i), "Observer"))
            out = _add_controller(ports[1], nodes.cfgs[i])
            assert out.returncode == 0, (out.stdout, out.stderr, nodes.tail(1))
            assert f"Added controller {i}" in out.stdout, out.stdout
            refused = _quorum(ports[1], "--command-config", str(nodes.cfgs[i]), "add-controller")
            assert refused.returncode != 0 and "DuplicateVoter" in refused.stderr + refused.stdout, refused
            nodes.wait_started(i)
        # every voter with its real directory id: the standalone one's from the voter set format wrote
        replication = _replication(ports[1])
        assert replication == {1: (nodes.directory_id(1), "Leader"), 2: (nodes.directory_id(2), "Follower"),
                               3: (nodes.directory_id(3), "Follower")}, replication

        # node 3 comes back on another controller port: it tells the leader (UpdateRaftVoter) and every voter
        # reaches it there from then on (the failover below needs 2 and 3 to talk)
        nodes.kill(3)
        ports[3] = free_port()
        nodes.start(3, formatted=True)
        moved = f"CONTROLLER://127.0.0.1:{ports[3]}"
        try:
            _wait("node 3's new endpoint in the voter set", lambda: _voter_endpoints(ports[1]).get(3) == [moved], 120)
        except AssertionError as e:
            raise AssertionError(f"{e}; node 1: {nodes.tail(1)}; node 3: {nodes.tail(3)}") from None
        nodes.wait_started(3)

        # the first leader goes: the two added voters elect one of them and serve topic creation
        nodes.kill(1)
        new_leader: list[int] = []

        # The admin client routes DescribeCluster to the active controller it was told of; told "none" (-1)
        # during the election, or the dead one, it waits out default.api.timeout.ms (60 s) without asking
        # again (on Kafka too): each try gets a short timeout and the loop asks anew.
        impatient = tmp_path / "impatient-admin.properties"
        impatient.write_text("default.api.timeout.ms=8000\nrequest.timeout.ms=4000\n")

        def elected() -> bool:
            for i in (2, 3):
                out = _quorum(ports[i], "--command-config", str(impatient), "describe", "--status")
                found = re.search(r"LeaderId:\s*(\d+)", out.stdout)
                if out.returncode == 0 and found and int(found.group(1)) in (2, 3):
                    new_leader.append(int(found.group(1)))
                    return True
            return False

        _wait("a new leader among 2 and 3", elected, 90)
        created = run_kafka_tool(TOPICS_COMMAND, "--bootstrap-server", f"127.0.0.1:{nodes.client_ports[2]}",
                                 "--create", "--topic", "after-failover", "--partitions", "2",
                                 "--replication-factor", "1")
        assert created.returncode == 0, (created.stdout, created.stderr)
        _wait("the topic on node 3", lambda: "PartitionCount: 2" in run_kafka_tool(
            TOPICS_COMMAND, "--bootstrap-server", f"127.0.0.1:{nodes.client_ports[3]}", "--describe",
            "--topic", "after-failover").stdout, 30)

        # remove-controller takes the dead first leader out (its voter key: id and directory id)
        leader = new_leader[0]
        # "=" form: a base64 Uuid may start with "-", which argparse would take for an option
        key = ("--controller-id", "1", f"--controller-directory-id={nodes.directory_id(1)}")
        out = _quorum(ports[leader], "remove-controller", *key)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert _voters(ports[leader]) == {2, 3}
        missing = _quorum(ports[leader], "remove-controller", *key)
        assert missing.returncode != 0 and "VoterNotFound" in missing.stderr + missing.stdout, missing
    finally:
        nodes.close()


def _quorum_via_broker(client_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return run_kafka_tool(QUORUM_COMMAND, "--bootstrap-server", f"127.0.0.1:{client_port}", *args, timeout=90)


@needs_kafka_tools
@pytest.mark.timeout(600)
@pytest.mark.parametrize("system", ["klog", "kafka"])
def test_add_and_remove_controller_through_a_broker_listener(tmp_path: Path, system: str) -> None:
    """``kafka-metadata-quorum --bootstrap-server <broker>`` add-controller / remove-controller: Kafka 4.3.1's
    brokers advertise AddRaftVoter and RemoveRaftVoter and forward them to the active controller (klog's broker
    listener did not advertise them: the tool failed with UnsupportedVersionException)."""
    nodes = _KlogNodes(tmp_path) if system == "klog" else _KafkaNodes(tmp_path)
    ports, client_ports = nodes.ports, nodes.client_ports
    try:
        nodes.start(1)
        nodes.wait_started(1)
        nodes.start(2)
        nodes.wait_joining(2)
        _wait("node 2 observing", lambda: _replication(ports[1]).get(2) == (nodes.directory_id(2), "Observer"))
        deadline = time.monotonic() + 60
        while True:   # retried while the leader answers that node 2 is not caught up yet (Kafka)
            out = _quorum_via_broker(client_ports[1], "--command-config", str(nodes.cfgs[2]), "add-controller")
            if out.returncode == 0 or "TimeoutException" not in out.stderr + out.stdout or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert out.returncode == 0, (out.stdout, out.stderr, nodes.tail(1))
        assert "Added controller 2" in out.stdout, out.stdout
        assert _voters(ports[1]) == {1, 2}
        nodes.wait_started(2)
        # node 2's own broker forwards too: the voter removed is itself
        key = ("--controller-id", "2", f"--controller-directory-id={nodes.directory_id(2)}")
        out = _quorum_via_broker(client_ports[2], "remove-controller", *key)
        assert out.returncode == 0, (out.stdout, out.stderr, nodes.tail(1))
        assert re.search(r"Removed\s+KRaft controller 2 ", out.stdout), out.stdout   # (Kafka prints two spaces)
        _wait("node 2 no longer a voter", lambda: _voters(ports[1]) == {1})
        missing = _quorum_via_broker(client_ports[1], "remove-controller", *key)
        assert missing.returncode != 0 and "VoterNotFound" in missing.stderr + missing.stdout, missing
    finally:
        nodes.close()


@needs_kafka_tools
@pytest.mark.timeout(600)
@pytest.mark.parametrize("system", ["klog", "kafka"])
def test_auto_join_controllers_add_themselves_and_a_reformatted_one_replaces_its_old_directory(
        tmp_path: Path, system: str) -> None:
    """controller.quorum.auto.join.enable=true (KIP-853): controllers formatted --no-initial-controllers become
    voters with no add-controller (each sends the leader AddRaftVoter itself, as Kafka's KafkaRaftClient does
    while its voter key is an observer); a voter whose disk is wiped and reformatted --no-initial-controllers
    comes back with the same node id and a new directory id, removes the voter holding its id under the old one
    (RemoveRaftVoter) and adds itself."""
    nodes = _KlogNodes(tmp_path) if system == "klog" else _KafkaNodes(tmp_path)
    ports = nodes.ports
    nodes.auto_join = {2, 3}
    try:
        nodes.start(1)
        nodes.wait_started(1)
        for i in (2, 3):
            nodes.start(i)

        def joined() -> bool:
            replication = _replication(ports[1])
            return replication == {1: (nodes.directory_id(1), "Leader"), 2: (nodes.directory_id(2), "Follower"),
                                   3: (nodes.directory_id(3), "Follower")}

        try:
            _wait("nodes 2 and 3 voters by themselves", joined, 60)
        except AssertionError as e:
            raise AssertionError(f"{e}: {_replication(ports[1])}; node 1: {nodes.tail(1)}; node 3: {nodes.tail(3)}"
                                 ) from None
        assert _voters(ports[1]) == {1, 2, 3}
        for i in (2, 3):
            nodes.wait_started(i)

        # node 3's disk is replaced: same node id, a new directory id
        old = nodes.directory_id(3)
        nodes.kill(3)
        nodes.wipe(3)
        nodes.start(3)
        new = nodes.directory_id(3)
        assert new != old

        def replaced() -> bool:
            voters = {(i, d) for i, d, status in _replication_rows(ports[1]) if status in ("Leader", "Follower")}
            return voters == {(1, nodes.directory_id(1)), (2, nodes.directory_id(2)), (3, new)}

        try:
            _wait("node 3 a voter again with its new directory id", replaced, 60)
        except AssertionError as e:
            raise AssertionError(f"{e}: {_replication_rows(ports[1])}; node 1: {nodes.tail(1)}; node 3: "
                                 f"{nodes.tail(3)}") from None
        assert _voters(ports[1]) == {1, 2, 3}
        nodes.wait_started(3)
    finally:
        nodes.close()
